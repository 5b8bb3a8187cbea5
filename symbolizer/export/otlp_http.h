/* OTLP/HTTP exporter (libcurl) for the symbolizer: POSTs protobuf
 * requests (profiles to {endpoint}/v1development/profiles, logs to
 * {endpoint}/v1/logs) with Content-Type application/x-protobuf and, by
 * default, Content-Encoding gzip, following the OTLP/HTTP specification:
 * - 2xx: success; a partial_success in the response is logged, never
 *   retried;
 * - 429, 502, 503, 504 and connection failures (refused, reset, DNS,
 *   timeout): retried, after Retry-After (seconds or HTTP date) when the
 *   response has one, else after exponential backoff with jitter;
 * - every other status: permanent failure, not retried.
 * Requests go through an export queue (export_queue.h): the caller only
 * enqueues, a worker thread compresses and sends. Configuration follows the
 * OpenTelemetry SDK environment variables (docs/export.md). */
#ifndef OPAL_OTLP_HTTP_H
#define OPAL_OTLP_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "export/export_queue.h"
#include "profile/otlp.h"
#include "shared/config.h"

#define OPAL_OTLP_PROFILES_PATH   "/v1development/profiles"
#define OPAL_OTLP_LOGS_PATH       "/v1/logs"
#define OPAL_OTLP_DEFAULT_TIMEOUT_MS 10000     /* OTEL_EXPORTER_OTLP_TIMEOUT default */
#define OPAL_OTLP_MAX_RESPONSE    (64u << 10)  /* response bytes kept for decoding */
#define OPAL_OTLP_MAX_HEADERS     64

enum opal_otlp_signal { OPAL_OTLP_SIGNAL_PROFILES, OPAL_OTLP_SIGNAL_LOGS };

/* The URL a signal is sent to, in the precedence of the OTel SDK
 * configuration spec adapted to opal's sources:
 * 1. `configured` from the command line (src == OPAL_SRC_FLAG): the
 *    --otlp-endpoint base URL + the signal path;
 * 2. OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT (logs:
 *    OTEL_EXPORTER_OTLP_LOGS_ENDPOINT), used as is;
 * 3. OTEL_EXPORTER_OTLP_ENDPOINT + the signal path;
 * 4. `configured` from the config file or a default (any other src) + the
 *    signal path.
 * "+ path": one trailing '/' of the base is dropped first, so
 * "http://h:4318/" gives "http://h:4318/v1development/profiles". Empty
 * variables count as unset. *url (free()) is NULL when nothing is
 * configured. Returns 0, -EINVAL (a URL that is not http:// or https://),
 * -ENOMEM. */
int opal_otlp_http_resolve_url(enum opal_otlp_signal sig, const char *configured,
			       enum opal_config_source src, char **url);

/* Parses OTEL_EXPORTER_OTLP_HEADERS ("k1=v1,k2=v2", percent-decoded; the
 * syntax of opal_otlp_parse_resource_attributes) into header pairs.
 * Rejects names that are not HTTP tokens and values holding CR, LF or
 * other control bytes (a decoded %0D%0A must not inject headers), and more
 * than OPAL_OTLP_MAX_HEADERS pairs. Returns 0 (*out, *n; free with
 * opal_otlp_kv_free), -EINVAL, -E2BIG, -ENOMEM. NULL / "" gives 0 pairs. */
int opal_otlp_http_parse_headers(const char *s, struct opal_otlp_kv **out, size_t *n);

/* Parses a Retry-After value: delay-seconds, or an HTTP date (RFC 9110,
 * via curl_getdate) taken relative to `now`. Returns the delay in ms (0 for
 * a date in the past), or -1 when unparsable. Delays are capped at one day. */
int64_t opal_otlp_http_parse_retry_after(const char *v, time_t now);


struct opal_otlp_http_config {
	const char *url;                       /* full URL (opal_otlp_http_resolve_url) */
	const struct opal_otlp_kv *headers;    /* extra request headers; may be NULL */
	size_t n_headers;
	unsigned timeout_ms;                   /* whole attempt, connect included (>= 1) */
	bool gzip;                             /* Content-Encoding: gzip */
	enum opal_otlp_signal signal;          /* which response message to decode */
	const char *user_agent;                /* NULL: "opal" */
};

/* Outcome of one attempt, for logs and tests. */
struct opal_otlp_http_result {
	enum opal_export_status status;
	long http_status;          /* 0 when no response arrived */
	int64_t retry_after_ms;    /* -1 when the response had none (or no response) */
	int64_t rejected;          /* partial_success.rejected_* */
	char message[256];         /* curl error, HTTP status, or partial_success message */
};

struct opal_otlp_http;

/* A client for one URL (copies the config). Calls curl_global_init, so the
 * first call must happen before other threads use libcurl. Returns 0,
 * -EINVAL (url NULL, timeout 0), -ENOMEM. */
int opal_otlp_http_new(const struct opal_otlp_http_config *cfg, struct opal_otlp_http **out);
void opal_otlp_http_free(struct opal_otlp_http *h);

/* One POST of `body` (`len` bytes, already gzip'd when cfg.gzip; the
 * caller compresses once for all attempts). Blocking for at most
 * timeout_ms; ends early when `cancel` (may be NULL) becomes true, which
 * counts as OPAL_EXPORT_FAILED. Classifies the outcome into `res` (see the
 * top of this file), logs failures and partial successes, and returns
 * res->status. Not thread-safe per client (one worker uses it). */
enum opal_export_status opal_otlp_http_post(struct opal_otlp_http *h, const uint8_t *body,
					    size_t len, const atomic_bool *cancel,
					    struct opal_otlp_http_result *res);

/* ---- Exporter: client + export queue ------------------------------------ */

struct opal_otlp_exporter;

/* Starts an exporter: `http` as above (copied), `queue` bounds and retry
 * policy (its prepare/deliver/arg are set by the exporter and ignored
 * here). Returns 0, -EINVAL, -ENOMEM, -errno. */
int opal_otlp_exporter_start(const struct opal_otlp_http_config *http,
			     const struct opal_export_queue_config *queue,
			     struct opal_otlp_exporter **out);

/* Enqueues one serialized, uncompressed request (ownership of `body`, a
 * malloc'd buffer, passes to the exporter in every case). Never blocks on
 * the network. Returns opal_export_queue_push's result. */
int opal_otlp_exporter_push(struct opal_otlp_exporter *e, uint8_t *body, size_t len);

/* Encodes one interval profile for the exporter's signal and enqueues it:
 * OPAL_OTLP_SIGNAL_PROFILES: opal_otlp_encode(p, po); OPAL_OTLP_SIGNAL_LOGS:
 * opal_otlp_logs_encode_profile(p, lo) ("profiles as logs"). Either
 * options pointer may be NULL. A profile without samples is not sent.
 * Encoding runs on the caller's thread (the profile is the caller's);
 * compression and sending do not. Returns 0, an encoder's -errno, or
 * opal_export_queue_push's result. */
struct opal_otlp_logs_options;
int opal_otlp_exporter_push_profile(struct opal_otlp_exporter *e, const struct opal_profile *p,
				    const struct opal_otlp_options *po,
				    const struct opal_otlp_logs_options *lo);

void opal_otlp_exporter_stats(struct opal_otlp_exporter *e, struct opal_export_stats *out);

/* Flushes for at most `flush_ms`, then stops and frees (see
 * opal_export_queue_stop). NULL is a no-op. */
void opal_otlp_exporter_stop(struct opal_otlp_exporter *e, unsigned flush_ms,
			     struct opal_export_stats *final);

#endif
