/* Tests of shared/log.c: the journald priority prefix and the path aliases
 * that turn /proc/self/fd/N back into the folder an operator knows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/log.h"

/* Runs opal_info(fmt, arg) with stderr redirected; returns the line. */
static char *logged(const char *fmt, const char *arg)
{
	static char line[2048];
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	fflush(stderr);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 2) >= 0);
	opal_log(LOG_INFO, fmt, arg);
	fflush(stderr);
	assert_true(dup2(saved, 2) >= 0);
	close(saved);
	rewind(tmp);
	line[0] = '\0';
	assert_non_null(fgets(line, sizeof(line), tmp));
	fclose(tmp);
	line[strcspn(line, "\n")] = '\0';
	return line;
}

static void test_prefix_and_aliases(void **state)
{
	(void)state;
	opal_log_init("opal-test", 0);
	assert_string_equal(logged("plain %s", "line"), "<6>opal-test: plain line");
	opal_log_alias("/proc/self/fd/3", "/var/lib/opal");
	assert_string_equal(logged("cannot open %s", "/proc/self/fd/3/state.db"),
			    "<6>opal-test: cannot open /var/lib/opal/state.db");
	assert_string_equal(logged("dir %s", "/proc/self/fd/3"), "<6>opal-test: dir /var/lib/opal");
	/* another descriptor whose number starts the same is left alone */
	assert_string_equal(logged("other %s", "/proc/self/fd/31/x"),
			    "<6>opal-test: other /proc/self/fd/31/x");
	/* twice in one line */
	assert_string_equal(logged("mv %s", "/proc/self/fd/3/a /proc/self/fd/3/b"),
			    "<6>opal-test: mv /var/lib/opal/a /var/lib/opal/b");
	/* a line at the length limit is cut, never overrun */
	char big[1100];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big + 1000, "/proc/self/fd/3/", 16);
	char *l = logged("%s", big);
	assert_true(strlen(l) < 1024 + strlen("<6>opal-test: "));
	assert_non_null(strstr(l, "x/var/lib/opal/x"));
	/* a real path longer than its alias near the end: cut, not overrun */
	opal_log_alias("/proc/self/fd/4", "/a/much/longer/folder/name/than/the/alias/it/replaces");
	memcpy(big + 1000, "/proc/self/fd/4/", 16);
	l = logged("%s", big);
	assert_true(strlen(l) < 1024 + strlen("<6>opal-test: "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_and_aliases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
