/* Prometheus counters of the symbolizer (metrics.h).
 *
 * The latency histogram has fixed buckets from 1 µs to 10 s (a decade
 * split 1-2.5-5); cumulative counts are computed when rendering. Memory
 * cache hits are timed one in 16, each timed one counted for the hits it
 * stands for (symbolize.c), so _count and the buckets lag the lookups by
 * at most 15 per thread. The
 * collector table holds OPAL_METRICS_MAX_COLLECTORS hosts under a mutex;
 * every other counter is a relaxed atomic. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/metrics.h"

static const uint64_t latency_bounds_ns[] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 25000000, 50000000, 100000000,
	250000000, 500000000, 1000000000, 2500000000ull, 5000000000ull, 10000000000ull,
};
#define N_BOUNDS (sizeof(latency_bounds_ns) / sizeof(latency_bounds_ns[0]))

/* HTTP status classes counted: 2xx..5xx by exact code for the few we send. */
static const unsigned http_codes[] = { 200, 400, 401, 403, 404, 405, 406, 409, 412, 413,
				       415, 500, 503, 507 };
#define N_HTTP (sizeof(http_codes) / sizeof(http_codes[0]))

struct collector_row {
	char host[128];
	uint64_t seen;   /* render order / replacement age */
	uint64_t run_id, seq;   /* of the interval the counters came with */
	Opal__Wire__V1__CollectorCounters c;
};

static struct {
	uint64_t uploads[OPAL_UPLOAD_N_OUTCOMES];
	uint64_t debuginfod[OPAL_DEBUGINFOD_N_RESULTS];
	uint64_t decomp[OPAL_DECOMP_N_REASONS];
	uint64_t unwritten[OPAL_UNWRITTEN_N];
	uint64_t cache_evicted[OPAL_CACHE_TABLE_N];
	uint64_t upstream[OPAL_UPSTREAM_N];
	uint64_t otlp_receive[OPAL_OTLP_RECEIVE_N];
	uint64_t otlp_locations[4];         /* opal_metrics_otlp_locations's, in its order */
	uint64_t http_refusals[OPAL_HTTP_REFUSAL_N];
	uint64_t frames[OPAL_FRAME_N];
	uint64_t collector_conns[OPAL_COLLECTOR_CONN_N];
	uint64_t queues[OPAL_QUEUE_N];
	uint64_t http[N_HTTP + 1];          /* last slot: any other code */
	uint64_t lat_buckets[N_BOUNDS + 1]; /* non-cumulative; last = +Inf */
	uint64_t lat_sum_ns, lat_count;
	uint64_t code_table[6];             /* opal_metrics_code_table's, in its order */
	uint64_t jit_table[OPAL_METRICS_JIT_N];   /* opal_metrics_jit_table's */
	pthread_mutex_t lock;               /* collector rows, exporter counters */
	struct opal_export_stats exporters[OPAL_EXPORTER_N];
	struct collector_row rows[OPAL_METRICS_MAX_COLLECTORS];
	size_t n_rows;
	uint64_t clock;
} m = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void add(uint64_t *p, uint64_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static uint64_t get(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* One more of counters[i], `i` checked against the array's `n`. */
static void bump(uint64_t *counters, unsigned n, unsigned i)
{
	if (i < n)
		add(&counters[i], 1);
}

void opal_metrics_code_table(uint64_t entries, uint64_t bytes, uint64_t added, uint64_t invalid,
			     uint64_t evicted, uint64_t unknown)
{
	const uint64_t v[6] = { entries, bytes, added, invalid, evicted, unknown };

	for (int i = 0; i < 6; i++)
		__atomic_store_n(&m.code_table[i], v[i], __ATOMIC_RELAXED);
}

void opal_metrics_jit_table(const uint64_t v[OPAL_METRICS_JIT_N])
{
	for (int i = 0; i < OPAL_METRICS_JIT_N; i++)
		__atomic_store_n(&m.jit_table[i], v[i], __ATOMIC_RELAXED);
}

void opal_metrics_upload(enum opal_metric_upload outcome)
{
	bump(m.uploads, OPAL_UPLOAD_N_OUTCOMES, (unsigned)outcome);
}

void opal_metrics_decomp_refused(enum opal_metric_decomp reason)
{
	bump(m.decomp, OPAL_DECOMP_N_REASONS, (unsigned)reason);
}

void opal_metrics_interval_unwritten(enum opal_metric_unwritten reason)
{
	bump(m.unwritten, OPAL_UNWRITTEN_N, (unsigned)reason);
}

void opal_metrics_cache_evicted(enum opal_metric_cache_table table, uint64_t rows)
{
	if ((unsigned)table < OPAL_CACHE_TABLE_N)
		add(&m.cache_evicted[table], rows);
}

void opal_metrics_debuginfod(enum opal_metric_debuginfod result)
{
	bump(m.debuginfod, OPAL_DEBUGINFOD_N_RESULTS, (unsigned)result);
}

void opal_metrics_http_refusal(enum opal_metric_http_refusal what)
{
	bump(m.http_refusals, OPAL_HTTP_REFUSAL_N, (unsigned)what);
}

void opal_metrics_frame_rejected(enum opal_metric_frame why)
{
	bump(m.frames, OPAL_FRAME_N, (unsigned)why);
}

void opal_metrics_collector_conn(enum opal_metric_collector_conn what)
{
	bump(m.collector_conns, OPAL_COLLECTOR_CONN_N, (unsigned)what);
}

void opal_metrics_upstream(enum opal_metric_upstream what)
{
	bump(m.upstream, OPAL_UPSTREAM_N, (unsigned)what);
}

void opal_metrics_otlp_receive(enum opal_metric_otlp_receive outcome)
{
	bump(m.otlp_receive, OPAL_OTLP_RECEIVE_N, (unsigned)outcome);
}

void opal_metrics_otlp_locations(uint64_t symbolized, uint64_t unresolved,
				 uint64_t unknown_file, uint64_t kept)
{
	const uint64_t v[4] = { symbolized, unresolved, unknown_file, kept };

	for (int i = 0; i < 4; i++)
		add(&m.otlp_locations[i], v[i]);
}

void opal_metrics_queue_depth(enum opal_metric_queue q, uint64_t depth)
{
	if ((unsigned)q < OPAL_QUEUE_N)
		__atomic_store_n(&m.queues[q], depth, __ATOMIC_RELAXED);
}

void opal_metrics_exporter(enum opal_metric_exporter e, const struct opal_export_stats *st)
{
	if ((unsigned)e >= OPAL_EXPORTER_N)
		return;
	pthread_mutex_lock(&m.lock);
	m.exporters[e] = *st;
	pthread_mutex_unlock(&m.lock);
}

void opal_metrics_http(unsigned status)
{
	size_t i = 0;
	while (i < N_HTTP && http_codes[i] != status)
		i++;
	add(&m.http[i], 1);
}

void opal_metrics_symbolize_latency(uint64_t ns, uint64_t weight)
{
	size_t i = 0;
	while (i < N_BOUNDS && ns > latency_bounds_ns[i])
		i++;
	add(&m.lat_buckets[i], weight);
	add(&m.lat_sum_ns, ns * weight);
	add(&m.lat_count, weight);
}

void opal_metrics_collector_counters(const char *host, uint64_t run_id, uint64_t seq,
				     const Opal__Wire__V1__CollectorCounters *c)
{
	if (!c)
		return;
	if (!host || !*host)
		host = "unknown";
	pthread_mutex_lock(&m.lock);
	struct collector_row *row = NULL;
	for (size_t i = 0; i < m.n_rows && !row; i++)
		if (m.rows[i].run_id == run_id &&
		    strncmp(m.rows[i].host, host, sizeof(m.rows[i].host) - 1) == 0)
			row = &m.rows[i];
	if (row && seq <= row->seq) {
		pthread_mutex_unlock(&m.lock);
		return;   /* older than what is published */
	}
	if (!row && m.n_rows < OPAL_METRICS_MAX_COLLECTORS)
		row = &m.rows[m.n_rows++];
	if (!row) {
		row = &m.rows[0];
		for (size_t i = 1; i < m.n_rows; i++)
			if (m.rows[i].seen < row->seen)
				row = &m.rows[i];
	}
	snprintf(row->host, sizeof(row->host), "%s", host);
	row->seen = ++m.clock;
	row->run_id = run_id;
	row->seq = seq;
	row->c = *c;
	pthread_mutex_unlock(&m.lock);
}

void opal_metrics_reset(void)
{
	pthread_mutex_lock(&m.lock);
	memset(m.uploads, 0, sizeof(m.uploads));
	memset(m.debuginfod, 0, sizeof(m.debuginfod));
	memset(m.decomp, 0, sizeof(m.decomp));
	memset(m.unwritten, 0, sizeof(m.unwritten));
	memset(m.cache_evicted, 0, sizeof(m.cache_evicted));
	memset(m.upstream, 0, sizeof(m.upstream));
	memset(m.otlp_receive, 0, sizeof(m.otlp_receive));
	memset(m.otlp_locations, 0, sizeof(m.otlp_locations));
	memset(m.http_refusals, 0, sizeof(m.http_refusals));
	memset(m.frames, 0, sizeof(m.frames));
	memset(m.collector_conns, 0, sizeof(m.collector_conns));
	memset(m.queues, 0, sizeof(m.queues));
	memset(m.http, 0, sizeof(m.http));
	memset(m.lat_buckets, 0, sizeof(m.lat_buckets));
	m.lat_sum_ns = m.lat_count = 0;
	memset(m.code_table, 0, sizeof(m.code_table));
	memset(m.jit_table, 0, sizeof(m.jit_table));
	m.n_rows = 0;
	memset(m.exporters, 0, sizeof(m.exporters));
	pthread_mutex_unlock(&m.lock);
}

/* Prometheus label value escaping: backslash, double quote, newline. */
static void put_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*v, f);
	}
}

static void header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_collectors(FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} fields[] = {
#define F(field, name, h) { "opal_collector_" name "_total", h, \
		  offsetof(Opal__Wire__V1__CollectorCounters, field) }
		F(samples_total, "samples", "Samples taken by the collector"),
		F(samples_idle, "samples_idle", "Idle (pid 0) samples, counted only"),
		F(samples_self, "samples_self", "Samples of opal's own processes, excluded"),
		F(samples_lost, "samples_lost", "Samples lost because the ring buffer was full"),
		F(frames_no_mapping, "frames_no_mapping", "User frames in no file-backed mapping"),
		F(maps_reads, "maps_reads", "Reads of /proc/PID/maps"),
		F(files_opened, "files_opened", "ELF files opened by the collector"),
		F(file_open_errors, "file_open_errors", "ELF files the collector could not open"),
		F(intervals_dropped, "intervals_dropped",
		  "Intervals dropped by the collector (buffer full)"),
		F(stack_errors, "stack_errors", "Stacks the collector could not read"),
		F(samples_dropped, "samples_dropped",
		  "Samples dropped over the per-interval aggregation bound"),
		F(frames_no_unwind_info, "frames_no_unwind_info",
		  "Unwinds ended without a usable CFI rule (error frame)"),
		F(frames_unreadable_stack, "frames_unreadable_stack",
		  "Unwinds ended by an unreadable stack (error frame)"),
		F(frames_truncated, "frames_truncated",
		  "Stacks truncated at the frame limit or the stack copy (error frame)"),
		F(frames_fp_fallback, "frames_fp_fallback",
		  "User frames found with frame pointers (mapping without an unwind table)"),
		F(samples_park_full, "samples_park_full",
		  "Deferred samples walked at once, not parked for their unwind tables: the "
		  "16 MiB park bound was full (their walk may end in an error frame)"),
		F(samples_deferred, "samples_deferred",
		  "Samples whose unwind was finished in userspace"),
		F(unwind_tables_built, "unwind_tables_built",
		  "Per-file unwind tables built and loaded into BPF"),
		F(unwind_tables_ahead, "unwind_tables_ahead",
		  "Unwind tables requested ahead of need (files mapped by many processes)"),
		F(unwind_table_errors, "unwind_table_errors",
		  "Files left without an unwind table (no CFI, errors, no room)"),
		F(unwind_tables_unloaded, "unwind_tables_unloaded",
		  "Unwind tables unloaded (idle, or for room)"),
		F(unwind_cache_hits, "unwind_cache_hits",
		  "Unwind tables read from the on-disk table cache instead of built"),
		F(unwind_cache_misses, "unwind_cache_misses",
		  "Unwind tables looked for in the table cache and not found there (or stale)"),
		F(unwind_cache_writes, "unwind_cache_writes", "Unwind tables written to the table cache"),
		F(unwind_cache_errors, "unwind_cache_errors",
		  "Damaged table cache entries deleted, and failed writes"),
		F(unwind_cache_evicted, "unwind_cache_evicted",
		  "Table cache entries deleted for its bound (least recently used)"),
		F(unwind_builds_throttled, "unwind_builds_throttled",
		  "Unwind table jobs that waited for the build CPU budget (--unwind-build-cpu)"),
		F(unwind_build_cpu_ns, "unwind_build_cpu_nanoseconds",
		  "CPU time of unwind table jobs (builds and cache reads), nanoseconds"),
		F(proc_installs, "proc_installs", "Process mapping arrays written to BPF"),
		F(proc_install_errors, "proc_install_errors",
		  "Process mapping arrays that could not be written to BPF"),
		F(vma_checks, "vma_checks", "Mapping checks with bpf_find_vma in BPF"),
		F(vma_busy, "vma_busy", "Mapping checks skipped because mmap_lock was busy"),
		F(lifecycle_lost, "lifecycle_lost",
		  "Exec/exit events lost because the lifecycle ring was full"),
		F(procs_revalidated, "procs_revalidated",
		  "Cached processes dropped after lost exec/exit events (gone or replaced)"),
		F(procs_evicted, "procs_evicted",
		  "Cached processes dropped for the collector's process table bound (least recently "
		  "used)"),
		F(offcpu_switches, "offcpu_switches",
		  "User tasks switched out blocking (not preempted), with --off-cpu"),
		F(offcpu_sampled, "offcpu_sampled", "Blocking switches picked by the off-CPU threshold"),
		F(offcpu_table_full, "offcpu_table_full",
		  "Blocking switches not recorded: too many threads blocked at once"),
		F(offcpu_lost, "offcpu_lost", "Off-CPU samples lost because the ring buffer was full"),
		F(offcpu_samples, "offcpu_samples", "Off-CPU samples added to intervals"),
		F(offcpu_unmatched, "offcpu_unmatched",
		  "Off-CPU sample or end records whose partner was lost or dropped"),
		F(offcpu_capped, "offcpu_capped",
		  "Blocking switches picked but not recorded: the per-CPU rate bound reached"),
		F(peers_refused, "peers_refused",
		  "Listeners on the collector's socket path refused (neither root nor the "
		  "symbolizer's user)"),
		F(send_waits, "send_waits",
		  "Collector sends left for later: its output queue to the symbolizer was full"),
		F(jit_frames, "jit_frames", "Frames in anonymous executable memory (JIT code) sent"),
		F(jit_files_opened, "jit_files_opened",
		  "Perf maps and jitdump files opened for the symbolizer"),
		F(jit_file_errors, "jit_file_errors",
		  "Perf maps and jitdump files refused or unreadable (missing ones not counted)"),
		F(jit_procs_dropped, "jit_procs_dropped",
		  "Processes whose JIT files were closed for the collector's JIT table bound"),
		F(process_ctx_reads, "process_ctx_reads",
		  "OTEP 4719 process contexts copied (first sight or an update)"),
		F(process_ctx_errors, "process_ctx_errors",
		  "Process contexts refused: bad header, over the bound, unreadable, torn, unpublished"),
		F(process_ctx_scans, "process_ctx_scans",
		  "Process maps scanned again for a context published after they were read"),
		F(thread_ctx_samples, "thread_ctx_samples",
		  "Samples sent with a valid OTEP 4947 thread context"),
		F(thread_ctx_invalid, "thread_ctx_invalid",
		  "Thread context records ignored: not valid (torn), too big, unreadable, lost"),
		F(thread_ctx_procs, "thread_ctx_procs",
		  "Processes given thread context walk parameters"),
		F(thread_ctx_unsupported, "thread_ctx_unsupported",
		  "Processes exporting otel_thread_ctx_v1 that opal cannot locate"),
		F(interp_procs, "interp_procs", "Processes given interpreter walk parameters"),
		F(interp_unsupported, "interp_unsupported",
		  "Interpreters found whose layout opal does not know (no frames)"),
		F(interp_frames, "interp_frames", "Interpreter frames sent"),
		F(interp_frame_errors, "interp_frame_errors",
		  "Interpreter walks ended early (error frame)"),
		F(interp_code_reads, "interp_code_reads", "Code objects copied from processes"),
		F(interp_code_errors, "interp_code_errors",
		  "Code objects that could not be read or no longer matched their frame"),
		F(interp_code_capped, "interp_code_capped",
		  "Code objects with a string or line table cut at its bound"),
		F(interp_code_evicted, "interp_code_evicted",
		  "Code objects dropped by the collector for its cache bound"),
		F(interp_unmatched, "interp_unmatched",
		  "Interpreter evaluations and native evaluation frames that did not pair up"),
		F(interp_early, "interp_early",
		  "Processes given interpreter walk parameters by BPF at exec, fork or a sample"),
#undef F
	};
	pthread_mutex_lock(&m.lock);
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
		header(f, fields[k].name, "counter", fields[k].help);
		for (size_t i = 0; i < m.n_rows; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&m.rows[i].c + fields[k].off, sizeof(v));
			fprintf(f, "%s{host=\"", fields[k].name);
			put_label(f, m.rows[i].host);
			fprintf(f, "\",run=\"%016" PRIx64 "\"} %" PRIu64 "\n", m.rows[i].run_id, v);
		}
	}
	pthread_mutex_unlock(&m.lock);
}

static void render_exporters(FILE *f)
{
	static const char *const names[OPAL_EXPORTER_N] = { "otlp", "otlp-logs",
								    "otlp-forward" };
	static const struct {
		const char *name, *type, *help, *label;
		size_t off;
	} fields[] = {
#define E(field, name, type, label, h) { name, type, h, label, \
		  offsetof(struct opal_export_stats, field) }
		E(enqueued, "opal_export_requests_total", "counter", "enqueued",
		  "OTLP export requests by exporter and outcome"),
		E(sent, "opal_export_requests_total", NULL, "sent", NULL),
		E(partial, "opal_export_requests_total", NULL, "partial", NULL),
		E(failed, "opal_export_requests_total", NULL, "failed", NULL),
		E(dropped, "opal_export_requests_total", NULL, "dropped", NULL),
		E(retries, "opal_export_retries_total", "counter", NULL,
		  "OTLP export attempts after a request's first one"),
		E(enqueued_bytes, "opal_export_enqueued_bytes_total", "counter", NULL,
		  "Bytes of OTLP requests accepted by the export queue (uncompressed)"),
		E(dropped_bytes, "opal_export_dropped_bytes_total", "counter", NULL,
		  "Bytes of OTLP requests dropped (queue overflow, too large, left at stop)"),
		E(queued_items, "opal_export_queue_requests", "gauge", NULL,
		  "OTLP requests waiting in the export queue"),
		E(queued_bytes, "opal_export_queue_bytes", "gauge", NULL,
		  "Bytes of OTLP requests waiting in the export queue"),
#undef E
	};
	struct opal_export_stats st[OPAL_EXPORTER_N];

	pthread_mutex_lock(&m.lock);
	memcpy(st, m.exporters, sizeof(st));
	pthread_mutex_unlock(&m.lock);
	for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
		if (fields[k].type)
			header(f, fields[k].name, fields[k].type, fields[k].help);
		for (int e = 0; e < OPAL_EXPORTER_N; e++) {
			uint64_t v;
			memcpy(&v, (const char *)&st[e] + fields[k].off, sizeof(v));
			fprintf(f, "%s{exporter=\"%s\"", fields[k].name, names[e]);
			if (fields[k].label)
				fprintf(f, ",outcome=\"%s\"", fields[k].label);
			fprintf(f, "} %" PRIu64 "\n", v);
		}
	}
}

/* A counter family: one series per label value names[i], counters[i]. */
static void family(FILE *f, const char *name, const char *help, const char *label,
		   const char *const *names, const uint64_t *counters, int n)
{
	header(f, name, "counter", help);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, names[i], get(&counters[i]));
}

int opal_metrics_render(const struct opal_symbolizer_stats *sym,
			const struct opal_process_stats *proc, char **out, size_t *len)
{
	static const char *const upload_names[OPAL_UPLOAD_N_OUTCOMES] = {
		"stored", "not_better", "invalid", "too_large", "refused", "expired",
		"unauthorized",
	};
	static const char *const dfd_names[OPAL_DEBUGINFOD_N_RESULTS] = {
		"found", "not_found", "negative_cached", "error",
	};
	static const char *const decomp_names[OPAL_DECOMP_N_REASONS] = {
		"over_budget", "expands", "malformed", "remembered",
	};
	static const char *const unwritten_names[OPAL_UNWRITTEN_N] = {
		"no_memory", "encode", "disk_full", "io",
	};
	static const char *const cache_table_names[OPAL_CACHE_TABLE_N] = {
		"frames", "files", "refused",
	};
	static const char *const up_names[OPAL_UPSTREAM_N] = {
		"batch_ok", "batch_failed", "uploaded", "upload_skipped", "upload_retried",
		"upload_failed", "dropped", "first_waited", "first_wait_exceeded",
	};
	static const char *const rx_names[OPAL_OTLP_RECEIVE_N] = {
		"forwarded", "malformed", "too_large", "unsupported", "busy", "not_forwarded",
	};
	static const char *const loc_names[4] = { "symbolized", "unresolved", "unknown_file",
						  "kept" };
	static const char *const refusal_names[OPAL_HTTP_REFUSAL_N] = {
		"connection_limit", "address_limit", "reserved_only", "header_timeout",
		"body_too_large",
	};
	static const char *const frame_names[OPAL_FRAME_N] = {
		"too_large", "bad_magic", "over_budget", "malformed", "stalled",
	};
	static const char *const cconn_names[OPAL_COLLECTOR_CONN_N] = {
		"refused", "idle_evicted", "no_hello",
	};
	static const char *const queue_names[OPAL_QUEUE_N] = {
		"upstream_addresses", "upstream_uploads",
	};
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;

	family(f, "opal_debuginfo_uploads_total", "Debug-info upload attempts by outcome",
	       "outcome", upload_names, m.uploads, OPAL_UPLOAD_N_OUTCOMES);
	family(f, "opal_debuginfod_lookups_total",
	       "Lookups of debug info on the DEBUGINFOD_URLS servers by result", "result",
	       dfd_names, m.debuginfod, OPAL_DEBUGINFOD_N_RESULTS);
	family(f, "opal_debug_decompress_refused_total",
	       "Files whose debug data was refused before decompression, by reason", "reason",
	       decomp_names, m.decomp, OPAL_DECOMP_N_REASONS);
	family(f, "opal_intervals_unwritten_total",
	       "Collector intervals not written (nor acknowledged: sent again), by reason",
	       "reason", unwritten_names, m.unwritten, OPAL_UNWRITTEN_N);
	family(f, "opal_cache_rows_evicted_total",
	       "Rows of the SQLite cache dropped at their table's bound, by table", "table",
	       cache_table_names, m.cache_evicted, OPAL_CACHE_TABLE_N);
	family(f, "opal_http_refusals_total",
	       "HTTP connections and requests refused at a bound, by reason", "reason",
	       refusal_names, m.http_refusals, OPAL_HTTP_REFUSAL_N);
	family(f, "opal_collector_frames_rejected_total",
	       "Collector socket frames refused, by reason", "reason", frame_names, m.frames,
	       OPAL_FRAME_N);
	family(f, "opal_collector_connections_closed_total",
	       "Collector connections refused or closed at a bound, by reason", "reason",
	       cconn_names, m.collector_conns, OPAL_COLLECTOR_CONN_N);
	family(f, "opal_upstream_events_total", "Work done with the upstream (central) symbolizer",
	       "event", up_names, m.upstream, OPAL_UPSTREAM_N);
	family(f, "opal_otlp_receive_requests_total",
	       "POST /v1development/profiles requests by outcome", "outcome", rx_names,
	       m.otlp_receive, OPAL_OTLP_RECEIVE_N);
	family(f, "opal_otlp_receive_locations_total",
	       "Locations of received OTLP profiles by what the symbolizer did with them", "result",
	       loc_names, m.otlp_locations, 4);
	header(f, "opal_queue_depth", "gauge", "Entries waiting in a bounded queue");
	for (int i = 0; i < OPAL_QUEUE_N; i++)
		fprintf(f, "opal_queue_depth{queue=\"%s\"} %" PRIu64 "\n", queue_names[i],
			get(&m.queues[i]));
	header(f, "opal_http_requests_total", "counter", "HTTP requests answered, by status");
	for (size_t i = 0; i <= N_HTTP; i++) {
		uint64_t v = get(&m.http[i]);
		if (i == N_HTTP)
			fprintf(f, "opal_http_requests_total{code=\"other\"} %" PRIu64 "\n", v);
		else
			fprintf(f, "opal_http_requests_total{code=\"%u\"} %" PRIu64 "\n",
				http_codes[i], v);
	}

	header(f, "opal_symbolize_duration_seconds", "histogram",
	       "Time to symbolize one native address (all cache levels; memory hits "
	       "sampled 1 in 16)");
	uint64_t cum = 0;
	for (size_t i = 0; i < N_BOUNDS; i++) {
		cum += get(&m.lat_buckets[i]);
		fprintf(f, "opal_symbolize_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
			(double)latency_bounds_ns[i] / 1e9, cum);
	}
	cum += get(&m.lat_buckets[N_BOUNDS]);
	fprintf(f, "opal_symbolize_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
	fprintf(f, "opal_symbolize_duration_seconds_sum %.9f\n",
		(double)get(&m.lat_sum_ns) / 1e9);
	fprintf(f, "opal_symbolize_duration_seconds_count %" PRIu64 "\n", get(&m.lat_count));

	static const struct {
		const char *name, *type, *help;
	} code[6] = {
		{ "opal_interp_code_objects", "gauge", "Interpreter code objects held" },
		{ "opal_interp_code_bytes", "gauge", "Bytes of the interpreter code objects held" },
		{ "opal_interp_code_added_total", "counter", "Interpreter code objects parsed and kept" },
		{ "opal_interp_code_invalid_total", "counter",
		  "Interpreter code objects refused (malformed or an unknown version)" },
		{ "opal_interp_code_evicted_total", "counter",
		  "Interpreter code objects dropped for the table's bound" },
		{ "opal_interp_frames_unnamed_total", "counter",
		  "Interpreter frames naming a code object the symbolizer does not have" },
	};
	for (int i = 0; i < 6; i++) {
		header(f, code[i].name, code[i].type, code[i].help);
		fprintf(f, "%s %" PRIu64 "\n", code[i].name, get(&m.code_table[i]));
	}
	static const struct {
		const char *name, *type, *help;
	} jit[OPAL_METRICS_JIT_N] = {
		{ "opal_jit_processes", "gauge", "Processes with JIT names held" },
		{ "opal_jit_bytes", "gauge", "Bytes of the JIT ranges and names held" },
		{ "opal_jit_files", "gauge", "Perf map and jitdump descriptors held" },
		{ "opal_jit_ranges_total", "counter", "JIT code ranges read from perf maps and jitdump files" },
		{ "opal_jit_bad_lines_total", "counter",
		  "Perf map lines skipped (malformed or longer than the line bound)" },
		{ "opal_jit_bad_records_total", "counter",
		  "Jitdump headers or records refused (the rest of that file is not read)" },
		{ "opal_jit_cut_total", "counter",
		  "JIT file reads stopped by a bound (ranges, bytes read, table bytes)" },
		{ "opal_jit_evicted_total", "counter", "Processes' JIT names dropped for the table's bounds" },
		{ "opal_jit_frames_named_total", "counter", "JIT frames named from a perf map or jitdump" },
		{ "opal_jit_frames_unnamed_total", "counter", "JIT frames no range named" },
	};
	for (int i = 0; i < OPAL_METRICS_JIT_N; i++) {
		header(f, jit[i].name, jit[i].type, jit[i].help);
		fprintf(f, "%s %" PRIu64 "\n", jit[i].name, get(&m.jit_table[i]));
	}

	if (proc) {
		header(f, "opal_seccomp_denials_total", "counter",
		       "System calls the sandbox's seccomp filter refused (each failed with EPERM)");
		fprintf(f, "opal_seccomp_denials_total %" PRIu64 "\n", proc->seccomp_denials);
	}
	if (sym) {
		const struct opal_symbolizer_stats st = *sym;
		header(f, "opal_symbolize_cache_hits_total", "counter",
		       "Native lookups answered from a cache, by level");
		fprintf(f, "opal_symbolize_cache_hits_total{level=\"memory\"} %" PRIu64 "\n",
			st.mem_hits);
		fprintf(f, "opal_symbolize_cache_hits_total{level=\"sqlite\"} %" PRIu64 "\n",
			st.cache_hits);
		header(f, "opal_symbolize_cache_misses_total", "counter",
		       "Native lookups that needed the debug data");
		fprintf(f, "opal_symbolize_cache_misses_total %" PRIu64 "\n", st.misses);
		header(f, "opal_symbolize_unresolved_total", "counter",
		       "Native lookups that found no function");
		fprintf(f, "opal_symbolize_unresolved_total %" PRIu64 "\n", st.unresolved);
		header(f, "opal_symbolize_files_open", "gauge", "Open libdwfl sessions");
		fprintf(f, "opal_symbolize_files_open %" PRIu64 "\n", st.files_open);
		header(f, "opal_symbolize_files_evicted_total", "counter",
		       "libdwfl sessions closed to stay within --max-open-files");
		fprintf(f, "opal_symbolize_files_evicted_total %" PRIu64 "\n", st.files_evicted);
	}
	render_collectors(f);
	render_exporters(f);
	if (fclose(f) != 0 || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = size;
	return 0;
}
