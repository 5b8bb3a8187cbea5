/* Packed intervals kept until the symbolizer acknowledges them, in seq
 * order, bounded by `max_bytes` of packed Interval (and OPAL_SENDQ_MAX
 * entries): pushing past the bound drops the oldest entries first, but
 * never the one just pushed.
 *
 * Drop accounting is exact from the collector's side: an entry pushed out
 * before it went out on the live connection is lost at once; one pushed
 * out while in flight on the live connection (sent, not yet acknowledged)
 * is only remembered by seq, because the symbolizer still writes it. Its
 * fate is known at the next Ack (the symbolizer handles and acknowledges a
 * connection's intervals in order, so a later seq's Ack means it was
 * skipped) or when the connection ends; docs/deployment.md "Restarts". */
#ifndef OPAL_COLLECTOR_SENDQ_H
#define OPAL_COLLECTOR_SENDQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"

#define OPAL_SENDQ_MAX 4096

struct opal_sendq_entry {
	uint64_t seq;
	uint8_t *buf;            /* packed Interval, heap */
	size_t len;
	opal_file_id *ids;       /* distinct file IDs it references, heap (may be NULL) */
	size_t n_ids;
	uint64_t *code_ids;      /* distinct code IDs its interpreter frames name, heap
				  * (may be NULL) */
	size_t n_code_ids;
	uint64_t *jit_ids;       /* distinct Process.jit_id values, heap (may be NULL) */
	size_t n_jit_ids;
	uint64_t sent_conn;      /* sender connection generation it went out on; 0 never */
};

struct opal_sendq {
	struct opal_sendq_entry *v;   /* ring of `cap` entries */
	size_t head, n, cap;
	size_t bytes, max_bytes;
	uint64_t live_conn;           /* sender connection in use; 0 while disconnected */
	/* seqs pushed out while in flight on live_conn, awaiting their Ack;
	 * ascending, at most OPAL_SENDQ_MAX */
	uint64_t *evicted;
	size_t n_evicted;
};

/* Returns 0 or -ENOMEM. */
int opal_sendq_init(struct opal_sendq *q, size_t max_bytes);
void opal_sendq_destroy(struct opal_sendq *q);

/* Takes ownership of e->buf, e->ids, e->code_ids and e->jit_ids; e->seq must be above every queued
 * seq. Returns the number of older entries lost to respect the bound
 * (>= 0; entries in flight on the live connection are not counted here but
 * by opal_sendq_acked / opal_sendq_set_conn), or -ENOMEM (nothing taken). */
int opal_sendq_push(struct opal_sendq *q, const struct opal_sendq_entry *e);

/* The i-th oldest entry (i < q->n). */
struct opal_sendq_entry *opal_sendq_at(struct opal_sendq *q, size_t i);

/* Drops the entry with `seq`. Returns 1 when found, 0 otherwise. */
int opal_sendq_ack(struct opal_sendq *q, uint64_t seq);

/* The symbolizer acknowledged `seq` on the live connection: drops its
 * entry (*found tells whether it was queued) or, when it had been pushed
 * out in flight, forgets it as delivered. Returns how many intervals are
 * now known lost: those pushed out in flight with a lower seq, which the
 * symbolizer skipped (it acknowledges in order). */
uint64_t opal_sendq_acked(struct opal_sendq *q, uint64_t seq, bool *found);

/* The sender now uses connection generation `conn` (0: disconnected).
 * Returns how many intervals are now known lost: those pushed out while in
 * flight on the previous connection, whose Ack can no longer come. */
uint64_t opal_sendq_set_conn(struct opal_sendq *q, uint64_t conn);

/* True when the entry with `seq` is still queued (not acknowledged). */
bool opal_sendq_has(const struct opal_sendq *q, uint64_t seq);

/* Lowest queued seq, or `next_seq` when empty. */
uint64_t opal_sendq_first_seq(const struct opal_sendq *q, uint64_t next_seq);

#endif
