/* Native and kernel symbolization: (file ID, ELF virtual address) ->
 * inline chain of frames, via elfutils libdwfl; kernel addresses via a
 * kallsyms descriptor. Results are cached in memory and in SQLite
 * (sym_sqlite.h). */
#ifndef OPAL_SYMBOLIZE_H
#define OPAL_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/metrics.h"
#include "base/sym_result.h"
#include "shared/fileid.h"

struct opal_cache;
struct opal_symbolizer;

/* Creates a symbolizer; `cache` may be NULL (no persistence) and is
 * borrowed. `max_open_files` bounds the libdwfl handles kept open (LRU;
 * 0 is taken as 1); their memory is bounded by
 * OPAL_SYM_DEFAULT_DEBUG_MEMORY until opal_symbolizer_set_max_debug_memory.
 * Returns NULL with errno set on failure. */
struct opal_symbolizer *opal_symbolizer_new(struct opal_cache *cache, size_t max_open_files);
/* Writes the queued SQLite rows (opal_symbolizer_flush), then frees. The
 * cache must still be open. */
void opal_symbolizer_free(struct opal_symbolizer *s);

/* Bound on the memory of the open libdwfl sessions together, in bytes, as
 * opal_dwfl_memory() estimates it (debug sections mapped or decompressed,
 * line tables libdw parsed): when a lookup takes the sum over it, the
 * least recently used other sessions are closed until it fits; the
 * session in use stays open even when it alone is larger. 0 removes the
 * bound (max_open_files still applies). Applies at once. */
#define OPAL_SYM_DEFAULT_DEBUG_MEMORY (1ull << 30)
void opal_symbolizer_set_max_debug_memory(struct opal_symbolizer *s, uint64_t bytes);

/* Frame rows bound for SQLite are queued (at most OPAL_SYM_WRITE_ROWS rows
 * or OPAL_SYM_WRITE_BYTES bytes, counting the frames they reference,
 * which are shared with the in-memory cache; written when full) and
 * written in one transaction per flush: one transaction per row cost
 * ~200 us a row. Call after a batch of lookups (an interval, a request);
 * lookups still see queued rows through the in-memory cache. While the
 * caller holds opal_cache_begin's transaction rows are written at once,
 * into it. Returns 0 or the cache's -errno (the rows are then dropped:
 * it is a cache). */
#define OPAL_SYM_WRITE_ROWS  65536
#define OPAL_SYM_WRITE_BYTES (32u << 20)
int opal_symbolizer_flush(struct opal_symbolizer *s);

/* Registers the ELF file `fd` (the symbolizer takes ownership of fd) under
 * `id`. `build_id` (len bytes, may be 0) and `path` (may be NULL) are
 * informational and recorded in the cache's files table. Registering an id
 * again replaces the descriptor. Returns 0 or -errno. */
int opal_symbolizer_add_file(struct opal_symbolizer *s, const opal_file_id *id, int fd,
			     const uint8_t *build_id, size_t build_id_len, const char *path);

/* True when a descriptor (or cached results) is known for `id`. */
bool opal_symbolizer_has_file(struct opal_symbolizer *s, const opal_file_id *id);

/* Symbolizes ELF virtual address `vaddr` of file `id`. When `return_address`
 * is true the lookup uses vaddr - 1 (a return address points after its
 * call). Fills `out` (n may be 0: unresolved, which is not an error);
 * an answer from the in-memory cache is a shared read-only view
 * (out->shared set, no copy): treat `out` as const and release it with
 * opal_sym_result_free, from any thread. Thread-safe. The first lookups
 * of a file whose debug info has to come from debuginfod wait for that
 * download (at most OPAL_SYM_DEBUGINFOD_MAX_S, debuginfo_sources.h), made
 * without the symbolizer's lock: lookups of other files go on meanwhile.
 * Returns 0, -ENOENT when no descriptor or cache entry exists for `id`
 * (ask the collector for the file again), -EAGAIN when `id` kept being
 * registered again during the lookup, or -errno. */
int opal_symbolize_native(struct opal_symbolizer *s, const opal_file_id *id, uint64_t vaddr,
			  bool return_address, struct opal_sym_result *out);

/* Loads kernel symbols from a /proc/kallsyms descriptor (taken over and
 * closed) opened by a CAP_SYSLOG holder; replaces earlier ones. Returns the
 * symbol count or -errno (-EPERM when every address reads as zero,
 * -EINVAL when it is not a regular file). */
int opal_symbolizer_set_kallsyms(struct opal_symbolizer *s, int fd);

/* Kernel address -> function (+ module). n == 0 when unknown or before
 * kallsyms arrived. Return addresses are looked up at addr - 1. */
int opal_symbolize_kernel(struct opal_symbolizer *s, uint64_t addr, bool return_address,
			  struct opal_sym_result *out);

/* Drops every cached result of `id`, in memory and in SQLite (better debug
 * data arrived). Opening a descriptor whose debug quality beats the
 * recorded one does this by itself. Returns 0 or -errno from the cache. */
int opal_symbolizer_invalidate_file(struct opal_symbolizer *s, const opal_file_id *id);

/* Debug quality of `id`: from its open session, by opening its registered
 * descriptor, or from the cache's files table. Returns 0, -ENOENT when
 * the file is unknown, or -errno. */
int opal_symbolizer_file_quality(struct opal_symbolizer *s, const opal_file_id *id,
				 enum opal_debug_quality *q);

/* Fills `out` (base/metrics.h) with the current statistics. */
void opal_symbolizer_stats(struct opal_symbolizer *s, struct opal_symbolizer_stats *out);

/* A .gnu_debuglink candidate for file `id`, opened by the collector next to
 * the binary (wire FileInfo kind DEBUGLINK); `fd` is taken over, `path`
 * (may be NULL) is informational. The sources check its CRC-32 against
 * the file's .gnu_debuglink (debuginfo_sources.h). At most
 * OPAL_SYM_MAX_DEBUGLINKS per registration of `id` are kept (further ones
 * are closed: -ENOSPC); registering `id` again drops them. A session
 * already open without DWARF is reopened to try it. Returns 0, -ENOENT
 * when `id` is not registered (fd closed), or -errno. */
int opal_symbolizer_add_debuglink(struct opal_symbolizer *s, const opal_file_id *for_id, int fd,
				  const char *path);

/* The key under which a file known only by its GNU build ID (remote
 * symbolization) is registered and cached: the first 16 bytes of
 * SHA-256("opal-build-id:" || build ID bytes), which cannot collide with
 * an htlhash file ID in practice. */
void opal_symbolizer_build_id_key(const uint8_t *build_id, size_t len, opal_file_id *out);

/* Makes a build ID given as lowercase hex symbolizable without a collector
 * descriptor: registers, under opal_symbolizer_build_id_key, the best ELF
 * the sources have for it (debuginfo_sources.h; may ask debuginfod, so call it
 * without holding locks of your own). Returns 0 and *key; -ENOENT when no
 * source has the build ID and nothing is cached for it; -EINVAL for a bad
 * ID. */
int opal_symbolizer_ensure_build_id(struct opal_symbolizer *s, const char *build_id_hex,
				    opal_file_id *key);

/* Same for an htlhash file ID: a registered descriptor, cached frames, or
 * an uploaded file of that ID. Returns 0, -ENOENT or -EINVAL. */
int opal_symbolizer_ensure_file_id(struct opal_symbolizer *s, const opal_file_id *id);

/* Better debug data for build ID `build_id` (len bytes, may be 0) or file
 * `file_id` (may be NULL) arrived with quality `q` (an upload): sessions of
 * matching registered files are closed so that the next lookup reopens
 * them through the sources (dropping cached frames when the new quality
 * beats the recorded one), and files registered by build ID only are
 * forgotten and their cached frames dropped. Returns the number of files
 * affected. */
int opal_symbolizer_debug_data_changed(struct opal_symbolizer *s, const uint8_t *build_id,
				       size_t len, const opal_file_id *file_id,
				       enum opal_debug_quality q);

/* Stores frames found elsewhere (the upstream symbolizer) for lookup
 * address `addr` of `id` (the address actually looked up, after any -1),
 * replacing what the memory and SQLite caches held (the SQLite row goes
 * through the write queue: opal_symbolizer_flush). Returns 0 or -errno. */
int opal_symbolizer_put_remote(struct opal_symbolizer *s, const opal_file_id *id, uint64_t addr,
			       const struct opal_sym_result *r);

/* Callbacks into the fleet side (upstream.h), called with the symbolizer's
 * lock held: they must only queue work, never call back into the
 * symbolizer. Any may be NULL.
 *  poor_result: a lookup computed from local data of quality below
 *    DWARF_LINES, or that found nothing: `addr` is the lookup address;
 *    `build_id` (len bytes) is 0-length for files without one.
 *  new_file: a newly registered descriptor was opened and ranked `q`;
 *    `main_fd` is the ELF, `debug_fd` the separate debug file used or -1
 *    (both borrowed: duplicate to keep). */
struct opal_symbolizer_hooks {
	void (*poor_result)(void *arg, const opal_file_id *id, const uint8_t *build_id,
			    size_t build_id_len, uint64_t addr, const struct opal_sym_result *local);
	void (*new_file)(void *arg, const opal_file_id *id, const uint8_t *build_id,
			 size_t build_id_len, int main_fd, int debug_fd, enum opal_debug_quality q);
	void *arg;
};
void opal_symbolizer_set_hooks(struct opal_symbolizer *s, const struct opal_symbolizer_hooks *h);

#endif
