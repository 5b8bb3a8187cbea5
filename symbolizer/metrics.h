/* Process-wide counters of the symbolizer, rendered as Prometheus text
 * exposition format 0.0.4 (every name prefixed "opal_") for GET /metrics.
 * Counters are updated with relaxed atomics from any thread (HTTP
 * threads, upload workers, the collector-facing loop); rendering reads a
 * consistent-enough snapshot without stopping them. */
#ifndef OPAL_METRICS_H
#define OPAL_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "export_queue.h"
#include "opal/wire.pb-c.h"

struct opal_symbolizer;

/* Outcome of one debug-info upload attempt (PUT or a refused initiate). */
enum opal_metric_upload {
	OPAL_UPLOAD_STORED,        /* validated and kept (first data or better data) */
	OPAL_UPLOAD_NOT_BETTER,    /* valid, but the stored data was as good: kept the old */
	OPAL_UPLOAD_INVALID,       /* not an ELF, truncated, wrong ID, hash mismatch */
	OPAL_UPLOAD_TOO_LARGE,     /* over --max-upload-bytes */
	OPAL_UPLOAD_REFUSED,       /* 409/412: known-invalid bytes, in progress, better exists */
	OPAL_UPLOAD_EXPIRED,       /* started but not finished within --upload-expiry */
	OPAL_UPLOAD_UNAUTHORIZED,  /* missing or wrong bearer token (any write endpoint) */
	OPAL_UPLOAD_N_OUTCOMES,
};

/* Result of one debuginfod lookup made by the symbolizer. */
enum opal_metric_debuginfod {
	OPAL_DEBUGINFOD_FOUND,
	OPAL_DEBUGINFOD_NOT_FOUND,
	OPAL_DEBUGINFOD_NEGATIVE_CACHED,   /* answered by the negative cache, no request */
	OPAL_DEBUGINFOD_ERROR,
	OPAL_DEBUGINFOD_N_RESULTS,
};

/* Queues whose depth is exported as a gauge. */
enum opal_metric_queue {
	OPAL_QUEUE_UPSTREAM_ADDRESSES,   /* addresses waiting for the central symbolizer */
	OPAL_QUEUE_UPSTREAM_UPLOADS,     /* debug files waiting to be uploaded upstream */
	OPAL_QUEUE_N,
};

/* Results of requests made to the upstream (central) symbolizer. */
enum opal_metric_upstream {
	OPAL_UPSTREAM_BATCH_OK,
	OPAL_UPSTREAM_BATCH_FAILED,
	OPAL_UPSTREAM_UPLOADED,
	OPAL_UPSTREAM_UPLOAD_SKIPPED,    /* the upstream said it needs no upload */
	OPAL_UPSTREAM_UPLOAD_RETRIED,    /* "in progress": queued again for later */
	OPAL_UPSTREAM_UPLOAD_FAILED,
	OPAL_UPSTREAM_DROPPED,           /* queue full: work dropped */
	OPAL_UPSTREAM_N,
};

void opal_metrics_upload(enum opal_metric_upload outcome);
void opal_metrics_debuginfod(enum opal_metric_debuginfod result);
void opal_metrics_upstream(enum opal_metric_upstream what);
void opal_metrics_queue_depth(enum opal_metric_queue q, uint64_t depth);

/* OTLP exporters of the symbolizer (--export). */
enum opal_metric_exporter {
	OPAL_EXPORTER_OTLP,         /* profiles, /v1development/profiles */
	OPAL_EXPORTER_OTLP_LOGS,    /* profiles as logs, /v1/logs */
	OPAL_EXPORTER_N,
};

/* Stores the latest counters of exporter `e` (copied), rendered as
 * opal_export_* metrics. The caller keeps them monotonic across exporter
 * restarts (SIGHUP) by adding what retired exporters counted. */
void opal_metrics_exporter(enum opal_metric_exporter e, const struct opal_export_stats *st);

/* Adds one HTTP request (any endpoint) answered with `status`. */
void opal_metrics_http(unsigned status);

/* Records the duration of a native symbolization (opal_symbolize_native),
 * in nanoseconds, into the latency histogram, as `weight` lookups of that
 * duration (a timed sample standing for untimed ones: symbolize.c). */
void opal_metrics_symbolize_latency(uint64_t ns, uint64_t weight);

/* Stores the counters the collector on `host` reported in Interval `seq`
 * of run `run_id` (running totals since that collector started: wire.proto
 * CollectorCounters), published with labels host and run (the run ID in
 * hex): collectors sharing a host name (containers) and a restarted
 * collector are series of their own, so no series ever goes back. An
 * interval no newer than the one stored for its run (re-sent, duplicate)
 * is ignored. At most OPAL_METRICS_MAX_COLLECTORS runs are kept; a
 * further one replaces the one reported least recently. `host` may be NULL
 * or empty ("unknown"). */
#define OPAL_METRICS_MAX_COLLECTORS 16
void opal_metrics_collector_counters(const char *host, uint64_t run_id, uint64_t seq,
				     const Opal__Wire__V1__CollectorCounters *c);

/* Renders every metric. `sym` (may be NULL) adds the symbolizer's cache
 * statistics (opal_symbolizer_stats). On success *out is a malloc'd
 * NUL-terminated text of *len bytes (caller frees). Returns 0 or -ENOMEM. */
int opal_metrics_render(struct opal_symbolizer *sym, char **out, size_t *len);

/* Clears every counter (tests). */
void opal_metrics_reset(void);

#endif
