/* Tests of the HTTP API (symbolizer/http/http_server.h) over a real loopback
 * socket with libcurl: authentication, the upload flow and its bad cases,
 * body limits, remote symbolization, the debuginfod protocol, /healthz
 * and /metrics (docs/http-api.md). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#include "debuginfo_helpers.h"
#include "symbolizer/base/metrics.h"
#include "symbolizer/debuginfo/debuginfo_sources.h"
#include "symbolizer/export/exporters.h"
#include "symbolizer/export/otlp_http.h"
#include "symbolizer/http/http_server.h"

#define TOKEN "s3cret-token"

struct env {
	char dir[PATH_MAX];
	struct opal_debuginfo_store *st;
	struct opal_symbolizer *s;
	struct opal_http_server *h;
	char base[64];
	char full_id[OPAL_DI_ID_HEX_MAX + 1];
};

struct reply {
	long status;
	char *body;
	size_t len;
	char maxsize_hdr[64];
	char www_auth[64];
	char allow[64];
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct reply *r = arg;
	r->body = realloc(r->body, r->len + sz * n + 1);
	memcpy(r->body + r->len, p, sz * n);
	r->len += sz * n;
	r->body[r->len] = '\0';
	return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = sz * n;
	if (len > 19 && !strncasecmp(p, "X-DEBUGINFOD-SIZE: ", 19))
		snprintf(r->maxsize_hdr, sizeof(r->maxsize_hdr), "%.*s", (int)(len - 21), p + 19);
	if (len > 18 && !strncasecmp(p, "WWW-Authenticate: ", 18))
		snprintf(r->www_auth, sizeof(r->www_auth), "%.*s", (int)(len - 20), p + 18);
	if (len > 7 && !strncasecmp(p, "Allow: ", 7))
		snprintf(r->allow, sizeof(r->allow), "%.*s", (int)(len - 9), p + 7);
	return len;
}

/* One request. `auth`: NULL none, else the token to send. `extra`: one
 * more header or NULL. */
static struct reply req(struct env *e, const char *method, const char *path, const void *body,
			size_t len, const char *auth, const char *extra)
{
	struct reply r = { 0 };
	char url[512], hdr[256];
	struct curl_slist *h = NULL;
	CURL *c = curl_easy_init();
	snprintf(url, sizeof(url), "%s%s", e->base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	if (auth) {
		snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", auth);
		h = curl_slist_append(h, hdr);
	}
	if (extra)
		h = curl_slist_append(h, extra);
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
	CURLcode rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return r;
}

static struct reply post(struct env *e, const char *path, const char *json, const char *auth)
{
	return req(e, "POST", path, json, strlen(json), auth, NULL);
}

static json_t *parse(const struct reply *r)
{
	json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
	if (!j)
		fail_msg("not JSON (status %ld): %s", r->status, r->body ? r->body : "");
	return j;
}

static void expect_error(struct reply r, long status, const char *part)
{
	if (r.status != status)
		fail_msg("status %ld, want %ld: %s", r.status, status, r.body ? r.body : "");
	json_t *j = parse(&r);
	const char *err = json_string_value(json_object_get(j, "error"));
	assert_non_null(err);
	if (part && !strstr(err, part))
		fail_msg("error '%s' lacks '%s'", err, part);
	json_decref(j);
	free(r.body);
}

static int setup_with(void **state, uint64_t max_upload)
{
	struct env *e = calloc(1, sizeof(*e));
	di_mktemp(e->dir, sizeof(e->dir));
	e->st = di_store(e->dir, max_upload, 0);
	e->s = opal_symbolizer_new(NULL, 8);
	struct opal_sym_sources_config sc = { .store = e->st };
	assert_int_equal(opal_sym_sources_init(&sc), 0);
	struct opal_http_config hc = { .listen = "127.0.0.1:0", .token = TOKEN, .sym = e->s,
				       .store = e->st };
	e->h = opal_http_start(&hc);
	assert_non_null(e->h);
	snprintf(e->base, sizeof(e->base), "http://127.0.0.1:%u", opal_http_port(e->h));
	di_build_id("di_full", e->full_id);
	*state = e;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, 1 << 20);
}

/* Room for a Go executable (gofix_stripped: 1.2 MB). */
static int setup_big(void **state)
{
	return setup_with(state, 16 << 20);
}

static int teardown(void **state)
{
	struct env *e = *state;
	opal_http_stop(e->h);
	opal_symbolizer_free(e->s);
	opal_sym_sources_reset();
	opal_debuginfo_store_close(e->st);
	di_rmtree(e->dir);
	free(e);
	return 0;
}

static char *read_fixture(const char *name, size_t *len)
{
	int fd = di_open(name);
	struct stat st;
	fstat(fd, &st);
	char *b = malloc((size_t)st.st_size);
	assert_int_equal(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return b;
}

/* initiate-upload for `bytes`; returns the upload URL (static) or NULL
 * when refused (*status set). */
/* initiate-upload of `bytes` under `id`, of ID type `id_type` (gnu or
 * htlhash). */
static const char *initiate_as(struct env *e, const char *id, const char *id_type,
			       const char *type, const char *bytes, size_t len, long *status)
{
	static char url[256];
	char hash[65], body[512];
	unsigned char md[32];
	unsigned int n;
	EVP_Digest(bytes, len, md, &n, EVP_sha256(), NULL);
	opal_hex_encode(md, 32, hash);
	snprintf(body, sizeof(body), "{\"build_id\":\"%s\",\"build_id_type\":\"%s\",\"type\":"
		 "\"%s\",\"hash\":\"%s\",\"size\":%zu}", id, id_type, type, hash, len);
	struct reply r = post(e, "/debuginfo/v1/initiate-upload", body, TOKEN);
	*status = r.status;
	if (r.status != 200) {
		free(r.body);
		return NULL;
	}
	json_t *j = parse(&r);
	assert_string_equal(json_string_value(json_object_get(j, "upload_strategy")), "put");
	snprintf(url, sizeof(url), "%s", json_string_value(json_object_get(j, "upload_url")));
	json_decref(j);
	free(r.body);
	return url;
}

static const char *initiate(struct env *e, const char *id, const char *type, const char *bytes,
			    size_t len, long *status)
{
	return initiate_as(e, id, "gnu", type, bytes, len, status);
}

static void test_health_metrics_routes(void **state)
{
	struct env *e = *state;
	struct reply r = req(e, "GET", "/healthz", NULL, 0, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"ok\""));
	free(r.body);
	Opal__Wire__V1__CollectorCounters cc = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	cc.samples_total = 1234;
	cc.frames_truncated = 77;
	cc.vma_busy = 5;
	cc.procs_evicted = 9;
	opal_metrics_collector_counters("host\"a", 7, 3, &cc);
	/* an older interval of the same run (re-sent) does not move them back */
	Opal__Wire__V1__CollectorCounters older = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	older.samples_total = 1000;
	opal_metrics_collector_counters("host\"a", 7, 2, &older);
	opal_metrics_collector_counters("host\"a", 7, 3, &older);
	r = req(e, "GET", "/metrics", NULL, 0, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "opal_debuginfo_uploads_total{outcome=\"stored\"}"));
	assert_non_null(strstr(r.body, "opal_symbolize_duration_seconds_bucket{le=\"+Inf\"}"));
	assert_non_null(strstr(r.body, "opal_collector_samples_total{host=\"host\\\"a\",run=\"0000000000000007\"} 1234"));
	assert_non_null(strstr(r.body, "opal_collector_frames_truncated_total{host=\"host\\\"a\",run=\"0000000000000007\"} 77"));
	assert_non_null(strstr(r.body, "opal_collector_vma_busy_total{host=\"host\\\"a\",run=\"0000000000000007\"} 5"));
	assert_non_null(strstr(r.body, "opal_collector_procs_evicted_total{host=\"host\\\"a\",run=\"0000000000000007\"} 9"));
	assert_non_null(strstr(r.body, "opal_symbolize_cache_misses_total"));
	for (char *line = r.body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1
									  : NULL)
		if (*line != '#' && *line != '\n')
			assert_int_equal(strncmp(line, "opal_", 5), 0);
	free(r.body);
	/* another run on that host (a restart, or a second collector in a
	 * container with the same host name): a series of its own, and the
	 * first one's stays as it was */
	opal_metrics_collector_counters("host\"a", 8, 1, &older);
	r = req(e, "GET", "/metrics", NULL, 0, NULL, NULL);
	assert_non_null(strstr(r.body, "opal_collector_samples_total{host=\"host\\\"a\","
				       "run=\"0000000000000008\"} 1000"));
	assert_non_null(strstr(r.body, "opal_collector_samples_total{host=\"host\\\"a\","
				       "run=\"0000000000000007\"} 1234"));
	free(r.body);
	expect_error(req(e, "GET", "/nope", NULL, 0, NULL, NULL), 404, "no such endpoint");
	r = req(e, "GET", "/symbolize/v1", NULL, 0, TOKEN, NULL);
	assert_string_equal(r.allow, "POST");
	expect_error(r, 405, NULL);
	r = req(e, "DELETE", "/healthz", NULL, 0, NULL, NULL);
	assert_string_equal(r.allow, "GET, HEAD");
	expect_error(r, 405, NULL);
}

static void test_auth(void **state)
{
	struct env *e = *state;
	const char *body = "{\"requests\":[]}";
	struct reply r = post(e, "/symbolize/v1", body, NULL);
	assert_string_equal(r.www_auth, "Bearer");
	expect_error(r, 401, "missing bearer token");
	expect_error(post(e, "/symbolize/v1", body, "wrong"), 403, "wrong bearer token");
	expect_error(post(e, "/debuginfo/v1/should-initiate-upload", "{}", "s3cret-tokeN"), 403,
		     NULL);
	expect_error(req(e, "PUT", "/debuginfo/v1/upload/0123456789abcdef0123456789abcdef", "x", 1,
			 NULL, NULL), 401, NULL);
	r = post(e, "/symbolize/v1", body, TOKEN);
	assert_int_equal(r.status, 200);
	free(r.body);
}

/* The stripped fixture symbolized only through an upload made over HTTP,
 * then served back through the debuginfod protocol. */
static void test_upload_and_symbolize(void **state)
{
	struct env *e = *state;
	char q[1024];
	uint64_t leaf = di_sym_addr("di_full", "di_mark_leaf");
	snprintf(q, sizeof(q), "{\"requests\":[{\"build_id\":\"%s\",\"addresses\":[\"0x%lx\"]},"
		 "{\"build_id\":\"00ff\",\"addresses\":[\"0x10\",\"0x20\"]}]}", e->full_id,
		 (unsigned long)leaf);
	struct reply r = post(e, "/symbolize/v1", q, TOKEN);
	assert_int_equal(r.status, 200);
	json_t *j = parse(&r);
	assert_int_equal(json_array_size(json_object_get(json_array_get(json_object_get(
		json_array_get(json_object_get(j, "results"), 0), "locations"), 0), "frames")), 0);
	json_decref(j);
	free(r.body);

	char sq[512];
	size_t len;
	char *bytes = read_fixture("di_full.debug", &len);
	snprintf(sq, sizeof(sq), "{\"build_id\":\"%s\",\"build_id_type\":\"gnu\",\"type\":"
		 "\"debuginfo\",\"hash\":\"%064d\"}", e->full_id, 0);
	r = post(e, "/debuginfo/v1/should-initiate-upload", sq, TOKEN);
	assert_int_equal(r.status, 200);
	j = parse(&r);
	assert_true(json_is_true(json_object_get(j, "should_initiate_upload")));
	assert_non_null(json_string_value(json_object_get(j, "reason")));
	json_decref(j);
	free(r.body);

	long status;
	const char *url = initiate(e, e->full_id, "debuginfo", bytes, len, &status);
	assert_non_null(url);
	char upload_id[64];
	snprintf(upload_id, sizeof(upload_id), "%s", strrchr(url, '/') + 1);
	r = req(e, "PUT", url, bytes, len, TOKEN, NULL);
	assert_int_equal(r.status, 200);
	j = parse(&r);
	assert_true(json_is_true(json_object_get(j, "stored")));
	assert_string_equal(json_string_value(json_object_get(j, "quality")), "dwarf_inline");
	json_decref(j);
	free(r.body);
	char mq[256];
	snprintf(mq, sizeof(mq), "{\"build_id\":\"%s\",\"upload_id\":\"%s\",\"type\":\"debuginfo\"}",
		 e->full_id, upload_id);
	r = post(e, "/debuginfo/v1/mark-upload-finished", mq, TOKEN);
	assert_int_equal(r.status, 200);
	free(r.body);

	/* Results in request order; frames innermost first; unknown IDs empty. */
	r = post(e, "/symbolize/v1", q, TOKEN);
	assert_int_equal(r.status, 200);
	j = parse(&r);
	json_t *res = json_object_get(j, "results");
	assert_int_equal(json_array_size(res), 2);
	json_t *r0 = json_array_get(res, 0);
	assert_string_equal(json_string_value(json_object_get(r0, "build_id")), e->full_id);
	json_t *loc = json_array_get(json_object_get(r0, "locations"), 0);
	char want_addr[32];
	snprintf(want_addr, sizeof(want_addr), "0x%lx", (unsigned long)leaf);
	assert_string_equal(json_string_value(json_object_get(loc, "address")), want_addr);
	json_t *frames = json_object_get(loc, "frames");
	assert_int_equal(json_array_size(frames), 3);
	const char *names[] = { "di_leaf", "di_mid", "di_outer" };
	for (int i = 0; i < 3; i++) {
		json_t *f = json_array_get(frames, (size_t)i);
		assert_string_equal(json_string_value(json_object_get(f, "function")), names[i]);
		assert_true(json_integer_value(json_object_get(f, "line")) > 0);
		assert_non_null(strstr(json_string_value(json_object_get(f, "file")), "di.c"));
		assert_int_equal(json_is_true(json_object_get(f, "inlined")), i < 2);
	}
	json_t *r1 = json_array_get(res, 1);
	assert_string_equal(json_string_value(json_object_get(r1, "build_id")), "00ff");
	json_t *l1 = json_object_get(r1, "locations");
	assert_int_equal(json_array_size(l1), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(l1, 1), "address")),
			    "0x20");
	assert_int_equal(json_array_size(json_object_get(json_array_get(l1, 0), "frames")), 0);
	json_decref(j);
	free(r.body);

	/* debuginfod: the file, its size header, HEAD, a section, 406, 400, 404. */
	char path[PATH_MAX + 256];
	snprintf(path, sizeof(path), "/buildid/%s/debuginfo", e->full_id);
	r = req(e, "GET", path, NULL, 0, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, len);
	assert_memory_equal(r.body, bytes, len);
	assert_int_equal(strtoull(r.maxsize_hdr, NULL, 10), len);
	free(r.body);
	r = req(e, "HEAD", path, NULL, 0, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(strtoull(r.maxsize_hdr, NULL, 10), len);
	free(r.body);
	expect_error(req(e, "GET", path, NULL, 0, NULL, "X-DEBUGINFOD-MAXSIZE: 10"), 406, NULL);
	expect_error(req(e, "POST", path, "x", 1, TOKEN, NULL), 400, NULL);
	snprintf(path, sizeof(path), "/buildid/%s/section/.debug_line", e->full_id);
	r = req(e, "GET", path, NULL, 0, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_true(r.len > 16);
	free(r.body);
	snprintf(path, sizeof(path), "/buildid/%s/executable", e->full_id);
	expect_error(req(e, "GET", path, NULL, 0, NULL, NULL), 404, NULL);
	expect_error(req(e, "GET", "/buildid/XYZ/debuginfo", NULL, 0, NULL, NULL), 400, "hex");
	expect_error(req(e, "GET", "/buildid/00ff/debuginfo", NULL, 0, NULL, NULL), 404, NULL);

	/* Sources: a member of the uploaded tarball by its absolute path. */
	size_t tlen;
	char *tar = read_fixture("di_sources.tar.gz", &tlen);
	url = initiate(e, e->full_id, "sources", tar, tlen, &status);
	assert_non_null(url);
	r = req(e, "PUT", url, tar, tlen, TOKEN, NULL);
	assert_int_equal(r.status, 200);
	free(r.body);
	free(tar);
	char real[PATH_MAX];
	assert_non_null(realpath(di_path("di.c"), real));
	snprintf(path, sizeof(path), "/buildid/%s/source%s", e->full_id, real);
	r = req(e, "GET", path, NULL, 0, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "di_static_work"));
	free(r.body);
	free(bytes);
}

static void test_bad_uploads(void **state)
{
	struct env *e = *state;
	long status;
	char body[512];
	/* Non-hex build ID. */
	snprintf(body, sizeof(body), "{\"build_id\":\"xyz0\",\"hash\":\"%064d\",\"size\":10}", 0);
	expect_error(post(e, "/debuginfo/v1/initiate-upload", body, TOKEN), 400, "lowercase hex");
	/* Not an ELF: 400 with the reason, then 409 for the same bytes. */
	const char *text = "definitely not an ELF file\n";
	const char *url = initiate(e, e->full_id, "debuginfo", text, strlen(text), &status);
	assert_non_null(url);
	expect_error(req(e, "PUT", url, text, strlen(text), TOKEN, NULL), 400, "not an ELF");
	assert_null(initiate(e, e->full_id, "debuginfo", text, strlen(text), &status));
	assert_int_equal(status, 409);
	/* Truncated ELF. */
	size_t len;
	char *bytes = read_fixture("di_full.debug", &len);
	url = initiate(e, e->full_id, "debuginfo", bytes, len / 2, &status);
	assert_non_null(url);
	expect_error(req(e, "PUT", url, bytes, len / 2, TOKEN, NULL), 400, "truncated");
	free(bytes);
	/* Wrong build ID. */
	bytes = read_fixture("di_dwarf4.debug", &len);
	url = initiate(e, e->full_id, "debuginfo", bytes, len, &status);
	assert_non_null(url);
	expect_error(req(e, "PUT", url, bytes, len, TOKEN, NULL), 400, "build ID mismatch");
	/* Oversize: announced over the 1 MiB limit, and a body longer than
	 * announced. */
	snprintf(body, sizeof(body), "{\"build_id\":\"%s\",\"hash\":\"%064d\",\"size\":%d}",
		 e->full_id, 0, 2 << 20);
	expect_error(post(e, "/debuginfo/v1/initiate-upload", body, TOKEN), 413, "limit");
	char *big = calloc(1, 4096);
	url = initiate(e, e->full_id, "debuginfo", big, 100, &status);
	assert_non_null(url);
	expect_error(req(e, "PUT", url, big, 4096, TOKEN, NULL), 413, NULL);
	free(big);
	/* Unknown upload. */
	expect_error(req(e, "PUT", "/debuginfo/v1/upload/00000000000000000000000000000000", "x", 1,
			 TOKEN, NULL), 404, NULL);
	expect_error(req(e, "PUT", "/debuginfo/v1/upload/..%2f..%2fetc", "x", 1, TOKEN, NULL), 400,
		     "malformed upload ID");
	free(bytes);
}

struct race {
	struct env *e;
	const char *bytes;
	size_t len;
	long status;
};

static void *race_initiate(void *arg)
{
	struct race *r = arg;
	initiate(r->e, r->e->full_id, "debuginfo", r->bytes, r->len, &r->status);
	return NULL;
}

/* Concurrent uploads of one ID: exactly one initiate wins, the others get
 * 412 "in progress". */
static void test_concurrent_initiate(void **state)
{
	struct env *e = *state;
	size_t len;
	char *bytes = read_fixture("di_full.debug", &len);
	enum { N = 6 };
	struct race r[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		r[i] = (struct race){ e, bytes, len, 0 };
		pthread_create(&t[i], NULL, race_initiate, &r[i]);
	}
	int ok = 0, busy = 0;
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		ok += r[i].status == 200;
		busy += r[i].status == 412;
	}
	assert_int_equal(ok, 1);
	assert_int_equal(busy, N - 1);
	free(bytes);
}

/* A /symbolize/v1 body with `n` addresses of one unknown build ID. */
static char *addresses_body(size_t n)
{
	size_t cap = 64 + n * 12;
	char *q = malloc(cap);
	size_t at = (size_t)snprintf(q, cap, "{\"requests\":[{\"build_id\":\"00ff\",\"addresses\":[");
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(q + at, cap - at, "%s\"0x%zx\"", i ? "," : "", i);
	snprintf(q + at, cap - at, "]}]}");
	return q;
}

static void test_symbolize_limits(void **state)
{
	struct env *e = *state;
	char *q = addresses_body(10001);
	expect_error(post(e, "/symbolize/v1", q, TOKEN), 413, "at most 10000");
	free(q);
	q = addresses_body(10000);
	struct reply r = post(e, "/symbolize/v1", q, TOKEN);
	free(q);
	assert_int_equal(r.status, 200);
	json_t *j = parse(&r);
	json_t *locs = json_object_get(json_array_get(json_object_get(j, "results"), 0),
				       "locations");
	assert_int_equal(json_array_size(locs), 10000);
	json_decref(j);
	free(r.body);
	/* A body over the 4 MiB bound, refused on its Content-Length. */
	size_t big = (4u << 20) + 1;
	char *b = malloc(big);
	memset(b, ' ', big);
	expect_error(req(e, "POST", "/symbolize/v1", b, big, TOKEN, NULL), 413, NULL);
	free(b);
	/* Nesting deeper than the parser accepts. */
	expect_error(post(e, "/symbolize/v1", "{\"requests\":[[[[[[[[[[1]]]]]]]]]]}", TOKEN), 400,
		     "nested");
}

/* POST /v1development/profiles: 404 while off; with a forwarder (to a
 * port nothing listens on: forwarding happens after the answer), the
 * header checks, the body bound (4 KiB here), malformed bodies and a
 * valid request, each counted. */
static void test_otlp_receive_route(void **state)
{
	struct env *e = *state;
	const char *pb = "Content-Type: application/x-protobuf";

	expect_error(req(e, "POST", "/v1development/profiles", "", 0, TOKEN, pb), 404,
		     "OTLP receiving is off");
	struct reply r = req(e, "GET", "/v1development/profiles", NULL, 0, TOKEN, NULL);
	assert_string_equal(r.allow, "POST");
	expect_error(r, 405, NULL);

	struct opal_otlp_exporter *fwd;
	struct opal_exporter_settings fs = { "http://127.0.0.1:1/v1development/profiles", NULL,
					     1000, true };
	assert_int_equal(opal_exporter_start("otlp-forward", OPAL_OTLP_SIGNAL_PROFILES, &fs,
					     1 << 20, &fwd), 0);
	struct opal_http_config hc = { .listen = "127.0.0.1:0", .token = TOKEN, .sym = e->s,
				       .store = e->st, .otlp_forward = fwd,
				       .max_upload_bytes = 4096 };
	struct opal_http_server *h = opal_http_start(&hc);
	assert_non_null(h);
	struct env e2 = *e;
	snprintf(e2.base, sizeof(e2.base), "http://127.0.0.1:%u", opal_http_port(h));
	opal_metrics_reset();

	expect_error(req(&e2, "POST", "/v1development/profiles", "", 0, NULL, pb), 401, NULL);
	expect_error(req(&e2, "POST", "/v1development/profiles", "{}", 2, TOKEN,
			 "Content-Type: application/json"), 415, "application/x-protobuf");
	r = req(&e2, "POST", "/v1development/profiles", "", 0, TOKEN, NULL);
	expect_error(r, 415, NULL);   /* no Content-Type at all */
	char *big = calloc(1, 8192);
	expect_error(req(&e2, "POST", "/v1development/profiles", big, 8192, TOKEN, pb), 413,
		     "at most 4096");
	free(big);
	/* field 1 (resource_profiles) announcing 100 bytes that are not there */
	expect_error(req(&e2, "POST", "/v1development/profiles", "\x0a\x64", 2, TOKEN, pb), 400,
		     "malformed protobuf");
	/* an empty request is a valid one: 200, an empty response, forwarded */
	r = req(&e2, "POST", "/v1development/profiles", "", 0, TOKEN, pb);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 0);
	free(r.body);
	r = req(&e2, "GET", "/metrics", NULL, 0, NULL, NULL);
	assert_non_null(strstr(r.body, "opal_otlp_receive_requests_total{outcome=\"forwarded\"} 1\n"));
	assert_non_null(strstr(r.body, "opal_otlp_receive_requests_total{outcome=\"unsupported\"} 2\n"));
	assert_non_null(strstr(r.body, "opal_otlp_receive_requests_total{outcome=\"too_large\"} 1\n"));
	assert_non_null(strstr(r.body, "opal_otlp_receive_requests_total{outcome=\"malformed\"} 1\n"));
	assert_non_null(strstr(r.body, "opal_export_requests_total{exporter=\"otlp-forward\","
				       "outcome=\"enqueued\"} 1\n"));
	free(r.body);
	opal_http_stop(h);
	opal_otlp_exporter_stop(fwd, 0, NULL);
}

/* A stripped Go executable (no DWARF, no .symtab, no GNU build ID)
 * uploaded as `executable` under its htlhash file ID: /symbolize/v1 by
 * that file ID answers every main.* PC of gofix.expect with the frames a
 * collector's descriptor of the same file gets, inline frames included
 * (docs/go.md). */
static void test_go_executable_upload(void **state)
{
	struct env *e = *state;
	const char *fx = getenv("OPAL_FIXTURES");
	char path[PATH_MAX], line[1024], fid[33];
	snprintf(path, sizeof(path), "%s/go/gofix_stripped", fx ? fx : "build/fixtures");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	opal_file_id id;
	assert_int_equal(opal_file_id_from_fd(fd, &id), 0);
	opal_file_id_to_hex(&id, fid);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	size_t len = (size_t)st.st_size;
	char *bytes = malloc(len);
	assert_int_equal(pread(fd, bytes, len, 0), (ssize_t)len);

	long status;
	const char *url = initiate_as(e, fid, "htlhash", "executable", bytes, len, &status);
	if (!url)
		fail_msg("initiate-upload: %ld", status);
	struct reply r = req(e, "PUT", url, bytes, len, TOKEN, NULL);
	assert_int_equal(r.status, 200);
	json_t *j = parse(&r);
	assert_true(json_is_true(json_object_get(j, "stored")));
	assert_string_equal(json_string_value(json_object_get(j, "quality")), "dwarf_inline");
	json_decref(j);
	free(r.body);

	/* the main.* PCs, asked by file ID */
	snprintf(path, sizeof(path), "%s/go/gofix.expect", fx ? fx : "build/fixtures");
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	uint64_t pcs[512];
	size_t n = 0;
	char *q = malloc(64 * 1024), *w = q;
	w += sprintf(w, "{\"requests\":[{\"file_id\":\"%s\",\"addresses\":[", fid);
	while (n < 512 && fgets(line, sizeof(line), f)) {
		unsigned long long pc;
		char fn[256];
		if (sscanf(line, "0x%llx\t%255s", &pc, fn) != 2 || strncmp(fn, "main.", 5) != 0)
			continue;
		w += sprintf(w, "%s\"0x%llx\"", n ? "," : "", pc);
		pcs[n++] = pc;
	}
	fclose(f);
	sprintf(w, "]}]}");
	assert_true(n > 20);
	r = post(e, "/symbolize/v1", q, TOKEN);
	free(q);
	assert_int_equal(r.status, 200);
	j = parse(&r);
	json_t *locs = json_object_get(json_array_get(json_object_get(j, "results"), 0), "locations");
	assert_int_equal(json_array_size(locs), n);

	/* the reference: the same file as a collector passes it */
	struct opal_symbolizer *ref = opal_symbolizer_new(NULL, 4);
	opal_file_id rid = id;
	assert_int_equal(opal_symbolizer_add_file(ref, &rid, fd, NULL, 0, "gofix_stripped"), 0);
	size_t inlined = 0;
	for (size_t i = 0; i < n; i++) {
		struct opal_sym_result sr;
		assert_int_equal(opal_symbolize_native(ref, &rid, pcs[i], false, &sr), 0);
		json_t *frames = json_object_get(json_array_get(locs, i), "frames");
		assert_true(sr.n > 0);
		assert_int_equal(json_array_size(frames), sr.n);
		for (size_t k = 0; k < sr.n; k++) {
			json_t *fr = json_array_get(frames, k);
			assert_string_equal(json_string_value(json_object_get(fr, "function")),
					    sr.frames[k].function);
			assert_string_equal(json_string_value(json_object_get(fr, "file")),
					    sr.frames[k].file);
			assert_int_equal(json_integer_value(json_object_get(fr, "line")),
					 sr.frames[k].line);
			assert_int_equal(json_is_true(json_object_get(fr, "inlined")),
					 sr.frames[k].inlined);
			inlined += sr.frames[k].inlined;
		}
		opal_sym_result_free(&sr);
	}
	assert_true(inlined > 0);
	opal_symbolizer_free(ref);
	json_decref(j);
	free(r.body);
	free(bytes);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_health_metrics_routes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upload_and_symbolize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_uploads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_initiate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbolize_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_otlp_receive_route, setup, teardown),
		cmocka_unit_test_setup_teardown(test_go_executable_upload, setup_big, teardown),
	};
	return cmocka_run_group_tests(tests, di_setup_fixtures, NULL);
}
