/* Unit tests of symbolizer/profile/recent.c (recent profiles for GET /flamegraph)
 * and of the interval encodings of symbolizer/output.c they are made from:
 * names carry the time range; the folder stays within its count, byte and
 * age bounds (oldest deleted first), also when the limits shrink; a
 * listing selects a time window, newest kept under `max`, oldest first;
 * leftover temporary files go at open; other files are ignored. output.c
 * encodes each interval once: the interval file holds exactly the bytes
 * handed back, OTLP only when wanted or written, no files without
 * write_intervals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolizer/output.h"
#include "symbolizer/profile/profile.h"
#include "symbolizer/profile/recent.h"

#define S 1000000000ull
#define T0 (1700000000ull * S)

static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/opal-test-recent.XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static size_t count(const char *d, const char *suffix)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(dd);
	while ((e = readdir(dd))) {
		size_t l = strlen(e->d_name), sl = strlen(suffix);
		if (l > sl && !strcmp(e->d_name + l - sl, suffix))
			n++;
	}
	closedir(dd);
	return n;
}

static void add(struct opal_recent *r, unsigned i, size_t bytes, uint64_t now)
{
	static uint8_t buf[4096];

	memset(buf, (int)i, sizeof(buf));
	assert_int_equal(opal_recent_add(r, buf, bytes, NULL, T0 + i * 5 * S,
					 T0 + (i + 1) * 5 * S, 0xabcdefull, i, now), 0);
}

static void test_bounds(void **state)
{
	char sub[128];
	struct opal_recent *r;
	struct opal_recent_limits l = { .max_files = 4, .max_bytes = 1 << 20,
					.max_age_s = 3600 };

	(void)state;
	snprintf(sub, sizeof(sub), "%s/recent", dir);
	assert_int_equal(opal_recent_open(sub, &l, &r), 0);
	assert_string_equal(opal_recent_dir(r), sub);
	assert_int_equal(opal_recent_max_age_s(r), 3600);
	for (unsigned i = 1; i <= 6; i++)
		add(r, i, 100, T0 + 40 * S);
	assert_int_equal(count(sub, ".pb.gz"), 4);

	struct opal_recent_entry *e;
	size_t n;
	assert_int_equal(opal_recent_list(r, 0, 0, 100, &e, &n), 0);
	assert_int_equal(n, 4);
	/* oldest first: 3, 4, 5, 6 survived */
	assert_int_equal(e[0].start_unix_ns, T0 + 15 * S);
	assert_int_equal(e[3].end_unix_ns, T0 + 35 * S);
	assert_int_equal(e[0].bytes, 100);
	assert_non_null(strstr(e[0].name, "-0000000000abcdef-000003.pb.gz"));
	free(e);

	/* a window: profiles ending before it are left out; `max` keeps the newest */
	assert_int_equal(opal_recent_list(r, T0 + 26 * S, 0, 100, &e, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(e[0].start_unix_ns, T0 + 25 * S);
	free(e);
	assert_int_equal(opal_recent_list(r, 0, T0 + 22 * S, 100, &e, &n), 0);
	assert_int_equal(n, 2);   /* 3 and 4 start before 22 s */
	free(e);
	assert_int_equal(opal_recent_list(r, 0, 0, 1, &e, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].start_unix_ns, T0 + 30 * S);
	free(e);

	/* bytes: 3 x 1000 > 2500 keeps the newest two */
	l.max_bytes = 2500;
	opal_recent_set_limits(r, &l);
	for (unsigned i = 7; i <= 9; i++)
		add(r, i, 1000, T0 + 60 * S);
	assert_int_equal(count(sub, ".pb.gz"), 2);
	/* age: now far past their end */
	add(r, 10, 10, T0 + 3652 * S);   /* 9 ended 3602 s ago, 10 3597 s ago */
	assert_int_equal(opal_recent_list(r, 0, 0, 100, &e, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].start_unix_ns, T0 + 50 * S);
	free(e);
	/* a profile larger than the byte bound is not kept */
	add(r, 11, 4000, T0 + 3652 * S);
	assert_int_equal(count(sub, ".pb.gz"), 1);
	/* keep nothing */
	l.max_files = 0;
	opal_recent_set_limits(r, &l);
	assert_int_equal(count(sub, ".pb.gz"), 0);
	add(r, 12, 10, T0 + 10000 * S);
	assert_int_equal(count(sub, ".pb.gz"), 0);
	opal_recent_close(r);

	/* leftovers: temporary files go, foreign files stay and are ignored */
	char path[256];
	snprintf(path, sizeof(path), "%s/recent-1-2-3-4.pb.gz.tmp", sub);
	FILE *f = fopen(path, "w");
	fclose(f);
	snprintf(path, sizeof(path), "%s/notes.txt", sub);
	f = fopen(path, "w");
	fclose(f);
	snprintf(path, sizeof(path), "%s/recent-x.pb.gz", sub);
	f = fopen(path, "w");
	fclose(f);
	l.max_files = 10;
	assert_int_equal(opal_recent_open(sub, &l, &r), 0);
	assert_int_equal(count(sub, ".tmp"), 0);
	assert_int_equal(count(sub, ".txt"), 1);
	assert_int_equal(opal_recent_list(r, 0, 0, 100, &e, &n), 0);
	assert_int_equal(n, 0);
	opal_recent_close(r);
}

static struct opal_profile *profile(size_t samples)
{
	struct opal_profile *p = opal_profile_new(10000000);
	struct opal_profile_mapping m = { .start = 0x400000, .limit = 0x500000,
					  .filename = "/usr/bin/app" };
	struct opal_profile_line l = { "main", "app.c", 3 };
	struct opal_profile_process proc = { .pid = 42, .executable_name = "app" };
	uint64_t ts[8];
	uint32_t cpus[8] = { 0 };

	assert_non_null(p);
	uint32_t loc = opal_profile_location(p, opal_profile_mapping(p, &m), 0x401000,
					     OPAL_FRAME_NATIVE, &l, 1);
	uint32_t pr = opal_profile_process(p, &proc);
	for (size_t i = 0; i < samples; i++)
		ts[i] = T0 + i;
	if (samples)
		assert_int_equal(opal_profile_add_sample(p, pr, 43, "t", &loc, 1, ts, cpus, samples),
				 0);
	opal_profile_set_time(p, T0, T0 + 5 * S);
	return p;
}

/* An output of interval files into `dir` keeping 2, initialised; `sub`
 * (128 bytes) gets its intervals folder. Returns a profile to write. */
static struct opal_profile *output_setup(struct opal_output *o, char *sub)
{
	*o = (struct opal_output){ .dir = dir, .keep_intervals = 2, .write_intervals = true };
	snprintf(sub, 128, "%s/intervals", dir);
	assert_int_equal(opal_output_init(o), 0);
	return profile(3);
}

static void touch(const char *path)
{
	FILE *t = fopen(path, "w");

	assert_non_null(t);
	fclose(t);
}

static void test_output_encodes_once(void **state)
{
	struct opal_output o;
	struct opal_output_interval enc;
	char sub[128], path[256];
	struct opal_profile *p = output_setup(&o, sub);

	(void)state;
	/* what a killed run leaves goes at the next start; other files stay */
	const char *left[] = { "intervals/interval-0000000000000000001-000001.pb.gz.tmp",
			       "profile.otlp.pb.tmp", "profile.pb.gz.tmp", "mine.tmp" };
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, left[i]);
		touch(path);
	}
	assert_int_equal(opal_output_init(&o), 0);
	assert_int_equal(count(sub, ".tmp"), 0);
	assert_int_equal(count(dir, ".tmp"), 1);
	snprintf(path, sizeof(path), "%s/mine.tmp", dir);
	assert_int_equal(unlink(path), 0);
	for (uint64_t seq = 1; seq <= 3; seq++) {
		assert_int_equal(opal_output_write_interval(&o, p, T0 + seq * 5 * S, seq, false, &enc),
				 0);
		assert_non_null(enc.pprof_gz);
		assert_non_null(enc.otlp);   /* written as a file, so encoded */
		if (seq < 3)
			opal_output_interval_free(&enc);
	}
	assert_int_equal(count(sub, ".pb.gz"), 2);
	assert_int_equal(count(sub, ".otlp.pb"), 2);
	/* the file holds the bytes handed back */
	snprintf(path, sizeof(path), "%s/interval-%019llu-000003.pb.gz", sub,
		 (unsigned long long)(T0 + 15 * S));
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	uint8_t *buf = malloc(enc.pprof_len + 1);
	assert_int_equal(fread(buf, 1, enc.pprof_len + 1, f), enc.pprof_len);
	fclose(f);
	assert_memory_equal(buf, enc.pprof_gz, enc.pprof_len);
	free(buf);

	/* the recent copy is the interval file linked, not written again, and
	 * outlives the interval file's rotation */
	assert_string_equal(enc.pprof_path, path);
	char rdir[128];
	struct opal_recent *r;
	struct opal_recent_limits l = { .max_files = 4, .max_bytes = 1 << 20, .max_age_s = 3600 };
	snprintf(rdir, sizeof(rdir), "%s/recent-linked", dir);
	assert_int_equal(opal_recent_open(rdir, &l, &r), 0);
	assert_int_equal(opal_recent_add(r, enc.pprof_gz, enc.pprof_len, enc.pprof_path,
					 T0 + 15 * S, T0 + 20 * S, 1, 3, T0 + 20 * S), 0);
	struct stat a, b;
	struct opal_recent_entry *e;
	size_t n;
	assert_int_equal(opal_recent_list(r, 0, 0, 10, &e, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].bytes, enc.pprof_len);
	char rpath[512];
	snprintf(rpath, sizeof(rpath), "%s/%s", rdir, e[0].name);
	free(e);
	assert_int_equal(stat(path, &a), 0);
	assert_int_equal(stat(rpath, &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_nlink == 2);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(stat(rpath, &b), 0);
	assert_int_equal((size_t)b.st_size, enc.pprof_len);
	assert_int_equal(link(rpath, path), 0);   /* back, for the checks below */
	opal_recent_close(r);
	opal_output_interval_free(&enc);
	assert_null(enc.pprof_gz);
	assert_null(enc.pprof_path);

	/* no interval files: encodings only, OTLP only when wanted */
	o.write_intervals = false;
	assert_int_equal(opal_output_write_interval(&o, p, T0 + 20 * S, 4, false, &enc), 0);
	assert_non_null(enc.pprof_gz);
	assert_null(enc.otlp);
	opal_output_interval_free(&enc);
	assert_int_equal(opal_output_write_interval(&o, p, T0 + 25 * S, 5, true, &enc), 0);
	assert_non_null(enc.otlp);
	opal_output_interval_free(&enc);
	assert_int_equal(count(sub, ".pb.gz"), 2);
	opal_output_free(&o);
	opal_profile_free(p);
}

static bool interval_exists(const char *sub, const char *prefix, uint64_t seq, const char *suffix)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s%019llu-%06llu%s", sub, prefix,
		 (unsigned long long)(T0 + seq * 5 * S), (unsigned long long)seq, suffix);
	return access(path, F_OK) == 0;
}

/* Rotation keeps the newest keep_intervals intervals (their pprof, OTLP
 * and off-CPU files), an earlier run's included; the folder is listed
 * once, and again after keep_intervals was 0. */
static void test_output_rotation(void **state)
{
	struct opal_output o;
	struct opal_output_interval enc;
	char sub[128], path[256];
	struct opal_profile *p = output_setup(&o, sub);

	(void)state;
	/* an earlier run's intervals 1 and 2, and a file not ours */
	const char *mine[] = { "interval-%019llu-000001.pb.gz", "interval-%019llu-000001.otlp.pb",
			       "offcpu-%019llu-000001.pb.gz", "interval-%019llu-000002.pb.gz",
			       "interval-%019llu-000002.otlp.pb", "notes.txt" };
	for (size_t i = 0; i < 6; i++) {
		char name[128];
		snprintf(name, sizeof(name), mine[i],
			 (unsigned long long)(T0 + (i < 3 ? 1 : 2) * 5 * S));
		snprintf(path, sizeof(path), "%s/%s", sub, name);
		touch(path);
	}
	for (uint64_t seq = 3; seq <= 5; seq++) {
		assert_int_equal(opal_output_write_interval(&o, p, T0 + seq * 5 * S, seq, false, &enc),
				 0);
		opal_output_interval_free(&enc);
		assert_int_equal(count(sub, ".pb.gz"), 2);
		assert_int_equal(count(sub, ".otlp.pb"), 2);
		assert_true(interval_exists(sub, "interval-", seq, ".pb.gz"));
		assert_true(interval_exists(sub, "interval-", seq - 1, ".otlp.pb"));
	}
	assert_false(interval_exists(sub, "offcpu-", 1, ".pb.gz"));
	snprintf(path, sizeof(path), "%s/notes.txt", sub);
	assert_int_equal(access(path, F_OK), 0);

	/* keep all: nothing deleted, nothing indexed */
	o.keep_intervals = 0;
	for (uint64_t seq = 6; seq <= 7; seq++) {
		assert_int_equal(opal_output_write_interval(&o, p, T0 + seq * 5 * S, seq, false, &enc),
				 0);
		opal_output_interval_free(&enc);
	}
	assert_int_equal(count(sub, ".pb.gz"), 4);
	assert_null(o.index);
	/* a bound again: the folder is listed, the oldest go */
	o.keep_intervals = 3;
	assert_int_equal(opal_output_write_interval(&o, p, T0 + 8 * 5 * S, 8, false, &enc), 0);
	opal_output_interval_free(&enc);
	assert_int_equal(count(sub, ".pb.gz"), 3);
	for (uint64_t seq = 6; seq <= 8; seq++)
		assert_true(interval_exists(sub, "interval-", seq, ".pb.gz"));
	opal_output_free(&o);
	assert_null(o.index);
	opal_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_output_encodes_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_output_rotation, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
