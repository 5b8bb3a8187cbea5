/* Userspace counters of the collector, cumulative since start; they feed
 * CollectorCounters (proto/opal/wire.proto) together with the BPF per-CPU
 * counters (bpf/sampler.h). */
#ifndef OPAL_COLLECTOR_COUNTERS_H
#define OPAL_COLLECTOR_COUNTERS_H

#include <stdint.h>

struct opal_counters {
	uint64_t samples_self;       /* dropped in userspace: opal's own pid seen before BPF knew it */
	uint64_t samples_dropped;    /* over an interval's aggregation bound */
	uint64_t frames_no_mapping;  /* user address in no mapping of its process */
	uint64_t maps_reads;         /* /proc/PID/maps reads */
	uint64_t files_opened;       /* successful opens through /proc/PID/map_files */
	uint64_t file_open_errors;   /* mapped files that could not be opened or parsed */
	uint64_t intervals_dropped;  /* unacknowledged intervals pushed out of the send buffer */
	uint64_t stack_errors;       /* user stacks without user registers */
	/* DWARF unwinder (docs/unwinding.md): error frames by reason */
	uint64_t frames_no_unwind_info;   /* no FDE, unrepresentable CFI, a needed
					   * register lost, or a CFA that did not move */
	uint64_t frames_unreadable_stack; /* a stack read failed */
	uint64_t frames_truncated;        /* deeper than the frame limit or the stack copy */
	uint64_t frames_fp_fallback;      /* frames found with frame pointers (no table) */
	uint64_t samples_deferred;        /* samples finished by the userspace unwinder */
	uint64_t unwind_tables_built;     /* tables built and loaded into BPF */
	uint64_t unwind_tables_ahead;     /* ... of them requested ahead of need (busy files) */
	uint64_t unwind_table_errors;     /* files left without a table (no CFI, errors, no room) */
	uint64_t unwind_tables_unloaded;  /* tables unloaded (idle or for room) */
	uint64_t proc_installs;           /* process mapping arrays written to BPF */
	uint64_t proc_install_errors;     /* ... that failed */
};

#endif
