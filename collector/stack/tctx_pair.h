/* Pairs the thread context records BPF sends (struct opal_tctx_event,
 * bpf/thread_ctx.h) with the samples they belong to: a record arrives just
 * before its sample, but a sample may be parked (stack/samples.h) and
 * added later, so records wait in a direct-mapped table keyed by (cpu,
 * tid, ktime_ns): OPAL_TCTX_PAIR_SLOTS records; a record pushed out of its
 * slot before its sample took it is lost (the sample then has no
 * context, counted in thread_ctx_unpaired). */
#ifndef OPAL_COLLECTOR_TCTX_PAIR_H
#define OPAL_COLLECTOR_TCTX_PAIR_H

#include <stddef.h>
#include "base/counters.h"
#include "bpf/sampler.h"

#define OPAL_TCTX_PAIR_SLOTS 1024   /* x 648 bytes */

struct opal_tctx_pair {
	struct opal_tctx_event *slots;   /* OPAL_TCTX_PAIR_SLOTS; kind 0: empty */
	struct opal_counters *ctr;
};

/* Returns 0 or -ENOMEM. */
int opal_tctx_pair_init(struct opal_tctx_pair *t, struct opal_counters *ctr);
void opal_tctx_pair_destroy(struct opal_tctx_pair *t);

/* Keeps ring record `data` (`size` bytes, untrusted length). Returns 0, or
 * -EINVAL for a record whose size does not match its attrs_len. */
int opal_tctx_pair_put(struct opal_tctx_pair *t, const void *data, size_t size);

/* The record of sample `ev` (OPAL_SAMPLE_THREAD_CTX set), valid until the
 * next put, or NULL when it was lost. Its slot is freed. */
const struct opal_tctx_event *opal_tctx_pair_take(struct opal_tctx_pair *t,
						  const struct opal_sample_event *ev);

#endif
