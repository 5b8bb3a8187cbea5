/* OTLP profiles export of a profile (profile.h): an
 * ExportProfilesServiceRequest in the opentelemetry-proto v1.11.0 layout
 * (package opentelemetry.proto.collector.profiles.v1development; see
 * docs/formats.md). */
#ifndef OPAL_OTLP_H
#define OPAL_OTLP_H

#include <stddef.h>
#include <stdint.h>

struct opal_profile;

#define OPAL_OTLP_MAX_BYTES        (1u << 30)  /* encoded request */
#define OPAL_OTLP_MAX_RES_ATTRS    128         /* parsed resource attributes */
#define OPAL_OTLP_MAX_RES_ATTR_LEN 4096        /* bytes per decoded key or value */

/* One string resource attribute. */
struct opal_otlp_kv {
	char *key;
	char *value;
};

struct opal_otlp_options {
	/* Extra resource attributes of the daemon (e.g. parsed from
	 * OTEL_RESOURCE_ATTRIBUTES), added to every ResourceProfiles for keys
	 * the per-process attributes do not set. May be NULL / 0. */
	const struct opal_otlp_kv *resource_attributes;
	size_t n_resource_attributes;
	/* InstrumentationScope.version; NULL for none. */
	const char *scope_version;
};

/* Parses the OTEL_RESOURCE_ATTRIBUTES syntax "k1=v1,k2=v2": members are
 * separated by ',', key and value by the first '='; spaces and tabs around
 * keys and values are dropped; keys and values are percent-decoded (%XX);
 * empty members are skipped; a repeated key keeps its last value. Per the
 * OpenTelemetry SDK configuration spec the whole value is rejected on any
 * error. On success *out (free with opal_otlp_kv_free) holds *n pairs in
 * first-appearance order. Returns 0, -EINVAL (missing '=', empty key, bad
 * escape, NUL from an escape), -E2BIG (over OPAL_OTLP_MAX_RES_ATTRS pairs
 * or OPAL_OTLP_MAX_RES_ATTR_LEN bytes) or -ENOMEM. `s` NULL or empty gives
 * 0 pairs. */
int opal_otlp_parse_resource_attributes(const char *s, struct opal_otlp_kv **out, size_t *n);
void opal_otlp_kv_free(struct opal_otlp_kv *kv, size_t n);

/* Encodes `p` as one ExportProfilesServiceRequest:
 * - one ProfilesDictionary; every table starts with its zero value (string
 *   "", Mapping{}, Location{}, Function{}, Link{}, KeyValueAndUnit{},
 *   Stack{}) and holds no duplicates;
 * - one ResourceProfiles per process that has samples, with resource
 *   attributes service.name (the process's, else
 *   "unknown_service:<executable name>"), process.pid,
 *   process.executable.name, process.executable.path, container.id and
 *   host.name (when known), then the option attributes whose keys are not
 *   set yet; one ScopeProfiles (scope "opal") with a CPU Profile (when the
 *   process has CPU samples) and an off-CPU Profile (when it has off-CPU
 *   samples, docs/offcpu.md), both on the one dictionary;
 * - CPU Profile: sample_type samples/count, period_type cpu/nanoseconds,
 *   period = period_ns; off-CPU Profile: sample_type off_cpu/nanoseconds,
 *   no period; both: time/duration from opal_profile_time, a random
 *   profile_id;
 * - samples split so that each has one cpu: one Sample per (stack, tid,
 *   cpu) with attributes thread.id, thread.name (when known) and
 *   cpu.logical_number, timestamps_unix_nano sorted and no values (each
 *   timestamp counts one sample); an off-CPU sample has values too, the
 *   nanoseconds off CPU of each timestamp;
 * - Mapping attributes process.executable.build_id.htlhash and
 *   process.executable.build_id.gnu (when known); Location attribute
 *   profile.frame.type "native", "kernel" or "cpython"; Location.address is the
 *   runtime address; Location.lines innermost inlined callee first; a line
 *   without a function name gets the function "??".
 * On success *buf (free()) and *len receive the serialized request.
 * Returns 0, -ENOMEM, -E2BIG (over OPAL_OTLP_MAX_BYTES or an int32 index
 * bound). `o` may be NULL. */
int opal_otlp_encode(const struct opal_profile *p, const struct opal_otlp_options *o,
		     uint8_t **buf, size_t *len);

/* Writes the encoding (uncompressed protobuf) to `path` atomically
 * (path.tmp, then rename). Returns 0 or -errno. */
int opal_otlp_write(const struct opal_profile *p, const struct opal_otlp_options *o,
		    const char *path);

#endif
