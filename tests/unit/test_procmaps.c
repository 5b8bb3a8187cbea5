/* Unit tests of collector/proc/procmaps.c: single lines in every shape proc(5)
 * documents, malformed lines, whole files and /proc/self/maps, lookup. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "collector/proc/procmaps.h"

static void parse_ok(const char *line, struct opal_map_entry *e)
{
	memset(e, 0, sizeof(*e));
	int rc = opal_maps_parse_line(line, e);
	if (rc != 0)
		fail_msg("opal_maps_parse_line(\"%s\") = %d", line, rc);
	assert_non_null(e->path);
}

static void test_file_backed(void **state)
{
	(void)state;
	struct opal_map_entry e;
	parse_ok("55d0c0a4e000-55d0c0a52000 r-xp 00002000 fd:01 1234567                    /usr/bin/cat\n",
		 &e);
	assert_int_equal(e.start, 0x55d0c0a4e000ull);
	assert_int_equal(e.limit, 0x55d0c0a52000ull);
	assert_int_equal(e.offset, 0x2000);
	assert_int_equal(e.dev_major, 0xfd);
	assert_int_equal(e.dev_minor, 0x01);
	assert_int_equal(e.inode, 1234567);
	assert_true(e.readable);
	assert_false(e.writable);
	assert_true(e.executable);
	assert_false(e.shared);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/usr/bin/cat");
	free(e.path);

	/* Without the trailing newline; shared writable; big offset; hex dev
	 * numbers above 9; 64-bit addresses. */
	parse_ok("ffffffffff600000-ffffffffff601000 rw-s 1fffff000 10a:2f 18446744073709551615 /dev/shm/x", &e);
	assert_int_equal(e.start, 0xffffffffff600000ull);
	assert_int_equal(e.limit, 0xffffffffff601000ull);
	assert_int_equal(e.offset, 0x1fffff000ull);
	assert_int_equal(e.dev_major, 0x10a);
	assert_int_equal(e.dev_minor, 0x2f);
	assert_int_equal(e.inode, UINT64_MAX);
	assert_true(e.readable);
	assert_true(e.writable);
	assert_false(e.executable);
	assert_true(e.shared);
	assert_string_equal(e.path, "/dev/shm/x");
	free(e.path);

	parse_ok("7f0000000000-7f0000001000 ---p 00000000 00:00 0 ", &e);
	assert_false(e.readable);
	assert_false(e.writable);
	assert_false(e.executable);
	assert_string_equal(e.path, "");
	free(e.path);
}

static void test_deleted(void **state)
{
	(void)state;
	struct opal_map_entry e;
	parse_ok("7f1234560000-7f1234561000 r-xp 00001000 08:02 42                         /tmp/opal fixture (deleted)\n",
		 &e);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/tmp/opal fixture");
	assert_int_equal(e.inode, 42);
	free(e.path);

	/* " (deleted)" inside the name is part of the name. */
	parse_ok("7f1234560000-7f1234561000 r-xp 00001000 08:02 42 /tmp/a (deleted)/b\n", &e);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/tmp/a (deleted)/b");
	free(e.path);
}

static void test_spaces_in_path(void **state)
{
	(void)state;
	struct opal_map_entry e;
	parse_ok("7f0000000000-7f0000002000 r--p 00000000 fe:00 99                         /opt/My App/lib  two.so\n",
		 &e);
	assert_string_equal(e.path, "/opt/My App/lib  two.so");
	assert_false(e.deleted);
	free(e.path);
}

static void test_pseudo_paths(void **state)
{
	(void)state;
	struct opal_map_entry e;
	parse_ok("7ffd5a1f3000-7ffd5a1f5000 r-xp 00000000 00:00 0                          [vdso]\n", &e);
	assert_string_equal(e.path, "[vdso]");
	assert_int_equal(e.inode, 0);
	assert_true(e.executable);
	free(e.path);

	parse_ok("7ffd5a1c0000-7ffd5a1e1000 rw-p 00000000 00:00 0                          [stack]\n", &e);
	assert_string_equal(e.path, "[stack]");
	free(e.path);

	parse_ok("7f0000000000-7f0000001000 rw-p 00000000 00:00 0                          [anon:glibc malloc]\n",
		 &e);
	assert_string_equal(e.path, "[anon:glibc malloc]");
	free(e.path);
}

static void test_anonymous(void **state)
{
	(void)state;
	struct opal_map_entry e;
	parse_ok("7f9d4c000000-7f9d4c021000 rw-p 00000000 00:00 0 \n", &e);
	assert_string_equal(e.path, "");
	assert_int_equal(e.inode, 0);
	assert_false(e.deleted);
	free(e.path);

	parse_ok("7f9d4c000000-7f9d4c021000 rw-p 00000000 00:00 0\n", &e);
	assert_string_equal(e.path, "");
	free(e.path);
}

static void test_malformed(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"\n",
		"garbage",
		"7f0000000000",
		"7f0000000000-",
		"7f0000000000-7f0000001000",
		"7f0000000000-7f0000001000 r-xp",
		"7f0000000000-7f0000001000 r-xp 00000000",
		"7f0000000000-7f0000001000 r-xp 00000000 08:02",
		"7f0000000000 7f0000001000 r-xp 00000000 08:02 1 /x",
		"zz00000000-7f0000001000 r-xp 00000000 08:02 1 /x",
		"7f0000000000-7f000000100g r-xp 00000000 08:02 1 /x",
		"7f0000000000-7f0000001000 r-x 00000000 08:02 1 /x",
		"7f0000000000-7f0000001000 rqxp 00000000 08:02 1 /x",
		"7f0000000000-7f0000001000 r-xp 0000zz00 08:02 1 /x",
		"7f0000000000-7f0000001000 r-xp 00000000 0802 1 /x",
		"7f0000000000-7f0000001000 r-xp 00000000 08:02 x1 /x",
		/* start after limit */
		"7f0000002000-7f0000001000 r-xp 00000000 08:02 1 /x",
		/* numbers wider than 64 bits */
		"17f00000000000000-27f00000000000000 r-xp 00000000 08:02 1 /x",
		"1000-17f00000000000000 r-xp 00000000 08:02 1 /x",
		"1000-2000 r-xp 100000000000000000 08:02 1 /x",
		/* signs and prefixes strtoull would accept */
		"1000--2000 r-xp 00000000 08:02 1 /x",
		"0x1000-0x2000 r-xp 00000000 08:02 1 /x",
		"1000-2000 r-xp -1000 08:02 1 /x",
	};
	int wrong = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct opal_map_entry e;
		memset(&e, 0, sizeof(e));
		int rc = opal_maps_parse_line(bad[i], &e);
		if (rc != -EINVAL) {
			print_error("opal_maps_parse_line(\"%s\") = %d, want -EINVAL\n", bad[i], rc);
			wrong++;
			if (rc == 0)
				free(e.path);
		}
	}
	assert_int_equal(wrong, 0);
}

static const char *const maps_file_lines[] = {
	"555555554000-555555556000 r--p 00000000 fd:01 100                        /usr/bin/prog\n",
	"555555556000-55555555a000 r-xp 00002000 fd:01 100                        /usr/bin/prog\n",
	"55555555a000-55555555b000 rw-p 00006000 fd:01 100                        /usr/bin/prog\n",
	"55555555b000-55555557c000 rw-p 00000000 00:00 0                          [heap]\n",
	"7ffff7dd0000-7ffff7df8000 r--p 00000000 fd:01 200                        /usr/lib/x86_64-linux-gnu/libc.so.6\n",
	"7ffff7df8000-7ffff7f8d000 r-xp 00028000 fd:01 200                        /usr/lib/x86_64-linux-gnu/libc.so.6\n",
	"7ffff7fc0000-7ffff7fc1000 r-xp 00000000 08:02 300                        /tmp/dir with space/x (deleted)\n",
	"7ffff7fc1000-7ffff7fc3000 rw-p 00000000 00:00 0 \n",
	"7ffff7fc3000-7ffff7fc5000 r-xp 00000000 00:00 0                          [vdso]\n",
	"7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]\n",
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n",
};

#define N_MAPS_LINES (sizeof(maps_file_lines) / sizeof(maps_file_lines[0]))

static void write_maps_file(char path[64], const char *const *lines, size_t n)
{
	snprintf(path, 64, "/tmp/opal-test-maps-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(write(fd, lines[i], strlen(lines[i])), (ssize_t)strlen(lines[i]));
	close(fd);
}

static void test_read_file(void **state)
{
	(void)state;
	char path[64];
	write_maps_file(path, maps_file_lines, N_MAPS_LINES);

	struct opal_map_entry *e = NULL;
	size_t n = 0;
	assert_int_equal(opal_maps_read(0, path, &e, &n), 0);
	unlink(path);
	assert_int_equal(n, N_MAPS_LINES);
	for (size_t i = 1; i < n; i++)
		assert_true(e[i - 1].start < e[i].start);

	assert_int_equal(e[1].start, 0x555555556000ull);
	assert_int_equal(e[1].offset, 0x2000);
	assert_true(e[1].executable);
	assert_string_equal(e[1].path, "/usr/bin/prog");
	assert_string_equal(e[3].path, "[heap]");
	assert_int_equal(e[5].offset, 0x28000);
	assert_int_equal(e[5].inode, 200);
	assert_true(e[6].deleted);
	assert_string_equal(e[6].path, "/tmp/dir with space/x");
	assert_string_equal(e[7].path, "");
	assert_string_equal(e[8].path, "[vdso]");
	assert_int_equal(e[10].start, 0xffffffffff600000ull);
	assert_true(e[10].executable);
	assert_false(e[10].readable);

	const struct opal_map_entry *f = opal_maps_find(e, n, 0x7ffff7e00123ull);
	assert_ptr_equal(f, &e[5]);
	assert_null(opal_maps_find(e, n, 0x7ffff7f8d000ull));   /* gap after libc text */
	opal_maps_free(e, n);
}

static void test_read_empty_and_missing(void **state)
{
	(void)state;
	char path[64];
	write_maps_file(path, NULL, 0);
	struct opal_map_entry *e = NULL;
	size_t n = 99;
	assert_int_equal(opal_maps_read(0, path, &e, &n), 0);
	assert_int_equal(n, 0);
	opal_maps_free(e, n);
	unlink(path);

	int rc = opal_maps_read(0, "/tmp/opal-test-no-such-maps-file", &e, &n);
	assert_true(rc == -ENOENT || rc == -ESRCH);

	/* A pid that cannot exist (above pid_max's hard limit of 2^22). */
	rc = opal_maps_read(0x7ffffff0, NULL, &e, &n);
	assert_true(rc == -ENOENT || rc == -ESRCH);
}

/* A function of this binary, whose mapping /proc/self/maps must show. */
__attribute__((noinline)) int opal_test_procmaps_marker(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static void test_read_self(void **state)
{
	(void)state;
	struct opal_map_entry *e = NULL;
	size_t n = 0;
	assert_int_equal(opal_maps_read(getpid(), NULL, &e, &n), 0);
	assert_true(n > 5);
	for (size_t i = 1; i < n; i++)
		assert_true(e[i - 1].limit <= e[i].start);

	uint64_t addr = (uint64_t)(uintptr_t)&opal_test_procmaps_marker;
	const struct opal_map_entry *m = opal_maps_find(e, n, addr);
	assert_non_null(m);
	assert_true(m->executable);
	assert_true(m->readable);
	assert_false(m->deleted);

	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(len > 0);
	exe[len] = '\0';
	assert_string_equal(m->path, exe);

	struct stat st;
	assert_int_equal(stat(exe, &st), 0);
	assert_int_equal(m->inode, st.st_ino);
	assert_int_equal(m->dev_major, major(st.st_dev));
	assert_int_equal(m->dev_minor, minor(st.st_dev));

	/* Same answer through the explicit path. */
	struct opal_map_entry *e2 = NULL;
	size_t n2 = 0;
	assert_int_equal(opal_maps_read(0, "/proc/self/maps", &e2, &n2), 0);
	const struct opal_map_entry *m2 = opal_maps_find(e2, n2, addr);
	assert_non_null(m2);
	assert_int_equal(m2->start, m->start);
	assert_int_equal(m2->offset, m->offset);
	opal_maps_free(e2, n2);

	/* The stack variable's mapping. */
	int local = opal_test_procmaps_marker(1);
	m = opal_maps_find(e, n, (uint64_t)(uintptr_t)&local);
	assert_non_null(m);
	assert_true(m->writable);
	opal_maps_free(e, n);
}

static void test_find_boundaries(void **state)
{
	(void)state;
	struct opal_map_entry e[3];
	memset(e, 0, sizeof(e));
	e[0].start = 0x1000; e[0].limit = 0x2000;
	e[1].start = 0x2000; e[1].limit = 0x3000;
	e[2].start = 0x5000; e[2].limit = 0x6000;

	assert_null(opal_maps_find(e, 3, 0));
	assert_null(opal_maps_find(e, 3, 0xfff));
	assert_ptr_equal(opal_maps_find(e, 3, 0x1000), &e[0]);
	assert_ptr_equal(opal_maps_find(e, 3, 0x1fff), &e[0]);
	assert_ptr_equal(opal_maps_find(e, 3, 0x2000), &e[1]);
	assert_ptr_equal(opal_maps_find(e, 3, 0x2fff), &e[1]);
	assert_null(opal_maps_find(e, 3, 0x3000));
	assert_null(opal_maps_find(e, 3, 0x4fff));
	assert_ptr_equal(opal_maps_find(e, 3, 0x5000), &e[2]);
	assert_ptr_equal(opal_maps_find(e, 3, 0x5fff), &e[2]);
	assert_null(opal_maps_find(e, 3, 0x6000));
	assert_null(opal_maps_find(e, 3, UINT64_MAX));
	assert_null(opal_maps_find(e, 0, 0x1000));
	assert_ptr_equal(opal_maps_find(e, 1, 0x1800), &e[0]);
	assert_null(opal_maps_find(e, 1, 0x2000));
}

/* Many entries: the binary search must find every one at both ends. */
static void test_find_many(void **state)
{
	(void)state;
	enum { N = 1000 };
	struct opal_map_entry *e = calloc(N, sizeof(*e));
	assert_non_null(e);
	for (size_t i = 0; i < N; i++) {
		e[i].start = 0x10000 + i * 0x3000;
		e[i].limit = e[i].start + 0x2000;   /* 0x1000 gap after each */
	}
	for (size_t i = 0; i < N; i++) {
		assert_ptr_equal(opal_maps_find(e, N, e[i].start), &e[i]);
		assert_ptr_equal(opal_maps_find(e, N, e[i].limit - 1), &e[i]);
		assert_null(opal_maps_find(e, N, e[i].limit));
		assert_null(opal_maps_find(e, N, e[i].start - 1));
	}
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_backed),
		cmocka_unit_test(test_deleted),
		cmocka_unit_test(test_spaces_in_path),
		cmocka_unit_test(test_pseudo_paths),
		cmocka_unit_test(test_anonymous),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_read_file),
		cmocka_unit_test(test_read_empty_and_missing),
		cmocka_unit_test(test_read_self),
		cmocka_unit_test(test_find_boundaries),
		cmocka_unit_test(test_find_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
