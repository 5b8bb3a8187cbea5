/* Unit tests of collector/options.c (command line, config file, --help,
 * SIGHUP reload) and collector/sampler/cpus.c (cpulist parsing). */
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

#include "collector/options.h"
#include "collector/sampler/cpus.h"

/* Parses a NULL-terminated argument list; output and errors go to
 * memory streams whose text is returned in *out / *err (caller frees). */
static int parse(struct opal_collector_options *o, char **out, char **err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	size_t olen, elen;
	FILE *fo = open_memstream(out, &olen), *fe = open_memstream(err, &elen);

	argv[argc++] = "opal-collector";
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	int r = opal_options_parse(argc, argv, o, fo, fe);
	fclose(fo);
	fclose(fe);
	return r;
}

static void test_defaults(void **state)
{
	(void)state;
	struct opal_collector_options o;
	char *out, *err;

	assert_int_equal(parse(&o, &out, &err, NULL), 0);
	assert_string_equal(o.socket_path, OPAL_DEFAULT_SOCKET);
	assert_string_equal(o.symbolizer_user, OPAL_DEFAULT_SYMBOLIZER_USER);
	assert_int_equal(o.frequency_hz, OPAL_DEFAULT_FREQUENCY);
	assert_int_equal(o.interval_s, OPAL_DEFAULT_INTERVAL);
	assert_int_equal(o.buffer_bytes, OPAL_DEFAULT_BUFFER_BYTES);
	assert_int_equal(o.max_fds, OPAL_DEFAULT_MAX_FDS);
	assert_int_equal(o.lifecycle_bytes, OPAL_DEFAULT_LIFECYCLE);
	assert_false(o.include_self);
	assert_false(o.off_cpu);
	assert_int_equal(o.off_cpu_ppm, OPAL_DEFAULT_OFFCPU_PPM);
	assert_int_equal(o.off_cpu_max_rate, OPAL_DEFAULT_OFFCPU_MAX_RATE);
	assert_false(o.command_line);
	assert_false(o.native_only);
	assert_false(o.verbose);
	free(out);
	free(err);
}

static void test_off_cpu(void **state)
{
	(void)state;
	struct opal_collector_options o;
	char *out, *err;

	assert_int_equal(parse(&o, &out, &err, "--off-cpu", "--off-cpu-threshold", "2500", NULL),
			 0);
	assert_true(o.off_cpu);
	assert_int_equal(o.off_cpu_ppm, 2500);
	free(out);
	free(err);
	assert_int_equal(parse(&o, &out, &err, "--off-cpu-threshold", "1000001", NULL), -EINVAL);
	assert_non_null(strstr(err, "off-cpu-threshold"));
	free(out);
	free(err);
	assert_int_equal(parse(&o, &out, &err, "--off-cpu-threshold", "0", NULL), -EINVAL);
	free(out);
	free(err);
	assert_int_equal(parse(&o, &out, &err, "--off-cpu-max-rate", "0", NULL), 0);
	assert_int_equal(o.off_cpu_max_rate, 0);
	free(out);
	free(err);
	assert_int_equal(parse(&o, &out, &err, "--off-cpu-max-rate=250", NULL), 0);
	assert_int_equal(o.off_cpu_max_rate, 250);
	free(out);
	free(err);
	assert_int_equal(parse(&o, &out, &err, "--off-cpu-max-rate", "1000001", NULL), -EINVAL);
	assert_non_null(strstr(err, "off-cpu-max-rate"));
	free(out);
	free(err);
}

static void test_all_options(void **state)
{
	(void)state;
	struct opal_collector_options o;
	char *out, *err;

	assert_int_equal(parse(&o, &out, &err, "--socket", "/tmp/x.sock", "--frequency", "99",
			       "--interval", "10", "--include-self", "--verbose", "--buffer-bytes",
			       "1048576", "--max-fds=64", "--command-line", "--native-only", NULL),
			 0);
	assert_string_equal(o.socket_path, "/tmp/x.sock");
	assert_int_equal(o.frequency_hz, 99);
	assert_int_equal(o.interval_s, 10);
	assert_int_equal(o.buffer_bytes, 1048576);
	assert_int_equal(o.max_fds, 64);
	assert_true(o.include_self);
	assert_true(o.command_line);
	assert_true(o.native_only);
	assert_true(o.verbose);
	free(out);
	free(err);
}

static void expect_bad(const char *opt, const char *val, const char *msg_part)
{
	struct opal_collector_options o;
	char *out, *err;

	assert_int_equal(parse(&o, &out, &err, opt, val, NULL), -EINVAL);
	if (!strstr(err, msg_part))
		fail_msg("%s %s: error text \"%s\" lacks \"%s\"", opt, val ? val : "", err, msg_part);
	free(out);
	free(err);
}

static void test_bad_values(void **state)
{
	(void)state;
	expect_bad("--frequency", "0", "frequency: '0' (from command line) is not a number in "
		   "[1, 100000]");
	expect_bad("--frequency", "100001", "frequency");
	expect_bad("--frequency", "20x", "frequency");
	expect_bad("--frequency", "-5", "frequency");
	expect_bad("--frequency", " 5", "frequency");
	expect_bad("--interval", "0", "interval");
	expect_bad("--interval", "3601", "interval");
	expect_bad("--buffer-bytes", "1000", "buffer-bytes");
	expect_bad("--max-fds", "3", "max-fds");
	expect_bad("--socket", "", "socket: '' is not a path");
	expect_bad("--socket", "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "shorter than 108 bytes");
	expect_bad("--frequency", NULL, "needs a value");
	expect_bad("--bogus", NULL, "unknown option");
	expect_bad("extra", NULL, "unexpected argument");
}

static void test_help_lists_options_with_defaults(void **state)
{
	(void)state;
	struct opal_collector_options o;
	char *out, *err;
	static const char *const want[] = {
		"--socket PATH", "default: /run/opal/collector.sock", "--frequency HZ",
		"default: 20;", "--interval SECONDS", "default: 5;", "--include-self", "--verbose",
		"--help", "--buffer-bytes BYTES", "default: 16m;", "--max-fds N", "default: 4096;",
		"--config FILE", "env: OPAL_COLLECTOR_CONFIG", "range: 1..100000",
	};

	assert_int_equal(parse(&o, &out, &err, "--help", NULL), 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(out, want[i]))
			fail_msg("--help lacks \"%s\":\n%s", want[i], out);
	/* exactly the reloadable ones say so, on their own entry */
	const char *iv = strstr(out, "--interval"), *fq = strstr(out, "--frequency");
	assert_non_null(strstr(iv, "reloadable on SIGHUP"));
	assert_true(strstr(iv, "reloadable on SIGHUP") < strstr(iv, "--buffer-bytes"));
	assert_true(strstr(fq, "reloadable on SIGHUP") > strstr(fq, "--interval"));
	free(out);
	free(err);
}

static char cfg_path[64];

static void write_config(const char *text)
{
	if (!cfg_path[0]) {
		strcpy(cfg_path, "/tmp/opal-collector-conf.XXXXXX");
		int fd = mkstemp(cfg_path);
		assert_true(fd >= 0);
		close(fd);
	}
	FILE *f = fopen(cfg_path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Config file below environment variable below flags; the file named by
 * OPAL_COLLECTOR_CONFIG when --config is absent. */
static void test_config_file(void **state)
{
	(void)state;
	struct opal_collector_options o;
	char *out, *err;

	write_config("{\"frequency\": 99, \"interval\": 2, \"buffer-bytes\": \"1m\", "
		     "\"include-self\": true}");
	assert_int_equal(parse(&o, &out, &err, "--config", cfg_path, "--interval", "3", NULL), 0);
	assert_int_equal(o.frequency_hz, 99);
	assert_int_equal(o.interval_s, 3);
	assert_int_equal(o.buffer_bytes, 1u << 20);
	assert_true(o.include_self);
	free(out);
	free(err);

	setenv(OPAL_COLLECTOR_CONFIG_ENV, cfg_path, 1);
	assert_int_equal(parse(&o, &out, &err, NULL), 0);
	assert_int_equal(o.interval_s, 2);
	free(out);
	free(err);

	write_config("{\"frequency\": 0}");
	assert_int_equal(parse(&o, &out, &err, NULL), -EINVAL);
	assert_non_null(strstr(err, "frequency: '0' (from config file)"));
	free(out);
	free(err);
	write_config("{\"sampling\": 1}");
	assert_int_equal(parse(&o, &out, &err, NULL), -EINVAL);
	assert_non_null(strstr(err, "unknown option \"sampling\""));
	free(out);
	free(err);
	unsetenv(OPAL_COLLECTOR_CONFIG_ENV);
}

/* SIGHUP: verbose and interval change at run time; frequency, socket and
 * the other options keep their running values; a broken file changes
 * nothing. */
static void test_reload(void **state)
{
	(void)state;
	struct opal_collector_options o, before;
	char *out, *err;
	char *argv[] = { "opal-collector", "--config", cfg_path, "--max-fds", "64", NULL };

	write_config("{\"frequency\": 49, \"interval\": 5}");
	assert_int_equal(parse(&o, &out, &err, "--config", cfg_path, "--max-fds", "64", NULL), 0);
	free(out);
	free(err);
	before = o;

	/* unchanged file: nothing applied */
	assert_int_equal(opal_options_reload(5, argv, &o), 0);
	assert_memory_equal(&o, &before, sizeof(o));

	write_config("{\"frequency\": 99, \"interval\": 1, \"verbose\": true, "
		     "\"socket\": \"/tmp/other.sock\", \"max-fds\": 128}");
	assert_int_equal(opal_options_reload(5, argv, &o), 2);
	assert_int_equal(o.interval_s, 1);
	assert_true(o.verbose);
	assert_int_equal(o.frequency_hz, 49);                 /* needs a restart */
	assert_string_equal(o.socket_path, "/run/opal/collector.sock");
	assert_int_equal(o.max_fds, 64);                      /* the flag still wins */

	write_config("{\"interval\": 0}");
	before = o;
	assert_int_equal(opal_options_reload(5, argv, &o), -EINVAL);
	assert_memory_equal(&o, &before, sizeof(o));
	write_config("{not json");
	assert_int_equal(opal_options_reload(5, argv, &o), -EINVAL);
	assert_memory_equal(&o, &before, sizeof(o));
	unlink(cfg_path);
}

/* SIGHUP with nothing changed keeps every flag given on the command line,
 * the options that cannot change at run time included (a reload once
 * turned --command-line off). */
static void test_reload_keeps_flags(void **state)
{
	(void)state;
	struct opal_collector_options o, before;
	char *out, *err;
	char *argv[] = { "opal-collector", "--command-line", "--native-only", "--include-self",
			 "--off-cpu", NULL };

	assert_int_equal(parse(&o, &out, &err, "--command-line", "--native-only",
			       "--include-self", "--off-cpu", NULL), 0);
	free(out);
	free(err);
	before = o;
	assert_int_equal(opal_options_reload(5, argv, &o), 0);
	assert_memory_equal(&o, &before, sizeof(o));
	assert_true(o.command_line && o.native_only && o.include_self && o.off_cpu);
}

static void test_cpulist(void **state)
{
	(void)state;
	int cpus[16];
	size_t n;

	assert_int_equal(opal_cpulist_parse("0-3,5,7-8\n", cpus, 16, &n), 0);
	assert_int_equal(n, 7);
	int want[] = { 0, 1, 2, 3, 5, 7, 8 };
	assert_memory_equal(cpus, want, sizeof(want));

	assert_int_equal(opal_cpulist_parse("0", cpus, 16, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(cpus[0], 0);

	/* overlapping ranges are de-duplicated and sorted */
	assert_int_equal(opal_cpulist_parse("4,0-2,1", cpus, 16, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(cpus[3], 4);

	assert_int_equal(opal_cpulist_parse("0-31", cpus, 16, &n), -E2BIG);
	assert_int_equal(opal_cpulist_parse("", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("3-1", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("0,,1", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("0,", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("1-", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("a", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("0\n1", cpus, 16, &n), -EINVAL);
	assert_int_equal(opal_cpulist_parse("99999", cpus, 16, &n), -EINVAL);
}

static void test_online_cpus(void **state)
{
	(void)state;
	int cpus[OPAL_MAX_CPUS];
	size_t n;

	assert_int_equal(opal_online_cpus(cpus, OPAL_MAX_CPUS, &n), 0);
	assert_true(n >= 1);
	assert_int_equal(n, (size_t)sysconf(_SC_NPROCESSORS_ONLN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_off_cpu),
		cmocka_unit_test(test_all_options),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_help_lists_options_with_defaults),
		cmocka_unit_test(test_config_file),
		cmocka_unit_test(test_reload),
		cmocka_unit_test(test_reload_keeps_flags),
		cmocka_unit_test(test_cpulist),
		cmocka_unit_test(test_online_cpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
