/* Unit tests of collector/options.c (command line) and collector/cpus.c
 * (cpulist parsing). */
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

#include "collector/cpus.h"
#include "collector/options.h"

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
	assert_string_equal(o.socket_path, "/run/opal/collector.sock");
	assert_int_equal(o.frequency_hz, 20);
	assert_int_equal(o.interval_s, 5);
	assert_int_equal(o.buffer_bytes, 16u << 20);
	assert_int_equal(o.max_fds, 4096);
	assert_false(o.include_self);
	assert_false(o.verbose);
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
			       "1048576", "--max-fds=64", NULL),
			 0);
	assert_string_equal(o.socket_path, "/tmp/x.sock");
	assert_int_equal(o.frequency_hz, 99);
	assert_int_equal(o.interval_s, 10);
	assert_int_equal(o.buffer_bytes, 1048576);
	assert_int_equal(o.max_fds, 64);
	assert_true(o.include_self);
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
	expect_bad("--frequency", "0", "--frequency");
	expect_bad("--frequency", "100001", "--frequency");
	expect_bad("--frequency", "20x", "--frequency");
	expect_bad("--frequency", "-5", "--frequency");
	expect_bad("--frequency", " 5", "--frequency");
	expect_bad("--interval", "0", "--interval");
	expect_bad("--interval", "3601", "--interval");
	expect_bad("--buffer-bytes", "1000", "--buffer-bytes");
	expect_bad("--max-fds", "3", "--max-fds");
	expect_bad("--socket", "", "--socket");
	expect_bad("--bogus", NULL, "unknown option");
	expect_bad("extra", NULL, "unexpected argument");
}

static void test_help_lists_options_with_defaults(void **state)
{
	(void)state;
	struct opal_collector_options o;
	char *out, *err;
	static const char *const want[] = {
		"--socket PATH", "default /run/opal/collector.sock", "--frequency HZ", "default 20",
		"--interval SECONDS", "default 5", "--include-self", "--verbose", "--help",
		"--buffer-bytes", "default 16777216", "--max-fds", "default 4096",
	};

	assert_int_equal(parse(&o, &out, &err, "--help", NULL), 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(out, want[i]))
			fail_msg("--help lacks \"%s\":\n%s", want[i], out);
	free(out);
	free(err);
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
		cmocka_unit_test(test_all_options),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_help_lists_options_with_defaults),
		cmocka_unit_test(test_cpulist),
		cmocka_unit_test(test_online_cpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
