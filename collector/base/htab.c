/* Chained hash table (htab.h). */
#include "base/htab.h"

#include <errno.h>
#include <stdlib.h>

#define MAX_ORDER 26   /* 64 Mi buckets: beyond any caller's element bound */

int opal_htab_init(struct opal_htab *t, unsigned order)
{
	t->nbuckets = (size_t)1 << order;
	t->count = 0;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	return t->buckets ? 0 : -ENOMEM;
}

void opal_htab_destroy(struct opal_htab *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->nbuckets = 0;
	t->count = 0;
}

static void grow(struct opal_htab *t)
{
	size_t n = t->nbuckets * 2;
	struct opal_hnode **b;

	if (t->nbuckets >= ((size_t)1 << MAX_ORDER))
		return;
	b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct opal_hnode *x = t->buckets[i];
		while (x) {
			struct opal_hnode *next = x->next;
			size_t j = x->hash & (n - 1);
			x->next = b[j];
			b[j] = x;
			x = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

void opal_htab_insert(struct opal_htab *t, struct opal_hnode *n, uint64_t hash)
{
	if (t->count >= t->nbuckets)
		grow(t);
	size_t i = hash & (t->nbuckets - 1);
	n->hash = hash;
	n->next = t->buckets[i];
	t->buckets[i] = n;
	t->count++;
}

void opal_htab_remove(struct opal_htab *t, struct opal_hnode *n)
{
	struct opal_hnode **pp = &t->buckets[n->hash & (t->nbuckets - 1)];

	while (*pp) {
		if (*pp == n) {
			*pp = n->next;
			n->next = NULL;
			t->count--;
			return;
		}
		pp = &(*pp)->next;
	}
}

struct opal_hnode *opal_htab_first(const struct opal_htab *t, uint64_t hash)
{
	struct opal_hnode *x = t->buckets[hash & (t->nbuckets - 1)];

	while (x && x->hash != hash)
		x = x->next;
	return x;
}

struct opal_hnode *opal_htab_next(const struct opal_hnode *n)
{
	struct opal_hnode *x = n->next;

	while (x && x->hash != n->hash)
		x = x->next;
	return x;
}

uint64_t opal_hash_bytes(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
