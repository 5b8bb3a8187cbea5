/* The symbolizer's OTLP exporters as configured (--export otlp, otlp-logs):
 * at most one profiles exporter and one logs exporter (otlp_http.h), each
 * with its own queue and worker thread, so that handing an interval over
 * never waits for the network. On SIGHUP an exporter whose settings
 * changed is replaced: the new one takes the next intervals while the old
 * one flushes what it holds (bounded) and stops on a thread of its own, so
 * symbolization does not wait for that either. Counters stay monotonic
 * across replacements and are published to /metrics (metrics.h). Every
 * function is for the main thread. */
#ifndef OPAL_EXPORTERS_H
#define OPAL_EXPORTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "export/otlp_http.h"   /* enum opal_otlp_signal */

struct opal_profile;
struct opal_otlp_logs_options;

#define OPAL_EXPORTERS_FLUSH_MS      5000   /* flush time of a stopping exporter */
#define OPAL_EXPORTERS_MAX_REQUESTS  1024   /* queued requests per exporter */
#define OPAL_EXPORTERS_MAX_ATTEMPTS  6      /* per request, the first included */
#define OPAL_EXPORTERS_BACKOFF_MS    1000   /* first backoff; doubles per retry */
#define OPAL_EXPORTERS_BACKOFF_MAX_MS 30000 /* backoff cap, also caps Retry-After */

/* What one exporter sends with; each signal has its own (the OTel
 * variables OTEL_EXPORTER_OTLP_<SIGNAL>_* beat the generic ones:
 * sym_config.h). */
struct opal_exporter_settings {
	const char *url;            /* full URL; NULL: this exporter is off */
	const char *headers;        /* OTEL_EXPORTER_OTLP_HEADERS syntax; NULL: none */
	unsigned timeout_ms;        /* one attempt (>= 1) */
	bool gzip;                  /* Content-Encoding: gzip */
};

struct opal_exporters_config {
	struct opal_exporter_settings profiles;   /* OTLP profiles */
	struct opal_exporter_settings logs;       /* profiles as OTLP log records */
	uint64_t queue_bytes;       /* bound of each queue (>= 1) */
};

struct opal_exporters;
struct opal_otlp_exporter;

/* One exporter with these settings and the queue and retry policy above,
 * outside the configured set (the OTLP receiver's forwarder): `name`
 * (static) names it in logs; thread-safe to push to from any thread
 * (opal_otlp_exporter_push); stop it with opal_otlp_exporter_stop. Starts
 * a thread: call after the sandbox is applied. Returns 0 and *out, or
 * -errno (logged). */
int opal_exporter_start(const char *name, enum opal_otlp_signal signal,
			const struct opal_exporter_settings *e, uint64_t queue_bytes,
			struct opal_otlp_exporter **out);

/* No exporter running yet. NULL on ENOMEM. */
struct opal_exporters *opal_exporters_new(void);

/* Brings the running exporters in line with `c` (copied): starts those
 * that are missing, replaces those whose URL, headers, timeout,
 * compression or queue bound differ, and retires those no longer wanted
 * (a retired exporter flushes for at most OPAL_EXPORTERS_FLUSH_MS on its
 * own thread). Starts threads: call after the sandbox is applied. Returns
 * 0, or the first -errno of an exporter that could not start (logged; that
 * exporter stays off, the others are configured). */
int opal_exporters_configure(struct opal_exporters *x, const struct opal_exporters_config *c);

/* True when a profiles exporter runs (the caller then encodes OTLP). */
bool opal_exporters_want_otlp(const struct opal_exporters *x);
/* True when a logs exporter runs (it needs the gzip'd pprof). */
bool opal_exporters_want_logs(const struct opal_exporters *x);

/* Hands one interval to the running exporters; never blocks on the
 * network. `otlp` (otlp_len bytes, malloc'd, may be NULL) is the encoded
 * ExportProfilesServiceRequest of `p` and is taken over in every case;
 * `pprof_gz` (gz_len bytes, borrowed, may be NULL) is its gzip'd pprof,
 * wrapped into a log record for the logs exporter with the resource `lo`
 * (may be NULL). An interval without samples is not sent. Failures are
 * logged and counted; nothing is returned. */
void opal_exporters_push(struct opal_exporters *x, const struct opal_profile *p, uint8_t *otlp,
			 size_t otlp_len, const uint8_t *pprof_gz, size_t gz_len,
			 const struct opal_otlp_logs_options *lo);

/* Publishes the counters to /metrics (opal_metrics_exporter); cheap. */
void opal_exporters_publish(struct opal_exporters *x);

/* Stops every exporter, each flushing for at most `flush_ms` (in
 * parallel), waits for retired ones, logs each exporter's totals, and
 * frees `x`. NULL is a no-op. */
void opal_exporters_stop(struct opal_exporters *x, unsigned flush_ms);

#endif
