/* Records shared by bpf/sampler.bpf.c and the collector: ring buffer events,
 * counter slots and map sizes (the unwinder's own: unwind.h). Included by BPF code after vmlinux.h and by
 * userspace C, so only __u32/__u64-style types are used. */
#ifndef OPAL_BPF_SAMPLER_H
#define OPAL_BPF_SAMPLER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "interp.h"
#include "thread_ctx.h"
#include "unwind.h"

/* Kernel frames per stack; equals the kernel's default perf_event_max_stack. */
#define OPAL_MAX_STACK_DEPTH 127
#define OPAL_COMM_LEN 16
/* Pids whose samples BPF counts and drops (opal's own processes). */
#define OPAL_MAX_EXCLUDED_PIDS 1024

/* First field of every ring buffer record: samples in one ring (events),
 * exec and exit events in another (lifecycle). */
enum opal_event_kind {
	OPAL_EVENT_SAMPLE = 1,
	OPAL_EVENT_EXEC = 2,   /* process image replaced: drop cached maps */
	OPAL_EVENT_EXIT = 3,   /* thread-group leader exited: drop the process */
	OPAL_EVENT_OFFCPU_END = 4,   /* an off-CPU sample's thread runs again */
	OPAL_EVENT_THREAD_CTX = 40,   /* a sample's thread context (thread_ctx.h) */
};

/* opal_sample_event.flags */
#define OPAL_SAMPLE_DEFERRED     1u  /* the walk continues in userspace from `regs`
				      * over `stack` (the frame in ustack[ustack_n - 1]) */
#define OPAL_SAMPLE_UNKNOWN_PROC 2u  /* no (current) mapping array for the process */
#define OPAL_SAMPLE_STALE        4u  /* the mapping array disagrees with the
				      * address space (bpf_find_vma): re-read maps */
#define OPAL_SAMPLE_PENDING      8u  /* a mapping's table is not loaded */
#define OPAL_SAMPLE_KERNEL_MODE  16u /* taken in the kernel: user registers from
				      * the task's pt_regs */
#define OPAL_SAMPLE_OFF_CPU      32u /* an off-CPU sample: the stack a thread
				      * blocked with, taken as it left the CPU;
				      * its struct opal_offcpu_end follows */
#define OPAL_SAMPLE_THREAD_CTX   0x100u /* its struct opal_tctx_event precedes it */

/* Threads whose off-CPU start is recorded at once (blocked and picked,
 * not yet run again): a block past it is counted in OPAL_CTR_OFFCPU_FULL
 * and not sampled. Also the off-CPU stacks the collector holds awaiting
 * their end record (collector/stack/offcpu.c). */
#define OPAL_OFFCPU_MAX_THREADS 32768

/* One CPU-clock sample of a non-idle, non-excluded task, or (flag
 * OPAL_SAMPLE_OFF_CPU) one off-CPU sample of a user task. `stack` is only
 * filled (and sent) for deferred samples. */
struct opal_sample_event {
	__u32 kind;             /* OPAL_EVENT_SAMPLE */
	__u32 pid;              /* tgid */
	__u32 tid;              /* kernel pid of the thread */
	__u32 cpu;
	__u64 ktime_ns;         /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 off_cpu_ns;       /* OFF_CPU: 0 from BPF; the collector sets it
				 * from the thread's opal_offcpu_end */
	/* kstack_n: frames in kstack, or a negative errno from bpf_get_stack.
	 * ustack_n: entries in ustack/uflags (0 for kernel threads); the
	 * last may be an error frame (OPAL_UFRAME_ERROR). */
	__s32 kstack_n;
	__s32 ustack_n;
	char comm[OPAL_COMM_LEN];   /* thread comm */
	__u32 flags;            /* OPAL_SAMPLE_* */
	__u32 stack_len;        /* bytes in stack[]: the regions' lengths summed */
	/* DEFERRED: the user memory in stack[], one region after the other */
	struct opal_stack_region regions[OPAL_STACK_REGIONS];
	struct opal_unwind_regs regs;   /* DEFERRED: the registers of the frame
					 * ustack[ustack_n - 1] */
	__u64 kstack[OPAL_MAX_STACK_DEPTH];   /* leaf first */
	__u64 ustack[OPAL_USTACK_SLOTS];      /* leaf first: PCs, or an enum
					       * opal_unwind_err for an error frame */
	__u8 uflags[OPAL_USTACK_SLOTS];       /* OPAL_UFRAME_* per ustack entry */
	__u8 pad[3];
	__u32 iframes_n;                      /* entries in iframes */
	/* interpreter frames of the thread, innermost first (interp.h) */
	struct opal_interp_frame iframes[OPAL_INTERP_SLOTS];
	__u8 stack[OPAL_STACK_COPY];          /* DEFERRED: the regions' bytes */
};

/* A record is OPAL_SAMPLE_HEAD_SIZE bytes plus its iframes_n interpreter
 * frames; with DEFERRED, OPAL_SAMPLE_FIXED_SIZE plus stack_len. */
#define OPAL_SAMPLE_HEAD_SIZE  __builtin_offsetof(struct opal_sample_event, iframes)
#define OPAL_SAMPLE_FIXED_SIZE __builtin_offsetof(struct opal_sample_event, stack)

/* The run again of a thread whose off-CPU sample (OPAL_SAMPLE_OFF_CPU,
 * taken when it blocked) was sent: in the sample ring, after that
 * sample. */
struct opal_offcpu_end {
	__u32 kind;             /* OPAL_EVENT_OFFCPU_END */
	__u32 pid;              /* tgid */
	__u32 tid;
	__u32 cpu;              /* where it runs again */
	__u64 ktime_ns;         /* when it runs again */
	__u64 off_cpu_ns;       /* ns since it blocked */
};

/* Exec or leader exit of process `pid`. */
struct opal_proc_event {
	__u32 kind;             /* OPAL_EVENT_EXEC or OPAL_EVENT_EXIT */
	__u32 pid;              /* tgid */
	__u64 ktime_ns;
};

/* Processes remembered as sampled while unknown (their exit event then
 * lists their executable VMAs); least recently added forgotten first. */
#define OPAL_MAX_UNKNOWN_PIDS 4096

/* The exit of a process sampled while userspace did not know it (an
 * OPAL_EVENT_EXIT record longer than struct opal_proc_event): its
 * executable VMAs at exit, lowest first. */
struct opal_exit_event {
	__u32 kind;             /* OPAL_EVENT_EXIT */
	__u32 pid;              /* tgid */
	__u64 ktime_ns;
	__u32 n_vmas;           /* entries in vmas[] */
	__u32 seen;             /* VMAs looked at (at most OPAL_VMA_SCAN) */
	struct opal_vma_rec vmas[OPAL_MAX_VMAS];
};

/* Slots of the per-CPU counter array (each a __u64 per CPU). */
enum opal_counter {
	OPAL_CTR_SAMPLES = 0,      /* every perf_event program run */
	OPAL_CTR_IDLE,             /* pid 0 */
	OPAL_CTR_EXCLUDED,         /* pid in the excluded map */
	OPAL_CTR_LOST,             /* sample ring buffer reservation failed */
	OPAL_CTR_PROC_LOST,        /* lifecycle (exec/exit) ring reservation failed */
	OPAL_CTR_VMA_BUSY,         /* bpf_find_vma could not lock mmap_lock (check skipped) */
	OPAL_CTR_VMA_CHECKS,       /* bpf_find_vma calls */
	OPAL_CTR_OFFCPU_SWITCHES,  /* user tasks switched out blocking (not preempted) */
	OPAL_CTR_OFFCPU_SAMPLED,   /* ... chosen by the threshold: start recorded */
	OPAL_CTR_OFFCPU_FULL,      /* ... not recorded: OPAL_OFFCPU_MAX_THREADS reached */
	OPAL_CTR_OFFCPU_LOST,      /* off-CPU sample or end record: ring reservation failed */
	OPAL_CTR_TCTX_SAMPLES,     /* samples with a valid thread context sent */
	OPAL_CTR_TCTX_INVALID,     /* thread context records ignored: not valid
				    * (an update under way), over the limit,
				    * unreadable, or their ring record lost */
	OPAL_CTR_INTERP_EARLY,     /* processes given interpreter walk parameters
				    * by BPF (interp_files: exec, fork, a sample) */
	OPAL_CTR_OFFCPU_CAPPED,    /* blocks chosen but not recorded: the CPU's
				    * offcpu_max_rate for this second reached */
	OPAL_CTR_MAX,
};

#endif
