/* In-memory cache of native symbolization results, keyed by (file ID,
 * looked-up address), in front of the SQLite cache. A hit hands out a
 * reference to the cached entry (a shared read-only view, sym_result.h)
 * instead of a copy.
 *
 * Bounded in entries and in bytes: every entry's block (key, frames,
 * strings) plus two table slots counts; references handed out keep an
 * evicted entry's block alive until released, outside the bound. The
 * slot table itself is 16 bytes times the power of two above 8/7 of the
 * entries, at most 32 MiB at the default entry bound. Eviction is CLOCK
 * (second chance), an approximation of least recently used: entries
 * leave in insertion order, except that one hit since it was last
 * considered sends an entry back to the newest end once.
 * Not thread-safe: the symbolizer's lock covers it (references may be
 * released without it). */
#ifndef OPAL_SYM_MEMCACHE_H
#define OPAL_SYM_MEMCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"
#include "symbolize/symbolize.h"

#define OPAL_SYM_MEMCACHE_MAX_ENTRIES (1u << 20)
#define OPAL_SYM_MEMCACHE_MAX_BYTES   (256u << 20)

struct opal_sym_memcache;

/* Bounds of 0 select the defaults above. NULL on ENOMEM. */
struct opal_sym_memcache *opal_sym_memcache_new(size_t max_entries, size_t max_bytes);
/* Frees the cache; blocks still referenced by views live on until their
 * views are released. */
void opal_sym_memcache_free(struct opal_sym_memcache *mc);

/* On a hit fills `out` with a view of the cached result (out->shared set
 * and referenced; an unresolved entry gives an empty result without a
 * reference) and returns 1: release it with opal_sym_result_free. Returns
 * 0 on a miss (`out` untouched). */
int opal_sym_memcache_get(struct opal_sym_memcache *mc, const opal_file_id *id, uint64_t addr,
			  struct opal_sym_result *out);

/* Stores a copy of `r` (replacing an older entry for the same key) and,
 * when `view` is not NULL, fills it on success as a hit on the new entry
 * would. Returns 0 or -ENOMEM (nothing stored; an older entry of the key
 * may be gone). */
int opal_sym_memcache_put_view(struct opal_sym_memcache *mc, const opal_file_id *id,
			       uint64_t addr, const struct opal_sym_result *r,
			       struct opal_sym_result *view);

/* Drops every entry of `id` (O(entries)). */
void opal_sym_memcache_drop_file(struct opal_sym_memcache *mc, const opal_file_id *id);

size_t opal_sym_memcache_count(const struct opal_sym_memcache *mc);

#endif
