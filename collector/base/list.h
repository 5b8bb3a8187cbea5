/* Intrusive circular doubly linked list, used for the LRU orders of the
 * process and file tables (head->next is the most recently used). */
#ifndef OPAL_COLLECTOR_LIST_H
#define OPAL_COLLECTOR_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct opal_list {
	struct opal_list *prev, *next;
};

#define opal_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

static inline void opal_list_init(struct opal_list *h)
{
	h->prev = h->next = h;
}

static inline bool opal_list_empty(const struct opal_list *h)
{
	return h->next == h;
}

/* True when `n` is linked into some list (unlinked nodes point to themselves). */
static inline bool opal_list_linked(const struct opal_list *n)
{
	return n->next != n;
}

static inline void opal_list_del(struct opal_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* Inserts `n` right after `h` (the most-recently-used end). */
static inline void opal_list_add(struct opal_list *h, struct opal_list *n)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}

/* Moves a linked or unlinked node to the front. */
static inline void opal_list_move_front(struct opal_list *h, struct opal_list *n)
{
	if (opal_list_linked(n))
		opal_list_del(n);
	opal_list_add(h, n);
}

/* The least recently used node, or NULL for an empty list. */
static inline struct opal_list *opal_list_last(const struct opal_list *h)
{
	return opal_list_empty(h) ? NULL : h->prev;
}

#endif
