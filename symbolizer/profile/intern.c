/* Interning table (intern.h). */
#include "profile/intern.h"
#include "base/arena.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

struct entry {
	const unsigned char *key;
	uint32_t len;
	uint32_t hash;
};

struct opal_intern {
	struct opal_arena keys;    /* copies of the keys */
	struct entry *entries;     /* by index */
	size_t n, cap_entries, max_entries;
	uint32_t *slots;           /* index + 1, 0 = empty */
	size_t nslots;             /* power of two */
	uint64_t seed;
};

/* The key eight bytes at a time (each word mixed in by a multiply and a
 * rotation), the tail zero-padded, started from a random seed, then a
 * 64-bit finalizer (splitmix64) so that the low bits used for the slot are
 * well mixed. The seed makes colliding key sets hard to prepare in
 * advance. Keys are stacks of frame IDs as often as names: a byte-wise
 * hash was a tenth of a warm interval's CPU. */
static uint32_t hash_key(uint64_t seed, const unsigned char *k, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ seed ^ ((uint64_t)len << 32), w;
	size_t i = 0;

	for (; len - i >= 8; i += 8) {
		memcpy(&w, k + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h = (h << 29) | (h >> 35);
	}
	if (i < len) {
		w = 0;
		memcpy(&w, k + i, len - i);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
	}
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return (uint32_t)h;
}

struct opal_intern *opal_intern_new(size_t max_entries)
{
	if (max_entries == 0 || max_entries > (1u << 30)) {
		errno = EINVAL;
		return NULL;
	}
	struct opal_intern *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	opal_arena_init(&t->keys, 0);
	t->max_entries = max_entries;
	t->nslots = 16;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
		t->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
	return t;
}

void opal_intern_free(struct opal_intern *t)
{
	if (!t)
		return;
	opal_arena_free(&t->keys);
	free(t->entries);
	free(t->slots);
	free(t);
}

static size_t probe(const struct opal_intern *t, const void *key, size_t len, uint32_t h,
		    bool *found)
{
	size_t mask = t->nslots - 1, i = h & mask;

	for (;;) {
		uint32_t s = t->slots[i];
		if (!s) {
			*found = false;
			return i;
		}
		const struct entry *e = &t->entries[s - 1];
		if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) {
			*found = true;
			return i;
		}
		i = (i + 1) & mask;
	}
}

static int grow_slots(struct opal_intern *t)
{
	size_t nslots = t->nslots * 2;
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t k = 0; k < t->n; k++) {
		size_t i = t->entries[k].hash & (nslots - 1);
		while (slots[i])
			i = (i + 1) & (nslots - 1);
		slots[i] = (uint32_t)k + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

int opal_intern_find(const struct opal_intern *t, const void *key, size_t len, uint32_t *index)
{
	bool found;

	if (len > OPAL_INTERN_MAX_KEY)
		return -ENOENT;
	size_t i = probe(t, key, len, hash_key(t->seed, key, len), &found);
	if (!found)
		return -ENOENT;
	*index = t->slots[i] - 1;
	return 0;
}

int opal_intern_add(struct opal_intern *t, const void *key, size_t len, uint32_t *index,
		    bool *added)
{
	bool found;

	if (len > OPAL_INTERN_MAX_KEY)
		return -E2BIG;
	uint32_t h = hash_key(t->seed, key, len);
	size_t i = probe(t, key, len, h, &found);
	if (added)
		*added = !found;
	if (found) {
		*index = t->slots[i] - 1;
		return 0;
	}
	if (t->n >= t->max_entries)
		return -E2BIG;
	/* Keep the load at most 3/4 so probes stay short and always end. */
	if ((t->n + 1) * 4 > t->nslots * 3) {
		if (grow_slots(t) < 0)
			return -ENOMEM;
		i = probe(t, key, len, h, &found);
	}
	if (t->n == t->cap_entries) {
		size_t cap = t->cap_entries ? t->cap_entries * 2 : 16;
		struct entry *e = realloc(t->entries, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		t->entries = e;
		t->cap_entries = cap;
	}
	const unsigned char *copy = (const unsigned char *)opal_arena_memdup0(&t->keys, key, len);
	if (!copy)
		return -ENOMEM;
	t->entries[t->n] = (struct entry){ .key = copy, .len = (uint32_t)len, .hash = h };
	t->slots[i] = (uint32_t)t->n + 1;
	*index = (uint32_t)t->n++;
	return 0;
}

int opal_intern_str(struct opal_intern *t, const char *s, uint32_t *index)
{
	return opal_intern_add(t, s, strlen(s), index, NULL);
}

const void *opal_intern_key(const struct opal_intern *t, uint32_t index, size_t *len)
{
	if (index >= t->n)
		return NULL;
	if (len)
		*len = t->entries[index].len;
	return t->entries[index].key;
}

size_t opal_intern_count(const struct opal_intern *t)
{
	return t->n;
}
