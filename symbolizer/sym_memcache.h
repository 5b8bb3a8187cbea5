/* In-memory LRU cache of native symbolization results, keyed by (file ID,
 * looked-up address), in front of the SQLite cache. Bounded both in
 * entries and in bytes (result strings included); the least recently
 * used entries are evicted first. Not thread-safe: the symbolizer's lock
 * covers it. */
#ifndef OPAL_SYM_MEMCACHE_H
#define OPAL_SYM_MEMCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "fileid.h"
#include "symbolize.h"

#define OPAL_SYM_MEMCACHE_MAX_ENTRIES (1u << 20)
#define OPAL_SYM_MEMCACHE_MAX_BYTES   (256u << 20)

struct opal_sym_memcache;

/* Bounds of 0 select the defaults above. NULL on ENOMEM. */
struct opal_sym_memcache *opal_sym_memcache_new(size_t max_entries, size_t max_bytes);
void opal_sym_memcache_free(struct opal_sym_memcache *mc);

/* On a hit copies the result into `out` (caller frees it with
 * opal_sym_result_free) and returns 1; returns 0 on a miss, -ENOMEM. */
int opal_sym_memcache_get(struct opal_sym_memcache *mc, const opal_file_id *id, uint64_t addr,
			  struct opal_sym_result *out);

/* Stores a copy of `r` (replacing an older entry for the same key).
 * Returns 0 or -ENOMEM (the cache is then unchanged). */
int opal_sym_memcache_put(struct opal_sym_memcache *mc, const opal_file_id *id, uint64_t addr,
			  const struct opal_sym_result *r);

/* Drops every entry of `id` (O(entries)). */
void opal_sym_memcache_drop_file(struct opal_sym_memcache *mc, const opal_file_id *id);

size_t opal_sym_memcache_count(const struct opal_sym_memcache *mc);

#endif
