/* Where separate debug info comes from, in opal's order (docs/http-api.md,
 * "Debug info sources"):
 *   1. uploads in the debuginfo store, by GNU build ID, else by htlhash
 *      file ID (debuginfo, then executable uploads);
 *   2. <debug root>/.build-id/xx/rest.debug (Debian's -dbg layout), then
 *      .gnu_debuglink candidates whose CRC-32 matches: <debug root>/<dir of
 *      the file>/<name>, and the descriptors the collector opened next to
 *      the binary (FileInfo kind DEBUGLINK) — the symbolizer itself never
 *      opens another process's files;
 *   3. the DEBUGINFOD_URLS servers through libdebuginfod (its cache under
 *      the state dir), with a negative cache;
 *   4. nothing separate: libdwfl uses the ELF itself (.symtab, .dynsym,
 *      .gnu_debugdata MiniDebugInfo).
 * The first candidate with usable DWARF wins; without one, the best
 * candidate that beats the ELF's own symbols. Candidates that cannot be
 * read (DWARF compressed with an unknown type, wrong build ID, bad CRC,
 * malformed) or are refused before decompression (debuginfo_bound.h) are
 * skipped and the reason is noted; the one chosen is handed to libdw
 * through opal_decomp_open (zstd sections decompressed).
 *
 * libdwfl asks through opal_sym_sources_find_debuginfo, installed as the
 * find_debuginfo callback of every session (sym_dwfl.c), so that libdwfl
 * never searches paths or debuginfod by itself. A libdwfl module reported
 * with dwfl_report_elf carries no caller data into that callback, so the
 * file being opened is described by a thread-local context that
 * symbolize.c sets around every libdwfl call it makes; without a context
 * the callback finds nothing (the ELF alone is used, as upload validation
 * wants).
 *
 * The network is never used from the callback: symbolize.c calls libdwfl
 * with its lock held, and a debuginfod server may take up to
 * OPAL_SYM_DEBUGINFOD_MAX_S to answer. At the debuginfod step the callback
 * uses only answers the caller already fetched (ctx->fetched) and
 * otherwise names the build ID it would have asked for in ctx->want; the
 * caller then drops its lock, calls opal_sym_sources_fetch_debuginfo,
 * retakes the lock, adds the answer to ctx->fetched and opens the file
 * again. The lookups without a context (opal_sym_sources_open_build_id,
 * opal_sym_sources_elsewhere) ask debuginfod themselves: call them
 * without locks held. Once a stop signal arrived (opal_stop_signals),
 * downloads in flight are cancelled within a second and no new one
 * starts; those lookups fail with -ECANCELED, remembered nowhere. */
#ifndef OPAL_SYM_SOURCES_H
#define OPAL_SYM_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <gelf.h>
#include <elfutils/libdwfl.h>
#include "base/sym_result.h"
#include "shared/fileid.h"

struct opal_debuginfo_store;

#define OPAL_SYM_MAX_DEBUGLINKS   4       /* collector candidates kept per file */
#define OPAL_SYM_NEGATIVE_TTL_S   3600    /* debuginfod "not found" remembered */
#define OPAL_SYM_DEBUGINFOD_MAX_S 60      /* one debuginfod download, at most */
#define OPAL_SYM_DEBUGINFOD_MAX_FETCHES 4 /* debuginfod downloads at once, process-wide */
#define OPAL_SYM_MAX_FETCHED      2       /* downloads kept per file: its debug file, dwz's file */

struct opal_sym_sources_config {
	struct opal_debuginfo_store *store;   /* uploads and negative cache; may be NULL */
	const char *debug_root;               /* "/usr/lib/debug"; NULL: none */
	const char *debuginfod_cache;         /* DEBUGINFOD_CACHE_PATH; NULL: no debuginfod */
	unsigned negative_ttl_s;              /* 0: OPAL_SYM_NEGATIVE_TTL_S */
};

/* Sets the process-wide sources (copied; the store is borrowed). Call
 * before threads start: it may set DEBUGINFOD_CACHE_PATH. debuginfod is
 * used only when DEBUGINFOD_URLS is set and debuginfod_cache is given.
 * Returns 0 or -errno. */
int opal_sym_sources_init(const struct opal_sym_sources_config *c);

/* Clears the configuration (no sources: tests, shutdown). */
void opal_sym_sources_reset(void);

/* A debuginfod answer for one build ID, kept by the caller so that the
 * file's later sessions use it without the network. */
struct opal_sym_fetched {
	char build_id[2 * OPAL_BUILD_ID_MAX + 1];   /* lowercase hex */
	char *path;   /* the debug file in the debuginfod cache (heap), NULL: none found */
};

/* Description of one file being opened by libdwfl, and what was found. */
struct opal_sym_sources_ctx {
	/* in (borrowed; set by the caller) */
	int main_fd;                           /* the ELF file itself */
	const char *path;                      /* path as the process saw it, or NULL */
	opal_file_id file_id;
	bool has_file_id;                      /* false for build-ID-only files */
	const int *debuglink_fds;              /* collector candidates */
	const char *const *debuglink_paths;
	size_t n_debuglinks;
	const struct opal_sym_fetched *fetched; /* debuginfod answers fetched for the file */
	size_t n_fetched;
	/* out (owned; cleared by opal_sym_sources_ctx_reset) */
	char source[200];                      /* separate debug data used, "" = none */
	char notes[400];                       /* candidates skipped, and why */
	int debug_fd;                          /* duplicate of that debug file, or -1 */
	/* The first build ID (hex) whose debuginfo the search would have asked
	 * debuginfod for, had it been allowed the network; "" when none. The
	 * answer is then missing from what was found: fetch it and reopen. */
	char want[2 * OPAL_BUILD_ID_MAX + 1];
};

void opal_sym_sources_ctx_init(struct opal_sym_sources_ctx *ctx);
/* Closes debug_fd and clears the outputs (before opening the file again). */
void opal_sym_sources_ctx_reset(struct opal_sym_sources_ctx *ctx);

/* Makes `ctx` the context of libdwfl calls made by this thread until
 * opal_sym_sources_leave. Not nestable. */
void opal_sym_sources_enter(struct opal_sym_sources_ctx *ctx);
void opal_sym_sources_leave(void);

/* Dwfl_Callbacks.find_debuginfo (libdwfl.h gives the contract): returns a
 * descriptor of the debug file for the module, or -1 (errno 0) when none
 * beats the ELF itself. Handles both the main debug file and dwz's
 * .gnu_debugaltlink file (looked up by its build ID). */
int opal_sym_sources_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
				    GElf_Addr base, const char *file_name,
				    const char *debuglink_file, GElf_Word debuglink_crc,
				    char **debuginfo_file_name);

/* Downloads the debuginfo of build ID `build_id_hex` (lowercase hex) from
 * the DEBUGINFOD_URLS servers into the debuginfod cache (libdebuginfod),
 * unless the negative cache knows it is missing. Blocks up to
 * OPAL_SYM_DEBUGINFOD_MAX_S, plus the wait for a free slot: at most
 * OPAL_SYM_DEBUGINFOD_MAX_FETCHES downloads run at once, and a caller
 * asking for a build ID already being downloaded waits for that download
 * and shares its answer (no second request). Call without locks held.
 * Returns 0 and *path (heap; caller frees) naming the cached file;
 * -ENOENT when no server has it or the negative cache says so; -ENOSYS
 * when debuginfod is not configured; -EINVAL for a bad ID; another
 * -errno when the download failed (remembered for 60 s). */
int opal_sym_sources_fetch_debuginfo(const char *build_id_hex, char **path);

/* Best ELF for a build ID known only by its ID (remote symbolization):
 * uploaded debuginfo, uploaded executable, <debug root>/.build-id, then
 * debuginfod (debuginfo, then executable). Returns a descriptor (caller
 * closes) with `source` (len bytes) saying where, or -ENOENT / -errno. */
int opal_sym_sources_open_build_id(const char *build_id_hex, char *source, size_t len);

/* Same for an htlhash file ID: uploads only. */
int opal_sym_sources_open_file_id(const char *file_id_hex, char *source, size_t len);

/* Local debug file for the debuginfod protocol: uploaded debuginfo, then
 * <debug root>/.build-id (no network, so that two servers cannot loop).
 * Returns a descriptor and `path` (len bytes) naming it ("uploads/debuginfo/ID"
 * or the file under the debug root), or -ENOENT. */
int opal_sym_sources_local_debuginfo(const char *build_id_hex, char *path, size_t len);

/* opal_di_elsewhere_fn of the store: true when DWARF for `build_id` is in
 * the debug root or on a debuginfod server. */
bool opal_sym_sources_elsewhere(void *arg, const char *build_id, char *where, size_t len);

#endif
