/* The on-disk cache of unwind tables (unwind_table.h), by file ID: a
 * table built once is read back by every later collector on the host, so
 * a restart, or the next run of a compiler after its table was unloaded,
 * costs a file read (libLLVM-15: milliseconds) instead of a build (0.5 s
 * of CPU). docs/unwinding.md, "The table cache".
 *
 * One file per table, <folder>/<32 hex digits of the file ID>.tab: a
 * header (struct opal_unwind_store_hdr), the rules, the bodies. An entry
 * is used only when its header names this collector's identity (the
 * caller's bytes: its own GNU build ID, so a new builder never reads the
 * tables of an old one), the file ID asked for and the same state of the
 * file's debug file (present or not: a debug file installed later adds
 * .debug_frame rules, so the table is rebuilt), and when its CRC-32, sizes
 * and rules (strictly increasing, bodies in range, GAP first and last)
 * check. Anything else is a miss; a damaged entry is deleted and counted.
 * Entries are written to a temporary name and renamed, so a reader never
 * sees half of one; a crash leaves at most a temporary file, removed at
 * the next open.
 *
 * Bounds: entries of at most OPAL_UNWIND_STORE_MAX_ENTRY bytes, at most
 * `max_bytes` in all and OPAL_UNWIND_STORE_MAX_FILES files: past either,
 * the least recently used entries (by mtime, touched on every hit) are
 * deleted down to 3/4 of the bound. The folder must be the caller's own
 * (root's) and writable by no one else; entries not owned by the caller
 * are never read.
 *
 * Thread-safe: the builder thread and the main loop use one store. */
#ifndef OPAL_COLLECTOR_UNWIND_STORE_H
#define OPAL_COLLECTOR_UNWIND_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"
#include "unwind/table/unwind_table.h"

#define OPAL_UNWIND_STORE_VERSION     1
#define OPAL_UNWIND_STORE_IDENT_MAX   64
#define OPAL_UNWIND_STORE_MAX_FILES   16384
#define OPAL_UNWIND_STORE_MAX_ENTRY                                                        \
	(sizeof(struct opal_unwind_store_hdr) +                                            \
	 (uint64_t)OPAL_UNWIND_MAX_RULES * sizeof(struct opal_unwind_rule) +               \
	 (uint64_t)OPAL_UNWIND_MAX_BODIES * sizeof(struct opal_unwind_body))
#define OPAL_UNWIND_STORE_DEFAULT_BYTES (256ull << 20)
/* Tables that took less CPU than this to build are not written: reading
 * them back would save little and churn would write an entry per new
 * small binary. */
#define OPAL_UNWIND_STORE_MIN_BUILD_NS 2000000ull

/* On disk, in the collector's byte order (the identity pins the build). */
struct opal_unwind_store_hdr {
	char magic[8];                              /* "OPALUNWT" */
	uint32_t version;                           /* OPAL_UNWIND_STORE_VERSION */
	uint32_t ident_len;
	uint8_t ident[OPAL_UNWIND_STORE_IDENT_MAX];
	opal_file_id id;
	uint64_t base;
	uint32_t n_rules, n_bodies;
	uint32_t debug_seen;                        /* a debug file existed at build time */
	uint32_t crc;                               /* zlib CRC-32 of the header (this
						     * field 0), rules and bodies */
	struct opal_unwind_stats stats;
};

struct opal_unwind_store {
	int dir_fd;                                 /* -1: no cache */
	uint8_t ident[OPAL_UNWIND_STORE_IDENT_MAX];
	uint32_t ident_len;
	uint64_t max_bytes;
	pthread_mutex_t mu;                         /* bytes, n_files, eviction */
	uint64_t bytes;                             /* entries' bytes (as counted) */
	uint32_t n_files;
	_Atomic uint64_t hits, misses, writes, errors, evicted;
};

/* Opens (creating it and missing parents, mode 0700) the cache folder `dir`
 * with identity `ident` (1..OPAL_UNWIND_STORE_IDENT_MAX bytes) and bound
 * `max_bytes` (0: OPAL_UNWIND_STORE_DEFAULT_BYTES); removes temporary
 * files and trims the folder to its bounds. Returns 0; -EPERM when the
 * folder is not the caller's or is writable by group or others, -EINVAL
 * for a bad identity, or -errno. On error `s` is a usable, disabled
 * store (every get misses, every put does nothing). */
int opal_unwind_store_open(struct opal_unwind_store *s, const char *dir, const void *ident,
			   size_t ident_len, uint64_t max_bytes);

/* A disabled store. */
void opal_unwind_store_init_off(struct opal_unwind_store *s);

void opal_unwind_store_close(struct opal_unwind_store *s);

/* Reads the table of file `id` built with (`debug_seen`) or without a
 * debug file into `out` (zeroed first; owns its arrays on success).
 * Returns 0 on a hit (counted in hits, the entry's mtime touched),
 * -ENOENT on a miss (counted in misses; also for a disabled store), or
 * -EBADMSG for an entry that failed its checks (deleted, counted in
 * errors and misses). */
int opal_unwind_store_get(struct opal_unwind_store *s, const opal_file_id *id, bool debug_seen,
			  struct opal_unwind_table *out);

/* Writes table `t` of file `id` (replacing any entry), then trims to the
 * bounds. Returns 0 (counted in writes), -ENOENT for a disabled store,
 * -E2BIG for a table over the entry bound, or -errno of the write
 * (counted in errors). */
int opal_unwind_store_put(struct opal_unwind_store *s, const opal_file_id *id, bool debug_seen,
			  const struct opal_unwind_table *t);

#endif
