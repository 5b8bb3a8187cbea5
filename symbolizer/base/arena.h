/* Bump allocator: many small, zeroed allocations released together. Used to
 * build protobuf-c message trees before packing them, and to store interned
 * keys. */
#ifndef OPAL_ARENA_H
#define OPAL_ARENA_H

#include <stddef.h>

struct opal_arena_chunk;

struct opal_arena {
	struct opal_arena_chunk *head;   /* newest chunk first */
	size_t used;                     /* bytes handed out, all chunks */
	size_t limit;                    /* bound on `used`; 0 = SIZE_MAX */
};

/* Initializes an empty arena whose allocations total at most `limit` bytes
 * (0: unbounded). Allocates nothing yet. */
void opal_arena_init(struct opal_arena *a, size_t limit);

/* Releases every allocation of `a`; the arena is empty and reusable. */
void opal_arena_free(struct opal_arena *a);

/* `size` zeroed bytes aligned to 16, valid until opal_arena_free. NULL when
 * malloc fails or the limit would be exceeded (size 0 yields a valid,
 * non-NULL pointer). */
void *opal_arena_alloc(struct opal_arena *a, size_t size);

/* n * size zeroed bytes; NULL on overflow as well. */
void *opal_arena_calloc(struct opal_arena *a, size_t n, size_t size);

/* Copy of `len` bytes of `s` plus a NUL. NULL on failure. */
char *opal_arena_memdup0(struct opal_arena *a, const void *s, size_t len);

#endif
