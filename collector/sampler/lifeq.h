/* Lifecycle records (exec and exit events, bpf/sampler.h) held back until
 * the samples taken before them are delivered. The BPF program writes them
 * to a ring of their own (so that samples cannot crowd them out); the
 * reader drains that ring first into this queue, then the sample ring, and
 * releases each held record just before the first sample taken after it
 * (by ktime_ns), so the process cache sees both in the order they
 * happened, as from one ring. */
#ifndef OPAL_COLLECTOR_LIFEQ_H
#define OPAL_COLLECTOR_LIFEQ_H

#include <stddef.h>
#include <stdint.h>

struct opal_lifeq {
	uint8_t *buf;       /* records: u64 size, then the bytes, 8-aligned */
	size_t cap;         /* bytes of buf */
	size_t head, tail;  /* the oldest record held, the end of the newest */
};

/* Queue of `cap` bytes (the lifecycle ring's size holds a whole drain of
 * it). Returns 0 or -ENOMEM. */
int opal_lifeq_init(struct opal_lifeq *q, size_t cap);
void opal_lifeq_destroy(struct opal_lifeq *q);

/* Holds a copy of the `size`-byte record at `rec` (its ktime_ns at byte 8,
 * as in struct opal_proc_event). Returns 0, -EINVAL when it is shorter
 * than 16 bytes, or -ENOSPC when the queue is full (the caller then
 * releases everything and delivers the record itself). */
int opal_lifeq_push(struct opal_lifeq *q, const void *rec, size_t size);

/* Delivers to `cb`, oldest first, every held record taken before
 * `before_ns` (UINT64_MAX: all), and forgets them. */
void opal_lifeq_release(struct opal_lifeq *q, uint64_t before_ns,
			void (*cb)(void *ctx, void *rec, size_t size), void *ctx);

#endif
