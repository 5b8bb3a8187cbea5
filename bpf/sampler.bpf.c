// SPDX-License-Identifier: GPL-2.0
/* opal CPU sampler: runs on every CPU-clock perf event, records the kernel
 * stack and the frame-pointer user stack of the interrupted task into a ring
 * buffer, and reports exec / process exit (sched_process_exec and
 * sched_process_exit) so userspace drops stale caches.
 * Record layouts: sampler.h. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "sampler.h"

char LICENSE[] SEC("license") = "GPL";

/* include/linux/sched.h: not in BTF because it is a #define */
#define OPAL_PF_KTHREAD 0x00200000

/* Sized by userspace with bpf_map__set_max_entries before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPAL_CTR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* tgid -> unused; filled by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OPAL_MAX_EXCLUDED_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} excluded SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);

	if (v)
		*v += 1;
}

SEC("perf_event")
int opal_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct opal_sample_event *e;
	struct task_struct *task;
	long n;

	count(OPAL_CTR_SAMPLES);
	if (tgid == 0) {
		count(OPAL_CTR_IDLE);
		return 0;
	}
	if (bpf_map_lookup_elem(&excluded, &tgid)) {
		count(OPAL_CTR_EXCLUDED);
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(OPAL_CTR_LOST);
		return 0;
	}
	e->kind = OPAL_EVENT_SAMPLE;
	e->pid = tgid;
	e->tid = (__u32)pid_tgid;
	e->cpu = bpf_get_smp_processor_id();
	e->ktime_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));

	n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->kstack_n = n < 0 ? (__s32)n : (__s32)(n / sizeof(__u64));

	/* Frame-pointer user stack. A DWARF unwinder replaces this block (and
	 * opal_stack_add_user in collector/samples.c) and nothing else. */
	task = bpf_get_current_task_btf();
	if (task->flags & OPAL_PF_KTHREAD) {
		e->ustack_n = 0;   /* no user address space */
	} else {
		n = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		e->ustack_n = n < 0 ? (__s32)n : (__s32)(n / sizeof(__u64));
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline void proc_event(__u32 kind, __u32 tgid)
{
	struct opal_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(OPAL_CTR_PROC_LOST);
		return;
	}
	e->kind = kind;
	e->pid = tgid;
	e->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
}

/* BTF-typed raw tracepoints: attached by name, so they need no tracefs
 * mount. Arguments as in include/trace/events/sched.h. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(opal_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	proc_event(OPAL_EVENT_EXEC, p->tgid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(opal_exit, struct task_struct *p)
{
	/* Fires for every thread; only the leader's exit ends the process's
	 * cache entry (its maps and /proc directory go with it). */
	if (p->pid == p->tgid)
		proc_event(OPAL_EVENT_EXIT, p->tgid);
	return 0;
}
