/* Interning table: deduplicates byte-string keys and numbers them 0, 1, 2...
 * in insertion order. Keys are copied (and NUL-terminated, so a string key
 * reads back as a C string). Open addressing with linear probing and a
 * per-table random hash seed; the slot array doubles at 3/4 load. */
#ifndef OPAL_INTERN_H
#define OPAL_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPAL_INTERN_MAX_KEY  (1u << 20)   /* bytes per key */

struct opal_intern;

/* New empty table holding at most `max_entries` keys (1 .. 2^30). NULL with
 * errno ENOMEM or EINVAL. */
struct opal_intern *opal_intern_new(size_t max_entries);
void opal_intern_free(struct opal_intern *t);

/* Looks `key` (len bytes) up and adds a copy when absent; *index receives
 * its number and *added (may be NULL) whether it was new. Returns 0,
 * -E2BIG when the table is full or len > OPAL_INTERN_MAX_KEY, -ENOMEM. */
int opal_intern_add(struct opal_intern *t, const void *key, size_t len, uint32_t *index,
		    bool *added);

/* Shorthand for a NUL-terminated string key. */
int opal_intern_str(struct opal_intern *t, const char *s, uint32_t *index);

/* Returns 0 and sets *index when present, else -ENOENT. */
int opal_intern_find(const struct opal_intern *t, const void *key, size_t len, uint32_t *index);

/* Stored key number `index` (NUL-terminated; *len may be NULL), valid until
 * opal_intern_free. NULL when index >= count. */
const void *opal_intern_key(const struct opal_intern *t, uint32_t index, size_t *len);

size_t opal_intern_count(const struct opal_intern *t);

#endif
