/* Unit tests of shared/config.c: precedence flags > environment > config
 * file > defaults for every option type, list replacement vs. repeated
 * flags, the config file named by flag or environment, value validation and
 * error messages, --help content, and change detection for SIGHUP. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/config.h"

struct conf {
	char *socket;
	uint64_t interval;
	uint64_t queue_bytes;
	bool whole_run;
	struct opal_strlist exports;
	uint64_t timeout_ms;
	char *headers;
};

static const char *const export_kinds[] = { "otlp", "otlp-logs", "pprof", NULL };

static const struct opal_opt opts[] = {
	{ .name = "socket", .type = OPAL_OPT_STRING, .offset = offsetof(struct conf, socket),
	  .def = "/run/opal/t.sock", .env = "OPAL_T_SOCKET", .arg = "PATH",
	  .help = "collector socket" },
	{ .name = "interval", .type = OPAL_OPT_UINT, .offset = offsetof(struct conf, interval),
	  .def = "5", .env = "OPAL_T_INTERVAL", .arg = "SECONDS", .help = "reporting interval",
	  .min = 1, .max = 3600, .reloadable = true },
	{ .name = "queue-bytes", .type = OPAL_OPT_SIZE, .offset = offsetof(struct conf, queue_bytes),
	  .def = "64m", .env = "OPAL_T_QUEUE", .help = "export queue bound",
	  .min = 1, .max = 3ull << 40 },
	{ .name = "whole-run", .type = OPAL_OPT_BOOL, .offset = offsetof(struct conf, whole_run),
	  .env = "OPAL_T_WHOLE", .help = "write the whole-run profile" },
	{ .name = "export", .type = OPAL_OPT_LIST, .offset = offsetof(struct conf, exports),
	  .def = "pprof", .env = "OPAL_T_EXPORT", .help = "exporters", .choices = export_kinds },
	{ .name = "otlp-timeout", .type = OPAL_OPT_UINT, .offset = offsetof(struct conf, timeout_ms),
	  .def = "10000", .env = "OTEL_EXPORTER_OTLP_TIMEOUT", .arg = "MS",
	  .help = "OTLP request timeout", .min = 1, .max = 600000 },
	{ .name = "otlp-headers", .type = OPAL_OPT_STRING, .offset = offsetof(struct conf, headers),
	  .env = "OTEL_EXPORTER_OTLP_HEADERS", .arg = "K=V,...", .help = "extra headers",
	  .env_note = "percent-decoded" },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static const struct opal_config_spec spec = {
	.prog = "opal-test", .usage = "Test daemon.", .opts = opts, .n_opts = N_OPTS,
	.config_env = "OPAL_T_CONFIG",
};

static char tmp_path[64];

static void clear_env(void)
{
	for (size_t i = 0; i < N_OPTS; i++)
		unsetenv(opts[i].env);
	unsetenv("OPAL_T_CONFIG");
}

static const char *write_file(const char *text)
{
	strcpy(tmp_path, "/tmp/opal-test-config.XXXXXX");
	int fd = mkstemp(tmp_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return tmp_path;
}

static int load(struct conf *c, enum opal_config_source *src, char *why, int argc, ...)
{
	char *argv[32] = { (char *)"opal-test" };
	va_list ap;

	assert_true(argc < 32);
	va_start(ap, argc);
	for (int i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	memset(c, 0, sizeof(*c));
	return opal_config_load(&spec, argc, argv, c, src, why, 256);
}

static void test_defaults(void **state)
{
	struct conf c;
	enum opal_config_source src[N_OPTS];
	char why[256];

	clear_env();
	assert_int_equal(load(&c, src, why, 1), 0);
	assert_string_equal(c.socket, "/run/opal/t.sock");
	assert_int_equal(c.interval, 5);
	assert_int_equal(c.queue_bytes, 64ull << 20);
	assert_false(c.whole_run);
	assert_int_equal(c.exports.n, 1);
	assert_string_equal(c.exports.v[0], "pprof");
	assert_int_equal(c.timeout_ms, 10000);
	assert_null(c.headers);
	for (size_t i = 0; i < N_OPTS; i++)
		assert_int_equal(src[i], OPAL_SRC_DEFAULT);
	opal_config_free(&spec, &c);
	assert_null(c.socket);
	assert_int_equal(c.exports.n, 0);
}

static void test_precedence(void **state)
{
	struct conf c;
	enum opal_config_source src[N_OPTS];
	char why[256];
	const char *file = write_file(
		"{\"socket\": \"/file.sock\", \"interval\": 7, \"queue-bytes\": \"1k\","
		" \"whole-run\": true, \"export\": [\"otlp\", \"pprof\"], \"otlp-timeout\": 111,"
		" \"otlp-headers\": \"a=file\"}");

	clear_env();
	/* file over defaults */
	assert_int_equal(load(&c, src, why, 3, "--config", file), 0);
	assert_string_equal(c.socket, "/file.sock");
	assert_int_equal(c.interval, 7);
	assert_int_equal(c.queue_bytes, 1024);
	assert_true(c.whole_run);
	assert_int_equal(c.exports.n, 2);
	assert_string_equal(c.exports.v[0], "otlp");
	assert_int_equal(c.timeout_ms, 111);
	assert_string_equal(c.headers, "a=file");
	for (size_t i = 0; i < N_OPTS; i++)
		assert_int_equal(src[i], OPAL_SRC_FILE);
	opal_config_free(&spec, &c);

	/* environment over file; empty variables count as unset */
	setenv("OPAL_T_SOCKET", "/env.sock", 1);
	setenv("OPAL_T_INTERVAL", "", 1);
	setenv("OPAL_T_WHOLE", "off", 1);
	setenv("OPAL_T_EXPORT", "otlp-logs", 1);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500", 1);
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=env", 1);
	assert_int_equal(load(&c, src, why, 3, "--config", file), 0);
	assert_string_equal(c.socket, "/env.sock");
	assert_int_equal(src[0], OPAL_SRC_ENV);
	assert_int_equal(c.interval, 7);
	assert_int_equal(src[1], OPAL_SRC_FILE);
	assert_false(c.whole_run);
	assert_int_equal(c.exports.n, 1);   /* replaced, not appended */
	assert_string_equal(c.exports.v[0], "otlp-logs");
	assert_int_equal(c.timeout_ms, 2500);
	assert_string_equal(c.headers, "a=env");
	opal_config_free(&spec, &c);

	/* flags over environment; repeated list flags accumulate */
	assert_int_equal(load(&c, src, why, 12, "--config", file, "--socket=/flag.sock",
			      "--otlp-timeout", "42", "--whole-run", "--export", "otlp",
			      "--export=pprof,otlp-logs", "--queue-bytes", "2MiB"), 0);
	assert_string_equal(c.socket, "/flag.sock");
	assert_int_equal(c.timeout_ms, 42);
	assert_true(c.whole_run);
	assert_int_equal(c.exports.n, 3);
	assert_string_equal(c.exports.v[0], "otlp");
	assert_string_equal(c.exports.v[1], "pprof");
	assert_string_equal(c.exports.v[2], "otlp-logs");
	assert_int_equal(c.queue_bytes, 2ull << 20);
	assert_int_equal(src[0], OPAL_SRC_FLAG);
	assert_int_equal(src[3], OPAL_SRC_FLAG);
	assert_int_equal(src[6], OPAL_SRC_ENV);
	opal_config_free(&spec, &c);

	/* --whole-run=false beats the environment's true */
	setenv("OPAL_T_WHOLE", "1", 1);
	assert_int_equal(load(&c, src, why, 2, "--whole-run=false"), 0);
	assert_false(c.whole_run);
	opal_config_free(&spec, &c);

	/* the config file can come from the environment */
	clear_env();
	setenv("OPAL_T_CONFIG", file, 1);
	assert_int_equal(load(&c, src, why, 1), 0);
	assert_string_equal(c.socket, "/file.sock");
	opal_config_free(&spec, &c);
	clear_env();
	unlink(file);
}

static void expect_error(int want, const char *needle, int argc, ...)
{
	char *argv[16] = { (char *)"opal-test" };
	struct conf c;
	char why[256] = "";
	va_list ap;

	va_start(ap, argc);
	for (int i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	memset(&c, 0, sizeof(c));
	int r = opal_config_load(&spec, argc, argv, &c, NULL, why, sizeof(why));
	if (r != want || !strstr(why, needle))
		fail_msg("got %d '%s', want %d with '%s'", r, why, want, needle);
	/* nothing allocated is left behind on error */
	assert_null(c.socket);
	assert_null(c.exports.v);
}

static void test_errors(void **state)
{
	clear_env();
	expect_error(-EINVAL, "unknown option '--nope'", 2, "--nope");
	expect_error(-EINVAL, "needs a value", 2, "--socket");
	expect_error(-EINVAL, "unexpected argument 'extra'", 2, "extra");
	expect_error(-EINVAL, "interval: '0' (from command line) is not a number in [1, 3600]",
		     3, "--interval", "0");
	expect_error(-EINVAL, "interval: '5s'", 2, "--interval=5s");
	expect_error(-EINVAL, "not a number", 3, "--queue-bytes", "5x");
	expect_error(-EINVAL, "'ftp' (from command line) is not one of: otlp, otlp-logs, pprof",
		     3, "--export", "otlp,ftp");
	expect_error(-EINVAL, "not a boolean", 2, "--whole-run=maybe");
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", 1);
	expect_error(-EINVAL, "[OTEL_EXPORTER_OTLP_TIMEOUT]", 1);
	unsetenv("OTEL_EXPORTER_OTLP_TIMEOUT");

	expect_error(-ENOENT, "/nonexistent/opal.json", 3, "--config", "/nonexistent/opal.json");
	const char *f = write_file("{\"sockett\": \"/x\"}");
	expect_error(-EINVAL, "unknown option \"sockett\"", 3, "--config", f);
	unlink(f);
	f = write_file("{\"interval\": \"7\", \"interval\": 8}");
	expect_error(-EINVAL, "duplicate", 3, "--config", f);
	unlink(f);
	f = write_file("{\"whole-run\": \"yes\"}");
	expect_error(-EINVAL, "\"whole-run\" must be a boolean", 3, "--config", f);
	unlink(f);
	f = write_file("{\"export\": [\"otlp\", 3]}");
	expect_error(-EINVAL, "must hold strings only", 3, "--config", f);
	unlink(f);
	f = write_file("[1, 2]");
	expect_error(-EINVAL, "expected a JSON object", 3, "--config", f);
	unlink(f);
	f = write_file("{\"socket\": ");
	expect_error(-EINVAL, f, 3, "--config", f);
	unlink(f);

	/* over the size bound */
	char *big = malloc(OPAL_CONFIG_MAX_FILE + 16);
	memset(big, ' ', OPAL_CONFIG_MAX_FILE + 15);
	big[0] = '{';
	big[OPAL_CONFIG_MAX_FILE + 14] = '}';
	big[OPAL_CONFIG_MAX_FILE + 15] = '\0';
	f = write_file(big);
	free(big);
	expect_error(-EFBIG, "larger than", 3, "--config", f);
	unlink(f);
}

static void test_help(void **state)
{
	char *buf;
	size_t len;
	FILE *out = open_memstream(&buf, &len);
	struct conf c;
	char why[256];

	opal_config_help(&spec, out);
	fclose(out);
	assert_non_null(strstr(buf, "usage: opal-test [options]"));
	assert_non_null(strstr(buf, "--interval SECONDS"));
	assert_non_null(strstr(buf, "default: 5; env: OPAL_T_INTERVAL; range: 1..3600; "
				    "reloadable on SIGHUP"));
	assert_non_null(strstr(buf, "default: 10000; env: OTEL_EXPORTER_OTLP_TIMEOUT"));
	assert_non_null(strstr(buf, "default: 64m; env: OPAL_T_QUEUE; range: 1..3t"));
	assert_non_null(strstr(buf, "env: OTEL_EXPORTER_OTLP_HEADERS (percent-decoded)"));
	assert_non_null(strstr(buf, "one of: otlp, otlp-logs, pprof"));
	assert_non_null(strstr(buf, "--whole-run\n"));
	assert_non_null(strstr(buf, "default: false; env: OPAL_T_WHOLE"));
	assert_non_null(strstr(buf, "--config FILE"));
	assert_non_null(strstr(buf, "env: OPAL_T_CONFIG"));
	/* every option is listed */
	for (size_t i = 0; i < N_OPTS; i++) {
		char flag[64];
		snprintf(flag, sizeof(flag), "  --%s", opts[i].name);
		assert_non_null(strstr(buf, flag));
	}
	free(buf);
	/* --help wins even next to a broken config file */
	clear_env();
	assert_int_equal(load(&c, NULL, why, 4, "--config", "/nonexistent", "--help"), 1);
}

static void test_changed(void **state)
{
	struct conf a, b;
	char why[256];
	const struct opal_opt *ch[4];

	clear_env();
	assert_int_equal(load(&a, NULL, why, 1), 0);
	assert_int_equal(load(&b, NULL, why, 1), 0);
	assert_int_equal(opal_config_changed(&spec, &a, &b, ch, 4), 0);
	opal_config_free(&spec, &b);
	assert_int_equal(load(&b, NULL, why, 5, "--interval", "9", "--export", "otlp"), 0);
	assert_int_equal(opal_config_changed(&spec, &a, &b, ch, 4), 2);
	assert_string_equal(ch[0]->name, "interval");
	assert_true(ch[0]->reloadable);
	assert_string_equal(ch[1]->name, "export");
	assert_false(ch[1]->reloadable);
	assert_true(opal_strlist_has(&b.exports, "otlp"));
	assert_false(opal_strlist_has(&b.exports, "pprof"));
	opal_config_free(&spec, &a);
	opal_config_free(&spec, &b);
}

/* SIGHUP: reloadable options move from the new load into the running one
 * (strings and lists swapped, sources too), others are listed as needing a
 * restart and keep their value; value texts for the log lines. */
static void test_apply_reload(void **state)
{
	struct opal_opt ropts[N_OPTS];
	struct opal_config_spec rspec = spec;
	struct conf cur, next;
	enum opal_config_source cs[N_OPTS], ns[N_OPTS];
	struct opal_config_plan plan;
	char why[256], text[64];

	(void)state;
	clear_env();
	memcpy(ropts, opts, sizeof(opts));
	ropts[4].reloadable = true;   /* export */
	ropts[6].reloadable = true;   /* otlp-headers */
	ropts[6].secret = true;
	rspec.opts = ropts;
	memset(&cur, 0, sizeof(cur));
	memset(&next, 0, sizeof(next));
	char *a1[] = { "t", NULL };
	char *a2[] = { "t", "--interval", "9", "--export", "otlp,otlp-logs", "--otlp-headers",
		       "a=b", "--socket", "/x.sock", "--whole-run", NULL };
	assert_int_equal(opal_config_load(&rspec, 1, a1, &cur, cs, why, sizeof(why)), 0);
	assert_int_equal(opal_config_load(&rspec, 10, a2, &next, ns, why, sizeof(why)), 0);
	opal_config_apply_reload(&rspec, &cur, cs, &next, ns, &plan);
	assert_int_equal(plan.n_applied, 3);
	assert_true(opal_config_plan_applied(&plan, "interval"));
	assert_true(opal_config_plan_applied(&plan, "export"));
	assert_true(opal_config_plan_applied(&plan, "otlp-headers"));
	assert_false(opal_config_plan_applied(&plan, "socket"));
	assert_int_equal(plan.n_restart, 2);
	assert_string_equal(plan.restart[0]->name, "socket");
	assert_string_equal(plan.restart[1]->name, "whole-run");
	/* applied: new values and sources in cur, old ones in next */
	assert_int_equal(cur.interval, 9);
	assert_int_equal(next.interval, 5);
	assert_int_equal(cur.exports.n, 2);
	assert_string_equal(cur.exports.v[1], "otlp-logs");
	assert_int_equal(next.exports.n, 1);
	assert_string_equal(cur.headers, "a=b");
	assert_null(next.headers);
	assert_int_equal(cs[1], OPAL_SRC_FLAG);
	assert_int_equal(cs[0], OPAL_SRC_DEFAULT);
	/* not applied: cur keeps its value */
	assert_string_equal(cur.socket, "/run/opal/t.sock");
	assert_false(cur.whole_run);
	/* log texts */
	opal_config_value_text(&ropts[4], &cur, text, sizeof(text));
	assert_string_equal(text, "otlp,otlp-logs");
	opal_config_value_text(&ropts[6], &cur, text, sizeof(text));
	assert_string_equal(text, "(hidden)");
	opal_config_value_text(&ropts[6], &next, text, sizeof(text));
	assert_string_equal(text, "(hidden)");
	opal_config_value_text(&ropts[2], &cur, text, sizeof(text));
	assert_string_equal(text, "67108864");
	opal_config_value_text(&ropts[3], &next, text, sizeof(text));
	assert_string_equal(text, "true");
	opal_config_value_text(&ropts[0], &next, text, 4);
	assert_string_equal(text, "/x.");   /* truncated, terminated */
	opal_config_free(&rspec, &next);
	/* a second reload with the same values changes nothing */
	assert_int_equal(opal_config_load(&rspec, 10, a2, &next, ns, why, sizeof(why)), 0);
	opal_config_apply_reload(&rspec, &cur, cs, &next, ns, &plan);
	assert_int_equal(plan.n_applied, 0);
	assert_int_equal(plan.n_restart, 2);
	opal_config_free(&rspec, &next);
	opal_config_free(&rspec, &cur);
}

/* The file a load would read: last --config, else the variable. */
static void test_config_file(void **state)
{
	(void)state;
	clear_env();
	char *a1[] = { "t", "--config", "/a.json", "--socket", "--config", "--config=/b.json", NULL };
	assert_string_equal(opal_config_file(&spec, 6, a1), "/b.json");
	char *a2[] = { "t", "--interval", "3", NULL };
	assert_null(opal_config_file(&spec, 3, a2));
	setenv("OPAL_T_CONFIG", "/c.json", 1);
	assert_string_equal(opal_config_file(&spec, 3, a2), "/c.json");
	unsetenv("OPAL_T_CONFIG");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_changed),
		cmocka_unit_test(test_apply_reload),
		cmocka_unit_test(test_config_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
