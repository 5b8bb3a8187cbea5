/* Process-wide counters of the symbolizer, rendered as Prometheus text
 * exposition format 0.0.4 (every name prefixed "opal_") for GET /metrics.
 * Counters are updated with relaxed atomics from any thread (HTTP
 * threads, upload workers, the collector-facing loop); rendering reads a
 * consistent-enough snapshot without stopping them. */
#ifndef OPAL_METRICS_H
#define OPAL_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "opal/wire.pb-c.h"

/* Counters of one OTLP export queue (export/export_queue.h) since start;
 * all monotonic except queued_*. */
struct opal_export_stats {
	uint64_t enqueued, enqueued_bytes;     /* accepted by opal_export_queue_push */
	uint64_t sent;                         /* delivered (OK or PARTIAL) */
	uint64_t partial;                      /* of `sent`, partial successes */
	uint64_t failed;                       /* permanent failure, prepare error or attempts used up */
	uint64_t retries;                      /* attempts after the first one */
	uint64_t dropped, dropped_bytes;       /* overflow (oldest first), too large, or left at stop */
	uint64_t queued_items, queued_bytes;   /* now waiting (not counting the one in flight) */
};

/* Statistics for /metrics and logs (native lookups; files_open is the
 * current number of libdwfl sessions, files_evicted the sessions closed
 * to stay within max_open_files). */
struct opal_symbolizer_stats {
	uint64_t mem_hits, cache_hits, misses, unresolved, files_open, files_evicted;
	uint64_t debug_bytes;       /* opal_dwfl_memory() of the open sessions, summed */
	uint64_t rows_pending;      /* SQLite rows queued, not yet written */
};
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

/* Why a file's debug data was refused before anything was decompressed
 * (debuginfo/debuginfo_bound.h). */
enum opal_metric_decomp {
	OPAL_DECOMP_OVER_BUDGET,   /* the declared sizes sum to more than --max-decompress */
	OPAL_DECOMP_EXPANDS,       /* xz data decodes to more than its index declares */
	OPAL_DECOMP_MALFORMED,     /* a header, index or frame that cannot be read or lies */
	OPAL_DECOMP_REMEMBERED,    /* not scanned: the SQLite cache remembers its refusal */
	OPAL_DECOMP_N_REASONS,
};

/* Tables of the SQLite cache (symbolize/sym_sqlite.h) whose rows are
 * dropped at their bounds. */
enum opal_metric_cache_table {
	OPAL_CACHE_TABLE_FRAMES,    /* 4 Mi rows, an eighth in key order */
	OPAL_CACHE_TABLE_FILES,     /* 256 Ki rows, the least recently updated eighth */
	OPAL_CACHE_TABLE_REFUSED,   /* 64 Ki rows, the oldest eighth */
	OPAL_CACHE_TABLE_N,
};

/* Why a collector's interval was not written (and so not acknowledged:
 * the collector sends it again when it reconnects, collector_link.c). */
enum opal_metric_unwritten {
	OPAL_UNWRITTEN_NO_MEMORY,   /* ingesting it ran out of memory */
	OPAL_UNWRITTEN_ENCODE,      /* pprof or OTLP encoding failed */
	OPAL_UNWRITTEN_DISK_FULL,   /* a write failed with ENOSPC or EDQUOT */
	OPAL_UNWRITTEN_IO,          /* a write failed for another reason */
	OPAL_UNWRITTEN_N,
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
	OPAL_UPSTREAM_FIRST_WAITED,      /* intervals held for the answers about a new file */
	OPAL_UPSTREAM_FIRST_WAIT_EXCEEDED, /* ... written unanswered after the bound */
	OPAL_UPSTREAM_N,
};

void opal_metrics_upload(enum opal_metric_upload outcome);
void opal_metrics_debuginfod(enum opal_metric_debuginfod result);
void opal_metrics_upstream(enum opal_metric_upstream what);
void opal_metrics_decomp_refused(enum opal_metric_decomp reason);
void opal_metrics_interval_unwritten(enum opal_metric_unwritten reason);
/* `rows` rows of `table` dropped for its bound. */
void opal_metrics_cache_evicted(enum opal_metric_cache_table table, uint64_t rows);
void opal_metrics_queue_depth(enum opal_metric_queue q, uint64_t depth);

/* OTLP exporters of the symbolizer (--export). */
enum opal_metric_exporter {
	OPAL_EXPORTER_OTLP,         /* profiles, /v1development/profiles */
	OPAL_EXPORTER_OTLP_LOGS,    /* profiles as logs, /v1/logs */
	OPAL_EXPORTER_OTLP_FORWARD, /* received OTLP profiles, symbolized (--otlp-forward) */
	OPAL_EXPORTER_N,
};

/* Stores the latest counters of exporter `e` (copied), rendered as
 * opal_export_* metrics. The caller keeps them monotonic across exporter
 * restarts (SIGHUP) by adding what retired exporters counted. */
void opal_metrics_exporter(enum opal_metric_exporter e, const struct opal_export_stats *st);

/* Outcome of one POST /v1development/profiles (--otlp-receive). */
enum opal_metric_otlp_receive {
	OPAL_OTLP_RECEIVE_FORWARDED,      /* symbolized and queued for forwarding */
	OPAL_OTLP_RECEIVE_MALFORMED,      /* 400: bad protobuf or gzip, index out of range */
	OPAL_OTLP_RECEIVE_TOO_LARGE,      /* 413: body, decoded size or Locations over a bound */
	OPAL_OTLP_RECEIVE_UNSUPPORTED,    /* 415: not application/x-protobuf, or not gzip */
	OPAL_OTLP_RECEIVE_BUSY,           /* 503: OPAL_HTTP_OTLP_AT_ONCE requests already in work */
	OPAL_OTLP_RECEIVE_NOT_FORWARDED,  /* 503: the forward queue refused it */
	OPAL_OTLP_RECEIVE_N,
};
void opal_metrics_otlp_receive(enum opal_metric_otlp_receive outcome);

/* Adds what the rewrite of one received request did with its Locations
 * (profile/otlp_rewrite.h, struct opal_otlp_rx_stats). */
void opal_metrics_otlp_locations(uint64_t symbolized, uint64_t unresolved,
				 uint64_t unknown_file, uint64_t kept);

/* The interpreter code table's figures (interp/code_table.h): entries and
 * bytes now, and code objects added, refused as invalid, evicted, and
 * frames naming an unknown one, since start. */
void opal_metrics_code_table(uint64_t entries, uint64_t bytes, uint64_t added, uint64_t invalid,
			     uint64_t evicted, uint64_t unknown);

/* Connections and requests the HTTP server refused at a bound
 * (docs/http-api.md, "Limits"). */
enum opal_metric_http_refusal {
	OPAL_HTTP_REFUSED_CONN_LIMIT,     /* connection limit reached, reserved slots too */
	OPAL_HTTP_REFUSED_ADDR_LIMIT,     /* its address's connection limit reached */
	OPAL_HTTP_REFUSED_RESERVED_ONLY,  /* on a reserved slot, not /healthz or /metrics: 503 */
	OPAL_HTTP_HEADER_TIMEOUT,         /* headers not complete within the header deadline */
	OPAL_HTTP_BODY_TOO_LARGE,         /* declared or chunked body over its bound: 413 */
	OPAL_HTTP_REFUSAL_N,
};

void opal_metrics_http_refusal(enum opal_metric_http_refusal what);

/* Collector socket frames the symbolizer refused (docs/wire-protocol.md). */
enum opal_metric_frame {
	OPAL_FRAME_TOO_LARGE,     /* length over 64 MiB: connection closed */
	OPAL_FRAME_BAD_MAGIC,     /* not a frame: connection closed */
	OPAL_FRAME_OVER_BUDGET,   /* decoding over its memory budget: dropped */
	OPAL_FRAME_MALFORMED,     /* does not unpack, wrong version: dropped */
	OPAL_FRAME_STALLED,       /* not complete within 5 s: connection closed */
	OPAL_FRAME_N,
};

void opal_metrics_frame_rejected(enum opal_metric_frame why);

/* Collector connections closed or refused at a bound (collector_link.c). */
enum opal_metric_collector_conn {
	OPAL_COLLECTOR_CONN_REFUSED,       /* every slot taken by active collectors */
	OPAL_COLLECTOR_CONN_IDLE_EVICTED,  /* idle, its slot given to a new collector */
	OPAL_COLLECTOR_CONN_NO_HELLO,      /* no Hello within 10 s */
	OPAL_COLLECTOR_CONN_N,
};

void opal_metrics_collector_conn(enum opal_metric_collector_conn what);
/* The JIT name table's figures (interp/jit_table.h), in this order:
 * processes and bytes now; since start: descriptors held now, ranges
 * read, perf map lines and jitdump records refused, reads cut by a
 * bound, processes evicted, JIT frames named and unnamed. */
#define OPAL_METRICS_JIT_N 10
void opal_metrics_jit_table(const uint64_t v[OPAL_METRICS_JIT_N]);

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

/* The process's own figures, read by the /metrics handler when it renders. */
struct opal_process_stats {
	uint64_t seccomp_denials;   /* calls the seccomp filter refused (opal_seccomp_denials) */
};

/* Renders every metric. `sym` (may be NULL) adds the symbolizer's cache
 * statistics (a snapshot: opal_symbolizer_stats), `proc` (may be NULL) the
 * process's own. On success *out is a malloc'd NUL-terminated text of *len
 * bytes (caller frees). Returns 0 or -ENOMEM. */
int opal_metrics_render(const struct opal_symbolizer_stats *sym,
			const struct opal_process_stats *proc, char **out, size_t *len);

/* Clears every counter (tests). */
void opal_metrics_reset(void);

#endif
