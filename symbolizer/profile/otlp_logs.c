/* "Profiles as logs" encoder (otlp_logs.h). */
#include "profile/otlp_logs.h"
#include "profile/pprof.h"
#include "profile/profile.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

#define MAX_RES_ATTRS (OPAL_OTLP_MAX_RES_ATTRS + 2)
#define N_REC_ATTRS 7

/* Fixed-size storage for one KeyValue list; strings are borrowed. */
struct kvs {
	KeyValue kv[MAX_RES_ATTRS];
	AnyValue val[MAX_RES_ATTRS];
	KeyValue *ptr[MAX_RES_ATTRS];
	size_t n;
};

static bool kvs_has(const struct kvs *k, const char *key)
{
	for (size_t i = 0; i < k->n; i++)
		if (strcmp(k->kv[i].key, key) == 0)
			return true;
	return false;
}

static AnyValue *kvs_add(struct kvs *k, const char *key)
{
	size_t i = k->n++;

	opentelemetry__proto__common__v1__key_value__init(&k->kv[i]);
	opentelemetry__proto__common__v1__any_value__init(&k->val[i]);
	k->kv[i].key = (char *)key;
	k->kv[i].value = &k->val[i];
	k->ptr[i] = &k->kv[i];
	return &k->val[i];
}

static void kvs_str(struct kvs *k, const char *key, const char *v)
{
	AnyValue *a;

	if (kvs_has(k, key) || k->n == MAX_RES_ATTRS)
		return;
	a = kvs_add(k, key);
	a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	a->string_value = (char *)v;
}

static void kvs_int(struct kvs *k, const char *key, int64_t v)
{
	AnyValue *a;

	if (kvs_has(k, key) || k->n == MAX_RES_ATTRS)
		return;
	a = kvs_add(k, key);
	a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	a->int_value = v;
}

static uint64_t now_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int opal_otlp_logs_encode(const struct opal_otlp_logs_record *r,
			  const struct opal_otlp_logs_options *o, uint8_t **buf, size_t *len)
{
	static const struct opal_otlp_logs_options none;
	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest req =
		OPENTELEMETRY__PROTO__COLLECTOR__LOGS__V1__EXPORT_LOGS_SERVICE_REQUEST__INIT;
	Opentelemetry__Proto__Logs__V1__ResourceLogs rl =
		OPENTELEMETRY__PROTO__LOGS__V1__RESOURCE_LOGS__INIT, *rlp = &rl;
	Opentelemetry__Proto__Logs__V1__ScopeLogs sl =
		OPENTELEMETRY__PROTO__LOGS__V1__SCOPE_LOGS__INIT, *slp = &sl;
	Opentelemetry__Proto__Logs__V1__LogRecord rec =
		OPENTELEMETRY__PROTO__LOGS__V1__LOG_RECORD__INIT, *recp = &rec;
	Opentelemetry__Proto__Resource__V1__Resource res =
		OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	Opentelemetry__Proto__Common__V1__InstrumentationScope scope =
		OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	AnyValue body = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	struct kvs *ra, *la;
	char *b64;
	int err = 0;

	if (!o)
		o = &none;
	if (!r->pprof_gz || !r->period_ns)
		return -EINVAL;
	if (r->len > OPAL_OTLP_LOGS_MAX_PAYLOAD)
		return -E2BIG;
	if (o->n_resource_attributes > OPAL_OTLP_MAX_RES_ATTRS)
		return -E2BIG;
	ra = calloc(1, sizeof(*ra));
	la = calloc(1, sizeof(*la));
	b64 = malloc(4 * ((r->len + 2) / 3) + 1);
	if (!ra || !la || !b64) {
		err = -ENOMEM;
		goto out;
	}
	EVP_EncodeBlock((unsigned char *)b64, r->pprof_gz, (int)r->len);

	/* Resource: explicit service name, then the list, then fallbacks. */
	if (o->service_name && *o->service_name)
		kvs_str(ra, "service.name", o->service_name);
	for (size_t i = 0; i < o->n_resource_attributes; i++)
		kvs_str(ra, o->resource_attributes[i].key, o->resource_attributes[i].value);
	kvs_str(ra, "service.name", "unknown_service:opal-symbolizer");
	if (o->host_name && *o->host_name)
		kvs_str(ra, "host.name", o->host_name);
	res.attributes = ra->ptr;
	res.n_attributes = ra->n;

	kvs_str(la, OPAL_LOGS_ATTR_FORMAT, "pprof");
	kvs_str(la, OPAL_LOGS_ATTR_COMPRESSION, "gzip");
	kvs_str(la, OPAL_LOGS_ATTR_ENCODING, "base64");
	kvs_str(la, OPAL_LOGS_ATTR_TYPE, "cpu");
	kvs_int(la, OPAL_LOGS_ATTR_PERIOD, (int64_t)r->period_ns);
	if (r->duration_ns)
		kvs_int(la, OPAL_LOGS_ATTR_DURATION, (int64_t)r->duration_ns);
	if (r->samples)
		kvs_int(la, OPAL_LOGS_ATTR_SAMPLES, (int64_t)r->samples);

	body.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	body.string_value = b64;
	rec.time_unix_nano = r->start_unix_ns;
	rec.observed_time_unix_nano = now_unix_ns();
	rec.severity_number = OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_INFO;
	rec.severity_text = "INFO";
	rec.event_name = OPAL_LOGS_EVENT_NAME;
	rec.body = &body;
	rec.attributes = la->ptr;
	rec.n_attributes = la->n;

	scope.name = "opal";
	if (o->scope_version)
		scope.version = (char *)o->scope_version;
	sl.scope = &scope;
	sl.log_records = &recp;
	sl.n_log_records = 1;
	rl.resource = &res;
	rl.scope_logs = &slp;
	rl.n_scope_logs = 1;
	req.resource_logs = &rlp;
	req.n_resource_logs = 1;

	*len = opentelemetry__proto__collector__logs__v1__export_logs_service_request__get_packed_size(&req);
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		err = -ENOMEM;
		goto out;
	}
	opentelemetry__proto__collector__logs__v1__export_logs_service_request__pack(&req, *buf);
out:
	free(ra);
	free(la);
	free(b64);
	return err;
}

int opal_otlp_logs_encode_profile(const struct opal_profile *p,
				  const struct opal_otlp_logs_options *o, uint8_t **buf,
				  size_t *len)
{
	struct opal_otlp_logs_record r = { 0 };
	uint8_t *gz;
	size_t gz_len;
	uint64_t start, end;
	int err = opal_pprof_encode(p, true, &gz, &gz_len);

	if (err < 0)
		return err;
	opal_profile_time(p, &start, &end);
	r.pprof_gz = gz;
	r.len = gz_len;
	r.start_unix_ns = start;
	r.duration_ns = end > start ? end - start : 0;
	r.period_ns = opal_profile_period_ns(p);
	r.samples = opal_profile_sample_count(p);
	err = opal_otlp_logs_encode(&r, o, buf, len);
	free(gz);
	return err;
}
