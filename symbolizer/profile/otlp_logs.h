/* "Profiles as logs": one interval's gzip'd pprof, base64-encoded, as the
 * string body of one OTLP LogRecord, for backends that ingest profiles that
 * way. The request is an ExportLogsServiceRequest (package
 * opentelemetry.proto.collector.logs.v1) sent to {endpoint}/v1/logs with the
 * OTLP/HTTP exporter (otlp_http.h, signal OPAL_OTLP_SIGNAL_LOGS). Attribute
 * keys are listed below and in docs/export.md. */
#ifndef OPAL_OTLP_LOGS_H
#define OPAL_OTLP_LOGS_H

#include <stddef.h>
#include <stdint.h>
#include "profile/otlp.h"

struct opal_profile;

/* 48 MiB of gzip'd pprof base64-encode to 64 MiB, the request size OTLP
 * receivers are advised to accept. */
#define OPAL_OTLP_LOGS_MAX_PAYLOAD (48u << 20)

/* LogRecord attribute keys (values in parentheses). */
#define OPAL_LOGS_ATTR_FORMAT       "profile.payload.format"       /* "pprof" */
#define OPAL_LOGS_ATTR_COMPRESSION  "profile.payload.compression"  /* "gzip" */
#define OPAL_LOGS_ATTR_ENCODING     "profile.payload.encoding"     /* "base64" */
#define OPAL_LOGS_ATTR_TYPE         "profile.type"                 /* "cpu" */
#define OPAL_LOGS_ATTR_PERIOD       "profile.sampling.period_ns"   /* int: ns between samples */
#define OPAL_LOGS_ATTR_DURATION     "profile.duration_ns"          /* int: interval length */
#define OPAL_LOGS_ATTR_SAMPLES      "profile.samples"              /* int: sampling events */
#define OPAL_LOGS_EVENT_NAME        "opal.profile"                 /* LogRecord.event_name */

struct opal_otlp_logs_record {
	const uint8_t *pprof_gz;    /* gzip'd pprof (pprof.h), len bytes */
	size_t len;                 /* <= OPAL_OTLP_LOGS_MAX_PAYLOAD */
	uint64_t start_unix_ns;     /* interval start: LogRecord.time_unix_nano */
	uint64_t duration_ns;       /* 0: attribute left out */
	uint64_t period_ns;         /* sampling period, 1e9 / Hz */
	uint64_t samples;           /* 0: attribute left out */
};

struct opal_otlp_logs_options {
	/* The daemon's resource: service_name (e.g. OTEL_SERVICE_NAME; NULL:
	 * the attribute list's service.name, else
	 * "unknown_service:opal-symbolizer"), host.name when given and not in
	 * the list, then the list (e.g. OTEL_RESOURCE_ATTRIBUTES); keys once. */
	const char *service_name;
	const char *host_name;
	const struct opal_otlp_kv *resource_attributes;
	size_t n_resource_attributes;
	const char *scope_version;  /* InstrumentationScope "opal" version; NULL none */
};

/* Encodes one ExportLogsServiceRequest: one ResourceLogs (resource above),
 * one ScopeLogs (scope "opal"), one LogRecord with time_unix_nano =
 * start_unix_ns, observed_time_unix_nano = now, severity INFO, event_name
 * OPAL_LOGS_EVENT_NAME, body string_value = base64 (RFC 4648, padded, no
 * line breaks) of the payload, and the attributes above. *buf (free()) /
 * *len. Returns 0, -EINVAL (NULL payload or period 0), -E2BIG (payload
 * over the bound), -ENOMEM. `o` may be NULL. */
int opal_otlp_logs_encode(const struct opal_otlp_logs_record *r,
			  const struct opal_otlp_logs_options *o, uint8_t **buf, size_t *len);

/* Convenience for one interval profile: encodes `p` as gzip'd pprof
 * (opal_pprof_encode) and fills the record from opal_profile_time /
 * _period_ns / _sample_count. Same returns, plus opal_pprof_encode's. */
int opal_otlp_logs_encode_profile(const struct opal_profile *p,
				  const struct opal_otlp_logs_options *o, uint8_t **buf,
				  size_t *len);

#endif
