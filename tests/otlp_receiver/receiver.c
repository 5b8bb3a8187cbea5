/* Test OTLP/HTTP receiver (receiver.h): libmicrohttpd with one thread per
 * connection, so a "slow" step delays only its own connection. */
#include "receiver.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

int rcv_gunzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, size_t max);

struct otlp_receiver {
	struct MHD_Daemon *mhd;
	uint16_t port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct timespec t0;
	struct rcv_step steps[RCV_MAX_STEPS];
	size_t n_steps, next_step;
	struct rcv_request *reqs;   /* RCV_MAX_REQUESTS */
	size_t n_reqs;
	FILE *log;
	bool stopping;              /* otlp_receiver_stop: "slow" steps end at once */
	char *save_dir;             /* NULL: bodies are not kept */
	size_t n_saved;
};

/* Per-connection upload state. */
struct upload {
	uint8_t *body;
	size_t len, cap;
	bool too_big;
};

static double ms_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- script ------------------------------------------------------------------ */

static int parse_step(char *tok, struct rcv_step *s)
{
	char *save, *part = strtok_r(tok, ":", &save), *end;

	*s = (struct rcv_step){ .status = 200, .retry_after_s = -1 };
	if (!part)
		return -EINVAL;
	if (strcmp(part, "ok") == 0) {
		s->status = 200;
	} else if (strcmp(part, "partial") == 0) {
		s->rejected = 1;
	} else if (strncmp(part, "slow=", 5) == 0) {
		s->delay_ms = (int)strtol(part + 5, &end, 10);
		if (*end || s->delay_ms < 0)
			return -EINVAL;
	} else {
		s->status = (int)strtol(part, &end, 10);
		if (*end || s->status < 100 || s->status > 599)
			return -EINVAL;
	}
	while ((part = strtok_r(NULL, ":", &save))) {
		char *eq = strchr(part, '=');
		if (!eq)
			return -EINVAL;
		*eq = '\0';
		long v = strtol(eq + 1, &end, 10);
		if (*end || v < 0 || v > 100000000)
			return -EINVAL;
		if (strcmp(part, "ra") == 0)
			s->retry_after_s = (int)v;
		else if (strcmp(part, "date") == 0)
			s->retry_after_s = (int)v, s->retry_after_date = true;
		else if (strcmp(part, "delay") == 0)
			s->delay_ms = (int)v;
		else if (strcmp(part, "rejected") == 0)
			s->rejected = v;
		else
			return -EINVAL;
	}
	return 0;
}

int otlp_receiver_script(struct otlp_receiver *r, const char *spec)
{
	struct rcv_step steps[RCV_MAX_STEPS];
	size_t n = 0;
	char *copy = strdup(spec ? spec : ""), *save, *tok;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == RCV_MAX_STEPS || parse_step(tok, &steps[n]) < 0) {
			free(copy);
			return -EINVAL;
		}
		n++;
	}
	free(copy);
	pthread_mutex_lock(&r->mu);
	memcpy(r->steps, steps, n * sizeof(*steps));
	r->n_steps = n;
	r->next_step = 0;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static void clear_locked(struct otlp_receiver *r)
{
	for (size_t i = 0; i < r->n_reqs; i++)
		rcv_summary_free(&r->reqs[i].sum);
	r->n_reqs = 0;
	r->n_steps = r->next_step = 0;
}

void otlp_receiver_reset(struct otlp_receiver *r)
{
	pthread_mutex_lock(&r->mu);
	clear_locked(r);
	pthread_mutex_unlock(&r->mu);
}

/* ---- records ----------------------------------------------------------------- */

static json_t *record_json(const struct rcv_request *q)
{
	json_t *o = json_object(), *pids = json_array(), *names = json_array();

	for (size_t i = 0; i < q->sum.n_pids; i++)
		json_array_append_new(pids, json_integer(q->sum.pids[i]));
	for (size_t i = 0; i < q->sum.n_names; i++)
		json_array_append_new(names, json_string(q->sum.names[i]));
	json_object_set_new(o, "t_ms", json_real(q->t_ms));
	json_object_set_new(o, "t_done_ms", json_real(q->t_done_ms));
	json_object_set_new(o, "path", json_string(q->path));
	json_object_set_new(o, "content_type", json_string(q->content_type));
	json_object_set_new(o, "content_encoding", json_string(q->content_encoding));
	json_object_set_new(o, "x_opal_test", json_string(q->test_header));
	json_object_set_new(o, "body_len", json_integer((json_int_t)q->body_len));
	char hash[17];
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)q->body_hash);
	json_object_set_new(o, "hash", json_string(hash));
	json_object_set_new(o, "status", json_integer(q->status));
	json_object_set_new(o, "retry_after_s", json_integer(q->retry_after_s));
	json_object_set_new(o, "valid", json_boolean(q->valid));
	json_object_set_new(o, "error", json_string(q->error));
	json_object_set_new(o, "kind", json_string(q->sum.kind));
	json_object_set_new(o, "resources", json_integer((json_int_t)q->sum.resources));
	json_object_set_new(o, "samples", json_integer((json_int_t)q->sum.samples));
	json_object_set_new(o, "off_cpu_samples",
			    json_integer((json_int_t)q->sum.off_cpu_samples));
	json_object_set_new(o, "off_cpu_ns", json_integer((json_int_t)q->sum.off_cpu_ns));
	json_object_set_new(o, "log_records", json_integer((json_int_t)q->sum.log_records));
	json_object_set_new(o, "period", json_integer((json_int_t)q->sum.period));
	json_object_set_new(o, "mappings_without_build_id",
			    json_integer((json_int_t)q->sum.mappings_without_id));
	json_object_set_new(o, "pids", pids);
	json_object_set_new(o, "functions", names);
	return o;
}

static void record(struct otlp_receiver *r, struct rcv_request *q)
{
	pthread_mutex_lock(&r->mu);
	if (r->log) {
		json_t *o = record_json(q);
		json_dumpf(o, r->log, JSON_COMPACT);
		fputc('\n', r->log);
		fflush(r->log);
		json_decref(o);
	}
	if (r->n_reqs < RCV_MAX_REQUESTS) {
		r->reqs[r->n_reqs++] = *q;
		/* the names now belong to the record */
		q->sum.names = NULL;
		q->sum.n_names = q->sum.cap_names = 0;
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	rcv_summary_free(&q->sum);
}

size_t otlp_receiver_requests(struct otlp_receiver *r, struct rcv_request *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&r->mu);
	n = r->n_reqs;
	memcpy(out, r->reqs, (n < max ? n : max) * sizeof(*out));
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* CLOCK_MONOTONIC (the clock of r->cv) `ms` milliseconds from now. */
static struct timespec deadline_in(int ms)
{
	struct timespec dl;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	return dl;
}

size_t otlp_receiver_wait(struct otlp_receiver *r, size_t n, int timeout_ms)
{
	struct timespec dl = deadline_in(timeout_ms);
	size_t got;

	pthread_mutex_lock(&r->mu);
	while (r->n_reqs < n && pthread_cond_timedwait(&r->cv, &r->mu, &dl) == 0)
		;
	got = r->n_reqs;
	pthread_mutex_unlock(&r->mu);
	return got;
}

static uint64_t fnv1a(const uint8_t *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* ---- HTTP --------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, int status, const void *body,
			     size_t len, const char *type)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	if (type)
		MHD_add_response_header(resp, "Content-Type", type);
	ret = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result control(struct otlp_receiver *r, struct MHD_Connection *conn,
			       const char *url, const char *method)
{
	if (strcmp(url, "/requests") == 0 && strcmp(method, "GET") == 0) {
		json_t *arr = json_array();
		pthread_mutex_lock(&r->mu);
		for (size_t i = 0; i < r->n_reqs; i++)
			json_array_append_new(arr, record_json(&r->reqs[i]));
		pthread_mutex_unlock(&r->mu);
		char *s = json_dumps(arr, JSON_COMPACT);
		json_decref(arr);
		enum MHD_Result ret = reply(conn, 200, s ? s : "[]", s ? strlen(s) : 2,
					    "application/json");
		free(s);
		return ret;
	}
	if (strcmp(url, "/control") == 0 && strcmp(method, "POST") == 0) {
		const char *spec = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "script");
		if (otlp_receiver_script(r, spec ? spec : "") < 0)
			return reply(conn, 400, "bad script\n", 11, "text/plain");
		return reply(conn, 200, "ok\n", 3, "text/plain");
	}
	if (strcmp(url, "/reset") == 0 && strcmp(method, "POST") == 0) {
		otlp_receiver_reset(r);
		return reply(conn, 200, "ok\n", 3, "text/plain");
	}
	return reply(conn, 404, "not found\n", 10, "text/plain");
}

static void copy_header(struct MHD_Connection *conn, const char *name, char *dst, size_t n)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
	snprintf(dst, n, "%s", v ? v : "");
}

/* Serialized Export*ServiceResponse, with partial_success when asked. */
static size_t response_body(bool logs, int64_t rejected, uint8_t *buf, size_t cap)
{
	static char msg[] = "opal test receiver: rejected on purpose";
	size_t n;

	if (logs) {
		Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceResponse resp =
			OPENTELEMETRY__PROTO__COLLECTOR__LOGS__V1__EXPORT_LOGS_SERVICE_RESPONSE__INIT;
		Opentelemetry__Proto__Collector__Logs__V1__ExportLogsPartialSuccess ps =
			OPENTELEMETRY__PROTO__COLLECTOR__LOGS__V1__EXPORT_LOGS_PARTIAL_SUCCESS__INIT;
		if (rejected > 0) {
			ps.rejected_log_records = rejected;
			ps.error_message = msg;
			resp.partial_success = &ps;
		}
		n = opentelemetry__proto__collector__logs__v1__export_logs_service_response__get_packed_size(&resp);
		if (n <= cap)
			opentelemetry__proto__collector__logs__v1__export_logs_service_response__pack(&resp, buf);
	} else {
		Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse resp =
			OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
		Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess ps =
			OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
		if (rejected > 0) {
			ps.rejected_profiles = rejected;
			ps.error_message = msg;
			resp.partial_success = &ps;
		}
		n = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__get_packed_size(&resp);
		if (n <= cap)
			opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__pack(&resp, buf);
	}
	return n <= cap ? n : 0;
}

/* Keeps the uncompressed body as SAVE_DIR/NNNN.pb, numbered from 0 in
 * arrival order. */
static void save_body(struct otlp_receiver *r, const uint8_t *b, size_t n)
{
	char path[4200];
	FILE *f;

	pthread_mutex_lock(&r->mu);
	size_t k = r->n_saved++;
	pthread_mutex_unlock(&r->mu);
	if (!r->save_dir)
		return;
	snprintf(path, sizeof(path), "%s/%04zu.pb", r->save_dir, k);
	if (!(f = fopen(path, "w")) || fwrite(b, 1, n, f) != n || fclose(f) != 0)
		fprintf(stderr, "otlp-receiver: cannot save %s\n", path);
}

static enum MHD_Result handle_otlp(struct otlp_receiver *r, struct MHD_Connection *conn,
				   const char *url, struct upload *up)
{
	bool logs = strcmp(url, "/v1/logs") == 0;
	struct rcv_request q = { .retry_after_s = -1 };
	struct rcv_step step = { .status = 200, .retry_after_s = -1 };
	uint8_t *plain = NULL, out[512];
	size_t plain_len = 0, out_len;

	q.t_ms = ms_since(&r->t0);
	snprintf(q.path, sizeof(q.path), "%s", url);
	copy_header(conn, "Content-Type", q.content_type, sizeof(q.content_type));
	copy_header(conn, "Content-Encoding", q.content_encoding, sizeof(q.content_encoding));
	copy_header(conn, "x-opal-test", q.test_header, sizeof(q.test_header));
	q.body_len = up->len;

	/* Verdict on the request itself. */
	if (up->too_big) {
		snprintf(q.error, sizeof(q.error), "body larger than %u bytes", RCV_MAX_BODY);
	} else if (strcmp(q.content_type, "application/x-protobuf") != 0) {
		snprintf(q.error, sizeof(q.error), "Content-Type is '%s'", q.content_type);
	} else if (q.content_encoding[0] && strcasecmp(q.content_encoding, "gzip") != 0) {
		snprintf(q.error, sizeof(q.error), "Content-Encoding '%s'", q.content_encoding);
	} else if (q.content_encoding[0] &&
		   rcv_gunzip(up->body, up->len, &plain, &plain_len, RCV_MAX_PLAIN) < 0) {
		snprintf(q.error, sizeof(q.error), "body does not gunzip");
	} else {
		const uint8_t *b = q.content_encoding[0] ? plain : up->body;
		size_t n = q.content_encoding[0] ? plain_len : up->len;
		q.body_hash = fnv1a(b, n);
		save_body(r, b, n);
		q.valid = logs ? rcv_check_logs(b, n, &q.sum, q.error, sizeof(q.error))
			       : rcv_check_profiles(b, n, &q.sum, q.error, sizeof(q.error));
	}
	free(plain);

	pthread_mutex_lock(&r->mu);
	if (r->next_step < r->n_steps)
		step = r->steps[r->next_step++];
	/* A "slow" step holds its answer, but not the receiver's stop: the
	 * client under test has given up or been stopped by then. */
	if (step.delay_ms) {
		struct timespec dl = deadline_in(step.delay_ms);
		while (!r->stopping && pthread_cond_timedwait(&r->cv, &r->mu, &dl) == 0)
			;
	}
	pthread_mutex_unlock(&r->mu);
	q.status = step.status;
	q.retry_after_s = step.retry_after_s;

	out_len = step.status == 200 ? response_body(logs, step.rejected, out, sizeof(out)) : 0;
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(out_len, out, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret = MHD_NO;
	if (resp) {
		MHD_add_response_header(resp, "Content-Type", "application/x-protobuf");
		if (step.retry_after_s >= 0) {
			char v[64];
			if (step.retry_after_date) {
				time_t t = time(NULL) + step.retry_after_s;
				struct tm tm;
				gmtime_r(&t, &tm);
				strftime(v, sizeof(v), "%a, %d %b %Y %H:%M:%S GMT", &tm);
			} else {
				snprintf(v, sizeof(v), "%d", step.retry_after_s);
			}
			MHD_add_response_header(resp, "Retry-After", v);
		}
		ret = MHD_queue_response(conn, (unsigned)step.status, resp);
		MHD_destroy_response(resp);
	}
	q.t_done_ms = ms_since(&r->t0);
	record(r, &q);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct otlp_receiver *r = cls;
	struct upload *up = *con_cls;
	bool otlp = strcmp(method, "POST") == 0 &&
		    (strcmp(url, "/v1development/profiles") == 0 || strcmp(url, "/v1/logs") == 0);

	if (!up) {
		up = calloc(1, sizeof(*up));
		if (!up)
			return MHD_NO;
		*con_cls = up;
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (up->len + *upload_data_size > RCV_MAX_BODY) {
			up->too_big = true;
		} else {
			if (up->len + *upload_data_size > up->cap) {
				size_t cap = (up->len + *upload_data_size) * 2;
				uint8_t *b = realloc(up->body, cap);
				if (!b)
					return MHD_NO;
				up->body = b;
				up->cap = cap;
			}
			memcpy(up->body + up->len, upload_data, *upload_data_size);
			up->len += *upload_data_size;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	return otlp ? handle_otlp(r, conn, url, up) : control(r, conn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct upload *up = *con_cls;

	if (up) {
		free(up->body);
		free(up);
		*con_cls = NULL;
	}
}

struct otlp_receiver *otlp_receiver_start(uint16_t port, const char *log_path)
{
	struct otlp_receiver *r = calloc(1, sizeof(*r));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	pthread_condattr_t ca;

	if (!r || !(r->reqs = calloc(RCV_MAX_REQUESTS, sizeof(*r->reqs)))) {
		fprintf(stderr, "otlp-receiver: out of memory\n");
		free(r);
		return NULL;
	}
	if (log_path && !(r->log = fopen(log_path, "a"))) {
		fprintf(stderr, "otlp-receiver: %s: %s\n", log_path, strerror(errno));
		free(r->reqs);
		free(r);
		return NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	r->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					  MHD_USE_ERROR_LOG,
				  port, NULL, NULL, on_request, r, MHD_OPTION_SOCK_ADDR, &sa,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, r,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
	if (!r->mhd) {
		fprintf(stderr, "otlp-receiver: cannot listen on 127.0.0.1:%u\n", port);
		if (r->log)
			fclose(r->log);
		free(r->reqs);
		free(r);
		return NULL;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(r->mhd, MHD_DAEMON_INFO_BIND_PORT);
	r->port = info ? info->port : port;
	return r;
}

int otlp_receiver_save_dir(struct otlp_receiver *r, const char *dir)
{
	free(r->save_dir);
	r->save_dir = dir ? strdup(dir) : NULL;
	return !dir || r->save_dir ? 0 : -ENOMEM;
}

uint16_t otlp_receiver_port(const struct otlp_receiver *r)
{
	return r->port;
}

void otlp_receiver_stop(struct otlp_receiver *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stopping = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	MHD_stop_daemon(r->mhd);
	clear_locked(r);
	if (r->log)
		fclose(r->log);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r->reqs);
	free(r->save_dir);
	free(r);
}
