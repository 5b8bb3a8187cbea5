/* OTEP 4947 thread contexts (opentelemetry-specification
 * oteps/profiles/4947-thread-ctx.md, merged 2026-07-17), shared by the BPF
 * sampler and the collector: where a process's otel_thread_ctx_v1 lives in
 * a thread (the collector computes it from the ELF file and ld.so's GOT,
 * collector/interp/tctx.c), and the record BPF copies at sample time.
 * Included by BPF code after vmlinux.h and by userspace C, so only
 * __u8/__u16/__u32/__u64-style types and plain macros are used.
 * docs/correlation.md. */
#ifndef OPAL_BPF_THREAD_CTX_H
#define OPAL_BPF_THREAD_CTX_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The record: trace-id[16], span-id[8], valid, trace-flags, attrs-data-size
 * (u16, native endian), attrs-data; the OTEP recommends at most 640 bytes
 * in all, the limit opal reads (a longer one is counted and ignored). */
#define OPAL_TCTX_HEAD_SIZE   28
#define OPAL_TCTX_RECORD_MAX  640
#define OPAL_TCTX_ATTRS_MAX   (OPAL_TCTX_RECORD_MAX - OPAL_TCTX_HEAD_SIZE)
#define OPAL_TCTX_MAX_PROCS   4096   /* tctx_procs entries */

/* How a thread finds its otel_thread_ctx_v1 (struct opal_tctx_walk.model),
 * from its thread pointer tp (FS base, x86-64 TLS variant II). */
enum opal_tctx_model {
	/* static TLS: the variable is at tp + tpoff (a main executable's
	 * block; a library's in the static TLS area) */
	OPAL_TCTX_STATIC = 1,
	/* dynamic TLS (glibc): dtv = *(tp + 8); block = dtv[module] (16-byte
	 * entries, the pointer first); the variable is at block + offset.
	 * A thread whose block is not allocated (0 or -1) has no context. */
	OPAL_TCTX_DTV = 2,
};

/* tctx_procs[tgid], written by the collector. */
struct opal_tctx_walk {
	__u32 model;       /* enum opal_tctx_model */
	__u32 pad;
	__s64 tpoff;       /* STATIC */
	__u64 module;      /* DTV: the module ID */
	__u64 offset;      /* DTV: the variable's offset in the module's block */
};

/* In the sample ring just before the sample it belongs to (which has
 * OPAL_SAMPLE_THREAD_CTX set and the same cpu, tid and ktime_ns): a valid
 * record's copy; attrs_len bytes of attrs are sent. */
struct opal_tctx_event {
	__u32 kind;        /* OPAL_EVENT_THREAD_CTX */
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u64 ktime_ns;
	__u8 trace_id[16];
	__u8 span_id[8];
	__u8 valid;        /* 1 */
	__u8 trace_flags;
	__u16 attrs_len;
	__u8 attrs[OPAL_TCTX_ATTRS_MAX];
};

#define OPAL_TCTX_EVENT_HEAD __builtin_offsetof(struct opal_tctx_event, attrs)

#endif
