/* Bounded queue of unacknowledged intervals (sendq.h). */
#include "send/sendq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int opal_sendq_init(struct opal_sendq *q, size_t max_bytes)
{
	memset(q, 0, sizeof(*q));
	q->cap = 16;
	q->v = calloc(q->cap, sizeof(*q->v));
	q->evicted = calloc(OPAL_SENDQ_MAX, sizeof(*q->evicted));
	q->max_bytes = max_bytes;
	if (!q->v || !q->evicted) {
		opal_sendq_destroy(q);
		return -ENOMEM;
	}
	return 0;
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
	free(e->code_ids);
	free(e->jit_ids);
	memset(e, 0, sizeof(*e));
}

static void drop_oldest(struct opal_sendq *q)
{
	free_entry(q, opal_sendq_at(q, 0));
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

/* Removes the first `k` remembered in-flight seqs. */
static void forget_evicted(struct opal_sendq *q, size_t k)
{
	memmove(q->evicted, q->evicted + k, (q->n_evicted - k) * sizeof(*q->evicted));
	q->n_evicted -= k;
}

/* Pushes the oldest entry out to respect the bound. Returns 1 when that
 * loses an interval now, 0 when its fate waits for the symbolizer (it is in
 * flight on the live connection). */
static int evict_oldest(struct opal_sendq *q)
{
	struct opal_sendq_entry *e = opal_sendq_at(q, 0);
	int lost = 1;

	if (q->live_conn && e->sent_conn == q->live_conn) {
		lost = 0;
		if (q->n_evicted == OPAL_SENDQ_MAX) {   /* bound: the oldest counts as lost */
			forget_evicted(q, 1);
			lost = 1;
		}
		q->evicted[q->n_evicted++] = e->seq;   /* seqs leave in order: stays ascending */
	}
	drop_oldest(q);
	return lost;
}

void opal_sendq_destroy(struct opal_sendq *q)
{
	while (q->v && q->n)
		drop_oldest(q);
	free(q->v);
	free(q->evicted);
	q->v = NULL;
	q->evicted = NULL;
	q->n_evicted = 0;
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

	if (q->n == OPAL_SENDQ_MAX)
		dropped += evict_oldest(q);
	if (q->n == q->cap && grow(q) < 0)
		return -ENOMEM;
	*opal_sendq_at(q, q->n) = *e;
	q->n++;
	q->bytes += e->len;
	while (q->n > 1 && q->bytes > q->max_bytes)
		dropped += evict_oldest(q);
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

uint64_t opal_sendq_acked(struct opal_sendq *q, uint64_t seq, bool *found)
{
	size_t below = 0;

	*found = opal_sendq_ack(q, seq) == 1;
	while (below < q->n_evicted && q->evicted[below] < seq)
		below++;
	/* `seq` itself, if it was pushed out in flight, arrived after all */
	forget_evicted(q, below < q->n_evicted && q->evicted[below] == seq ? below + 1 : below);
	return below;
}

uint64_t opal_sendq_set_conn(struct opal_sendq *q, uint64_t conn)
{
	uint64_t lost = q->n_evicted;

	q->n_evicted = 0;
	q->live_conn = conn;
	return lost;
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
