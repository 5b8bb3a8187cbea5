/* Chunked bump allocator (arena.h). */
#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE  (64u * 1024u)   /* default chunk payload */
#define ALIGN       16u

struct opal_arena_chunk {
	struct opal_arena_chunk *next;
	size_t size, off;
	_Alignas(16) unsigned char data[];
};

void opal_arena_init(struct opal_arena *a, size_t limit)
{
	a->head = NULL;
	a->used = 0;
	a->limit = limit ? limit : SIZE_MAX;
}

void opal_arena_free(struct opal_arena *a)
{
	struct opal_arena_chunk *c = a->head;

	while (c) {
		struct opal_arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
	a->used = 0;
}

void *opal_arena_alloc(struct opal_arena *a, size_t size)
{
	size_t rounded = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);

	if (rounded < size || rounded > a->limit - a->used)
		return NULL;
	struct opal_arena_chunk *c = a->head;
	if (!c || c->size - c->off < rounded) {
		/* A large request gets a chunk of its own placed behind the
		 * current one, so the current chunk's free space stays usable. */
		size_t payload = rounded > CHUNK_SIZE / 4 ? rounded : CHUNK_SIZE;
		struct opal_arena_chunk *n = malloc(sizeof(*n) + payload);
		if (!n)
			return NULL;
		n->size = payload;
		n->off = 0;
		if (c && payload != CHUNK_SIZE) {
			n->next = c->next;
			c->next = n;
		} else {
			n->next = c;
			a->head = n;
		}
		c = n;
	}
	void *p = c->data + c->off;
	c->off += rounded;
	a->used += rounded;
	memset(p, 0, size);
	return p;
}

void *opal_arena_calloc(struct opal_arena *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return opal_arena_alloc(a, n * size);
}

char *opal_arena_memdup0(struct opal_arena *a, const void *s, size_t len)
{
	if (len == SIZE_MAX)
		return NULL;
	char *p = opal_arena_alloc(a, len + 1);
	if (p && len)
		memcpy(p, s, len);
	return p;
}
