/* Unit tests of symbolizer/profile/pprof.c and symbolizer/profile/report.c: a profile with
 * inline chains, an unsymbolized frame and kernel frames is encoded, decoded
 * again with the protobuf-c pprof code and checked field by field; the
 * gzip'd file is read back by the report code (stacks, top, check); when
 * the tools exist, `protoc --decode perftools.profiles.Profile` and
 * `go tool pprof -raw` must accept the file. */
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
#include <unistd.h>

#include "symbolizer/profile/pprof.h"
#include "symbolizer/profile/profile.h"
#include "symbolizer/profile/report.h"

#define PERIOD 50000000ull   /* 20 Hz */
#define T0     1700000000000000000ull

/* Location ids of the fixture, filled by build_profile. */
static uint32_t loc_inline, loc_main, loc_libc, loc_kernel;

/* Two processes; process 100 has two threads; one stack is added twice to
 * check merging; one frame (libc) has no symbols. */
static struct opal_profile *build_profile(bool with_kernel)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping app = {
		.start = 0x400000, .limit = 0x500000, .file_offset = 0, .filename = "/usr/bin/app",
		.build_id_gnu = "0123456789abcdef0123456789abcdef01234567",
		.file_id_htlhash = "00112233445566778899aabbccddeeff",
		.has_functions = true, .has_filenames = true, .has_line_numbers = true,
		.has_inline_frames = true,
	};
	struct opal_profile_mapping libc = {
		.start = 0x7f0000000000, .limit = 0x7f0000200000, .file_offset = 0x28000,
		.filename = "/usr/lib/x86_64-linux-gnu/libc.so.6",
		.file_id_htlhash = "ffeeddccbbaa99887766554433221100",
	};
	struct opal_profile_mapping kernel = {
		.start = 0xffffffff80000000, .limit = 0xffffffffffffffff,
		.filename = "[kernel.kallsyms]", .has_functions = true,
	};
	struct opal_profile_line chain[2] = {
		{ .function = "inner_helper", .filename = "app.c", .line = 10 },
		{ .function = "compute", .filename = "app.c", .line = 20 },
	};
	struct opal_profile_line main_line = { .function = "main", .filename = "app.c", .line = 30 };
	struct opal_profile_line ksym = { .function = "do_syscall_64" };

	assert_non_null(p);
	uint32_t m_app = opal_profile_mapping(p, &app);
	uint32_t m_libc = opal_profile_mapping(p, &libc);
	uint32_t m_kernel = opal_profile_mapping(p, &kernel);
	loc_inline = opal_profile_location(p, m_app, 0x401234, OPAL_FRAME_NATIVE, chain, 2);
	loc_main = opal_profile_location(p, m_app, 0x401500, OPAL_FRAME_NATIVE, &main_line, 1);
	loc_libc = opal_profile_location(p, m_libc, 0x7f0000001234, OPAL_FRAME_NATIVE, NULL, 0);
	loc_kernel = opal_profile_location(p, m_kernel, 0xffffffff81000010, OPAL_FRAME_KERNEL,
					   &ksym, 1);
	struct opal_profile_process p1 = { .pid = 100, .executable_name = "app",
					   .executable_path = "/usr/bin/app",
					   .container_id = "c0ffee", .host_name = "host1" };
	struct opal_profile_process p2 = { .pid = 200, .executable_name = "app",
					   .executable_path = "/usr/bin/app",
					   .service_name = "checkout", .host_name = "host1" };
	uint32_t proc1 = opal_profile_process(p, &p1), proc2 = opal_profile_process(p, &p2);
	uint32_t s_kernel[3] = { loc_kernel, loc_inline, loc_main };
	uint32_t s_user[2] = { loc_inline, loc_main };
	uint32_t s_libc[2] = { loc_libc, loc_main };
	uint64_t ts[4] = { T0 + 1, T0 + 2, T0 + 3, T0 + 4 };
	uint32_t cpus[4] = { 0, 1, 0, 1 };
	uint32_t *first = with_kernel ? s_kernel : s_user;
	size_t nfirst = with_kernel ? 3 : 2;

	assert_int_equal(opal_profile_add_sample(p, proc1, 101, "worker", first, nfirst, ts, cpus, 3), 0);
	assert_int_equal(opal_profile_add_sample(p, proc1, 101, "worker", first, nfirst, ts + 3, cpus + 3, 1), 0);
	assert_int_equal(opal_profile_add_sample(p, proc1, 102, "io", s_libc, 2, ts, cpus, 2), 0);
	assert_int_equal(opal_profile_add_sample(p, proc2, 201, "main", s_user, 2, ts, cpus + 3, 1), 0);
	opal_profile_set_time(p, T0, T0 + 5000000000ull);
	return p;
}

static const char *S(const Perftools__Profiles__Profile *pp, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < pp->n_string_table);
	return pp->string_table[i];
}

static const Perftools__Profiles__Function *func(const Perftools__Profiles__Profile *pp,
						 uint64_t id)
{
	for (size_t i = 0; i < pp->n_function; i++)
		if (pp->function[i]->id == id)
			return pp->function[i];
	fail_msg("function %llu missing", (unsigned long long)id);
	return NULL;
}

static int64_t label_num(const Perftools__Profiles__Profile *pp,
			 const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (strcmp(S(pp, s->label[i]->key), key) == 0)
			return s->label[i]->num;
	fail_msg("label %s missing", key);
	return -1;
}

static const char *label_str(const Perftools__Profiles__Profile *pp,
			     const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (strcmp(S(pp, s->label[i]->key), key) == 0)
			return S(pp, s->label[i]->str);
	return NULL;
}

static void test_encode_decode(void **state)
{
	struct opal_profile *p = build_profile(true);
	uint8_t *buf;
	size_t len;

	assert_int_equal(opal_pprof_encode(p, false, &buf, &len), 0);
	Perftools__Profiles__Profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	assert_non_null(pp);
	char why[256] = "";
	assert_int_equal(opal_report_validate(pp, why, sizeof(why)), 0);

	assert_true(pp->n_string_table > 0);
	assert_string_equal(pp->string_table[0], "");
	/* No string twice in the table. */
	for (size_t i = 0; i < pp->n_string_table; i++)
		for (size_t j = i + 1; j < pp->n_string_table; j++)
			assert_string_not_equal(pp->string_table[i], pp->string_table[j]);

	assert_int_equal(pp->n_sample_type, 2);
	assert_string_equal(S(pp, pp->sample_type[0]->type), "samples");
	assert_string_equal(S(pp, pp->sample_type[0]->unit), "count");
	assert_string_equal(S(pp, pp->sample_type[1]->type), "cpu");
	assert_string_equal(S(pp, pp->sample_type[1]->unit), "nanoseconds");
	assert_string_equal(S(pp, pp->period_type->type), "cpu");
	assert_string_equal(S(pp, pp->period_type->unit), "nanoseconds");
	assert_int_equal(pp->period, PERIOD);
	assert_int_equal(pp->time_nanos, T0);
	assert_int_equal(pp->duration_nanos, 5000000000ll);

	assert_int_equal(pp->n_mapping, 3);
	assert_int_equal(pp->mapping[0]->id, 1);
	assert_int_equal(pp->mapping[0]->memory_start, 0x400000);
	assert_int_equal(pp->mapping[0]->memory_limit, 0x500000);
	assert_string_equal(S(pp, pp->mapping[0]->filename), "/usr/bin/app");
	/* GNU build ID preferred, htlhash otherwise. */
	assert_string_equal(S(pp, pp->mapping[0]->build_id),
			    "0123456789abcdef0123456789abcdef01234567");
	assert_string_equal(S(pp, pp->mapping[1]->build_id), "ffeeddccbbaa99887766554433221100");
	assert_int_equal(pp->mapping[1]->file_offset, 0x28000);
	assert_true(pp->mapping[0]->has_functions && pp->mapping[0]->has_filenames &&
		    pp->mapping[0]->has_line_numbers && pp->mapping[0]->has_inline_frames);
	assert_false(pp->mapping[1]->has_functions || pp->mapping[1]->has_inline_frames);
	assert_string_equal(S(pp, pp->mapping[2]->filename), "[kernel.kallsyms]");

	assert_int_equal(pp->n_location, 4);
	const Perftools__Profiles__Location *l = pp->location[loc_inline - 1];
	assert_int_equal(l->id, loc_inline);
	assert_int_equal(l->mapping_id, 1);
	assert_int_equal(l->address, 0x401234);
	/* pprof: line[0] is the innermost inlined function. */
	assert_int_equal(l->n_line, 2);
	assert_string_equal(S(pp, func(pp, l->line[0]->function_id)->name), "inner_helper");
	assert_string_equal(S(pp, func(pp, l->line[1]->function_id)->name), "compute");
	assert_string_equal(S(pp, func(pp, l->line[0]->function_id)->filename), "app.c");
	assert_int_equal(l->line[0]->line, 10);
	assert_int_equal(l->line[1]->line, 20);
	assert_int_equal(pp->location[loc_libc - 1]->n_line, 0);
	assert_int_equal(pp->location[loc_libc - 1]->address, 0x7f0000001234);
	/* Functions are deduplicated: inner_helper, compute, main, do_syscall_64. */
	assert_int_equal(pp->n_function, 4);

	assert_int_equal(pp->n_sample, 3);
	const Perftools__Profiles__Sample *s = pp->sample[0];
	assert_int_equal(s->n_location_id, 3);
	assert_int_equal(s->location_id[0], loc_kernel);
	assert_int_equal(s->location_id[1], loc_inline);
	assert_int_equal(s->location_id[2], loc_main);
	assert_int_equal(s->n_value, 2);
	assert_int_equal(s->value[0], 4);
	assert_int_equal(s->value[1], 4 * PERIOD);
	assert_int_equal(label_num(pp, s, "pid"), 100);
	assert_int_equal(label_num(pp, s, "tid"), 101);
	assert_string_equal(label_str(pp, s, "thread_name"), "worker");
	assert_string_equal(label_str(pp, s, "process"), "app");
	assert_int_equal(label_num(pp, pp->sample[2], "pid"), 200);
	assert_int_equal(pp->sample[2]->value[0], 1);

	perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);
	opal_profile_free(p);
}

/* Writes the fixture as a gzip'd pprof file in a fresh temp dir. */
static void write_fixture(bool with_kernel, char dir[64], char path[128])
{
	snprintf(dir, 64, "/tmp/opal-test-pprof-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, 128, "%s/profile.pb.gz", dir);
	struct opal_profile *p = build_profile(with_kernel);
	assert_int_equal(opal_pprof_write(p, path), 0);
	opal_profile_free(p);
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	assert_int_equal(access(tmp, F_OK), -1);
}

static void remove_dir(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* noinline: keeps GCC from tracking the memstream buffer into callers
 * (a false -Wdangling-pointer). */
__attribute__((noinline))
static char *run_to_string(int (*fn)(FILE *, const Perftools__Profiles__Profile *, void *),
			   const Perftools__Profiles__Profile *pp, void *arg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(fn(f, pp, arg), 0);
	fclose(f);
	return text;
}

static int do_stacks(FILE *f, const Perftools__Profiles__Profile *pp, void *arg)
{
	return opal_report_stacks(f, pp, arg != NULL);
}

static int do_top(FILE *f, const Perftools__Profiles__Profile *pp, void *arg)
{
	return opal_report_top(f, pp, 3, arg ? *(int *)arg : -1);
}

/* Python frames: under the "[cpython]" mapping with their first line in
 * Function.start_line; stacks show the line executing, top lists one
 * entry per function (first line), --kind cpython only those. */
static void test_report_python(void **state)
{
	char dir[64] = "/tmp/opal-test-pprof-py-XXXXXX", path[128], why[256];
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping py = { .filename = OPAL_PROFILE_CPYTHON_MAPPING,
					   .has_functions = true, .has_filenames = true,
					   .has_line_numbers = true };
	struct opal_profile_mapping exe = { .start = 0x400000, .limit = 0x500000,
					    .filename = "/usr/bin/python3.11", .has_functions = true };
	struct opal_profile_line leaf = { .function = "Worker.spin", .filename = "app.py",
					  .line = 14, .start_line = 12 };
	struct opal_profile_line leaf2 = { .function = "Worker.spin", .filename = "app.py",
					   .line = 15, .start_line = 12 };
	struct opal_profile_line caller = { .function = "main", .filename = "app.py", .line = 30,
					    .start_line = 28 };
	struct opal_profile_line eval = { .function = "_PyEval_EvalFrameDefault" };
	struct opal_profile_process proc = { .pid = 7, .executable_name = "python3.11" };
	uint64_t ts[2] = { 1, 2 };
	uint32_t cpus[2] = { 0, 1 };

	assert_non_null(p);
	uint32_t mp = opal_profile_mapping(p, &py), me = opal_profile_mapping(p, &exe);
	uint32_t l1 = opal_profile_location(p, mp, 0, OPAL_FRAME_CPYTHON, &leaf, 1);
	uint32_t l2 = opal_profile_location(p, mp, 0, OPAL_FRAME_CPYTHON, &leaf2, 1);
	uint32_t lc = opal_profile_location(p, mp, 0, OPAL_FRAME_CPYTHON, &caller, 1);
	uint32_t le = opal_profile_location(p, me, 0x401000, OPAL_FRAME_NATIVE, &eval, 1);
	assert_true(l1 && l2 && lc && le && l1 != l2);
	uint32_t pid = opal_profile_process(p, &proc);
	const uint32_t s1[] = { l1, lc, le }, s2[] = { le, l2, lc, le };
	assert_int_equal(opal_profile_add_sample(p, pid, 7, "python3.11", s1, 3, ts, cpus, 2), 0);
	assert_int_equal(opal_profile_add_sample(p, pid, 7, "python3.11", s2, 4, ts, cpus, 1), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/profile.pb.gz", dir);
	assert_int_equal(opal_pprof_write(p, path), 0);
	opal_profile_free(p);

	Perftools__Profiles__Profile *pp;
	assert_int_equal(opal_report_load(path, &pp, why, sizeof(why)), 0);
	bool start_line = false;
	for (size_t i = 0; i < pp->n_function; i++)
		start_line |= pp->function[i]->start_line == 12;
	assert_true(start_line);
	char *stacks = run_to_string(do_stacks, pp, NULL);
	assert_non_null(strstr(stacks, "count=2: Worker.spin (app.py:14);main (app.py:30);"
				"_PyEval_EvalFrameDefault\n"));
	assert_non_null(strstr(stacks, "count=1: _PyEval_EvalFrameDefault;Worker.spin (app.py:15);"
				"main (app.py:30);_PyEval_EvalFrameDefault\n"));
	free(stacks);
	int cpython = OPAL_FRAME_CPYTHON;
	char *top = run_to_string(do_top, pp, &cpython);
	/* one function for both lines; self: the innermost Python frame */
	assert_non_null(strstr(top, "by self, total 3 samples"));
	assert_non_null(strstr(top, "         3 100.00% 100.00%          3 100.00%  Worker.spin (app.py:12)\n"));
	assert_null(strstr(top, "_PyEval_EvalFrameDefault"));
	free(top);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	remove_dir(dir);
}

static void test_report_roundtrip(void **state)
{
	char dir[64], path[128], why[256];
	Perftools__Profiles__Profile *pp;

	write_fixture(true, dir, path);
	/* The file is gzip. */
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fgetc(f), 0x1f);
	assert_int_equal(fgetc(f), 0x8b);
	fclose(f);

	assert_int_equal(opal_report_load(path, &pp, why, sizeof(why)), 0);
	char *stacks = run_to_string(do_stacks, pp, NULL);
	assert_non_null(strstr(stacks, "pid=100 tid=101 comm=worker count=4: "
				"do_syscall_64;inner_helper;compute;main\n"));
	/* Unsymbolized: basename + file offset (0x1234 + 0x28000). */
	assert_non_null(strstr(stacks, "pid=100 tid=102 comm=io count=2: libc.so.6+0x29234;main\n"));
	assert_non_null(strstr(stacks, "pid=200 tid=201 comm=main count=1: inner_helper;compute;main\n"));
	free(stacks);

	char *top = run_to_string(do_top, pp, NULL);
	/* Self: do_syscall_64 4, libc 2, inner_helper 1 (of 7). */
	assert_non_null(strstr(top, "by self, total 7 samples"));
	assert_non_null(strstr(top, "         4 57.14% 57.14%          4 57.14%  do_syscall_64\n"));
	assert_non_null(strstr(top, "         2 28.57% 85.71%          2 28.57%  libc.so.6+0x29234\n"));
	/* Cumulative: main is in all 7. */
	const char *cum = strstr(top, "by cumulative");
	assert_non_null(cum);
	assert_non_null(strstr(cum, "         0  0.00%  0.00%          7 100.00%  main\n"));
	free(top);

	assert_int_equal(opal_report_check(pp, why, sizeof(why)), 0);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	remove_dir(dir);

	/* Without kernel frames the check fails and says why. */
	write_fixture(false, dir, path);
	assert_int_equal(opal_report_load(path, &pp, why, sizeof(why)), 0);
	assert_int_equal(opal_report_check(pp, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "kernel"));
	perftools__profiles__profile__free_unpacked(pp, NULL);
	remove_dir(dir);
}

static void test_report_rejects_bad_input(void **state)
{
	char dir[64] = "/tmp/opal-test-pprof-XXXXXX", path[128], why[256];
	Perftools__Profiles__Profile *pp;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/garbage", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fputs("this is not a protobuf \xff\xff\xff\xff", f);
	fclose(f);
	assert_int_equal(opal_report_load(path, &pp, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "not a pprof profile"));
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(opal_report_load(path, &pp, why, sizeof(why)), -ENOENT);
	/* A truncated gzip stream is refused, not half-read. */
	struct opal_profile *prof = build_profile(true);
	uint8_t *gz;
	size_t gzlen;
	assert_int_equal(opal_pprof_encode(prof, true, &gz, &gzlen), 0);
	opal_profile_free(prof);
	snprintf(path, sizeof(path), "%s/truncated.pb.gz", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(gz, 1, gzlen / 2, f), gzlen / 2);
	fclose(f);
	free(gz);
	assert_true(opal_report_load(path, &pp, why, sizeof(why)) < 0);

	/* A sample pointing at a location that does not exist is rejected. */
	Perftools__Profiles__Profile bad = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType *vts[1] = { &vt };
	Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
	Perftools__Profiles__Sample *ss[1] = { &s };
	char *strs[1] = { "" };
	uint64_t locs[1] = { 7 };
	int64_t vals[1] = { 1 };
	bad.string_table = strs;
	bad.n_string_table = 1;
	bad.sample_type = vts;
	bad.n_sample_type = 1;
	s.location_id = locs;
	s.n_location_id = 1;
	s.value = vals;
	s.n_value = 1;
	bad.sample = ss;
	bad.n_sample = 1;
	assert_int_equal(opal_report_validate(&bad, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown location 7"));
	remove_dir(dir);
}

/* Repository root: the first ancestor of the test binary (or of the
 * working directory) holding proto/pprof/profile.proto. */
static bool find_srcdir(char out[PATH_MAX])
{
	char exe[PATH_MAX], cwd[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	const char *starts[2] = { exe, cwd };
	for (int k = 0; k < 2; k++) {
		char dir[PATH_MAX], probe[PATH_MAX + 32];
		size_t len = strnlen(starts[k], sizeof(dir) - 1);
		memcpy(dir, starts[k], len);
		dir[len] = '\0';
		while (*dir) {
			snprintf(probe, sizeof(probe), "%s/proto/pprof/profile.proto", dir);
			if (access(probe, R_OK) == 0) {
				memcpy(out, dir, strlen(dir) + 1);
				return true;
			}
			char *slash = strrchr(dir, '/');
			if (!slash)
				break;
			*slash = '\0';
		}
	}
	return false;
}

static bool have(const char *tool)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

/* Runs `cmd` through the shell; returns its exit status and its stdout. */
static int run(const char *cmd, char **out)
{
	size_t len = 0, cap = 1 << 16;
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	*out = calloc(1, cap);
	assert_non_null(*out);
	size_t got;
	while ((got = fread(*out + len, 1, cap - len - 1, f)) > 0) {
		len += got;
		if (len == cap - 1) {
			*out = realloc(*out, cap * 2);
			assert_non_null(*out);
			cap *= 2;
		}
	}
	(*out)[len] = '\0';
	return pclose(f);
}

static void test_protoc_decodes(void **state)
{
	char src[PATH_MAX], dir[64], path[128], cmd[PATH_MAX * 2 + 512];
	char *out;

	if (!have("protoc") || !have("gunzip"))
		fail_msg("protoc or gunzip not on PATH: scripts/install-deps.sh installs "
			 "protobuf-compiler (gzip is essential)");
	if (!find_srcdir(src))
		fail_msg("proto/pprof/profile.proto not found above the test binary or the "
			 "working directory: run the test from the source tree");
	write_fixture(true, dir, path);
	snprintf(cmd, sizeof(cmd),
		 "gunzip -c '%s' | protoc --decode perftools.profiles.Profile -I'%s/proto' "
		 "'%s/proto/pprof/profile.proto'", path, src, src);
	assert_int_equal(run(cmd, &out), 0);
	assert_non_null(strstr(out, "string_table: \"inner_helper\""));
	assert_non_null(strstr(out, "has_inline_frames: true"));
	free(out);
	remove_dir(dir);
}

static void test_go_pprof_reads(void **state)
{
	char dir[64], path[128], cmd[512];
	char *out;

	if (!have("go"))
		fail_msg("go not on PATH: scripts/install-deps.sh installs golang-go");
	write_fixture(true, dir, path);
	/* A private HOME and build cache: the test must not depend on (or
	 * write to) the caller's. */
	snprintf(cmd, sizeof(cmd),
		 "HOME='%s' GOCACHE='%s/gocache' GOFLAGS= GOTOOLCHAIN=local "
		 "go tool pprof -raw '%s' 2>&1", dir, dir, path);
	int rc = run(cmd, &out);
	if (rc != 0)
		print_error("go tool pprof output:\n%s\n", out);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "inner_helper"));
	assert_non_null(strstr(out, "compute"));
	assert_non_null(strstr(out, "do_syscall_64"));
	assert_non_null(strstr(out, "/usr/bin/app"));
	free(out);
	remove_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_decode),
		cmocka_unit_test(test_report_roundtrip),
		cmocka_unit_test(test_report_python),
		cmocka_unit_test(test_report_rejects_bad_input),
		cmocka_unit_test(test_protoc_decodes),
		cmocka_unit_test(test_go_pprof_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
