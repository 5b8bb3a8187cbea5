/* Bounded export queue with its own worker thread, so that exporting never
 * blocks the thread that produces the data (symbolization). The producer
 * hands over byte buffers; the worker prepares each one once (e.g. gzip),
 * then delivers it, retrying as the delivery result asks: after the
 * server's Retry-After when given, else after exponential backoff with
 * jitter. When a new buffer would exceed the bounds, the oldest queued
 * buffers are dropped first; every drop is counted. */
#ifndef OPAL_EXPORT_QUEUE_H
#define OPAL_EXPORT_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/metrics.h"   /* struct opal_export_stats */

/* Result of one delivery attempt. */
enum opal_export_status {
	OPAL_EXPORT_OK,        /* accepted */
	OPAL_EXPORT_PARTIAL,   /* accepted in part; logged by the deliverer, not retried */
	OPAL_EXPORT_RETRY,     /* transient failure: try again later */
	OPAL_EXPORT_FAILED,    /* permanent failure: drop */
};

struct opal_export_queue_config {
	const char *name;              /* for log lines, e.g. "otlp" */
	size_t max_bytes;              /* bound on queued bytes (>= 1) */
	size_t max_items;              /* bound on queued buffers (>= 1) */
	unsigned max_attempts;         /* per buffer, first attempt included (>= 1) */
	unsigned backoff_initial_ms;   /* first backoff; doubles per retry (>= 1) */
	unsigned backoff_max_ms;       /* backoff cap, also caps Retry-After */
	/* Optional, run once per buffer on the worker before the first attempt:
	 * may replace *data / *len (freeing the old buffer). Returns 0 or
	 * -errno (the buffer is then counted as failed). */
	int (*prepare)(void *arg, uint8_t **data, size_t *len);
	/* One attempt. `cancel` becomes true when the queue stops and its flush
	 * time is over: the attempt should end early. On OPAL_EXPORT_RETRY,
	 * *retry_after_ms >= 0 asks for that delay (Retry-After), -1 for the
	 * backoff. */
	enum opal_export_status (*deliver)(void *arg, const uint8_t *data, size_t len,
					   const atomic_bool *cancel, int64_t *retry_after_ms);
	void *arg;
};

struct opal_export_queue;

/* Validates `cfg` (copied; `name` must outlive the queue) and starts the
 * worker. Returns 0 and *out, -EINVAL (a bound is 0 or deliver is NULL),
 * -ENOMEM, or -errno from pthread_create. */
int opal_export_queue_start(const struct opal_export_queue_config *cfg,
			    struct opal_export_queue **out);

/* Hands `data` (len bytes, malloc'd) to the queue, which owns it from now
 * on whatever the result. Never waits for the worker: only a short mutex
 * section. When the bounds would be exceeded, the oldest queued buffers are
 * dropped (counted). Returns 0, -E2BIG (len alone exceeds max_bytes:
 * dropped, counted) or -ESHUTDOWN (queue stopping: dropped, counted). */
int opal_export_queue_push(struct opal_export_queue *q, uint8_t *data, size_t len);

/* A consistent snapshot of the counters. */
void opal_export_queue_stats(struct opal_export_queue *q, struct opal_export_stats *out);

/* Stops accepting buffers, lets the worker deliver what is queued for at
 * most `flush_ms` (retry waits included), then cancels the attempt in
 * flight, drops (counts) what is left, joins the worker and frees `q`.
 * *final (may be NULL) receives the last counters. NULL q is a no-op. */
void opal_export_queue_stop(struct opal_export_queue *q, unsigned flush_ms,
			    struct opal_export_stats *final);

/* The delay before retry number `retry` (1 = first retry): the
 * server-given `retry_after_ms` when >= 0 (capped at max_ms), else
 * exponential backoff min(max_ms, initial_ms * 2^(retry-1)) with "equal
 * jitter": half of it fixed, half uniformly random (`rnd` in [0, 1)).
 * Exposed for tests. */
uint64_t opal_export_backoff_ms(unsigned retry, int64_t retry_after_ms, unsigned initial_ms,
				unsigned max_ms, double rnd);

#endif
