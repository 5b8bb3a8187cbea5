/* SQLite cache of symbolization results and of known files, under the
 * state directory (state.db). Survives restarts. */
#ifndef OPAL_CACHE_H
#define OPAL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"
#include "symbolize/symbolize.h"

struct opal_cache;

/* Opens (creating) `path` (e.g. "<state-dir>/state.db"). NULL on error
 * with errno set and a log line. */
struct opal_cache *opal_cache_open(const char *path);
void opal_cache_close(struct opal_cache *c);
/* Lowers the bound on frame rows from OPAL_CACHE_MAX_FRAMES (4 Mi) to
 * `max_frames` (at least 8), e.g. to exercise eviction; when a write takes
 * the table over it, an eighth of the bound is dropped in key order. */
void opal_cache_set_max_frames(struct opal_cache *c, int64_t max_frames);

/* files table: (file ID, build ID, path, debug quality, reason). */
int opal_cache_put_file(struct opal_cache *c, const opal_file_id *id, const uint8_t *build_id,
			size_t build_id_len, const char *path, enum opal_debug_quality q,
			const char *reason);
/* Returns 0 and fills *q, or -ENOENT. */
int opal_cache_get_file_quality(struct opal_cache *c, const opal_file_id *id,
				enum opal_debug_quality *q);

/* refused table: files refused before decompression under `budget`
 * bytes (debuginfo/debuginfo_bound.h), so a restart does not scan them
 * again. get answers for a row of file ID `id` or of the build ID (when
 * build_id_len > 0) whose budget is at least `budget` (a raised budget
 * judges the file anew), copying its reason into reason[len]. Return 0,
 * -ENOENT (get: no such row), -EINVAL, or -errno. */
int opal_cache_put_refused(struct opal_cache *c, const opal_file_id *id, const uint8_t *build_id,
			   size_t build_id_len, uint64_t budget, const char *reason);
int opal_cache_get_refused(struct opal_cache *c, const opal_file_id *id, const uint8_t *build_id,
			   size_t build_id_len, uint64_t budget, char *reason, size_t len);

/* frames table: (file ID, lookup address) -> frames. `addr` is the address
 * actually looked up (after any -1). Returns 0, -ENOENT for a miss, -errno. */
int opal_cache_get_frames(struct opal_cache *c, const opal_file_id *id, uint64_t addr,
			  struct opal_sym_result *out);
int opal_cache_put_frames(struct opal_cache *c, const opal_file_id *id, uint64_t addr,
			  const struct opal_sym_result *r);
/* One row of opal_cache_put_frames_batch. */
struct opal_cache_frames_row {
	opal_file_id id;
	uint64_t addr;                  /* lookup address, as for put_frames */
	struct opal_sym_result res;     /* borrowed */
};
/* Writes the `n` rows of `rows` (an array of n) in one transaction, later
 * rows replacing earlier ones of the same key; inside the transaction of
 * opal_cache_begin when one is open. Without such a transaction the batch
 * is all or nothing: on error it is rolled back. Returns 0 or -errno. */
int opal_cache_put_frames_batch(struct opal_cache *c, const struct opal_cache_frames_row *rows,
				size_t n);
/* Drops every cached frame of `id` (better debug data arrived). */
int opal_cache_invalidate_file(struct opal_cache *c, const opal_file_id *id);

/* Groups many puts into one transaction (much faster); nestable no. */
int opal_cache_begin(struct opal_cache *c);
int opal_cache_commit(struct opal_cache *c);
/* True between opal_cache_begin and opal_cache_commit: puts then join
 * that transaction, so the symbolizer writes rows at once rather than
 * queueing them. */
bool opal_cache_in_transaction(struct opal_cache *c);

#endif
