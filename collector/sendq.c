/* Bounded queue of unacknowledged intervals (sendq.h). */
#include "sendq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int opal_sendq_init(struct opal_sendq *q, size_t max_bytes)
{
	memset(q, 0, sizeof(*q));
	q->cap = 16;
	q->v = calloc(q->cap, sizeof(*q->v));
	q->max_bytes = max_bytes;
	return q->v ? 0 : -ENOMEM;
}

struct opal_sendq_entry *opal_sendq_at(struct opal_sendq *q, size_t i)
{
	return &q->v[(q->head + i) % q->cap];
}

static void free_entry(struct opal_sendq *q, struct opal_sendq_entry *e)
{
	q->bytes -= e->len;
	free(e->buf);
	free(e->ids);
	memset(e, 0, sizeof(*e));
}

static void drop_oldest(struct opal_sendq *q)
{
	free_entry(q, opal_sendq_at(q, 0));
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

void opal_sendq_destroy(struct opal_sendq *q)
{
	while (q->n)
		drop_oldest(q);
	free(q->v);
	q->v = NULL;
}

static int grow(struct opal_sendq *q)
{
	size_t ncap = q->cap * 2;
	struct opal_sendq_entry *nv = calloc(ncap, sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	for (size_t i = 0; i < q->n; i++)
		nv[i] = *opal_sendq_at(q, i);
	free(q->v);
	q->v = nv;
	q->cap = ncap;
	q->head = 0;
	return 0;
}

int opal_sendq_push(struct opal_sendq *q, const struct opal_sendq_entry *e)
{
	int dropped = 0;

	if (q->n == OPAL_SENDQ_MAX) {
		drop_oldest(q);
		dropped++;
	}
	if (q->n == q->cap && grow(q) < 0)
		return -ENOMEM;
	*opal_sendq_at(q, q->n) = *e;
	q->n++;
	q->bytes += e->len;
	while (q->n > 1 && q->bytes > q->max_bytes) {
		drop_oldest(q);
		dropped++;
	}
	return dropped;
}

int opal_sendq_ack(struct opal_sendq *q, uint64_t seq)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		if (opal_sendq_at(q, i)->seq == seq)
			break;
	if (i == q->n)
		return 0;
	free_entry(q, opal_sendq_at(q, i));
	/* close the gap by moving the older entries up one slot */
	for (size_t j = i; j > 0; j--)
		*opal_sendq_at(q, j) = *opal_sendq_at(q, j - 1);
	memset(opal_sendq_at(q, 0), 0, sizeof(struct opal_sendq_entry));
	q->head = (q->head + 1) % q->cap;
	q->n--;
	return 1;
}

bool opal_sendq_has(const struct opal_sendq *q, uint64_t seq)
{
	for (size_t i = 0; i < q->n; i++)
		if (q->v[(q->head + i) % q->cap].seq == seq)
			return true;
	return false;
}

uint64_t opal_sendq_first_seq(const struct opal_sendq *q, uint64_t next_seq)
{
	return q->n ? q->v[q->head].seq : next_seq;
}
