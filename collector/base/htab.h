/* Intrusive chained hash table keyed by a caller-computed 64-bit hash;
 * callers compare their own keys while walking a hash's chain. Grows by
 * doubling at load factor 1; element counts are bounded by the callers. */
#ifndef OPAL_COLLECTOR_HTAB_H
#define OPAL_COLLECTOR_HTAB_H

#include <stddef.h>
#include <stdint.h>

struct opal_hnode {
	struct opal_hnode *next;
	uint64_t hash;
};

struct opal_htab {
	struct opal_hnode **buckets;   /* nbuckets entries, a power of two */
	size_t nbuckets;
	size_t count;
};

/* Empty table with 2^`order` buckets. Returns 0 or -ENOMEM. */
int opal_htab_init(struct opal_htab *t, unsigned order);

/* Frees the bucket array; the nodes belong to the caller. */
void opal_htab_destroy(struct opal_htab *t);

/* Links `n` under `hash` (duplicates allowed). Never fails: when growing
 * the bucket array fails the table just gets longer chains. */
void opal_htab_insert(struct opal_htab *t, struct opal_hnode *n, uint64_t hash);

/* Unlinks `n`, which must be in `t`. */
void opal_htab_remove(struct opal_htab *t, struct opal_hnode *n);

/* First node with `hash`, or NULL; continue with opal_htab_next. */
struct opal_hnode *opal_htab_first(const struct opal_htab *t, uint64_t hash);
struct opal_hnode *opal_htab_next(const struct opal_hnode *n);

/* 64-bit FNV-1a over `len` bytes, continuing from `h` (start with
 * OPAL_HASH_SEED). */
#define OPAL_HASH_SEED 0xcbf29ce484222325ull
uint64_t opal_hash_bytes(uint64_t h, const void *p, size_t len);

/* Mixes a 64-bit integer (splitmix64 finalizer). */
static inline uint64_t opal_hash_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
