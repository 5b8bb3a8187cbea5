/* Tests of the JIT name readers of the symbolizer
 * (symbolizer/interp/jit_parse.h, jit_table.h): perf map lines good and
 * bad, jitdump headers and records whole, truncated and corrupt, the
 * runtimes' name conventions, and the table over memfds the way the
 * collector passes files: growing files read on, a rewritten file read
 * again, partial lines and records waiting, later ranges winning, huge
 * lines and files cut at their bounds and counted; and the collector's
 * NSpid and jitdump-path readers (collector/proc/jitsrc.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "collector/proc/jitsrc.h"
#include "symbolizer/interp/jit_parse.h"
#include "symbolizer/interp/jit_table.h"

#define SEC 1000000000ull

static int line_ok(const char *s, uint64_t *start, uint64_t *size, char *name)
{
	size_t off, len;
	int r = opal_perfmap_parse_line(s, strlen(s), start, size, &off, &len);

	if (r == 0) {
		memcpy(name, s + off, len);
		name[len] = '\0';
	}
	return r;
}

static void test_perfmap_lines(void **state)
{
	uint64_t start, size;
	char name[OPAL_PERFMAP_MAX_LINE + 1];

	(void)state;
	assert_int_equal(line_ok("7f7a7a7c5b80 298 JS:*f /a.js:1:21", &start, &size, name), 0);
	assert_int_equal(start, 0x7f7a7a7c5b80);
	assert_int_equal(size, 0x298);
	assert_string_equal(name, "JS:*f /a.js:1:21");
	/* OpenJDK's 0x prefixes, names with spaces */
	assert_int_equal(line_ok("0x00007f559ced2820 0x0000000000000238 int Spin.hot(int)", &start,
				 &size, name), 0);
	assert_int_equal(start, 0x7f559ced2820);
	assert_int_equal(size, 0x238);
	assert_string_equal(name, "int Spin.hot(int)");
	/* trailing CR and spaces are not part of the name */
	assert_int_equal(line_ok("10 2 name \r", &start, &size, name), 0);
	assert_string_equal(name, "name");
	const char *bad[] = {
		"", "10", "10 2", "10 2 ", "10 2  \r", "zz 2 n", "10 zz n", "10 0 n",
		"-10 2 n", "0x 2 n", "10\t",
		"ffffffffffffffff 2 wraps", "11111111111111111 2 too-long-number",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(line_ok(bad[i], &start, &size, name), -EINVAL);
	/* a NUL inside, and a line over the bound */
	assert_int_equal(opal_perfmap_parse_line("10 2 a\0b", 8, &start, &size, &(size_t){ 0 },
						 &(size_t){ 0 }), -EINVAL);
	char *big = malloc(OPAL_PERFMAP_MAX_LINE + 2);
	memset(big, 'x', OPAL_PERFMAP_MAX_LINE + 1);
	memcpy(big, "10 2 ", 5);
	big[OPAL_PERFMAP_MAX_LINE + 1] = '\0';
	assert_int_equal(line_ok(big, &start, &size, name), -EINVAL);
	free(big);
}

/* Appends a jitdump record to buf at *len: CODE_LOAD of [addr, addr +
 * size) named `name` with `code` bytes of code after it. */
static void put_load(uint8_t *buf, size_t *len, uint64_t addr, uint64_t size, const char *name,
		     size_t code)
{
	uint32_t id = OPAL_JITDUMP_CODE_LOAD;
	uint32_t total = (uint32_t)(OPAL_JITDUMP_REC_HEAD + OPAL_JITDUMP_LOAD_FIXED +
				    strlen(name) + 1 + code);
	uint64_t ts = 1, vma = addr, index = 7;
	uint32_t pid = 42, tid = 42;
	uint8_t *p = buf + *len;

	memcpy(p, &id, 4);
	memcpy(p + 4, &total, 4);
	memcpy(p + 8, &ts, 8);
	memcpy(p + 16, &pid, 4);
	memcpy(p + 20, &tid, 4);
	memcpy(p + 24, &vma, 8);
	memcpy(p + 32, &addr, 8);
	memcpy(p + 40, &size, 8);
	memcpy(p + 48, &index, 8);
	memcpy(p + 56, name, strlen(name) + 1);
	memset(p + 56 + strlen(name) + 1, 0x90, code);
	*len += total;
}

static size_t put_header(uint8_t *buf)
{
	uint32_t w[10] = { OPAL_JITDUMP_MAGIC, 1, 40, 62, 0, 42 };

	memcpy(buf, w, 40);
	return 40;
}

static void test_jitdump_records(void **state)
{
	uint8_t buf[8192] = { 0 };
	size_t len = 0;
	struct opal_jitdump_rec rec;

	(void)state;
	assert_int_equal(opal_jitdump_parse_header(buf, 10), -EAGAIN);
	len = put_header(buf);
	assert_int_equal(opal_jitdump_parse_header(buf, len), 40);
	uint32_t swapped = __builtin_bswap32(OPAL_JITDUMP_MAGIC);
	uint8_t other[40];
	memcpy(other, buf, 40);
	memcpy(other, &swapped, 4);
	assert_int_equal(opal_jitdump_parse_header(other, 40), -EINVAL);
	uint32_t huge = 1u << 20;
	memcpy(other, buf, 40);
	memcpy(other + 8, &huge, 4);
	assert_int_equal(opal_jitdump_parse_header(other, 40), -EINVAL);

	size_t at = len;
	put_load(buf, &len, 0x1000, 0x40, "JS:*leaf /a.js:3:1", 64);
	assert_int_equal(opal_jitdump_parse_record(buf + at, len - at, &rec), 0);
	assert_int_equal(rec.id, OPAL_JITDUMP_CODE_LOAD);
	assert_int_equal(rec.code_addr, 0x1000);
	assert_int_equal(rec.code_size, 0x40);
	assert_int_equal(rec.name_len, strlen("JS:*leaf /a.js:3:1"));
	assert_memory_equal(rec.name, "JS:*leaf /a.js:3:1", rec.name_len);
	/* every truncation of it waits for more, never misreads */
	for (size_t cut = 0; cut < 56 + 5; cut++)
		assert_int_equal(opal_jitdump_parse_record(buf + at, cut, &rec), -EAGAIN);
	/* impossible sizes */
	uint8_t bad[128];
	memcpy(bad, buf + at, 128);
	uint32_t t = 8;
	memcpy(bad + 4, &t, 4);
	assert_int_equal(opal_jitdump_parse_record(bad, sizeof(bad), &rec), -EINVAL);
	t = 56;   /* no room for the name's NUL */
	memcpy(bad + 4, &t, 4);
	assert_int_equal(opal_jitdump_parse_record(bad, sizeof(bad), &rec), -EINVAL);
	t = 60;   /* the name runs past the record */
	memcpy(bad + 4, &t, 4);
	assert_int_equal(opal_jitdump_parse_record(bad, sizeof(bad), &rec), -EINVAL);
	t = (1u << 30) + 1;
	memcpy(bad + 4, &t, 4);
	assert_int_equal(opal_jitdump_parse_record(bad, sizeof(bad), &rec), -EINVAL);
	memcpy(bad, buf + at, 128);
	uint64_t zero = 0;
	memcpy(bad + 40, &zero, 8);   /* code_size 0 */
	assert_int_equal(opal_jitdump_parse_record(bad, sizeof(bad), &rec), -EINVAL);
	/* a name longer than the bound is cut */
	char longname[OPAL_JIT_MAX_NAME + 200];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	len = 0;
	put_load(buf, &len, 0x2000, 0x10, longname, 0);
	assert_int_equal(opal_jitdump_parse_record(buf, OPAL_JITDUMP_REC_HEAD +
					OPAL_JITDUMP_LOAD_FIXED + OPAL_JIT_MAX_NAME + 1, &rec), 0);
	assert_int_equal(rec.name_len, OPAL_JIT_MAX_NAME);
	/* other records need only their head */
	uint32_t head[4] = { OPAL_JITDUMP_DEBUG_INFO, 24, 0, 0 };
	assert_int_equal(opal_jitdump_parse_record((uint8_t *)head, 16, &rec), 0);
	assert_int_equal(rec.total_size, 24);
}

static void test_names(void **state)
{
	char func[256], file[256];
	uint32_t line;
	const char *n;

	(void)state;
	n = "JS:*opalJitLeaf /tmp/jx/spin.js:1:21";
	assert_int_equal(opal_jit_name_split(n, strlen(n), func, file, 256, &line), OPAL_JIT_V8JS);
	assert_string_equal(func, "opalJitLeaf");
	assert_string_equal(file, "/tmp/jx/spin.js");
	assert_int_equal(line, 1);
	n = "LazyCompile:~ /srv/app.js:10:3";
	assert_int_equal(opal_jit_name_split(n, strlen(n), func, file, 256, &line), OPAL_JIT_V8JS);
	assert_string_equal(func, "(anonymous)");
	assert_string_equal(file, "/srv/app.js");
	assert_int_equal(line, 10);
	n = "Builtin:ArrayPrototypePush";
	assert_int_equal(opal_jit_name_split(n, strlen(n), func, file, 256, &line), OPAL_JIT_V8JS);
	assert_string_equal(func, "Builtin:ArrayPrototypePush");
	assert_string_equal(file, "");
	n = "py::Outer.method:/srv/app.py";
	assert_int_equal(opal_jit_name_split(n, strlen(n), func, file, 256, &line),
			 OPAL_JIT_CPYTHON);
	assert_string_equal(func, "Outer.method");
	assert_string_equal(file, "/srv/app.py");
	n = "int Spin.hot(int)";
	assert_int_equal(opal_jit_name_split(n, strlen(n), func, file, 256, &line), OPAL_JIT_NATIVE);
	assert_string_equal(func, "int Spin.hot(int)");
	/* cut to the buffer */
	assert_int_equal(opal_jit_name_split(n, strlen(n), func, file, 4, &line), OPAL_JIT_NATIVE);
	assert_string_equal(func, "int");
	assert_int_equal(opal_jit_runtime_of_exe("/usr/bin/node"), OPAL_JIT_V8JS);
	assert_int_equal(opal_jit_runtime_of_exe("/usr/lib/jvm/x/bin/java"), OPAL_JIT_JVM);
	assert_int_equal(opal_jit_runtime_of_exe("/opt/bin/python3.12"), OPAL_JIT_CPYTHON);
	assert_int_equal(opal_jit_runtime_of_exe("/usr/bin/python3-config"), OPAL_JIT_NATIVE);
	assert_int_equal(opal_jit_runtime_of_exe(NULL), OPAL_JIT_NATIVE);
}

/* A memfd holding `s`; the test keeps writing to it. */
static int memfd_with(const void *s, size_t n)
{
	int fd = memfd_create("jit", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, s, n), (ssize_t)n);
	return fd;
}

static const char *name_at(struct opal_jit_table *t, uint64_t id, uint64_t addr, uint64_t now)
{
	static char buf[OPAL_JIT_MAX_NAME + 1];

	return opal_jit_table_name(t, 1, id, addr, now, buf, sizeof(buf)) == 0 ? buf : NULL;
}

static void test_table_perf_map(void **state)
{
	struct opal_jit_table *t = opal_jit_table_new();
	struct opal_jit_table_stats st;
	const char *text = "1000 100 first\n"
			   "garbage line\n"
			   "2000 10 second\n"
			   "1080 10 later-overlap\n"
			   "3000 10 part";   /* being written */
	int fd = memfd_with(text, strlen(text)), fd2 = dup(fd);

	(void)state;
	assert_int_equal(opal_jit_table_put(t, 1, 0, OPAL_JIT_FILE_PERF_MAP, dup(fd)), -EINVAL);
	assert_int_equal(opal_jit_table_put(t, 1, 7, OPAL_JIT_FILE_PERF_MAP, fd), 0);
	assert_string_equal(name_at(t, 7, 0x1000, 1 * SEC), "first");
	assert_string_equal(name_at(t, 7, 0x10ff, 1 * SEC), "first");
	assert_string_equal(name_at(t, 7, 0x1085, 1 * SEC), "later-overlap");
	assert_string_equal(name_at(t, 7, 0x2009, 1 * SEC), "second");
	assert_null(name_at(t, 7, 0x2010, 1 * SEC));
	assert_null(name_at(t, 7, 0x3000, 1 * SEC));   /* partial line: not yet */
	assert_null(name_at(t, 8, 0x1000, 1 * SEC));   /* another process */
	assert_null(name_at(t, 7, 0x3000, 1 * SEC));
	/* the file grows: read on, at most every second */
	assert_int_equal(write(fd2, "\n4000 10 grown\n", 15), 15);
	assert_null(name_at(t, 7, 0x4000, SEC + SEC / 2));
	assert_string_equal(name_at(t, 7, 0x3005, 2 * SEC + 1), "part");
	assert_string_equal(name_at(t, 7, 0x4000, 2 * SEC + 1), "grown");
	opal_jit_table_stats(t, &st);
	assert_int_equal(st.bad_lines, 1);
	assert_int_equal(st.ranges, 5);
	assert_int_equal(st.files, 1);
	/* rewritten shorter (jcmd Compiler.perfmap): read again from the start */
	assert_int_equal(ftruncate(fd2, 0), 0);
	assert_int_equal(pwrite(fd2, "5000 10 new\n", 12, 0), 12);
	assert_string_equal(name_at(t, 7, 0x5000, 4 * SEC), "new");
	assert_null(name_at(t, 7, 0x1000, 4 * SEC));
	/* rewritten longer: the line read last no longer ends where it did */
	const char *again = "6000 10 sixty\n5000 10 new-again\n";
	assert_int_equal(pwrite(fd2, again, strlen(again), 0), (ssize_t)strlen(again));
	assert_string_equal(name_at(t, 7, 0x5000, 5 * SEC + 1), "new-again");
	assert_string_equal(name_at(t, 7, 0x6000, 5 * SEC + 1), "sixty");
	/* a connection's processes go with it */
	opal_jit_table_drop_conn(t, 1);
	assert_null(name_at(t, 7, 0x5000, 7 * SEC));
	opal_jit_table_stats(t, &st);
	assert_int_equal(st.files, 0);
	close(fd2);
	opal_jit_table_free(t);
}

static void test_table_long_lines_and_bounds(void **state)
{
	struct opal_jit_table *t = opal_jit_table_new();
	struct opal_jit_table_stats st;
	size_t n = 200000;   /* a line of 200 KB, longer than every buffer */
	char *text = malloc(n + 64);

	(void)state;
	memcpy(text, "1000 10 ", 8);
	memset(text + 8, 'x', n - 8);
	strcpy(text + n, "\n2000 10 after\n");
	int fd = memfd_with(text, strlen(text));
	assert_int_equal(opal_jit_table_put(t, 1, 3, OPAL_JIT_FILE_PERF_MAP, fd), 0);
	assert_null(name_at(t, 3, 0x1000, SEC));
	assert_string_equal(name_at(t, 3, 0x2000, SEC), "after");
	opal_jit_table_stats(t, &st);
	assert_int_equal(st.bad_lines, 1);
	free(text);
	/* more ranges than a process may hold: the rest is cut, counted */
	size_t lines = OPAL_JIT_MAX_RANGES + 10, cap = lines * 24;
	char *big = malloc(cap), *p = big;
	for (size_t i = 0; i < lines; i++)
		p += sprintf(p, "%zx 1 f%zu\n", 0x100000 + i, i);
	fd = memfd_with(big, (size_t)(p - big));
	free(big);
	assert_int_equal(opal_jit_table_put(t, 1, 4, OPAL_JIT_FILE_PERF_MAP, fd), 0);
	assert_string_equal(name_at(t, 4, 0x100000, SEC), "f0");
	assert_null(name_at(t, 4, 0x100000 + OPAL_JIT_MAX_RANGES + 5, SEC));
	opal_jit_table_stats(t, &st);
	assert_true(st.cut >= 1);
	opal_jit_table_free(t);
}

static void test_table_jitdump(void **state)
{
	struct opal_jit_table *t = opal_jit_table_new();
	struct opal_jit_table_stats st;
	uint8_t buf[4096] = { 0 };
	size_t len = put_header(buf), first;

	(void)state;
	put_load(buf, &len, 0x7000, 0x100, "JS:*a /x.js:1:1", 300);
	first = len;
	put_load(buf, &len, 0x8000, 0x100, "JS:*b /x.js:2:1", 10);
	/* only part of the second record is written yet */
	int fd = memfd_with(buf, first + 30), fd2 = dup(fd);
	assert_int_equal(opal_jit_table_put(t, 1, 9, OPAL_JIT_FILE_JITDUMP, fd), 0);
	assert_string_equal(name_at(t, 9, 0x70ff, SEC), "JS:*a /x.js:1:1");
	assert_null(name_at(t, 9, 0x8000, SEC));
	assert_int_equal(pwrite(fd2, buf + first + 30, len - first - 30, (off_t)(first + 30)),
			 (ssize_t)(len - first - 30));
	char out[64];
	/* the same process id on another connection is another process */
	assert_int_equal(opal_jit_table_name(t, 2, 9, 0x8000, 3 * SEC, out, sizeof(out)), -ENOENT);
	assert_int_equal(opal_jit_table_name(t, 1, 9, 0x8000, 3 * SEC, out, sizeof(out)), 0);
	assert_string_equal(out, "JS:*b /x.js:2:1");
	/* a corrupt record stops the file, counted; what was read stays */
	uint32_t junk[4] = { OPAL_JITDUMP_CODE_LOAD, 3, 0, 0 };
	assert_int_equal(pwrite(fd2, junk, 16, (off_t)len), 16);
	assert_int_equal(opal_jit_table_name(t, 1, 9, 0x7000, 5 * SEC, out, sizeof(out)), 0);
	opal_jit_table_stats(t, &st);
	assert_int_equal(st.bad_records, 1);
	close(fd2);
	/* a file with a bad header gives nothing */
	memset(buf, 0, 64);
	assert_int_equal(opal_jit_table_put(t, 1, 10, OPAL_JIT_FILE_JITDUMP, memfd_with(buf, 64)),
			 0);
	assert_null(name_at(t, 10, 0, SEC));
	opal_jit_table_free(t);
}

static void test_collector_readers(void **state)
{
	const char *st = "Name:\tnode\nPid:\t4242\nNSpid:\t4242\t17\nUid:\t0\n";

	(void)state;
	assert_int_equal(opal_status_ns_pid(st, strlen(st)), 17);
	assert_int_equal(opal_status_ns_pid("NSpid:\t99\n", 10), 99);
	assert_int_equal(opal_status_ns_pid("Pid:\t1\n", 7), -EINVAL);
	assert_int_equal(opal_status_ns_pid("NSpid:\tx\n", 9), -EINVAL);
	assert_int_equal(opal_status_ns_pid("NSpid:\t99999999999\n", 19), -EINVAL);
	assert_true(opal_jit_is_jitdump_path("/home/u/jit-1234.dump"));
	assert_true(opal_jit_is_jitdump_path("jit-1.dump"));
	assert_false(opal_jit_is_jitdump_path("/tmp/jit-.dump"));
	assert_false(opal_jit_is_jitdump_path("/tmp/jit-12.dump.bak"));
	assert_false(opal_jit_is_jitdump_path("/tmp/xjit-12.dump"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_perfmap_lines),
		cmocka_unit_test(test_jitdump_records),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_table_perf_map),
		cmocka_unit_test(test_table_long_lines_and_bounds),
		cmocka_unit_test(test_table_jitdump),
		cmocka_unit_test(test_collector_readers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
