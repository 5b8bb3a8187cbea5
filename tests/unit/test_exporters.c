/* Unit tests of symbolizer/export/exporters.c (the configured OTLP exporters)
 * against the loopback test receiver of tests/otlp_receiver, compiled in:
 * profiles and logs exporters start from their URLs; the same settings keep
 * the running exporter, changed ones replace it without waiting for the old
 * one's flush; counters in /metrics stay monotonic across replacements;
 * turning an exporter off stops it; intervals without samples are not
 * sent; stopping flushes what is queued. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symbolizer/base/metrics.h"
#include "symbolizer/export/exporters.h"
#include "symbolizer/profile/otlp.h"
#include "symbolizer/profile/otlp_logs.h"
#include "symbolizer/profile/pprof.h"
#include "symbolizer/profile/profile.h"

#include "../otlp_receiver/check.c"
#include "../otlp_receiver/receiver.c"

#define PERIOD 10000000ull
#define T0     1700000000000000000ull

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct opal_profile *profile(uint32_t pid, size_t n)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping m = { .start = 0x400000, .limit = 0x500000,
					  .filename = "/usr/bin/app",
					  .file_id_htlhash = "00112233445566778899aabbccddeeff" };
	struct opal_profile_line l = { "compute", "app.c", 20 };
	struct opal_profile_process proc = { .pid = pid, .executable_name = "app",
					     .executable_path = "/usr/bin/app", .host_name = "h" };
	uint64_t ts[16];
	uint32_t cpus[16] = { 0 };

	assert_non_null(p);
	uint32_t loc = opal_profile_location(p, opal_profile_mapping(p, &m), 0x401234,
					     OPAL_FRAME_NATIVE, &l, 1);
	uint32_t pr = opal_profile_process(p, &proc);
	for (size_t i = 0; i < n; i++)
		ts[i] = T0 + i * PERIOD;
	if (n)
		assert_int_equal(opal_profile_add_sample(p, pr, pid, "w", &loc, 1, ts, cpus, n), 0);
	opal_profile_set_time(p, T0, T0 + 5000000000ull);
	return p;
}

/* Hands one interval over as the symbolizer does: OTLP and gzip'd pprof. */
static void push(struct opal_exporters *x, uint32_t pid, size_t n)
{
	struct opal_profile *p = profile(pid, n);
	uint8_t *otlp = NULL, *gz;
	size_t otlp_len = 0, gz_len;
	struct opal_otlp_logs_options lo = { .service_name = "svc", .host_name = "h" };

	if (opal_exporters_want_otlp(x))
		assert_int_equal(opal_otlp_encode(p, NULL, &otlp, &otlp_len), 0);
	assert_int_equal(opal_pprof_encode(p, true, &gz, &gz_len), 0);
	opal_exporters_push(x, p, otlp, otlp_len, gz, gz_len, &lo);
	free(gz);
	opal_profile_free(p);
}

/* The value of one exporter metric line. */
static uint64_t metric(const char *exporter, const char *outcome)
{
	char *text, line[256];
	size_t len;
	uint64_t v = UINT64_MAX;

	assert_int_equal(opal_metrics_render(NULL, NULL, &text, &len), 0);
	if (outcome)
		snprintf(line, sizeof(line), "opal_export_requests_total{exporter=\"%s\",outcome=\"%s\"} ",
			 exporter, outcome);
	else
		snprintf(line, sizeof(line), "opal_export_queue_requests{exporter=\"%s\"} ", exporter);
	char *at = strstr(text, line);
	if (at)
		v = strtoull(at + strlen(line), NULL, 10);
	free(text);
	if (!at)
		fail_msg("no metric line %s", line);
	return v;
}

/* Publishes (as the daemon's tick does) until the metric reaches `want`. */
static void wait_metric(struct opal_exporters *x, const char *exporter, const char *outcome,
			uint64_t want)
{
	for (int i = 0; i < 100; i++) {
		opal_exporters_publish(x);
		if (metric(exporter, outcome) >= want)
			break;
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL);
	}
}

static void test_configure_replace_stop(void **state)
{
	struct otlp_receiver *rcv = otlp_receiver_start(0, NULL);
	struct rcv_request reqs[16];
	char purl[128], lurl[128];

	(void)state;
	opal_metrics_reset();
	assert_non_null(rcv);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%u/v1development/profiles",
		 otlp_receiver_port(rcv));
	snprintf(lurl, sizeof(lurl), "http://127.0.0.1:%u/v1/logs", otlp_receiver_port(rcv));
	struct opal_exporters *x = opal_exporters_new();
	assert_non_null(x);
	assert_false(opal_exporters_want_otlp(x));

	/* profiles only */
	struct opal_exporters_config c = {
		.profiles = { .url = purl, .headers = "x-opal-test=one", .timeout_ms = 2000,
			      .gzip = true },
		.logs = { .headers = "x-opal-test=logs", .timeout_ms = 2000, .gzip = true },
		.queue_bytes = 1 << 20 };
	assert_int_equal(opal_exporters_configure(x, &c), 0);
	assert_true(opal_exporters_want_otlp(x));
	assert_false(opal_exporters_want_logs(x));
	push(x, 101, 3);
	push(x, 102, 0);   /* no samples: not sent */
	assert_int_equal(otlp_receiver_wait(rcv, 1, 5000), 1);
	assert_int_equal(otlp_receiver_requests(rcv, reqs, 16), 1);
	assert_true(reqs[0].valid);
	assert_string_equal(reqs[0].path, "/v1development/profiles");
	assert_string_equal(reqs[0].test_header, "one");
	wait_metric(x, "otlp", "sent", 1);
	assert_int_equal(metric("otlp", "enqueued"), 1);

	/* same settings: the exporter keeps running (no flush, nothing lost) */
	assert_int_equal(opal_exporters_configure(x, &c), 0);
	assert_int_equal(metric("otlp", "enqueued"), 1);

	/* changed settings while the old exporter is busy with a slow answer:
	 * configure does not wait for it, and the new one sends with the new
	 * headers; the counters add up */
	assert_int_equal(otlp_receiver_script(rcv, "slow=1500"), 0);
	push(x, 103, 2);
	struct timespec in_flight = { 0, 300000000 };   /* the old worker is waiting */
	nanosleep(&in_flight, NULL);
	c.profiles.headers = "x-opal-test=two";
	c.logs.url = lurl;
	double t = now_ms();
	assert_int_equal(opal_exporters_configure(x, &c), 0);
	assert_true(now_ms() - t < 500);
	assert_true(opal_exporters_want_logs(x));
	push(x, 104, 4);
	assert_int_equal(otlp_receiver_wait(rcv, 4, 8000), 4);
	size_t n = otlp_receiver_requests(rcv, reqs, 16);
	int two = 0, logs = 0;
	for (size_t i = 1; i < n; i++) {
		assert_true(reqs[i].valid);
		if (!strcmp(reqs[i].path, "/v1/logs") && !strcmp(reqs[i].test_header, "logs"))
			logs++;   /* each exporter with its own headers */
		else if (!strcmp(reqs[i].test_header, "two"))
			two++;
	}
	assert_int_equal(logs, 1);
	assert_int_equal(two, 1);
	wait_metric(x, "otlp", "sent", 3);
	assert_int_equal(metric("otlp", "enqueued"), 3);
	assert_int_equal(metric("otlp", "sent"), 3);
	wait_metric(x, "otlp-logs", "sent", 1);
	assert_int_equal(metric("otlp-logs", "sent"), 1);

	/* profiles off: nothing more is sent there */
	c.profiles.url = NULL;
	assert_int_equal(opal_exporters_configure(x, &c), 0);
	assert_false(opal_exporters_want_otlp(x));
	push(x, 105, 2);
	assert_int_equal(otlp_receiver_wait(rcv, 5, 5000), 5);
	n = otlp_receiver_requests(rcv, reqs, 16);
	assert_string_equal(reqs[4].path, "/v1/logs");
	assert_int_equal(metric("otlp", "enqueued"), 3);

	/* stop flushes the queue within its time */
	assert_int_equal(otlp_receiver_script(rcv, "slow=300"), 0);
	push(x, 106, 2);
	opal_exporters_stop(x, 5000);
	assert_int_equal(otlp_receiver_requests(rcv, reqs, 16), 6);
	assert_int_equal(metric("otlp-logs", "sent"), 3);
	assert_int_equal(metric("otlp-logs", NULL), 0);
	assert_int_equal(metric("otlp", "dropped"), 0);
	otlp_receiver_stop(rcv);
	opal_exporters_stop(NULL, 0);
}

/* A refused connection: the request is retried, counted, and at stop
 * with no flush time it is dropped and counted, without hanging. */
static void test_unreachable(void **state)
{
	struct opal_exporters_config c = {
		.profiles = { .url = "http://127.0.0.1:1/v1development/profiles", .timeout_ms = 500 },
		.queue_bytes = 1 << 20 };
	struct opal_exporters *x = opal_exporters_new();

	(void)state;
	opal_metrics_reset();
	assert_int_equal(opal_exporters_configure(x, &c), 0);
	push(x, 201, 2);
	push(x, 202, 2);
	double t = now_ms();
	opal_exporters_stop(x, 0);
	assert_true(now_ms() - t < 3000);
	assert_int_equal(metric("otlp", "enqueued"), 2);
	assert_int_equal(metric("otlp", "sent"), 0);
	assert_int_equal(metric("otlp", "dropped") + metric("otlp", "failed"), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configure_replace_stop),
		cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
