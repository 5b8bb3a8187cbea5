/* Aggregation of one reporting interval: samples with identical (process,
 * thread, thread name, kind, frames) are merged into one Stack that keeps every
 * sample's Unix timestamp and CPU (and an off-CPU sample's time off CPU); a thread renamed within the interval
 * has one Thread per name; each Process lists only the mappings its
 * frames use.
 * The result is packed as an Interval message (proto/opal/wire.proto).
 *
 * Bounds per interval: `max_stacks` distinct stacks, `max_samples`
 * samples, and `max_bytes` of packed Interval (an upper-bound estimate kept
 * while adding, so the packed message never exceeds it by more than its
 * fixed header). A sample over a bound is refused with -ENOSPC (the caller
 * counts it); once a bound on new stacks is hit, samples of stacks already
 * present are still merged. */
#ifndef OPAL_COLLECTOR_AGGREGATE_H
#define OPAL_COLLECTOR_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "proc/procinfo.h"
#include "send/sendq.h"
#include "shared/fileid.h"
#include "stack/samples.h"
#include "bpf/thread_ctx.h"
#include "opal/wire.pb-c.h"

#define OPAL_AGG_MAX_STACKS   65536
#define OPAL_AGG_MAX_SAMPLES  (1u << 20)
#define OPAL_AGG_MAX_BYTES    (48u << 20)   /* below OPAL_WIRE_MAX_FRAME */

struct opal_agg_limits {
	size_t max_stacks, max_samples, max_bytes;
};

struct opal_agg;

/* NULL on ENOMEM. */
struct opal_agg *opal_agg_new(const struct opal_agg_limits *lim);
void opal_agg_free(struct opal_agg *a);

/* Forgets every sample (start of the next interval). */
void opal_agg_reset(struct opal_agg *a);

struct opal_agg_sample {
	uint32_t pid, tid, cpu;
	uint64_t time_unix_ns;
	const char *thread_name;             /* thread comm at sample time; NULL as "" */
	const struct opal_proc_info *proc;   /* copied on the process's first sample */
	const struct opal_frame *frames;     /* leaf first */
	size_t n_frames;
	bool off_cpu;                        /* an off-CPU sample (a Stack of its own kind) */
	uint64_t off_cpu_ns;                 /* off_cpu: the time off CPU */
	uint64_t jit_id;                     /* Process.jit_id (proc/jitsrc.h), 0: none */
	/* the process's OTEP 4719 context payload (NULL: none), copied on
	 * the process's first sample like `proc` */
	const uint8_t *process_context;
	size_t process_context_len;
	uint64_t process_context_published_ns;
	/* the thread context the sample ran under (NULL: none) */
	const struct opal_tctx_event *thread_ctx;
};

/* Adds one sample; everything it points to is copied. Processes are told
 * apart by (pid, executable path), so an exec within the interval starts a
 * new Process. Returns 0, -ENOSPC over a bound, -EINVAL for a native frame
 * without mapping, or -ENOMEM. */
int opal_agg_add(struct opal_agg *a, const struct opal_agg_sample *s);

/* Samples added since the last reset: all of them (the bound counts
 * both kinds), and of those the off-CPU ones. */
size_t opal_agg_n_samples(const struct opal_agg *a);
size_t opal_agg_n_off_cpu(const struct opal_agg *a);
size_t opal_agg_n_stacks(const struct opal_agg *a);

struct opal_interval_meta {
	uint64_t seq, run_id;
	uint64_t start_unix_ns, end_unix_ns;
	uint64_t idle_samples;
	const Opal__Wire__V1__CollectorCounters *counters;   /* copied */
	bool final;
};

/* Packs the interval into e->buf (e->len bytes) and lists the distinct
 * file IDs its mappings reference in e->ids and the distinct code IDs its
 * interpreter frames name in e->code_ids and the processes' jit_ids in
 * e->jit_ids (sorted; NULL when none); the caller owns the four
 * (opal_sendq_push takes them). Returns 0 or
 * -ENOMEM (e's buffers then NULL). */
int opal_agg_pack(const struct opal_agg *a, const struct opal_interval_meta *m,
		  struct opal_sendq_entry *e);

#endif
