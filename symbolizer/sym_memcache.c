/* Chained hash table plus an LRU list (sym_memcache.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "sym_memcache.h"
#include "sym_result.h"

#define MIN_BUCKETS 1024

struct entry {
	opal_file_id id;
	uint64_t addr;
	struct opal_sym_result res;
	size_t bytes;                 /* accounted size of this entry */
	struct entry *hnext;          /* bucket chain */
	struct entry *prev, *next;    /* LRU list, most recent at head */
};

struct opal_sym_memcache {
	struct entry **buckets;
	size_t n_buckets;             /* power of two */
	size_t n, bytes;
	size_t max_entries, max_bytes;
	struct entry *head, *tail;
	uint64_t seed;                /* random: keys come from other users' files */
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t hash_key(const struct opal_sym_memcache *mc, const opal_file_id *id,
			 uint64_t addr)
{
	uint64_t a, b;
	memcpy(&a, id->b, 8);
	memcpy(&b, id->b + 8, 8);
	return mix(mix(mix(a ^ mc->seed) ^ b) ^ addr);
}

struct opal_sym_memcache *opal_sym_memcache_new(size_t max_entries, size_t max_bytes)
{
	struct opal_sym_memcache *mc = calloc(1, sizeof(*mc));
	if (!mc)
		return NULL;
	mc->max_entries = max_entries ? max_entries : OPAL_SYM_MEMCACHE_MAX_ENTRIES;
	mc->max_bytes = max_bytes ? max_bytes : OPAL_SYM_MEMCACHE_MAX_BYTES;
	mc->n_buckets = MIN_BUCKETS;
	mc->buckets = calloc(mc->n_buckets, sizeof(*mc->buckets));
	if (!mc->buckets) {
		free(mc);
		return NULL;
	}
	if (getrandom(&mc->seed, sizeof(mc->seed), GRND_NONBLOCK) != sizeof(mc->seed))
		mc->seed = mix((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)mc);
	return mc;
}

static void lru_unlink(struct opal_sym_memcache *mc, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		mc->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		mc->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_head(struct opal_sym_memcache *mc, struct entry *e)
{
	e->prev = NULL;
	e->next = mc->head;
	if (mc->head)
		mc->head->prev = e;
	mc->head = e;
	if (!mc->tail)
		mc->tail = e;
}

static struct entry **find_slot(struct opal_sym_memcache *mc, const opal_file_id *id,
				uint64_t addr)
{
	struct entry **pp = &mc->buckets[hash_key(mc, id, addr) & (mc->n_buckets - 1)];
	while (*pp && !((*pp)->addr == addr && opal_file_id_eq(&(*pp)->id, id)))
		pp = &(*pp)->hnext;
	return pp;
}

static void remove_entry(struct opal_sym_memcache *mc, struct entry **slot)
{
	struct entry *e = *slot;
	*slot = e->hnext;
	lru_unlink(mc, e);
	mc->n--;
	mc->bytes -= e->bytes;
	opal_sym_result_free(&e->res);
	free(e);
}

void opal_sym_memcache_free(struct opal_sym_memcache *mc)
{
	if (!mc)
		return;
	struct entry *e = mc->head;
	while (e) {
		struct entry *next = e->next;
		opal_sym_result_free(&e->res);
		free(e);
		e = next;
	}
	free(mc->buckets);
	free(mc);
}

int opal_sym_memcache_get(struct opal_sym_memcache *mc, const opal_file_id *id, uint64_t addr,
			  struct opal_sym_result *out)
{
	struct entry *e = *find_slot(mc, id, addr);
	if (!e)
		return 0;
	if (opal_sym_result_copy(out, &e->res) < 0)
		return -ENOMEM;
	lru_unlink(mc, e);
	lru_push_head(mc, e);
	return 1;
}

/* Doubles the bucket array when chains would average over one entry;
 * a failed allocation just keeps longer chains. */
static void maybe_grow(struct opal_sym_memcache *mc)
{
	if (mc->n < mc->n_buckets)
		return;
	size_t nb = mc->n_buckets * 2;
	struct entry **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < mc->n_buckets; i++) {
		struct entry *e = mc->buckets[i];
		while (e) {
			struct entry *next = e->hnext;
			size_t k = hash_key(mc, &e->id, e->addr) & (nb - 1);
			e->hnext = b[k];
			b[k] = e;
			e = next;
		}
	}
	free(mc->buckets);
	mc->buckets = b;
	mc->n_buckets = nb;
}

int opal_sym_memcache_put(struct opal_sym_memcache *mc, const opal_file_id *id, uint64_t addr,
			  const struct opal_sym_result *r)
{
	struct entry *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (opal_sym_result_copy(&e->res, r) < 0) {
		free(e);
		return -ENOMEM;
	}
	e->id = *id;
	e->addr = addr;
	e->bytes = sizeof(*e) + opal_sym_result_bytes(&e->res);

	struct entry **slot = find_slot(mc, id, addr);
	if (*slot)
		remove_entry(mc, slot);
	while (mc->tail && (mc->n + 1 > mc->max_entries || mc->bytes + e->bytes > mc->max_bytes))
		remove_entry(mc, find_slot(mc, &mc->tail->id, mc->tail->addr));
	maybe_grow(mc);
	slot = find_slot(mc, id, addr);
	e->hnext = NULL;
	*slot = e;
	lru_push_head(mc, e);
	mc->n++;
	mc->bytes += e->bytes;
	return 0;
}

void opal_sym_memcache_drop_file(struct opal_sym_memcache *mc, const opal_file_id *id)
{
	for (size_t i = 0; i < mc->n_buckets; i++) {
		struct entry **pp = &mc->buckets[i];
		while (*pp) {
			if (opal_file_id_eq(&(*pp)->id, id))
				remove_entry(mc, pp);
			else
				pp = &(*pp)->hnext;
		}
	}
}

size_t opal_sym_memcache_count(const struct opal_sym_memcache *mc)
{
	return mc->n;
}
