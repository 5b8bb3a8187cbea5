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

#include "metrics.h"
#include "symbolize.h"

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
	uint64_t upstream[OPAL_UPSTREAM_N];
	uint64_t queues[OPAL_QUEUE_N];
	uint64_t http[N_HTTP + 1];          /* last slot: any other code */
	uint64_t lat_buckets[N_BOUNDS + 1]; /* non-cumulative; last = +Inf */
	uint64_t lat_sum_ns, lat_count;
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

void opal_metrics_upload(enum opal_metric_upload outcome)
{
	if ((unsigned)outcome < OPAL_UPLOAD_N_OUTCOMES)
		add(&m.uploads[outcome], 1);
}

void opal_metrics_debuginfod(enum opal_metric_debuginfod result)
{
	if ((unsigned)result < OPAL_DEBUGINFOD_N_RESULTS)
		add(&m.debuginfod[result], 1);
}

void opal_metrics_upstream(enum opal_metric_upstream what)
{
	if ((unsigned)what < OPAL_UPSTREAM_N)
		add(&m.upstream[what], 1);
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
	memset(m.upstream, 0, sizeof(m.upstream));
	memset(m.queues, 0, sizeof(m.queues));
	memset(m.http, 0, sizeof(m.http));
	memset(m.lat_buckets, 0, sizeof(m.lat_buckets));
	m.lat_sum_ns = m.lat_count = 0;
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
		F(proc_installs, "proc_installs", "Process mapping arrays written to BPF"),
		F(proc_install_errors, "proc_install_errors",
		  "Process mapping arrays that could not be written to BPF"),
		F(vma_checks, "vma_checks", "Mapping checks with bpf_find_vma in BPF"),
		F(vma_busy, "vma_busy", "Mapping checks skipped because mmap_lock was busy"),
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
	static const char *const names[OPAL_EXPORTER_N] = { "otlp", "otlp-logs" };
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

int opal_metrics_render(struct opal_symbolizer *sym, char **out, size_t *len)
{
	static const char *const upload_names[OPAL_UPLOAD_N_OUTCOMES] = {
		"stored", "not_better", "invalid", "too_large", "refused", "expired",
		"unauthorized",
	};
	static const char *const dfd_names[OPAL_DEBUGINFOD_N_RESULTS] = {
		"found", "not_found", "negative_cached", "error",
	};
	static const char *const up_names[OPAL_UPSTREAM_N] = {
		"batch_ok", "batch_failed", "uploaded", "upload_skipped", "upload_retried",
		"upload_failed", "dropped",
	};
	static const char *const queue_names[OPAL_QUEUE_N] = {
		"upstream_addresses", "upstream_uploads",
	};
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;

	header(f, "opal_debuginfo_uploads_total", "counter",
	       "Debug-info upload attempts by outcome");
	for (int i = 0; i < OPAL_UPLOAD_N_OUTCOMES; i++)
		fprintf(f, "opal_debuginfo_uploads_total{outcome=\"%s\"} %" PRIu64 "\n",
			upload_names[i], get(&m.uploads[i]));
	header(f, "opal_debuginfod_lookups_total", "counter",
	       "Lookups of debug info on the DEBUGINFOD_URLS servers by result");
	for (int i = 0; i < OPAL_DEBUGINFOD_N_RESULTS; i++)
		fprintf(f, "opal_debuginfod_lookups_total{result=\"%s\"} %" PRIu64 "\n",
			dfd_names[i], get(&m.debuginfod[i]));
	header(f, "opal_upstream_events_total", "counter",
	       "Work done with the upstream (central) symbolizer");
	for (int i = 0; i < OPAL_UPSTREAM_N; i++)
		fprintf(f, "opal_upstream_events_total{event=\"%s\"} %" PRIu64 "\n", up_names[i],
			get(&m.upstream[i]));
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

	if (sym) {
		struct opal_symbolizer_stats st;
		opal_symbolizer_stats(sym, &st);
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
