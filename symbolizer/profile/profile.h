/* In-memory profile model shared by the exporters: deduplicated mappings,
 * functions, locations (with inline line chains) and samples, grouped by
 * process. Encoded as pprof (pprof.h) and as OTLP profiles (otlp.h). */
#ifndef OPAL_PROFILE_H
#define OPAL_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What ran a frame: OTLP's profile.frame.type (semantic conventions
 * "native", "kernel", "cpython", "v8js", "jvm"). */
enum opal_frame_type {
	OPAL_FRAME_NATIVE = 0,
	OPAL_FRAME_KERNEL = 1,
	OPAL_FRAME_CPYTHON = 2,
	OPAL_FRAME_V8JS = 3,    /* JIT code of V8 (Node.js) */
	OPAL_FRAME_JVM = 4,     /* JIT code of a JVM (HotSpot) */
	OPAL_FRAME_N_TYPES,
};

/* The mapping name interpreter frames of each runtime are under in
 * pprof (which has no frame type): "[cpython]". */
#define OPAL_PROFILE_CPYTHON_MAPPING "[cpython]"
/* The mapping name of JIT frames whose anonymous mapping has none. */
#define OPAL_PROFILE_JIT_MAPPING "[jit]"

struct opal_profile;

/* Creates an empty profile. `period_ns` is the sampling period (1e9/Hz).
 * NULL on ENOMEM. */
struct opal_profile *opal_profile_new(uint64_t period_ns);
void opal_profile_free(struct opal_profile *p);

/* Sets the profile's time range (Unix ns); widened by later calls. */
void opal_profile_set_time(struct opal_profile *p, uint64_t start_unix_ns, uint64_t end_unix_ns);

struct opal_profile_mapping {
	uint64_t start, limit, file_offset;  /* runtime range and offset */
	const char *filename;                /* path, or "[kernel.kallsyms]" */
	const char *build_id_gnu;            /* lowercase hex or NULL */
	const char *file_id_htlhash;         /* 32 lowercase hex or NULL */
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

/* Interns a mapping (deduplicated on every field); strings are copied.
 * Returns its 1-based id, or 0 on ENOMEM. */
uint32_t opal_profile_mapping(struct opal_profile *p, const struct opal_profile_mapping *m);

struct opal_profile_line {
	const char *function;   /* may be NULL (unknown) */
	const char *filename;   /* may be NULL */
	int64_t line;           /* 0 unknown */
	int64_t start_line;     /* the function's first line, 0 unknown */
};

/* Interns a location: runtime `address` in `mapping_id` (0 = none), with
 * `n_lines` lines innermost inlined callee first (n_lines 0 for an
 * unsymbolized frame). Returns its 1-based id, 0 on ENOMEM. */
uint32_t opal_profile_location(struct opal_profile *p, uint32_t mapping_id, uint64_t address,
			       enum opal_frame_type type, const struct opal_profile_line *lines,
			       size_t n_lines);

/* One string attribute (a resource attribute of a process, an attribute
 * of a sample). */
struct opal_profile_attr {
	const char *key;
	const char *value;
};

struct opal_profile_process {
	uint32_t pid;
	const char *executable_name;   /* basename of the executable */
	const char *executable_path;
	const char *service_name;      /* NULL: unknown_service:<executable_name> */
	const char *container_id;      /* NULL when none */
	const char *host_name;
	/* what the process published (OTEP 4719 process context): its
	 * resource, ahead of every attribute opal sets itself */
	const struct opal_profile_attr *resource;
	size_t n_resource;
	const char *host_id;          /* host.id (/etc/machine-id), NULL when unknown */
	const char *os_version;       /* os.version: the kernel release, NULL when unknown */
	const char *pod_uid;          /* k8s.pod.uid, NULL when none */
	const char *command_line;     /* process.command_line, NULL when not sent */
};

/* Interns a process (key: pid, executable path and the resource it
 * published: one that publishes mid-run is two processes, before and
 * after). Returns 1-based id, 0 on ENOMEM. */
uint32_t opal_profile_process(struct opal_profile *p, const struct opal_profile_process *proc);

/* Adds one stack sampled `n_times` times by thread `tid` while it was named
 * `thread_name` (may be NULL): `location_ids` leaf first (n_locations),
 * with per-sample `timestamps_unix_ns` and `cpus` (n_times each).
 * Identical (process, tid, thread name, stack) are merged: a renamed
 * thread's samples keep the name they were taken with. Returns 0,
 * -ENOMEM, -EINVAL (unknown process or location id, n_times 0) or -E2BIG
 * (a bound below exceeded); on error nothing is added. */
int opal_profile_add_sample(struct opal_profile *p, uint32_t process_id, uint32_t tid,
			    const char *thread_name, const uint32_t *location_ids,
			    size_t n_locations, const uint64_t *timestamps_unix_ns,
			    const uint32_t *cpus, size_t n_times);

/* The trace context a sample ran under (OTEP 4947 thread context). */
struct opal_profile_trace_ctx {
	bool has_link;                         /* trace_id and span_id set */
	uint8_t trace_id[16], span_id[8];
	uint8_t trace_flags;
	const struct opal_profile_attr *attrs; /* n_attrs, keys unique */
	size_t n_attrs;
};

/* opal_profile_add_sample for samples that ran under trace context `ctx`
 * (copied; NULL: none): samples under different contexts are kept apart. */
int opal_profile_add_sample_ctx(struct opal_profile *p, uint32_t process_id, uint32_t tid,
				const char *thread_name, const uint32_t *location_ids,
				size_t n_locations, const uint64_t *timestamps_unix_ns,
				const uint32_t *cpus, size_t n_times,
				const struct opal_profile_trace_ctx *ctx);

/* An off-CPU sample (docs/offcpu.md): as opal_profile_add_sample, with
 * each time's `off_cpu_ns` (n_times), the nanoseconds its thread was off
 * CPU, under thread context `ctx` as opal_profile_add_sample_ctx (NULL:
 * none). Off-CPU and CPU samples of the same stack stay apart. Returns as
 * opal_profile_add_sample (-EINVAL without off_cpu_ns). */
int opal_profile_add_off_cpu(struct opal_profile *p, uint32_t process_id, uint32_t tid,
			     const char *thread_name, const uint32_t *location_ids,
			     size_t n_locations, const uint64_t *timestamps_unix_ns,
			     const uint32_t *cpus, const uint64_t *off_cpu_ns, size_t n_times,
			     const struct opal_profile_trace_ctx *ctx);

/* Totals, for logs and checks: the number of sampling events (the sum of
 * n_times over every add_sample call that succeeded). */
size_t opal_profile_sample_count(const struct opal_profile *p);

/* ---- Bounds (profile.c). Interning calls beyond them fail (0 / -E2BIG
 * with errno E2BIG) and leave the profile unchanged. */
#define OPAL_PROFILE_MAX_STRINGS    (1u << 22)  /* distinct strings */
#define OPAL_PROFILE_MAX_STRLEN     (64u << 10) /* bytes per string */
#define OPAL_PROFILE_MAX_MAPPINGS   (1u << 20)
#define OPAL_PROFILE_MAX_LOCATIONS  (1u << 22)
#define OPAL_PROFILE_MAX_LINES      64          /* inline depth per location */
#define OPAL_PROFILE_MAX_PROCESSES  (1u << 16)
#define OPAL_PROFILE_MAX_SAMPLES    (1u << 22)  /* distinct (process, tid, name, stack) */
#define OPAL_PROFILE_MAX_STACK      1024        /* locations per stack */
#define OPAL_PROFILE_MAX_EVENTS     (1u << 24)  /* sum of n_times */

/* ---- Read access for the exporters. Ids are dense: 1 .. opal_profile_n_*().
 * Returned pointers and strings are owned by the profile and stay valid
 * until opal_profile_free. */

uint64_t opal_profile_period_ns(const struct opal_profile *p);

/* The range set with opal_profile_set_time; when never set, the range of the
 * sample timestamps ([min, max + period]); both 0 for an empty profile. */
void opal_profile_time(const struct opal_profile *p, uint64_t *start_unix_ns,
		       uint64_t *end_unix_ns);

size_t opal_profile_n_mappings(const struct opal_profile *p);
/* NULL when `id` is 0 or out of range. */
const struct opal_profile_mapping *opal_profile_get_mapping(const struct opal_profile *p,
							    uint32_t id);

struct opal_profile_location_info {
	uint32_t mapping_id;                   /* 0: none */
	uint64_t address;                      /* runtime address */
	enum opal_frame_type type;
	const struct opal_profile_line *lines; /* n_lines, innermost inlined first */
	size_t n_lines;
};
size_t opal_profile_n_locations(const struct opal_profile *p);
/* Returns 0, or -ENOENT when `id` is 0 or out of range. */
int opal_profile_get_location(const struct opal_profile *p, uint32_t id,
			      struct opal_profile_location_info *out);

size_t opal_profile_n_processes(const struct opal_profile *p);
/* NULL when `id` is 0 or out of range. */
const struct opal_profile_process *opal_profile_get_process(const struct opal_profile *p,
							    uint32_t id);

struct opal_profile_sample_info {
	uint32_t process_id, tid;
	const char *thread_name;               /* at sample time; may be NULL */
	const uint32_t *location_ids;          /* n_locations, leaf first */
	size_t n_locations;
	const uint64_t *timestamps_unix_ns;    /* n_times, in arrival order */
	const uint32_t *cpus;                  /* n_times, cpus[i] for timestamps[i] */
	size_t n_times;
	bool off_cpu;                          /* an off-CPU sample */
	const uint64_t *off_cpu_ns;            /* off_cpu: n_times, ns off CPU; else NULL */
	const struct opal_profile_trace_ctx *ctx;   /* NULL: none */
};
/* Number of distinct (process, tid, thread name, stack) samples. */
size_t opal_profile_n_samples(const struct opal_profile *p);
/* Of them, the off-CPU ones (`off_cpu`) or the CPU ones. */
size_t opal_profile_n_samples_of(const struct opal_profile *p, bool off_cpu);
/* `index` is 0-based. Returns 0, or -ENOENT when out of range. */
int opal_profile_get_sample(const struct opal_profile *p, size_t index,
			    struct opal_profile_sample_info *out);

#endif
