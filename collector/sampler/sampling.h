/* The BPF side of the collector: loads bpf/sampler.bpf.c (skeleton
 * build/sampler.skel.h), opens a CPU-clock perf event per online CPU with
 * the program attached, attaches the exec/exit tracepoints, and gives
 * access to the ring buffer, the counters, the excluded-pid map and the
 * unwinder's maps (unwind_maps.h). */
#ifndef OPAL_COLLECTOR_SAMPLING_H
#define OPAL_COLLECTOR_SAMPLING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "bpf/sampler.h"
#include "sampler/lifeq.h"

struct sampler_bpf;
struct ring_buffer;
struct bpf_link;

/* 4 MiB holds about 30 deferred samples with the largest stack copy
 * (132 KiB), and about 200 of a typical one (under 20 KiB), while
 * userspace installs processes and builds tables. */
#define OPAL_RINGBUF_MIN (4u << 20)
#define OPAL_RINGBUF_MAX (256u << 20)
/* With off-CPU samples the ring also holds half a second of them at
 * OPAL_OFFCPU_SWITCH_RATE blocking switches per second per CPU, scaled by
 * the threshold, up to 64 MiB (about 18,000 records of a typical 3.5 KiB;
 * BPF wakes the reader when it is half full). */
#define OPAL_RINGBUF_OFFCPU     (64u << 20)
#define OPAL_OFFCPU_SWITCH_RATE 50000u
/* Bounds of the lifecycle ring (exec/exit events; its default, 2 MiB, holds
 * ~87,000 exec or exit events or ~780 exits with VMA lists between two
 * polls; BPF wakes the reader when it is half full). */
#define OPAL_LIFECYCLE_MIN     (4u << 10)
#define OPAL_LIFECYCLE_MAX     (256u << 20)

struct opal_sampling {
	struct sampler_bpf *skel;
	struct ring_buffer *rb;         /* the lifecycle ring, then the sample ring */
	struct ring_buffer *rb_life;    /* the lifecycle ring alone */
	uint64_t life_read_ns;          /* when the lifecycle ring was last read */
	struct opal_lifeq held;         /* lifecycle records not yet delivered */
	int (*cb)(void *ctx, void *data, size_t size);
	void *cb_ctx;
	struct bpf_link **perf_links;   /* one per attached CPU */
	size_t n_perf_links;
	struct bpf_link *exec_link, *exit_link;
	struct bpf_link *mmap_link;     /* kernels without the VMA iterator */
	struct bpf_link *fork_link;     /* new processes inherit interpreter walks */
	struct bpf_link *switch_link;   /* off-CPU samples (--off-cpu) */
	int n_possible_cpus;
	uint64_t period_ns;
	uint32_t excluded[OPAL_MAX_EXCLUDED_PIDS];   /* mirror of the BPF excluded map */
	size_t n_excluded;
};

/* Ring buffer bytes for `n_cpus` CPUs sampling at `freq_hz` with records
 * of `record_size` bytes: room for half a second of samples (the main loop
 * drains every ~100 ms), rounded up to a power of two (a ring buffer
 * requirement) and clamped to [OPAL_RINGBUF_MIN, OPAL_RINGBUF_MAX]. */
uint32_t opal_ringbuf_size(size_t n_cpus, uint32_t freq_hz, size_t record_size);

/* The sample ring's bytes with off-CPU samples at `off_cpu_ppm` (per
 * million blocking switches, 1..1000000) besides `on_cpu_size` bytes for
 * CPU samples (opal_ringbuf_size): the larger of the two, the off-CPU
 * share as above with records of `record_size` bytes (an off-CPU record
 * is walked in BPF: OPAL_SAMPLE_HEAD_SIZE plus its interpreter frames),
 * a power of two at most OPAL_RINGBUF_OFFCPU. At the
 * default 1% on a few CPUs that is OPAL_RINGBUF_MIN: a 64 MiB ring, whose
 * pages all become resident once it has wrapped, made the collector's RSS
 * 150 MiB (docs/performance.md, "Overhead"). */
uint32_t opal_offcpu_ringbuf_size(size_t n_cpus, uint32_t off_cpu_ppm, uint32_t on_cpu_size,
				  size_t record_size);

/* Records passed to `cb` are struct opal_sample_event (variable size:
 * check with opal_sample_event_valid) or struct opal_proc_event /
 * struct opal_exit_event (tell them apart by their first u32, check the
 * size), in the order they were taken (lifeq.h). `lifecycle_bytes` sizes
 * the lifecycle ring (rounded up to a power of two, clamped to
 * [OPAL_LIFECYCLE_MIN, OPAL_LIFECYCLE_MAX]). `off_cpu_ppm` (0: off, at
 * most 1000000) is the share of blocking context switches, per million,
 * that become off-CPU samples (flag OPAL_SAMPLE_OFF_CPU, each followed by
 * a struct opal_offcpu_end, docs/offcpu.md), at most `off_cpu_max_rate`
 * per CPU per second (0: no bound; the rest counted in
 * OPAL_CTR_OFFCPU_CAPPED).
 * Returns 0 or a negative errno after writing a reason into `why`
 * (`why_len` bytes): missing privileges or kernel features (checked first,
 * kernel_check.h), a BPF program that failed to load (its verifier log is
 * logged, bpf_load.h), no CPU could be sampled. */
int opal_sampling_start(struct opal_sampling *s, uint32_t freq_hz, uint64_t lifecycle_bytes,
			uint32_t off_cpu_ppm, uint32_t off_cpu_max_rate,
			int (*cb)(void *ctx, void *data, size_t size), void *ctx, char *why,
			size_t why_len);

/* Descriptors of the unwinder's maps (owned by the BPF object):
 * unwind_info, unwind_rules, unwind_bodies, proc_maps. */
/* The interp_procs map (bpf/interp.h walk parameters by tgid). */
int opal_sampling_interp_fd(const struct opal_sampling *s);
/* The interp_files map (struct opal_interp_file by struct
 * opal_interp_file_key: bpf/interp.h). */
int opal_sampling_interp_files_fd(const struct opal_sampling *s);
/* The tctx_procs map (bpf/thread_ctx.h walk parameters by tgid). */
int opal_sampling_tctx_fd(const struct opal_sampling *s);

void opal_sampling_unwind_fds(const struct opal_sampling *s, int *info, int *rules, int *bodies,
			      int *procs);

/* Waits up to `timeout_ms` for a record that wakes the reader (BPF wakes
 * it only for records needing prompt action, or a lifecycle ring half
 * full), then delivers every record in the rings. Returns the number delivered or a negative errno
 * (-EINTR on a signal). */
int opal_sampling_poll(struct opal_sampling *s, int timeout_ms);

/* Delivers every record already in the rings, without waiting. Returns
 * the number delivered or a negative errno. */
int opal_sampling_drain(struct opal_sampling *s);

/* Detaches the perf events (no new samples); the ring buffer stays
 * readable for a final drain. */
void opal_sampling_stop(struct opal_sampling *s);

void opal_sampling_destroy(struct opal_sampling *s);

/* Sums the per-CPU counters into out[OPAL_CTR_MAX]. Returns 0 or -errno. */
int opal_sampling_counters(struct opal_sampling *s, uint64_t out[OPAL_CTR_MAX]);

/* Adds `pid` to the BPF excluded map. Returns 0 or -errno (-E2BIG when
 * OPAL_MAX_EXCLUDED_PIDS are excluded already). */
int opal_sampling_exclude(struct opal_sampling *s, pid_t pid);

/* Removes `pid` from the BPF excluded map; costs no system call when it
 * is not there (called on every process exit). Returns 0 or -errno. */
int opal_sampling_unexclude(struct opal_sampling *s, pid_t pid);

/* Empties the BPF excluded map (after lost exit events: a stale pid could
 * be reused by another process). Returns 0 or the last -errno. */
int opal_sampling_unexclude_all(struct opal_sampling *s);

#endif
