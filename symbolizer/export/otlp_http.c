/* OTLP/HTTP client and exporter (otlp_http.h). */
#include "export/otlp_http.h"
#include "base/gzip.h"
#include "profile/otlp_logs.h"
#include "profile/profile.h"
#include "shared/log.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_RETRY_AFTER_S 86400

/* ---- configuration helpers ------------------------------------------------ */

static bool is_http_url(const char *u)
{
	return strncasecmp(u, "http://", 7) == 0 || strncasecmp(u, "https://", 8) == 0;
}

static int with_path(const char *base, const char *path, char **url)
{
	size_t n = strlen(base);

	if (n && base[n - 1] == '/')
		n--;
	if (asprintf(url, "%.*s%s", (int)n, base, path) < 0) {
		*url = NULL;
		return -ENOMEM;
	}
	return 0;
}

static const char *env_set(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

int opal_otlp_http_resolve_url(enum opal_otlp_signal sig, const char *configured,
			       enum opal_config_source src, char **url)
{
	const char *path = sig == OPAL_OTLP_SIGNAL_LOGS ? OPAL_OTLP_LOGS_PATH
							: OPAL_OTLP_PROFILES_PATH;
	const char *signal_env = env_set(sig == OPAL_OTLP_SIGNAL_LOGS
						 ? "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
						 : "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
	const char *base_env = env_set("OTEL_EXPORTER_OTLP_ENDPOINT");
	const char *chosen;
	int err;

	if (configured && !*configured)
		configured = NULL;
	*url = NULL;
	if (configured && src == OPAL_SRC_FLAG)
		err = with_path(chosen = configured, path, url);
	else if (signal_env)
		err = (*url = strdup(chosen = signal_env)) ? 0 : -ENOMEM;
	else if (base_env)
		err = with_path(chosen = base_env, path, url);
	else if (configured)
		err = with_path(chosen = configured, path, url);
	else
		return 0;
	if (err)
		return err;
	if (!is_http_url(chosen)) {
		opal_err("OTLP endpoint '%s' is not an http:// or https:// URL", chosen);
		free(*url);
		*url = NULL;
		return -EINVAL;
	}
	return 0;
}

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s))
			return false;
	return true;
}

static bool is_header_value(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
			return false;
	return true;
}

int opal_otlp_http_parse_headers(const char *s, struct opal_otlp_kv **out, size_t *n)
{
	int err = opal_otlp_parse_resource_attributes(s, out, n);

	if (err < 0)
		return err;
	if (*n > OPAL_OTLP_MAX_HEADERS) {
		opal_otlp_kv_free(*out, *n);
		*out = NULL;
		*n = 0;
		return -E2BIG;
	}
	for (size_t i = 0; i < *n; i++) {
		if (!is_token((*out)[i].key) || !is_header_value((*out)[i].value)) {
			opal_otlp_kv_free(*out, *n);
			*out = NULL;
			*n = 0;
			return -EINVAL;
		}
	}
	return 0;
}

int64_t opal_otlp_http_parse_retry_after(const char *v, time_t now)
{
	char buf[128];
	size_t n;
	const char *p;

	while (*v == ' ' || *v == '\t')
		v++;
	n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
		n--;
	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, v, n);
	buf[n] = '\0';
	for (p = buf; *p >= '0' && *p <= '9'; p++)
		;
	if (!*p) {
		/* delay-seconds; long digit strings saturate at the cap */
		if (n > 9)
			return (int64_t)MAX_RETRY_AFTER_S * 1000;
		long s = strtol(buf, NULL, 10);
		return (int64_t)(s > MAX_RETRY_AFTER_S ? MAX_RETRY_AFTER_S : s) * 1000;
	}
	time_t t = curl_getdate(buf, NULL);
	if (t == (time_t)-1)
		return -1;
	if (t <= now)
		return 0;
	if (t - now > MAX_RETRY_AFTER_S)
		return (int64_t)MAX_RETRY_AFTER_S * 1000;
	return (int64_t)(t - now) * 1000;
}

/* ---- client --------------------------------------------------------------- */

struct opal_otlp_http {
	struct opal_otlp_http_config cfg;
	char *url, *user_agent;
	CURL *curl;
	struct curl_slist *headers;
	/* per attempt */
	uint8_t *resp;
	size_t resp_len;
	bool resp_truncated;
	char retry_after[128];
	const atomic_bool *cancel;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct opal_otlp_http *h = arg;
	size_t n = size * nmemb, room = OPAL_OTLP_MAX_RESPONSE - h->resp_len;

	if (n > room) {
		h->resp_truncated = true;
		n = room;
	}
	memcpy(h->resp + h->resp_len, data, n);
	h->resp_len += n;
	return size * nmemb;   /* the excess is read and discarded */
}

static size_t on_header(char *data, size_t size, size_t nitems, void *arg)
{
	struct opal_otlp_http *h = arg;
	size_t n = size * nitems;
	static const char name[] = "retry-after:";

	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0)
		h->retry_after[0] = '\0';   /* a new response (after 1xx): forget the old one */
	if (n > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		size_t vlen = n - (sizeof(name) - 1);
		const char *v = data + sizeof(name) - 1;
		while (vlen && (*v == ' ' || *v == '\t'))
			v++, vlen--;
		while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
			vlen--;
		if (vlen >= sizeof(h->retry_after))
			vlen = 0;   /* longer than any valid value: ignore it */
		memcpy(h->retry_after, v, vlen);
		h->retry_after[vlen] = '\0';
	}
	return n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct opal_otlp_http *h = arg;

	return h->cancel && atomic_load(h->cancel) ? 1 : 0;
}

void opal_otlp_http_free(struct opal_otlp_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	curl_slist_free_all(h->headers);
	free(h->resp);
	free(h->url);
	free(h->user_agent);
	free(h);
}

static int add_header(struct curl_slist **list, const char *fmt, const char *a, const char *b)
{
	char *line;
	struct curl_slist *l;

	if (asprintf(&line, fmt, a, b) < 0)
		return -ENOMEM;
	l = curl_slist_append(*list, line);
	free(line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

int opal_otlp_http_new(const struct opal_otlp_http_config *cfg, struct opal_otlp_http **out)
{
	struct opal_otlp_http *h;
	int err = 0;

	if (!cfg->url || !cfg->timeout_ms || !is_http_url(cfg->url))
		return -EINVAL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->cfg = *cfg;
	h->url = strdup(cfg->url);
	h->user_agent = strdup(cfg->user_agent ? cfg->user_agent : "opal");
	h->resp = malloc(OPAL_OTLP_MAX_RESPONSE);
	h->curl = curl_easy_init();
	if (!h->url || !h->user_agent || !h->resp || !h->curl)
		err = -ENOMEM;
	/* Expect: (empty) turns off "100-continue", which costs a round trip. */
	if (!err)
		err = add_header(&h->headers, "%s%s", "Content-Type: application/x-protobuf", "");
	if (!err && cfg->gzip)
		err = add_header(&h->headers, "%s%s", "Content-Encoding: gzip", "");
	if (!err)
		err = add_header(&h->headers, "%s%s", "Expect:", "");
	for (size_t i = 0; !err && i < cfg->n_headers; i++)
		err = add_header(&h->headers, "%s: %s", cfg->headers[i].key, cfg->headers[i].value);
	if (err) {
		opal_otlp_http_free(h);
		return err;
	}
	h->cfg.url = h->url;
	h->cfg.headers = NULL;    /* copied into h->headers */
	h->cfg.user_agent = h->user_agent;
	CURL *c = h->curl;
	curl_easy_setopt(c, CURLOPT_URL, h->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
	curl_easy_setopt(c, CURLOPT_USERAGENT, h->user_agent);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	*out = h;
	return 0;
}

/* Failures worth another attempt: the server was not reached or did not
 * answer in time. */
static bool curl_retryable(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

/* Reads partial_success from a 2xx response body; an undecodable or empty
 * body counts as full success (the spec lets servers omit it). */
static void read_partial(struct opal_otlp_http *h, struct opal_otlp_http_result *res)
{
	if (h->resp_len == 0 || h->resp_truncated)
		return;
	if (h->cfg.signal == OPAL_OTLP_SIGNAL_LOGS) {
		Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceResponse *r =
			opentelemetry__proto__collector__logs__v1__export_logs_service_response__unpack(
				NULL, h->resp_len, h->resp);
		if (!r)
			return;
		if (r->partial_success) {
			res->rejected = r->partial_success->rejected_log_records;
			snprintf(res->message, sizeof(res->message), "%s",
				 r->partial_success->error_message ? r->partial_success->error_message : "");
		}
		opentelemetry__proto__collector__logs__v1__export_logs_service_response__free_unpacked(r, NULL);
	} else {
		Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *r =
			opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
				NULL, h->resp_len, h->resp);
		if (!r)
			return;
		if (r->partial_success) {
			res->rejected = r->partial_success->rejected_profiles;
			snprintf(res->message, sizeof(res->message), "%s",
				 r->partial_success->error_message ? r->partial_success->error_message : "");
		}
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(r, NULL);
	}
	if (res->rejected > 0 || res->message[0])
		res->status = OPAL_EXPORT_PARTIAL;
}

enum opal_export_status opal_otlp_http_post(struct opal_otlp_http *h, const uint8_t *body,
					    size_t len, const atomic_bool *cancel,
					    struct opal_otlp_http_result *res)
{
	CURL *c = h->curl;
	CURLcode rc;

	*res = (struct opal_otlp_http_result){ .status = OPAL_EXPORT_FAILED, .retry_after_ms = -1 };
	h->resp_len = 0;
	h->resp_truncated = false;
	h->retry_after[0] = '\0';
	h->cancel = cancel;
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	rc = curl_easy_perform(c);
	h->cancel = NULL;
	if (rc != CURLE_OK) {
		res->status = curl_retryable(rc) ? OPAL_EXPORT_RETRY : OPAL_EXPORT_FAILED;
		snprintf(res->message, sizeof(res->message), "%s",
			 rc == CURLE_ABORTED_BY_CALLBACK ? "cancelled at shutdown"
							 : curl_easy_strerror(rc));
		opal_warn("OTLP export to %s: %s%s", h->url, res->message,
			  res->status == OPAL_EXPORT_RETRY ? "; will retry" : "");
		return res->status;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res->http_status);
	if (h->retry_after[0])
		res->retry_after_ms = opal_otlp_http_parse_retry_after(h->retry_after, time(NULL));
	if (res->http_status >= 200 && res->http_status < 300) {
		res->status = OPAL_EXPORT_OK;
		read_partial(h, res);
		if (res->status == OPAL_EXPORT_PARTIAL)
			opal_warn("OTLP export to %s: partial success: %" PRId64 " rejected: %s "
				  "(not retried)", h->url, res->rejected,
				  res->message[0] ? res->message : "no message");
		return res->status;
	}
	switch (res->http_status) {
	case 429: case 502: case 503: case 504:
		res->status = OPAL_EXPORT_RETRY;
		break;
	default:
		res->status = OPAL_EXPORT_FAILED;
		break;
	}
	snprintf(res->message, sizeof(res->message), "HTTP %ld", res->http_status);
	if (res->status == OPAL_EXPORT_RETRY)
		opal_warn("OTLP export to %s: HTTP %ld%s%s; will retry", h->url, res->http_status,
			  h->retry_after[0] ? ", Retry-After: " : "", h->retry_after);
	else
		opal_err("OTLP export to %s: HTTP %ld; request dropped (not retryable)", h->url,
			 res->http_status);
	return res->status;
}

/* ---- exporter ------------------------------------------------------------- */

struct opal_otlp_exporter {
	struct opal_otlp_http *http;
	struct opal_export_queue *q;
	bool gzip;
	enum opal_otlp_signal signal;
};

static int exporter_prepare(void *arg, uint8_t **data, size_t *len)
{
	struct opal_otlp_exporter *e = arg;
	uint8_t *z;
	size_t zlen;
	int err;

	if (!e->gzip)
		return 0;
	if ((err = opal_gzip(*data, *len, &z, &zlen)) < 0)
		return err;
	free(*data);
	*data = z;
	*len = zlen;
	return 0;
}

static enum opal_export_status exporter_deliver(void *arg, const uint8_t *data, size_t len,
						const atomic_bool *cancel, int64_t *retry_after_ms)
{
	struct opal_otlp_exporter *e = arg;
	struct opal_otlp_http_result res;
	enum opal_export_status s = opal_otlp_http_post(e->http, data, len, cancel, &res);

	*retry_after_ms = res.retry_after_ms;
	return s;
}

int opal_otlp_exporter_start(const struct opal_otlp_http_config *http,
			     const struct opal_export_queue_config *queue,
			     struct opal_otlp_exporter **out)
{
	struct opal_otlp_exporter *e = calloc(1, sizeof(*e));
	struct opal_export_queue_config qc = *queue;
	int err;

	if (!e)
		return -ENOMEM;
	e->gzip = http->gzip;
	e->signal = http->signal;
	if ((err = opal_otlp_http_new(http, &e->http)) < 0) {
		free(e);
		return err;
	}
	qc.prepare = exporter_prepare;
	qc.deliver = exporter_deliver;
	qc.arg = e;
	if ((err = opal_export_queue_start(&qc, &e->q)) < 0) {
		opal_otlp_http_free(e->http);
		free(e);
		return err;
	}
	*out = e;
	return 0;
}

int opal_otlp_exporter_push(struct opal_otlp_exporter *e, uint8_t *body, size_t len)
{
	return opal_export_queue_push(e->q, body, len);
}

int opal_otlp_exporter_push_profile(struct opal_otlp_exporter *e, const struct opal_profile *p,
				    const struct opal_otlp_options *po,
				    const struct opal_otlp_logs_options *lo)
{
	uint8_t *buf;
	size_t len;
	int err;

	if (opal_profile_sample_count(p) == 0)
		return 0;   /* an interval without samples: nothing to send */
	err = e->signal == OPAL_OTLP_SIGNAL_LOGS ? opal_otlp_logs_encode_profile(p, lo, &buf, &len)
						 : opal_otlp_encode(p, po, &buf, &len);

	if (err < 0) {
		opal_err("OTLP %s export: encoding the interval failed: %s",
			 e->signal == OPAL_OTLP_SIGNAL_LOGS ? "logs" : "profiles", strerror(-err));
		return err;
	}
	return opal_export_queue_push(e->q, buf, len);
}

void opal_otlp_exporter_stats(struct opal_otlp_exporter *e, struct opal_export_stats *out)
{
	opal_export_queue_stats(e->q, out);
}

void opal_otlp_exporter_stop(struct opal_otlp_exporter *e, unsigned flush_ms,
			     struct opal_export_stats *final)
{
	if (!e)
		return;
	opal_export_queue_stop(e->q, flush_ms, final);
	opal_otlp_http_free(e->http);
	free(e);
}
