/* Store of uploaded debug data (the upload flow of docs/http-api.md, after
 * Parca's debuginfo service: github.com/parca-dev/parca,
 * proto/parca/debuginfo/v1alpha1/debuginfo.proto, its ShouldInitiateUpload,
 * InitiateUpload and MarkUploadFinished calls), kept under
 * <state-dir>/debuginfo with its bookkeeping in SQLite (state.db).
 *
 * One stored file per (ID, type): ID is a GNU build ID or an htlhash file
 * ID (lowercase hex), type debuginfo, executable or sources. Uploads go
 * uploading -> uploaded (validated and stored, or valid but not better
 * than what is stored) or invalid (bytes rejected: their hash is
 * remembered so that the same bytes are refused at once); an upload still
 * uploading after the expiry time is forgotten. Better data replaces worse:
 * a valid upload replaces the stored file only when its debug quality is
 * higher (or equal, with "force").
 *
 * Thread-safe: one mutex guards the database; files are streamed and
 * validated outside it. */
#ifndef OPAL_DEBUGINFO_STORE_H
#define OPAL_DEBUGINFO_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "base/sym_result.h"
#include "shared/fileid.h"

#define OPAL_DI_ID_HEX_MAX        (2 * OPAL_BUILD_ID_MAX)  /* hex digits of an ID */
#define OPAL_DI_UPLOAD_ID_LEN     32                       /* hex digits of an upload ID */
#define OPAL_DI_DEFAULT_MAX_UPLOAD (1ull << 30)            /* bytes */
#define OPAL_DI_DEFAULT_EXPIRY_S  900                      /* 15 minutes */
#define OPAL_DI_MAX_ENTRIES       100000                   /* stored (ID, type) files */
#define OPAL_DI_MAX_ACTIVE        32                       /* uploads received at once */
#define OPAL_DI_MAX_SOURCES_ENTRIES 200000                 /* members of a sources tarball */

enum opal_di_type { OPAL_DI_DEBUGINFO, OPAL_DI_EXECUTABLE, OPAL_DI_SOURCES, OPAL_DI_N_TYPES };
enum opal_di_id_type { OPAL_DI_ID_GNU, OPAL_DI_ID_HTLHASH };

const char *opal_di_type_name(enum opal_di_type t);       /* "debuginfo", ... */
const char *opal_di_id_type_name(enum opal_di_id_type t); /* "gnu", "htlhash" */
/* "dwarf_inline", "dwarf_lines", "symtab", "dynsym", "none" (JSON answers). */
const char *opal_di_quality_name(enum opal_debug_quality q);

/* True when `id` is a valid ID of that kind: lowercase hex, an even number
 * of digits from 2 to OPAL_DI_ID_HEX_MAX for a build ID, exactly 32 for an
 * htlhash file ID. Nothing else ever becomes part of a path. */
bool opal_di_id_valid(const char *id, enum opal_di_id_type t);

/* One should-initiate-upload / initiate-upload request, already parsed. */
struct opal_di_request {
	char id[OPAL_DI_ID_HEX_MAX + 1];
	enum opal_di_id_type id_type;
	enum opal_di_type type;
	char hash[65];        /* SHA-256 of the bytes to upload, lowercase hex */
	bool force;
	uint64_t size;        /* initiate only: bytes announced */
};

/* Answer to a request: `status` is the HTTP status to send (200 or the
 * error of docs/http-api.md), `reason` a one-line explanation. */
struct opal_di_answer {
	int status;
	bool yes;                                   /* should-initiate: upload wanted */
	char reason[256];
	char upload_id[OPAL_DI_UPLOAD_ID_LEN + 1];  /* initiate: the new upload */
	enum opal_debug_quality quality;            /* upload finish: rank of the file */
	bool replaced;                              /* upload finish: it is now the stored one */
};

/* Ranks the ELF file `fd` (borrowed) as the symbolizer would use it to
 * symbolize, writing why into `why` (why_len bytes). Returns 0 and *q, or
 * -errno when it cannot open the file that way (the store then ranks it
 * from its ELF probe alone). Service assembly hands in the symbolizer's
 * own (opal_dwfl_rank, symbolize/sym_dwfl.h), so the store needs no
 * libdwfl session of its own. */
typedef int (*opal_di_rank_fn)(int fd, enum opal_debug_quality *q, char *why, size_t why_len);

struct opal_debuginfo_store_config {
	const char *dir;             /* folder for files and partial uploads (created) */
	const char *db_path;         /* SQLite database (state.db) */
	uint64_t max_upload_bytes;   /* 0: OPAL_DI_DEFAULT_MAX_UPLOAD */
	uint64_t expiry_s;           /* 0: OPAL_DI_DEFAULT_EXPIRY_S */
	opal_di_rank_fn rank;        /* NULL: rank by the ELF probe alone */
};

struct opal_debuginfo_store;

/* Opens the store (creating folders and tables; partial uploads left by
 * an earlier run are deleted). NULL on error, with errno and a log line. */
struct opal_debuginfo_store *opal_debuginfo_store_open(const struct opal_debuginfo_store_config *c);
void opal_debuginfo_store_close(struct opal_debuginfo_store *s);

uint64_t opal_debuginfo_store_max_upload(const struct opal_debuginfo_store *s);

/* Called (outside the store's lock) after an upload became the stored file
 * of (id, type) with quality `q`: the symbolizer re-opens and invalidates
 * what used the older data. */
typedef void (*opal_di_stored_fn)(void *arg, const char *id, enum opal_di_id_type id_type,
				  enum opal_di_type type, enum opal_debug_quality q);
/* Asked by should-initiate for a GNU build ID the store lacks: true when
 * debug info of DWARF quality is already available elsewhere (local
 * debug folder, debuginfod); `where` (len bytes) then says where. */
typedef bool (*opal_di_elsewhere_fn)(void *arg, const char *build_id, char *where, size_t len);
void opal_debuginfo_store_set_hooks(struct opal_debuginfo_store *s, opal_di_stored_fn stored,
				    opal_di_elsewhere_fn elsewhere, void *arg);

/* POST /debuginfo/v1/should-initiate-upload. Fills `a` (status 200 with
 * yes/reason, or 400 for a request the store cannot take). Returns 0 or
 * -errno (database failure: answer 500). */
int opal_debuginfo_should_initiate(struct opal_debuginfo_store *s, const struct opal_di_request *r,
				   struct opal_di_answer *a);

/* POST /debuginfo/v1/initiate-upload. On 200 a new upload (state
 * uploading) exists with a->upload_id; otherwise a->status is 409 (these
 * bytes are known invalid), 412 (an upload is in progress, or the stored
 * data is already of the best quality), 413 (size over the limit) or 507
 * (store full). Returns 0 or -errno. */
int opal_debuginfo_initiate(struct opal_debuginfo_store *s, const struct opal_di_request *r,
			    struct opal_di_answer *a);

struct opal_di_upload;

/* Starts receiving the body of upload `upload_id` (PUT). Returns 0 and
 * *out; -ENOENT for an unknown or expired upload (404), -EALREADY when it
 * was already received (409), -EBUSY when another PUT of it is running or
 * OPAL_DI_MAX_ACTIVE uploads are (409 / 503), or -errno. */
int opal_debuginfo_upload_begin(struct opal_debuginfo_store *s, const char *upload_id,
				struct opal_di_upload **out);

/* Bytes announced for the body (initiate-upload's "size"). */
uint64_t opal_debuginfo_upload_expected(const struct opal_di_upload *u);

/* Appends body bytes (streamed to a file, hashed on the way). Returns 0,
 * -EFBIG when the body grows past the announced size or the limit (413),
 * or -errno (write failure). */
int opal_debuginfo_upload_write(struct opal_di_upload *u, const void *buf, size_t len);

/* Ends the body: checks size and SHA-256, validates the file (ELF of the
 * right ID, or a tarball for sources) and stores it when better than what
 * is stored. Fills `a`: 200 (a->replaced, a->quality, a->reason) or 400
 * with the reason (the store is left as it was; the hash is remembered
 * as invalid when the bytes were the announced ones). Frees `u`. Returns
 * 0 or -errno (500). */
int opal_debuginfo_upload_finish(struct opal_di_upload *u, struct opal_di_answer *a);

/* Drops a partial upload (connection closed): the upload stays
 * "uploading" and may be PUT again until it expires. Frees `u`. */
void opal_debuginfo_upload_abort(struct opal_di_upload *u);

/* The validation of a received body (size and hash aside): for ELF types,
 * an ET_EXEC/ET_DYN ELF (or dwz's shared DWARF file) that is not
 * truncated, whose build ID (gnu) or file ID (htlhash; a separate debug
 * file without build ID is accepted unverified) matches r->id, with code
 * for "executable"; for "sources", a readable archive with a regular file.
 * Sets *q to the debug quality `rank` (may be NULL: the ELF probe's
 * estimate) gives it. Returns true when valid; `why` (why_len bytes) gets
 * the reason either way. */
bool opal_debuginfo_validate(int fd, const struct opal_di_request *r, opal_di_rank_fn rank,
			     enum opal_debug_quality *q, char *why, size_t why_len);

/* POST /debuginfo/v1/mark-upload-finished. a->status: 200 when the upload
 * was received (uploaded or invalid: a->reason says which), 404 unknown,
 * 409 body not received yet, 400 when it belongs to another ID or type.
 * Returns 0 or -errno. */
int opal_debuginfo_mark_finished(struct opal_debuginfo_store *s, const char *id,
				 enum opal_di_type type, const char *upload_id,
				 struct opal_di_answer *a);

/* Opens the stored file of (id, type) read-only. `q` (may be NULL) gets
 * its quality, `path` (len bytes, may be NULL) its location. Returns the
 * descriptor (caller closes) or -ENOENT / -errno. */
int opal_debuginfo_store_open_file(struct opal_debuginfo_store *s, const char *id,
				   enum opal_di_type type, enum opal_debug_quality *q,
				   char *path, size_t len);

/* Forgets uploads still uploading after the expiry time (their partial
 * files are deleted). Done by every request too, and once a minute by the
 * daemon (opal_services_tick). Returns the count. */
int opal_debuginfo_store_expire(struct opal_debuginfo_store *s);

/* Negative cache of debuginfod lookups: (build ID, kind) known absent
 * until a time. At most OPAL_DI_MAX_MISSES rows; expired rows go first. */
#define OPAL_DI_MAX_MISSES 100000
bool opal_debuginfo_store_miss_known(struct opal_debuginfo_store *s, const char *build_id,
				     const char *kind);
void opal_debuginfo_store_miss_put(struct opal_debuginfo_store *s, const char *build_id,
				   const char *kind, unsigned ttl_s);

/* File IDs of the symbolizer's files table (sym_sqlite.h) whose build ID is
 * `build_id` (len bytes) and whose recorded quality is below `q`: their
 * cached frames came from poorer data. Writes at most `max` IDs. Returns
 * the count or -errno. */
int opal_debuginfo_store_files_below(struct opal_debuginfo_store *s, const uint8_t *build_id,
				     size_t len, enum opal_debug_quality q, opal_file_id *ids,
				     size_t max);

#endif
