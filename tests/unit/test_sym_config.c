/* Unit tests of symbolizer/sym_config.c: the option table (every option
 * documented, the old command-line names and defaults kept, the reloadable
 * set), the OpenTelemetry environment variables, the derived values (uids,
 * resource attributes, OTLP URLs) and their errors, and the SIGHUP reload
 * (applied vs needs-restart, derived values refreshed, broken files
 * ignored). */
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

#include "symbolizer/sym_config.h"
#include "symbolizer/symbolize/sym_index.h"

static const char *const otel_vars[] = {
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME", OPAL_SYMBOLIZER_CONFIG_ENV,
	"OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
	"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION",
};

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(otel_vars) / sizeof(otel_vars[0]); i++)
		unsetenv(otel_vars[i]);
}

static char conf_path[64];

static void write_conf(const char *text)
{
	if (!conf_path[0]) {
		strcpy(conf_path, "/tmp/opal-test-symconf.XXXXXX");
		int fd = mkstemp(conf_path);
		assert_true(fd >= 0);
		close(fd);
	}
	FILE *f = fopen(conf_path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int load(struct opal_sym_config *c, char *why, int argc, ...)
{
	char *argv[32] = { "opal-symbolizer" };
	va_list ap;

	va_start(ap, argc);
	for (int i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	return opal_sym_config_load(argc, argv, c, why, 512);
}

static const struct opal_opt *opt(const char *name)
{
	const struct opal_config_spec *s = opal_sym_config_spec();

	for (size_t i = 0; i < s->n_opts; i++)
		if (!strcmp(s->opts[i].name, name))
			return &s->opts[i];
	return NULL;
}

/* The names scripts, units and docs use, each with help text; the
 * reloadable set is exactly what the daemon applies on SIGHUP. */
static void test_table(void **state)
{
	static const char *const names[] = {
		"socket", "state-dir", "out-dir", "keep-intervals", "whole-run", "user", "output-group",
		"allow-uid", "max-open-files", "max-debug-memory", "max-decompress",
		"max-index-memory", "verbose", "http-listen",
		"token-file", "tls-cert", "tls-key",
		"max-upload-bytes", "upload-expiry", "upstream", "upstream-token-file",
		"upstream-cacert", "upload-debuginfo", "export", "otlp-endpoint", "otlp-headers",
		"otlp-timeout", "otlp-compression", "otlp-queue-bytes", "resource-attributes",
		"service-name", "flamegraph-keep", "flamegraph-max-bytes", "flamegraph-max-age",
		"otlp-receive", "otlp-forward",
	};
	static const char *const reloadable[] = {
		"keep-intervals", "max-debug-memory", "max-decompress", "max-index-memory", "verbose",
		"export", "otlp-endpoint", "otlp-headers",
		"otlp-timeout", "otlp-compression", "otlp-queue-bytes", "resource-attributes",
		"service-name", "flamegraph-keep", "flamegraph-max-bytes", "flamegraph-max-age",
	};
	const struct opal_config_spec *s = opal_sym_config_spec();
	size_t n_reload = 0;

	(void)state;
	assert_int_equal(s->n_opts, sizeof(names) / sizeof(names[0]));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct opal_opt *o = opt(names[i]);
		if (!o)
			fail_msg("option %s missing", names[i]);
		assert_non_null(o->help);
		assert_true(strlen(o->help) > 10);
	}
	for (size_t i = 0; i < s->n_opts; i++)
		n_reload += s->opts[i].reloadable;
	assert_int_equal(n_reload, sizeof(reloadable) / sizeof(reloadable[0]));
	for (size_t i = 0; i < n_reload; i++)
		assert_true(opt(reloadable[i])->reloadable);
	assert_true(opt("otlp-headers")->secret);
	assert_string_equal(opt("otlp-timeout")->env, "OTEL_EXPORTER_OTLP_TIMEOUT");
	assert_string_equal(opt("otlp-headers")->env, "OTEL_EXPORTER_OTLP_HEADERS");
	assert_string_equal(opt("otlp-compression")->env, "OTEL_EXPORTER_OTLP_COMPRESSION");
	assert_string_equal(opt("resource-attributes")->env, "OTEL_RESOURCE_ATTRIBUTES");
	assert_string_equal(s->config_env, "OPAL_SYMBOLIZER_CONFIG");
}

/* The defaults the daemon had before the table, plus the new ones. */
static void test_defaults(void **state)
{
	struct opal_sym_config c;
	char why[512];

	(void)state;
	clear_env();
	assert_int_equal(load(&c, why, 1), 0);
	assert_string_equal(c.o.socket, "/run/opal/collector.sock");
	assert_string_equal(c.o.state_dir, "/var/lib/opal");
	assert_string_equal(c.o.out_dir, "/var/lib/opal/out");
	assert_int_equal(c.o.keep_intervals, 100);
	assert_int_equal(c.o.max_open_files, 512);
	assert_int_equal(c.o.max_debug_memory, 1ull << 30);
	assert_int_equal(c.o.max_index_memory, OPAL_SYM_INDEX_DEFAULT_BUDGET);
	assert_string_equal(c.o.http_listen, "127.0.0.1:7412");
	assert_false(c.http_required);
	assert_int_equal(c.o.max_upload_bytes, 1u << 30);
	assert_int_equal(c.o.upload_expiry, 900);
	assert_null(c.o.user);
	assert_int_equal(c.n_allow, 0);
	assert_int_equal(c.o.exports.n, 2);
	assert_true(opal_strlist_has(&c.o.exports, "pprof"));
	assert_true(opal_strlist_has(&c.o.exports, "otlp"));
	assert_true(c.write_intervals);
	assert_null(c.profiles_url);   /* otlp on, but no endpoint */
	assert_null(c.logs_url);
	assert_int_equal(c.o.otlp_timeout_ms, 10000);
	assert_string_equal(c.o.otlp_compression, "gzip");
	assert_int_equal(c.o.otlp_queue_bytes, 64u << 20);
	assert_int_equal(c.o.flamegraph_keep, 720);
	assert_int_equal(c.o.flamegraph_max_bytes, 256u << 20);
	assert_int_equal(c.o.flamegraph_max_age_s, 3600);
	assert_int_equal(c.n_res_attrs, 0);
	opal_sym_config_free(&c);
}

/* The command line the integration tests and units use, and the
 * OpenTelemetry variables. */
static void test_flags_and_env(void **state)
{
	struct opal_sym_config c;
	char why[512];

	(void)state;
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/", 1);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1500", 1);
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-a=1,x-b=%20two", 1);
	setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,team=infra", 1);
	setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs:4318/custom/logs", 1);
	assert_int_equal(load(&c, why, 16, "--socket", "/tmp/s.sock", "--state-dir", "/tmp/st",
			      "--out-dir", "/tmp/out", "--user", "nobody", "--whole-run",
			      "--allow-uid", "1000", "--allow-uid=1001", "--export",
			      "pprof,otlp,otlp-logs", "--verbose"), 0);
	assert_string_equal(c.o.socket, "/tmp/s.sock");
	assert_string_equal(c.o.user, "nobody");
	assert_true(c.o.whole_run);
	assert_true(c.o.verbose);
	assert_int_equal(c.n_allow, 2);
	assert_int_equal(c.allow_uids[0], 1000);
	assert_int_equal(c.allow_uids[1], 1001);
	assert_int_equal(c.o.otlp_timeout_ms, 1500);
	assert_string_equal(c.profiles_url, "http://env:4318/v1development/profiles");
	assert_string_equal(c.logs_url, "http://logs:4318/custom/logs");
	assert_int_equal(c.n_res_attrs, 2);
	assert_string_equal(c.res_attrs[1].key, "team");
	/* no signal variable: both exporters take the generic ones */
	for (int s = 0; s < 2; s++) {
		assert_string_equal(c.signal[s].headers, "x-a=1,x-b=%20two");
		assert_int_equal(c.signal[s].timeout_ms, 1500);
		assert_true(c.signal[s].gzip);
	}
	opal_sym_config_free(&c);

	/* a signal's own variables beat the generic ones for that signal */
	setenv("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "x-p=1", 1);
	setenv("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "2500", 1);
	setenv("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "none", 1);
	assert_int_equal(load(&c, why, 3, "--export", "otlp,otlp-logs"), 0);
	assert_string_equal(c.signal[OPAL_OTLP_SIGNAL_PROFILES].headers, "x-p=1");
	assert_int_equal(c.signal[OPAL_OTLP_SIGNAL_PROFILES].timeout_ms, 2500);
	assert_true(c.signal[OPAL_OTLP_SIGNAL_PROFILES].gzip);
	assert_string_equal(c.signal[OPAL_OTLP_SIGNAL_LOGS].headers, "x-a=1,x-b=%20two");
	assert_int_equal(c.signal[OPAL_OTLP_SIGNAL_LOGS].timeout_ms, 1500);
	assert_false(c.signal[OPAL_OTLP_SIGNAL_LOGS].gzip);
	opal_sym_config_free(&c);
	/* ... and the command line beats them */
	assert_int_equal(load(&c, why, 5, "--otlp-headers", "x-f=1", "--otlp-timeout", "700"), 0);
	assert_string_equal(c.signal[OPAL_OTLP_SIGNAL_PROFILES].headers, "x-f=1");
	assert_int_equal(c.signal[OPAL_OTLP_SIGNAL_PROFILES].timeout_ms, 700);
	opal_sym_config_free(&c);
	/* bad values are named */
	setenv("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "soon", 1);
	assert_int_equal(load(&c, why, 1), -EINVAL);
	assert_non_null(strstr(why, "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT: 'soon'"));
	setenv("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "2500", 1);
	setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "bad header=1", 1);
	assert_int_equal(load(&c, why, 1), -EINVAL);
	assert_non_null(strstr(why, "OTEL_EXPORTER_OTLP_LOGS_HEADERS is malformed"));
	unsetenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS");
	setenv("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "zstd", 1);
	assert_int_equal(load(&c, why, 1), -EINVAL);
	assert_non_null(strstr(why, "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION: 'zstd'"));
	unsetenv("OTEL_EXPORTER_OTLP_PROFILES_HEADERS");
	unsetenv("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT");
	unsetenv("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION");

	/* the flag's base URL beats every variable */
	assert_int_equal(load(&c, why, 5, "--export", "otlp,otlp-logs", "--otlp-endpoint",
			      "https://flag:4318"), 0);
	assert_string_equal(c.profiles_url, "https://flag:4318/v1development/profiles");
	assert_string_equal(c.logs_url, "https://flag:4318/v1/logs");
	assert_false(c.write_intervals);
	opal_sym_config_free(&c);

	/* an explicit --http-listen must work (the default may fail quietly) */
	assert_int_equal(load(&c, why, 3, "--http-listen", "none"), 0);
	assert_true(c.http_required);
	opal_sym_config_free(&c);
	clear_env();
}

static void expect_error(const char *needle, int argc, ...)
{
	char *argv[16] = { "opal-symbolizer" };
	struct opal_sym_config c;
	char why[512];
	va_list ap;

	va_start(ap, argc);
	for (int i = 1; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	assert_int_equal(opal_sym_config_load(argc, argv, &c, why, sizeof(why)), -EINVAL);
	if (!strstr(why, needle))
		fail_msg("error \"%s\" lacks \"%s\"", why, needle);
	assert_null(c.o.socket);   /* nothing left allocated */
}

/* --otlp-receive forwards to --otlp-forward as given, else to the
 * profiles endpoint; with neither it refuses to start. */
static void test_otlp_receive(void **state)
{
	struct opal_sym_config c;
	char why[512];

	(void)state;
	clear_env();
	assert_int_equal(load(&c, why, 2, "--whole-run"), 0);
	assert_null(c.forward_url);   /* off: nothing derived */
	opal_sym_config_free(&c);
	assert_int_equal(load(&c, why, 2, "--otlp-receive"), -EINVAL);
	assert_non_null(strstr(why, "nowhere to forward to"));
	assert_int_equal(load(&c, why, 4, "--otlp-receive", "--otlp-forward", "ftp://x"), -EINVAL);
	assert_non_null(strstr(why, "otlp-forward"));
	assert_int_equal(load(&c, why, 4, "--otlp-receive", "--otlp-forward",
			      "http://backend:4318/v1development/profiles"), 0);
	assert_string_equal(c.forward_url, "http://backend:4318/v1development/profiles");
	opal_sym_config_free(&c);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/", 1);
	assert_int_equal(load(&c, why, 4, "--otlp-receive", "--export", "pprof"), 0);
	assert_string_equal(c.forward_url, "http://collector:4318/v1development/profiles");
	opal_sym_config_free(&c);
	clear_env();
}

static void test_errors(void **state)
{
	(void)state;
	clear_env();
	expect_error("allow-uid: 'bob' is not a user id", 3, "--allow-uid", "bob");
	expect_error("allow-uid: more than 16", 3, "--allow-uid",
		     "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17");
	expect_error("export: 'jaeger' (from command line) is not one of: otlp, otlp-logs, pprof", 3,
		     "--export", "pprof,jaeger");
	expect_error("otlp-compression", 3, "--otlp-compression", "zstd");
	expect_error("not an http:// or https:// URL", 3, "--otlp-endpoint", "ftp://x");
	expect_error("keep-intervals", 3, "--keep-intervals", "-1");
	expect_error("otlp-timeout", 3, "--otlp-timeout", "0");
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "bad header=1", 1);
	expect_error("otlp-headers (OTEL_EXPORTER_OTLP_HEADERS) is malformed", 1);
	unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
	setenv("OTEL_RESOURCE_ATTRIBUTES", "novalue", 1);
	expect_error("resource-attributes (OTEL_RESOURCE_ATTRIBUTES) is malformed", 1);
	unsetenv("OTEL_RESOURCE_ATTRIBUTES");
	/* a bad profiles endpoint is harmless while otlp is not exported */
	setenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "gopher://x", 1);
	expect_error("OTLP profiles endpoint", 1);
	struct opal_sym_config c;
	char why[512];
	assert_int_equal(load(&c, why, 3, "--export", "pprof"), 0);
	opal_sym_config_free(&c);
	clear_env();
}

/* SIGHUP through the config file: the reloadable options apply, the
 * derived values follow, the others keep their running value; the
 * command line still wins; a broken file changes nothing. */
static void test_reload(void **state)
{
	struct opal_sym_config c;
	struct opal_config_plan plan;
	char why[512];
	char *argv[] = { "opal-symbolizer", "--config", conf_path, "--keep-intervals", "7", NULL };

	(void)state;
	clear_env();
	write_conf("{\"export\": [\"pprof\"], \"max-open-files\": 100}");
	assert_int_equal(opal_sym_config_load(5, argv, &c, why, sizeof(why)), 0);
	assert_int_equal(c.o.keep_intervals, 7);
	assert_int_equal(c.o.max_open_files, 100);
	assert_null(c.profiles_url);

	write_conf("{\"export\": [\"pprof\", \"otlp\"], \"otlp-endpoint\": \"http://h:4318\", "
		   "\"resource-attributes\": \"a=b\", \"keep-intervals\": 1, "
		   "\"max-open-files\": 5, \"flamegraph-keep\": 3, \"otlp-headers\": \"k=v\"}");
	assert_int_equal(opal_sym_config_reload(5, argv, &c, &plan), 0);
	assert_true(opal_config_plan_applied(&plan, "export"));
	assert_true(opal_config_plan_applied(&plan, "otlp-endpoint"));
	assert_true(opal_config_plan_applied(&plan, "flamegraph-keep"));
	assert_true(opal_sym_config_exporters_changed(&plan));
	assert_false(opal_config_plan_applied(&plan, "keep-intervals"));   /* the flag wins */
	assert_int_equal(plan.n_restart, 1);
	assert_string_equal(plan.restart[0]->name, "max-open-files");
	assert_int_equal(c.o.max_open_files, 100);
	assert_int_equal(c.o.flamegraph_keep, 3);
	assert_string_equal(c.profiles_url, "http://h:4318/v1development/profiles");
	assert_int_equal(c.n_res_attrs, 1);
	assert_string_equal(c.o.otlp_headers, "k=v");

	/* broken files: nothing changes */
	write_conf("{\"export\": [\"otlp\"], \"otlp-endpoint\": \"mailto:x\"}");
	assert_int_equal(opal_sym_config_reload(5, argv, &c, &plan), -EINVAL);
	assert_int_equal(plan.n_applied, 0);
	assert_string_equal(c.profiles_url, "http://h:4318/v1development/profiles");
	assert_true(c.write_intervals);
	write_conf("{\"export\": ");
	assert_int_equal(opal_sym_config_reload(5, argv, &c, &plan), -EINVAL);
	unlink(conf_path);
	assert_int_equal(opal_sym_config_reload(5, argv, &c, &plan), -ENOENT);
	assert_int_equal(c.n_res_attrs, 1);

	/* only exporter-unrelated options: the exporters stay */
#define UNRELATED "{\"export\": [\"pprof\", \"otlp\"], \"otlp-endpoint\": \"http://h:4318\", " \
		  "\"resource-attributes\": \"a=b\", \"max-open-files\": 5, " \
		  "\"flamegraph-keep\": 4, \"otlp-headers\": \"k=v\", \"verbose\": true, " \
		  "\"max-debug-memory\": \"64m\""
	write_conf(UNRELATED "}");
	assert_int_equal(opal_sym_config_reload(5, argv, &c, &plan), 0);
	assert_int_equal(plan.n_applied, 3);
	assert_true(opal_config_plan_applied(&plan, "max-debug-memory"));
	assert_false(opal_sym_config_exporters_changed(&plan));
	assert_true(c.o.verbose);
	assert_int_equal(c.o.max_debug_memory, 64ull << 20);

	/* the DWARF index budget alone */
	write_conf(UNRELATED ", \"max-index-memory\": \"32m\"}");
#undef UNRELATED
	assert_int_equal(opal_sym_config_reload(5, argv, &c, &plan), 0);
	assert_int_equal(plan.n_applied, 1);
	assert_true(opal_config_plan_applied(&plan, "max-index-memory"));
	assert_int_equal(c.o.max_index_memory, 32ull << 20);
	opal_sym_config_free(&c);
	unlink(conf_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_flags_and_env),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_otlp_receive),
		cmocka_unit_test(test_reload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
