/* Tests of symbolizer/base/mkdirs.c: folders made with their parents, the
 * modes asked for, existing folders accepted, files in the way refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolizer/base/mkdirs.h"

static char root[64];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/opal-mkdirs.XXXXXX");
	umask(022);
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	return st.st_mode & 07777;
}

static void test_parents_and_modes(void **state)
{
	(void)state;
	char p[256], q[256];
	bool created = false;

	snprintf(p, sizeof(p), "%s/run/opal/state", root);
	assert_int_equal(opal_mkdirs(p, 0700, &created), 0);
	assert_true(created);
	assert_int_equal(mode_of(p), 0700);
	snprintf(q, sizeof(q), "%s/run/opal", root);
	assert_int_equal(mode_of(q), 0755);
	snprintf(q, sizeof(q), "%s/run", root);
	assert_int_equal(mode_of(q), 0755);

	/* Again: exists, mode kept, not created. */
	assert_int_equal(chmod(p, 0750), 0);
	assert_int_equal(opal_mkdirs(p, 0700, &created), 0);
	assert_false(created);
	assert_int_equal(mode_of(p), 0750);

	/* Trailing and doubled slashes. */
	snprintf(p, sizeof(p), "%s//out//x/", root);
	assert_int_equal(opal_mkdirs(p, 0755, &created), 0);
	assert_true(created);
	snprintf(q, sizeof(q), "%s/out/x", root);
	assert_int_equal(mode_of(q), 0755);
}

static void test_relative(void **state)
{
	(void)state;
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(root), 0);
	assert_int_equal(opal_mkdirs("rel/a/b", 0700, NULL), 0);
	assert_int_equal(mode_of("rel/a/b"), 0700);
	assert_int_equal(chdir(cwd), 0);
}

static void test_refused(void **state)
{
	(void)state;
	char f[256], p[256];
	snprintf(f, sizeof(f), "%s/file", root);
	FILE *fp = fopen(f, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(opal_mkdirs(f, 0700, NULL), -ENOTDIR);
	snprintf(p, sizeof(p), "%s/file/below", root);
	assert_int_equal(opal_mkdirs(p, 0700, NULL), -ENOTDIR);
	assert_int_equal(opal_mkdirs("", 0700, NULL), -EINVAL);
	assert_int_equal(opal_mkdirs(NULL, 0700, NULL), -EINVAL);

	char deep[PATH_MAX + 16];
	size_t n = (size_t)snprintf(deep, sizeof(deep), "%s", root);
	for (int i = 0; i <= OPAL_MKDIRS_MAX_DEPTH; i++)
		n += (size_t)snprintf(deep + n, sizeof(deep) - n, "/d");
	assert_int_equal(opal_mkdirs(deep, 0700, NULL), -ENAMETOOLONG);
	snprintf(p, sizeof(p), "%s/d", root);
	assert_int_equal(access(p, F_OK), -1);   /* nothing made before the refusal */
	memset(deep, 'a', sizeof(deep) - 1);
	deep[0] = '/';
	deep[sizeof(deep) - 1] = '\0';
	assert_int_equal(opal_mkdirs(deep, 0700, NULL), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parents_and_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_relative, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
