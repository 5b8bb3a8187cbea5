/* Records shared by bpf/sampler.bpf.c and the collector: ring buffer events,
 * counter slots and map sizes. Included by BPF code after vmlinux.h and by
 * userspace C, so only __u32/__u64-style types are used. */
#ifndef OPAL_BPF_SAMPLER_H
#define OPAL_BPF_SAMPLER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames per stack; equals the kernel's default perf_event_max_stack. */
#define OPAL_MAX_STACK_DEPTH 127
#define OPAL_COMM_LEN 16
/* Pids whose samples BPF counts and drops (opal's own processes). */
#define OPAL_MAX_EXCLUDED_PIDS 1024

/* First field of every ring buffer record. */
enum opal_event_kind {
	OPAL_EVENT_SAMPLE = 1,
	OPAL_EVENT_EXEC = 2,   /* process image replaced: drop cached maps */
	OPAL_EVENT_EXIT = 3,   /* thread-group leader exited: drop the process */
};

/* One CPU-clock sample of a non-idle, non-excluded task. */
struct opal_sample_event {
	__u32 kind;             /* OPAL_EVENT_SAMPLE */
	__u32 pid;              /* tgid */
	__u32 tid;              /* kernel pid of the thread */
	__u32 cpu;
	__u64 ktime_ns;         /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	/* Frame counts in kstack/ustack, or a negative errno from
	 * bpf_get_stack. ustack_n is 0 for kernel threads. */
	__s32 kstack_n;
	__s32 ustack_n;
	char comm[OPAL_COMM_LEN];   /* thread comm */
	__u64 kstack[OPAL_MAX_STACK_DEPTH];   /* leaf first */
	__u64 ustack[OPAL_MAX_STACK_DEPTH];   /* leaf first; [0] is the interrupted PC */
};

/* Exec or leader exit of process `pid`. */
struct opal_proc_event {
	__u32 kind;             /* OPAL_EVENT_EXEC or OPAL_EVENT_EXIT */
	__u32 pid;              /* tgid */
	__u64 ktime_ns;
};

/* Slots of the per-CPU counter array (each a __u64 per CPU). */
enum opal_counter {
	OPAL_CTR_SAMPLES = 0,      /* every perf_event program run */
	OPAL_CTR_IDLE,             /* pid 0 */
	OPAL_CTR_EXCLUDED,         /* pid in the excluded map */
	OPAL_CTR_LOST,             /* sample ring buffer reservation failed */
	OPAL_CTR_PROC_LOST,        /* exec/exit event reservation failed */
	OPAL_CTR_MAX,
};

#endif
