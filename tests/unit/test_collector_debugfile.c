/* Tests of collector/proc/debugfile.c: the debug file found under a debug
 * root by the file's build ID (read here with readelf -n, not with the
 * code under test), its own build ID checked, and nothing but regular
 * files opened. Fixtures: $OPAL_FIXTURES/unwind and $OPAL_FIXTURES/layout. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/proc/debugfile.h"

static char fixdir[PATH_MAX], root[64];

static const char *fixture(const char *name)
{
	static char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", fixdir, name);
	return p;
}

/* The build ID of fixture `name` as readelf -n prints it. */
static void build_id_of(const char *name, char hex[128])
{
	char cmd[PATH_MAX + 128];
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | sed -n 's/^ *Build ID: *//p'", fixture(name));
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(hex, 128, p));
	pclose(p);
	hex[strcspn(hex, "\n")] = '\0';
	assert_true(strlen(hex) > 2);
}

/* Where the debug root would hold the debug file of fixture `name`. */
static void debug_path(const char *name, char *out, size_t len, bool mkdirs)
{
	char hex[128], dir[256];
	build_id_of(name, hex);
	snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", root, hex);
	if (mkdirs) {
		char top[128];
		snprintf(top, sizeof(top), "%s/.build-id", root);
		mkdir(top, 0755);
		mkdir(dir, 0755);
	}
	snprintf(out, len, "%s/%s.debug", dir, hex + 2);
}

static void copy(const char *from, const char *to)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

static int open_fixture(const char *name)
{
	int fd = open(fixture(name), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s (run make fixtures)", fixture(name));
	return fd;
}

static int setup(void **state)
{
	(void)state;
	const char *base = getenv("OPAL_FIXTURES");
	snprintf(fixdir, sizeof(fixdir), "%s", base ? base : "build/fixtures");
	snprintf(root, sizeof(root), "/tmp/opal-debugfile.XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_found_and_checked(void **state)
{
	(void)state;
	char path[PATH_MAX];
	int fd = open_fixture("unwind/frames-nocfi");

	assert_int_equal(opal_debugfile_open(fd, root), -ENOENT);
	debug_path("unwind/frames-nocfi", path, sizeof(path), true);
	copy(fixture("unwind/frames.debug"), path);
	int dfd = opal_debugfile_open(fd, root);
	assert_true(dfd >= 0);
	struct stat a, b;
	assert_int_equal(fstat(dfd, &a), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	close(dfd);

	/* a symlink (Fedora's layout) is followed */
	char target[PATH_MAX + 8];
	snprintf(target, sizeof(target), "%s/real.debug", root);
	assert_int_equal(rename(path, target), 0);
	assert_int_equal(symlink(target, path), 0);
	dfd = opal_debugfile_open(fd, root);
	assert_true(dfd >= 0);
	close(dfd);
	unlink(path);

	/* another file's debug file at that name: refused */
	copy(fixture("unwind/frames-moved.debug"), path);
	assert_int_equal(opal_debugfile_open(fd, root), -ESTALE);
	unlink(path);

	/* a FIFO or a folder is never opened for reading */
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(opal_debugfile_open(fd, root), -EINVAL);
	unlink(path);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(opal_debugfile_open(fd, root), -EINVAL);
	rmdir(path);
	close(fd);
}

static void test_no_build_id(void **state)
{
	(void)state;
	int fd = open_fixture("layout/buildid-none");
	assert_int_equal(opal_debugfile_open(fd, root), -ENODATA);
	close(fd);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	assert_int_equal(opal_debugfile_open(fd, root), -ENOEXEC);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_found_and_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_build_id, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
