/* The BPF read of a sampled thread's OTEP 4947 thread context (records:
 * thread_ctx.h). Included by sampler.bpf.c after its maps and count(). The
 * thread is interrupted by the sample, and only it writes its record: the
 * OTEP's reads need no retry; a record its thread was changing (valid not
 * 1, or the pointer cleared) is not a context. */
#ifndef OPAL_BPF_THREAD_CTX_READ_H
#define OPAL_BPF_THREAD_CTX_READ_H

/* tgid -> where its threads keep otel_thread_ctx_v1, written by the collector. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OPAL_TCTX_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct opal_tctx_walk);
} tctx_procs SEC(".maps");

/* The record being copied, one per CPU (larger than the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct opal_tctx_event);
} tctx_scratch SEC(".maps");

#define TCTX_READ(dst, size, addr) \
	bpf_probe_read_user((dst), (size), (const void *)(unsigned long)(addr))

/* The address of the thread's otel_thread_ctx_v1, or 0 (none allocated). */
static __always_inline __u64 tctx_var(const struct opal_tctx_walk *w, struct task_struct *task)
{
	__u64 tp = task->thread.fsbase, dtv, block;

	if (!tp)
		return 0;
	if (w->model == OPAL_TCTX_STATIC)
		return tp + (__u64)w->tpoff;
	if (w->model != OPAL_TCTX_DTV || TCTX_READ(&dtv, sizeof(dtv), tp + 8) < 0 || !dtv ||
	    TCTX_READ(&block, sizeof(block), dtv + w->module * 16) < 0 || !block ||
	    block == (__u64)-1)
		return 0;
	return block + w->offset;
}

/* Sends the thread context of sample `ev` (the current task) when its
 * process has one and the record is valid, and flags the sample. */
static __always_inline void tctx_record(struct opal_sample_event *ev, struct task_struct *task,
					__u32 tgid)
{
	struct opal_tctx_walk *w = bpf_map_lookup_elem(&tctx_procs, &tgid);
	struct opal_tctx_event *e;
	__u32 zero = 0, len;
	__u64 var, rec = 0;

	if (!w || !(var = tctx_var(w, task)))
		return;
	if (TCTX_READ(&rec, sizeof(rec), var) < 0) {
		count(OPAL_CTR_TCTX_INVALID);
		return;
	}
	if (!rec)
		return;   /* no context attached */
	if (!(e = bpf_map_lookup_elem(&tctx_scratch, &zero)))
		return;
	if (TCTX_READ(e->trace_id, OPAL_TCTX_HEAD_SIZE, rec) < 0 || e->valid != 1 ||
	    e->attrs_len > OPAL_TCTX_ATTRS_MAX) {
		count(OPAL_CTR_TCTX_INVALID);
		return;
	}
	len = e->attrs_len;
	barrier_var(len);
	if (len > OPAL_TCTX_ATTRS_MAX)
		return;
	if (len && TCTX_READ(e->attrs, len, rec + OPAL_TCTX_HEAD_SIZE) < 0) {
		count(OPAL_CTR_TCTX_INVALID);
		return;
	}
	e->kind = OPAL_EVENT_THREAD_CTX;
	e->pid = ev->pid;
	e->tid = ev->tid;
	e->cpu = ev->cpu;
	e->ktime_ns = ev->ktime_ns;
	__u64 size = OPAL_TCTX_EVENT_HEAD + (__u64)len;
	barrier_var(size);
	if (size > sizeof(*e))
		return;
	if (bpf_ringbuf_output(&events, e, size, BPF_RB_NO_WAKEUP) < 0) {
		count(OPAL_CTR_TCTX_INVALID);
		return;
	}
	ev->flags |= OPAL_SAMPLE_THREAD_CTX;
	count(OPAL_CTR_TCTX_SAMPLES);
}

#endif
