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
	uint64_t peers_refused;      /* listeners on --socket not trusted (send/peer.h) */
	uint64_t send_waits;         /* services that left intervals queued: the output queue was full */
	/* DWARF unwinder (docs/unwinding.md): error frames by reason */
	uint64_t frames_no_unwind_info;   /* no FDE, unrepresentable CFI, a needed
					   * register lost, or a CFA that did not move */
	uint64_t frames_unreadable_stack; /* a stack read failed */
	uint64_t frames_truncated;        /* deeper than the frame limit or the stack copy */
	uint64_t frames_fp_fallback;      /* frames found with frame pointers (no table) */
	uint64_t samples_deferred;        /* samples finished by the userspace unwinder */
	uint64_t samples_park_full;       /* ... at once, past OPAL_PARK_MAX_BYTES of parked ones */
	uint64_t unwind_tables_built;     /* tables built and loaded into BPF */
	uint64_t unwind_tables_ahead;     /* ... of them requested ahead of need (busy files) */
	uint64_t unwind_table_errors;     /* files left without a table (no CFI, errors, no room) */
	uint64_t unwind_tables_unloaded;  /* tables unloaded (idle or for room) */
	uint64_t proc_installs;           /* process mapping arrays written to BPF */
	uint64_t proc_install_errors;     /* ... that failed */
	uint64_t procs_revalidated;       /* cached processes dropped after lost
					   * exec/exit events (gone or replaced) */
	uint64_t procs_evicted;           /* cached processes dropped for the
					   * table's bound (least recently used) */
	uint64_t offcpu_samples;          /* off-CPU samples added to intervals */
	uint64_t offcpu_unmatched;        /* off-CPU sample or end records without partner */
	/* interpreter frames (collector/interp/) */
	uint64_t interp_procs;            /* processes given interpreter walk parameters */
	uint64_t interp_unsupported;      /* interpreters found without a known layout */
	uint64_t interp_frames;           /* interpreter frames translated */
	uint64_t interp_frame_errors;     /* interpreter error entries (unreadable, truncated, ...) */
	uint64_t interp_code_reads;       /* code objects copied from processes */
	uint64_t interp_code_errors;      /* ... that could not be read or failed their check */
	uint64_t interp_code_capped;      /* ... with a string or line table cut at its bound */
	uint64_t interp_code_evicted;     /* code objects dropped for the cache's bound */
	uint64_t interp_unmatched;        /* evaluations without their native frame, or the reverse */
	/* JIT code (proc/jitsrc.h) */
	uint64_t jit_frames;              /* frames in anonymous executable memory */
	uint64_t jit_files_opened;        /* perf maps and jitdump files opened */
	uint64_t jit_file_errors;         /* ... refused or unreadable (missing: not counted) */
	uint64_t jit_procs_dropped;       /* processes' JIT files closed for the table's bound */
	/* OTEP 4719 process contexts (proc/procctx.h) */
	uint64_t process_ctx_reads;       /* contexts copied (first sight or an update) */
	uint64_t process_ctx_errors;      /* ... refused: bad header, too big, unreadable, torn */
	uint64_t process_ctx_scans;       /* maps scanned again for a context published late */
	/* OTEP 4947 thread contexts (interp/tctx.h) */
	uint64_t thread_ctx_procs;        /* processes given walk parameters */
	uint64_t thread_ctx_unsupported;  /* processes exporting the variable, not located */
	uint64_t thread_ctx_unpaired;     /* records or flagged samples without their partner */
};

#endif
