/* Unit tests of the OTLP/HTTP exporter (symbolizer/export/otlp_http.c,
 * export_queue.c) and the "profiles as logs" encoder (otlp_logs.c) against
 * the loopback test receiver of tests/otlp_receiver, compiled in: endpoint,
 * header, Retry-After and backoff rules; 503 + Retry-After honoured (timed,
 * seconds and HTTP date); 429, 502, 504, timeouts and refused connections
 * retried; 400 and 500 not retried; partial success logged, not retried;
 * the queue drops the oldest buffers first and counts them, and pushing
 * never waits for the network; the receiver's own checks reject broken
 * requests. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shared/log.h"
#include "symbolizer/export/export_queue.h"
#include "symbolizer/export/otlp_http.h"
#include "symbolizer/profile/otlp.h"
#include "symbolizer/profile/otlp_logs.h"
#include "symbolizer/profile/profile.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

/* The receiver is compiled into this test so that it can be scripted and
 * inspected directly. */
#include "../otlp_receiver/check.c"
#include "../otlp_receiver/receiver.c"

#define PERIOD 10000000ull   /* 100 Hz */
#define T0     1700000000000000000ull

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A two-process-free profile of one process `pid`: a kernel frame above an
 * inline chain in /usr/bin/app, sampled `n` times. */
static struct opal_profile *small_profile(uint32_t pid, size_t n)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping app = {
		.start = 0x400000, .limit = 0x500000, .filename = "/usr/bin/app",
		.file_id_htlhash = "00112233445566778899aabbccddeeff", .has_functions = true,
	};
	struct opal_profile_mapping kernel = {
		.start = 0xffffffff80000000, .limit = 0xffffffffffffffff,
		.filename = "[kernel.kallsyms]", .build_id_gnu = "aabbccdd",
	};
	struct opal_profile_line chain[2] = { { "inner_inline", "app.c", 10 },
					      { "compute", "app.c", 20 } };
	struct opal_profile_line mainl = { "main", "app.c", 30 };
	struct opal_profile_line ksym = { "do_syscall_64", NULL, 0 };
	struct opal_profile_process proc = { .pid = pid, .executable_name = "app",
					     .executable_path = "/usr/bin/app", .host_name = "h" };
	uint64_t ts[64];
	uint32_t cpus[64];

	assert_non_null(p);
	assert_true(n <= 64);
	uint32_t ma = opal_profile_mapping(p, &app), mk = opal_profile_mapping(p, &kernel);
	uint32_t stack[3] = {
		opal_profile_location(p, mk, 0xffffffff81000010, OPAL_FRAME_KERNEL, &ksym, 1),
		opal_profile_location(p, ma, 0x401234, OPAL_FRAME_NATIVE, chain, 2),
		opal_profile_location(p, ma, 0x401500, OPAL_FRAME_NATIVE, &mainl, 1),
	};
	uint32_t pr = opal_profile_process(p, &proc);
	for (size_t i = 0; i < n; i++) {
		ts[i] = T0 + i * PERIOD;
		cpus[i] = (uint32_t)(i % 2);
	}
	assert_int_equal(opal_profile_add_sample(p, pr, pid + 1, "worker", stack, 3, ts, cpus, n), 0);
	opal_profile_set_time(p, T0, T0 + 5000000000ull);
	return p;
}

/* Serialized ExportProfilesServiceRequest of small_profile(pid, 4). */
static uint8_t *request_for(uint32_t pid, size_t *len)
{
	struct opal_profile *p = small_profile(pid, 4);
	uint8_t *buf;

	assert_int_equal(opal_otlp_encode(p, NULL, &buf, len), 0);
	opal_profile_free(p);
	return buf;
}

struct fixture {
	struct otlp_receiver *rcv;
	char url[128];
	struct rcv_request reqs[16];
};

static struct fixture *fx_start(const char *script, const char *path)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->rcv = otlp_receiver_start(0, NULL);
	assert_non_null(f->rcv);
	assert_int_equal(otlp_receiver_script(f->rcv, script), 0);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u%s", otlp_receiver_port(f->rcv), path);
	return f;
}

static void fx_stop(struct fixture *f)
{
	otlp_receiver_stop(f->rcv);
	free(f);
}

static size_t fx_requests(struct fixture *f)
{
	return otlp_receiver_requests(f->rcv, f->reqs, 16);
}

static const struct opal_export_queue_config fast_queue = {
	.name = "test", .max_bytes = 1 << 20, .max_items = 64, .max_attempts = 5,
	.backoff_initial_ms = 50, .backoff_max_ms = 5000,
};

static struct opal_otlp_exporter *exporter(const char *url, unsigned timeout_ms,
					   enum opal_otlp_signal sig,
					   const struct opal_export_queue_config *qc)
{
	struct opal_otlp_http_config hc = { .url = url, .timeout_ms = timeout_ms, .gzip = true,
					    .signal = sig };
	struct opal_otlp_exporter *e;

	assert_int_equal(opal_otlp_exporter_start(&hc, qc ? qc : &fast_queue, &e), 0);
	return e;
}

static void push_request(struct opal_otlp_exporter *e, uint32_t pid)
{
	size_t len;
	uint8_t *buf = request_for(pid, &len);

	assert_int_equal(opal_otlp_exporter_push(e, buf, len), 0);
}

/* ---- configuration ---------------------------------------------------------- */

static void clear_env(void)
{
	unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
	unsetenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
	unsetenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT");
}

static void expect_url(enum opal_otlp_signal sig, const char *configured,
		       enum opal_config_source src, const char *want)
{
	char *url = (char *)"unset";

	assert_int_equal(opal_otlp_http_resolve_url(sig, configured, src, &url), 0);
	if (!want) {
		assert_null(url);
		return;
	}
	assert_non_null(url);
	assert_string_equal(url, want);
	free(url);
}

static void test_resolve_url(void **state)
{
	char *url;

	clear_env();
	expect_url(OPAL_OTLP_SIGNAL_PROFILES, NULL, OPAL_SRC_DEFAULT, NULL);
	expect_url(OPAL_OTLP_SIGNAL_PROFILES, "http://file:4318", OPAL_SRC_FILE,
		   "http://file:4318/v1development/profiles");
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318/", 1);
	/* env beats file; one trailing slash dropped */
	expect_url(OPAL_OTLP_SIGNAL_PROFILES, "http://file:4318", OPAL_SRC_FILE,
		   "http://base:4318/v1development/profiles");
	expect_url(OPAL_OTLP_SIGNAL_LOGS, NULL, OPAL_SRC_DEFAULT, "http://base:4318/v1/logs");
	setenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://sig:9999/custom/path", 1);
	/* the signal variable is used as is and beats the base variable */
	expect_url(OPAL_OTLP_SIGNAL_PROFILES, NULL, OPAL_SRC_DEFAULT, "http://sig:9999/custom/path");
	expect_url(OPAL_OTLP_SIGNAL_LOGS, NULL, OPAL_SRC_DEFAULT, "http://base:4318/v1/logs");
	/* the flag beats both */
	expect_url(OPAL_OTLP_SIGNAL_PROFILES, "https://flag:443", OPAL_SRC_FLAG,
		   "https://flag:443/v1development/profiles");
	expect_url(OPAL_OTLP_SIGNAL_LOGS, "https://flag:443", OPAL_SRC_FLAG,
		   "https://flag:443/v1/logs");
	/* empty variables are unset */
	setenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "", 1);
	expect_url(OPAL_OTLP_SIGNAL_PROFILES, NULL, OPAL_SRC_DEFAULT,
		   "http://base:4318/v1development/profiles");
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://nope", 1);
	assert_int_equal(opal_otlp_http_resolve_url(OPAL_OTLP_SIGNAL_PROFILES, NULL,
						    OPAL_SRC_DEFAULT, &url), -EINVAL);
	assert_null(url);
	clear_env();
}

static void test_parse_headers(void **state)
{
	struct opal_otlp_kv *kv;
	size_t n;

	assert_int_equal(opal_otlp_http_parse_headers("api-key=s3cr%3Dt, x-opal-test = a%20b", &kv,
						      &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(kv[0].key, "api-key");
	assert_string_equal(kv[0].value, "s3cr=t");
	assert_string_equal(kv[1].key, "x-opal-test");
	assert_string_equal(kv[1].value, "a b");
	opal_otlp_kv_free(kv, n);
	assert_int_equal(opal_otlp_http_parse_headers(NULL, &kv, &n), 0);
	assert_int_equal(n, 0);
	/* a decoded CR LF must not inject a header line */
	assert_int_equal(opal_otlp_http_parse_headers("a=b%0D%0AEvil: x", &kv, &n), -EINVAL);
	assert_int_equal(opal_otlp_http_parse_headers("bad name=x", &kv, &n), -EINVAL);
	assert_int_equal(opal_otlp_http_parse_headers("novalue", &kv, &n), -EINVAL);
}

static void test_retry_after_parse(void **state)
{
	time_t now = 1700000000;
	char date[64];
	struct tm tm;
	time_t t = now + 7;

	assert_int_equal(opal_otlp_http_parse_retry_after("3", now), 3000);
	assert_int_equal(opal_otlp_http_parse_retry_after(" 120 \r\n", now), 120000);
	assert_int_equal(opal_otlp_http_parse_retry_after("99999999999", now), 86400000);
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	assert_int_equal(opal_otlp_http_parse_retry_after(date, now), 7000);
	assert_int_equal(opal_otlp_http_parse_retry_after(date, now + 60), 0);
	assert_int_equal(opal_otlp_http_parse_retry_after("soon", now), -1);
	assert_int_equal(opal_otlp_http_parse_retry_after("", now), -1);
	assert_int_equal(opal_otlp_http_parse_retry_after("-5", now), -1);
}

static void test_backoff(void **state)
{
	/* exponential: 100, 200, 400 ... capped at 1000; half fixed, half jitter */
	assert_int_equal(opal_export_backoff_ms(1, -1, 100, 1000, 0.0), 50);
	assert_in_range(opal_export_backoff_ms(1, -1, 100, 1000, 0.999), 99, 100);
	assert_int_equal(opal_export_backoff_ms(3, -1, 100, 1000, 0.0), 200);
	assert_in_range(opal_export_backoff_ms(3, -1, 100, 1000, 0.5), 299, 301);
	assert_int_equal(opal_export_backoff_ms(10, -1, 100, 1000, 0.0), 500);
	assert_in_range(opal_export_backoff_ms(40, -1, 100, 1000, 0.999), 999, 1000);
	/* a server delay wins, within the cap */
	assert_int_equal(opal_export_backoff_ms(1, 700, 100, 1000, 0.3), 700);
	assert_int_equal(opal_export_backoff_ms(1, 0, 100, 1000, 0.3), 0);
	assert_int_equal(opal_export_backoff_ms(1, 5000, 100, 1000, 0.3), 1000);
}

/* ---- exporter against the receiver ----------------------------------------- */

static void test_success_headers_gzip(void **state)
{
	struct fixture *f = fx_start("ok", OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_kv *kv;
	size_t n;
	struct opal_export_stats st;

	assert_int_equal(opal_otlp_http_parse_headers("x-opal-test=hello%20world", &kv, &n), 0);
	struct opal_otlp_http_config hc = { .url = f->url, .timeout_ms = 2000, .gzip = true,
					    .headers = kv, .n_headers = n };
	struct opal_otlp_exporter *e;
	assert_int_equal(opal_otlp_exporter_start(&hc, &fast_queue, &e), 0);
	opal_otlp_kv_free(kv, n);   /* the exporter keeps its own copy */
	struct opal_profile *p = small_profile(4242, 4);
	assert_int_equal(opal_otlp_exporter_push_profile(e, p, NULL, NULL), 0);
	opal_profile_free(p);
	assert_int_equal(otlp_receiver_wait(f->rcv, 1, 5000), 1);
	/* an interval without samples is not sent */
	p = opal_profile_new(PERIOD);
	assert_int_equal(opal_otlp_exporter_push_profile(e, p, NULL, NULL), 0);
	opal_profile_free(p);
	opal_otlp_exporter_stop(e, 2000, &st);
	assert_int_equal(st.enqueued, 1);
	assert_int_equal(fx_requests(f), 1);
	struct rcv_request *q = &f->reqs[0];
	if (!q->valid)
		fail_msg("receiver rejected the request: %s", q->error);
	assert_string_equal(q->content_type, "application/x-protobuf");
	assert_string_equal(q->content_encoding, "gzip");
	assert_string_equal(q->test_header, "hello world");
	assert_string_equal(q->sum.kind, "profiles");
	assert_int_equal(q->sum.n_pids, 1);
	assert_int_equal(q->sum.pids[0], 4242);
	assert_int_equal(q->sum.samples, 4);
	assert_int_equal(q->sum.period, PERIOD);
	assert_int_equal(q->sum.mappings_without_id, 0);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.retries, 0);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.dropped, 0);
	fx_stop(f);
}

/* Two requests; returns the gap (ms) between the end of the first answer
 * and the arrival of the second. */
static double retry_gap(const char *script, struct opal_export_stats *st)
{
	struct fixture *f = fx_start(script, OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_exporter *e = exporter(f->url, 3000, OPAL_OTLP_SIGNAL_PROFILES, NULL);

	push_request(e, 100);
	assert_int_equal(otlp_receiver_wait(f->rcv, 2, 8000), 2);
	opal_otlp_exporter_stop(e, 3000, st);
	assert_int_equal(fx_requests(f), 2);
	assert_true(f->reqs[1].valid);
	double gap = f->reqs[1].t_ms - f->reqs[0].t_done_ms;
	fx_stop(f);
	return gap;
}

static void test_503_retry_after_seconds(void **state)
{
	struct opal_export_stats st;
	double gap = retry_gap("503:ra=1,ok", &st);

	/* the backoff alone would wait 25..50 ms */
	if (gap < 950 || gap > 3000)
		fail_msg("retry came %.0f ms after a 503 with Retry-After: 1", gap);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.failed, 0);
}

static void test_503_retry_after_date(void **state)
{
	struct opal_export_stats st;
	double gap = retry_gap("503:date=2,ok", &st);

	/* HTTP dates have 1 s resolution: now+2 s means 1..2 s from now */
	if (gap < 900 || gap > 4000)
		fail_msg("retry came %.0f ms after a 503 with a Retry-After date 2 s ahead", gap);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.retries, 1);
}

static void test_429_retried_with_backoff(void **state)
{
	struct opal_export_stats st;
	double gap = retry_gap("429,ok", &st);

	if (gap > 900)
		fail_msg("retry after 429 without Retry-After took %.0f ms (backoff is 25-50 ms)",
			 gap);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.retries, 1);
}

static void test_502_504_retried(void **state)
{
	struct fixture *f = fx_start("502,504,ok", OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_exporter *e = exporter(f->url, 3000, OPAL_OTLP_SIGNAL_PROFILES, NULL);
	struct opal_export_stats st;

	push_request(e, 101);
	assert_int_equal(otlp_receiver_wait(f->rcv, 3, 8000), 3);
	opal_otlp_exporter_stop(e, 3000, &st);
	assert_int_equal(fx_requests(f), 3);
	assert_int_equal(f->reqs[0].status, 502);
	assert_int_equal(f->reqs[1].status, 504);
	assert_int_equal(f->reqs[2].status, 200);
	assert_int_equal(st.retries, 2);
	assert_int_equal(st.sent, 1);
	fx_stop(f);
}

static void not_retried(const char *script, int status)
{
	struct fixture *f = fx_start(script, OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_exporter *e = exporter(f->url, 3000, OPAL_OTLP_SIGNAL_PROFILES, NULL);
	struct opal_export_stats st;

	push_request(e, 102);
	assert_int_equal(otlp_receiver_wait(f->rcv, 1, 5000), 1);
	/* a retry would come after 25..50 ms of backoff */
	assert_int_equal(otlp_receiver_wait(f->rcv, 2, 800), 1);
	opal_otlp_exporter_stop(e, 1000, &st);
	assert_int_equal(fx_requests(f), 1);
	assert_int_equal(f->reqs[0].status, status);
	assert_true(f->reqs[0].valid);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.sent, 0);
	assert_int_equal(st.retries, 0);
	fx_stop(f);
}

static void test_400_not_retried(void **state)
{
	not_retried("400,ok", 400);
}

static void test_500_not_retried(void **state)
{
	not_retried("500,ok", 500);
}

static void test_partial_success_not_retried(void **state)
{
	struct fixture *f = fx_start("partial:rejected=3,ok", OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_http_config hc = { .url = f->url, .timeout_ms = 2000, .gzip = false };
	struct opal_otlp_http *h;
	struct opal_otlp_http_result res;
	struct opal_export_stats st;
	size_t len;
	uint8_t *buf = request_for(103, &len);

	/* one attempt: the result carries the partial success */
	assert_int_equal(opal_otlp_http_new(&hc, &h), 0);
	assert_int_equal(opal_otlp_http_post(h, buf, len, NULL, &res), OPAL_EXPORT_PARTIAL);
	assert_int_equal(res.http_status, 200);
	assert_int_equal(res.rejected, 3);
	assert_non_null(strstr(res.message, "rejected on purpose"));
	free(buf);
	opal_otlp_http_free(h);

	/* through the queue: sent once, counted as partial, not retried */
	otlp_receiver_reset(f->rcv);
	assert_int_equal(otlp_receiver_script(f->rcv, "partial,ok"), 0);
	struct opal_otlp_exporter *e = exporter(f->url, 2000, OPAL_OTLP_SIGNAL_PROFILES, NULL);
	push_request(e, 104);
	assert_int_equal(otlp_receiver_wait(f->rcv, 1, 5000), 1);
	assert_int_equal(otlp_receiver_wait(f->rcv, 2, 800), 1);
	opal_otlp_exporter_stop(e, 1000, &st);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.partial, 1);
	assert_int_equal(st.retries, 0);
	assert_int_equal(st.failed, 0);
	fx_stop(f);
}

static void test_slow_response_times_out_and_retries(void **state)
{
	struct fixture *f = fx_start("slow=1500,ok", OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_exporter *e = exporter(f->url, 300, OPAL_OTLP_SIGNAL_PROFILES, NULL);
	struct opal_export_stats st;
	double t0 = now_ms();

	push_request(e, 105);
	/* The retry is answered at once; the slow first answer is recorded when
	 * its delay ends. */
	assert_int_equal(otlp_receiver_wait(f->rcv, 2, 8000), 2);
	opal_otlp_exporter_stop(e, 2000, &st);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.retries, 1);
	assert_int_equal(fx_requests(f), 2);
	/* the retry started after the 300 ms timeout, long before the slow answer */
	double first = f->reqs[0].t_ms < f->reqs[1].t_ms ? f->reqs[0].t_ms : f->reqs[1].t_ms;
	double second = f->reqs[0].t_ms < f->reqs[1].t_ms ? f->reqs[1].t_ms : f->reqs[0].t_ms;
	if (second - first < 290 || second - first > 1400)
		fail_msg("retry arrived %.0f ms after the slow request (timeout 300 ms)",
			 second - first);
	assert_true(now_ms() - t0 < 6000);
	fx_stop(f);
}

static void test_connection_refused_retried(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char url[128];

	/* A port that was free a moment ago and has no listener now. */
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1development/profiles",
		 ntohs(sa.sin_port));

	struct opal_otlp_http_config hc = { .url = url, .timeout_ms = 1000 };
	struct opal_otlp_http *h;
	struct opal_otlp_http_result res;
	assert_int_equal(opal_otlp_http_new(&hc, &h), 0);
	assert_int_equal(opal_otlp_http_post(h, (const uint8_t *)"x", 1, NULL, &res),
			 OPAL_EXPORT_RETRY);
	assert_int_equal(res.http_status, 0);
	opal_otlp_http_free(h);

	struct opal_export_queue_config qc = fast_queue;
	qc.max_attempts = 3;
	qc.backoff_initial_ms = 20;
	struct opal_otlp_exporter *e = exporter(url, 1000, OPAL_OTLP_SIGNAL_PROFILES, &qc);
	struct opal_export_stats st;
	push_request(e, 106);
	for (int i = 0; i < 100; i++) {
		opal_otlp_exporter_stats(e, &st);
		if (st.failed)
			break;
		usleep(20000);
	}
	opal_otlp_exporter_stop(e, 1000, &st);
	assert_int_equal(st.retries, 2);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.sent, 0);
}

static void test_queue_drops_oldest_and_never_blocks(void **state)
{
	struct fixture *f = fx_start("slow=1000", OPAL_OTLP_PROFILES_PATH);
	size_t len;
	uint8_t *probe = request_for(1001, &len);
	struct opal_export_queue_config qc = fast_queue;
	struct opal_export_stats st;

	free(probe);
	/* Room for two queued requests (all five have the same size). */
	qc.max_bytes = len * 2 + len / 2;
	struct opal_otlp_exporter *e = exporter(f->url, 5000, OPAL_OTLP_SIGNAL_PROFILES, &qc);
	push_request(e, 1001);
	/* Wait for the worker to take 1001 (now held by the slow answer). */
	for (int i = 0; i < 200; i++) {
		opal_otlp_exporter_stats(e, &st);
		if (st.queued_items == 0)
			break;
		usleep(5000);
	}
	assert_int_equal(st.queued_items, 0);
	for (uint32_t pid = 1002; pid <= 1005; pid++) {
		double t = now_ms();
		push_request(e, pid);
		if (now_ms() - t > 100)
			fail_msg("push took %.0f ms while the worker was busy", now_ms() - t);
	}
	opal_otlp_exporter_stats(e, &st);
	assert_int_equal(st.dropped, 2);
	assert_int_equal(st.dropped_bytes, 2 * len);
	assert_int_equal(st.queued_items, 2);
	assert_int_equal(st.enqueued, 5);
	/* 1001 (slow), then the two newest. */
	assert_int_equal(otlp_receiver_wait(f->rcv, 3, 8000), 3);
	opal_otlp_exporter_stop(e, 3000, &st);
	assert_int_equal(fx_requests(f), 3);
	uint32_t got[3] = { f->reqs[0].sum.pids[0], f->reqs[1].sum.pids[0], f->reqs[2].sum.pids[0] };
	assert_int_equal(got[0], 1001);
	assert_int_equal(got[1], 1004);
	assert_int_equal(got[2], 1005);
	assert_int_equal(st.sent, 3);
	assert_int_equal(st.dropped, 2);

	/* A buffer larger than the whole queue is refused and counted. */
	qc.max_bytes = 16;
	e = exporter(f->url, 5000, OPAL_OTLP_SIGNAL_PROFILES, &qc);
	uint8_t *big = request_for(1006, &len);
	assert_int_equal(opal_otlp_exporter_push(e, big, len), -E2BIG);
	opal_otlp_exporter_stop(e, 100, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.enqueued, 0);
	fx_stop(f);
}

static void test_stop_cancels_slow_attempt(void **state)
{
	struct fixture *f = fx_start("slow=5000", OPAL_OTLP_PROFILES_PATH);
	struct opal_otlp_exporter *e = exporter(f->url, 10000, OPAL_OTLP_SIGNAL_PROFILES, NULL);
	struct opal_export_stats st;

	push_request(e, 107);
	push_request(e, 108);
	usleep(200000);
	double t = now_ms();
	opal_otlp_exporter_stop(e, 300, &st);
	double took = now_ms() - t;
	if (took > 1500)
		fail_msg("stop with a 300 ms flush took %.0f ms", took);
	assert_int_equal(st.failed, 1);    /* the cancelled attempt */
	assert_int_equal(st.dropped, 1);   /* left in the queue */
	assert_int_equal(st.sent, 0);
	fx_stop(f);
}

/* ---- profiles as logs --------------------------------------------------------- */

static void test_logs_encode(void **state)
{
	struct opal_profile *p = small_profile(200, 6);
	struct opal_otlp_kv extra[2] = { { "deployment.environment.name", "test" },
					 { "service.name", "from-attributes" } };
	struct opal_otlp_logs_options o = { .host_name = "h1", .resource_attributes = extra,
					    .n_resource_attributes = 2, .scope_version = "9" };
	struct rcv_summary sum = { 0 };
	char why[256] = "";
	uint8_t *buf;
	size_t len;

	assert_int_equal(opal_otlp_logs_encode_profile(p, &o, &buf, &len), 0);
	if (!rcv_check_logs(buf, len, &sum, why, sizeof(why)))
		fail_msg("logs request rejected: %s", why);
	assert_int_equal(sum.samples, 6);
	assert_int_equal(sum.period, PERIOD);
	assert_int_equal(sum.log_records, 1);
	rcv_summary_free(&sum);

	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *q =
		opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(NULL, len,
											  buf);
	assert_non_null(q);
	assert_int_equal(q->n_resource_logs, 1);
	Opentelemetry__Proto__Resource__V1__Resource *res = q->resource_logs[0]->resource;
	bool saw_service = false, saw_host = false;
	for (size_t i = 0; i < res->n_attributes; i++) {
		if (strcmp(res->attributes[i]->key, "service.name") == 0) {
			assert_string_equal(res->attributes[i]->value->string_value, "from-attributes");
			saw_service = true;
		}
		if (strcmp(res->attributes[i]->key, "host.name") == 0) {
			assert_string_equal(res->attributes[i]->value->string_value, "h1");
			saw_host = true;
		}
	}
	assert_true(saw_service && saw_host);
	Opentelemetry__Proto__Logs__V1__ScopeLogs *sl = q->resource_logs[0]->scope_logs[0];
	assert_string_equal(sl->scope->name, "opal");
	assert_string_equal(sl->scope->version, "9");
	Opentelemetry__Proto__Logs__V1__LogRecord *lr = sl->log_records[0];
	assert_int_equal(lr->time_unix_nano, T0);
	assert_string_equal(lr->event_name, OPAL_LOGS_EVENT_NAME);
	assert_int_equal(lr->severity_number,
			 OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_INFO);
	bool saw_duration = false;
	for (size_t i = 0; i < lr->n_attributes; i++)
		if (strcmp(lr->attributes[i]->key, OPAL_LOGS_ATTR_DURATION) == 0) {
			assert_int_equal(lr->attributes[i]->value->int_value, 5000000000ll);
			saw_duration = true;
		}
	assert_true(saw_duration);
	opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(q, NULL);
	free(buf);

	/* OTEL_SERVICE_NAME-style explicit name wins; bounds are enforced. */
	o.service_name = "explicit";
	struct opal_otlp_logs_record r = { .pprof_gz = (const uint8_t *)"\x1f\x8b", .len = 2,
					   .period_ns = 1 };
	assert_int_equal(opal_otlp_logs_encode(&r, &o, &buf, &len), 0);
	assert_non_null(memmem(buf, len, "explicit", 8));
	assert_null(memmem(buf, len, "from-attributes", 15));
	free(buf);
	r.len = OPAL_OTLP_LOGS_MAX_PAYLOAD + 1;
	assert_int_equal(opal_otlp_logs_encode(&r, &o, &buf, &len), -E2BIG);
	r.len = 2;
	r.period_ns = 0;
	assert_int_equal(opal_otlp_logs_encode(&r, &o, &buf, &len), -EINVAL);
	opal_profile_free(p);
}

static void test_logs_exporter(void **state)
{
	struct fixture *f = fx_start("ok,partial", OPAL_OTLP_LOGS_PATH);
	struct opal_otlp_exporter *e = exporter(f->url, 3000, OPAL_OTLP_SIGNAL_LOGS, NULL);
	struct opal_profile *p = small_profile(300, 5);
	struct opal_export_stats st;
	uint8_t *buf;
	size_t len;

	assert_int_equal(opal_otlp_logs_encode_profile(p, NULL, &buf, &len), 0);
	assert_int_equal(opal_otlp_exporter_push(e, buf, len), 0);
	assert_int_equal(opal_otlp_exporter_push_profile(e, p, NULL, NULL), 0);
	assert_int_equal(otlp_receiver_wait(f->rcv, 2, 5000), 2);
	opal_otlp_exporter_stop(e, 2000, &st);
	assert_int_equal(fx_requests(f), 2);
	for (int i = 0; i < 2; i++) {
		if (!f->reqs[i].valid)
			fail_msg("logs request %d rejected: %s", i, f->reqs[i].error);
		assert_string_equal(f->reqs[i].path, "/v1/logs");
		assert_string_equal(f->reqs[i].content_encoding, "gzip");
		assert_int_equal(f->reqs[i].sum.samples, 5);
	}
	assert_int_equal(st.sent, 2);
	assert_int_equal(st.partial, 1);   /* the logs response's partial_success was read */
	opal_profile_free(p);
	fx_stop(f);
}

/* ---- the receiver's checks can fail ------------------------------------------ */

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	Request;

static bool check_mutated(void (*mutate)(Request *), char *why, size_t why_len)
{
	size_t len;
	uint8_t *buf = request_for(400, &len);
	Request *q =
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
			NULL, len, buf);
	struct rcv_summary sum = { 0 };
	bool ok;

	assert_non_null(q);
	free(buf);
	char **orig = q->dictionary->string_table;
	size_t orig_n = q->dictionary->n_string_table;
	mutate(q);
	len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(q);
	buf = malloc(len + 1);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(q, buf);
	/* Mutations replace the string table with static storage: put the
	 * decoded one back before freeing. */
	q->dictionary->string_table = orig;
	q->dictionary->n_string_table = orig_n;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(q, NULL);
	ok = rcv_check_profiles(buf, len, &sum, why, why_len);
	rcv_summary_free(&sum);
	free(buf);
	return ok;
}

static char *saved_strings[256];

static void keep_strings(Request *q, size_t extra)
{
	Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = q->dictionary;

	assert_true(d->n_string_table + extra <= 256);
	for (size_t i = 0; i < d->n_string_table; i++)
		saved_strings[i] = d->string_table[i];
}

static void mut_none(Request *q)
{
	keep_strings(q, 0);
	q->dictionary->string_table = saved_strings;
}

static void mut_dup_string(Request *q)
{
	size_t n = q->dictionary->n_string_table;

	keep_strings(q, 1);
	saved_strings[n] = saved_strings[n - 1];
	q->dictionary->string_table = saved_strings;
	q->dictionary->n_string_table = n + 1;
}

static void mut_first_string(Request *q)
{
	keep_strings(q, 0);
	saved_strings[0] = saved_strings[1];
	q->dictionary->string_table = saved_strings;
}

static void mut_orphan_string(Request *q)
{
	static char orphan[] = "nobody-references-me";
	size_t n = q->dictionary->n_string_table;

	keep_strings(q, 1);
	saved_strings[n] = orphan;
	q->dictionary->string_table = saved_strings;
	q->dictionary->n_string_table = n + 1;
}

static void mut_bad_stack_index(Request *q)
{
	mut_none(q);
	q->resource_profiles[0]->scope_profiles[0]->profiles[0]->samples[0]->stack_index = 9999;
}

static void mut_dup_attr_key(Request *q)
{
	Opentelemetry__Proto__Profiles__V1development__Sample *s =
		q->resource_profiles[0]->scope_profiles[0]->profiles[0]->samples[0];

	mut_none(q);
	assert_true(s->n_attribute_indices >= 2);
	s->attribute_indices[1] = s->attribute_indices[0];
}

static void test_receiver_rejects_broken_requests(void **state)
{
	char why[256];

	if (!check_mutated(mut_none, why, sizeof(why)))
		fail_msg("unchanged request rejected: %s", why);
	assert_false(check_mutated(mut_dup_string, why, sizeof(why)));
	assert_non_null(strstr(why, "twice"));
	assert_false(check_mutated(mut_first_string, why, sizeof(why)));
	assert_non_null(strstr(why, "string_table[0]"));
	assert_false(check_mutated(mut_orphan_string, why, sizeof(why)));
	assert_non_null(strstr(why, "not referenced"));
	assert_false(check_mutated(mut_bad_stack_index, why, sizeof(why)));
	assert_non_null(strstr(why, "out of range"));
	assert_false(check_mutated(mut_dup_attr_key, why, sizeof(why)));
	assert_non_null(strstr(why, "twice"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve_url),
		cmocka_unit_test(test_parse_headers),
		cmocka_unit_test(test_retry_after_parse),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_receiver_rejects_broken_requests),
		cmocka_unit_test(test_success_headers_gzip),
		cmocka_unit_test(test_503_retry_after_seconds),
		cmocka_unit_test(test_503_retry_after_date),
		cmocka_unit_test(test_429_retried_with_backoff),
		cmocka_unit_test(test_502_504_retried),
		cmocka_unit_test(test_400_not_retried),
		cmocka_unit_test(test_500_not_retried),
		cmocka_unit_test(test_partial_success_not_retried),
		cmocka_unit_test(test_slow_response_times_out_and_retries),
		cmocka_unit_test(test_connection_refused_retried),
		cmocka_unit_test(test_queue_drops_oldest_and_never_blocks),
		cmocka_unit_test(test_stop_cancels_slow_attempt),
		cmocka_unit_test(test_logs_encode),
		cmocka_unit_test(test_logs_exporter),
	};

	opal_log_init("test_otlp_http", 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
