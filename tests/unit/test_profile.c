/* Unit tests of symbolizer/profile/profile.c: interning deduplicates mappings,
 * locations, processes and samples; strings are copied; bad ids and
 * bounds are rejected without changing the profile; read accessors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/profile/intern.h"
#include "symbolizer/profile/profile.h"

static void test_mapping_dedup_and_copy(void **state)
{
	struct opal_profile *p = opal_profile_new(1000000);
	char name[64];
	struct opal_profile_mapping m = {
		.start = 0x1000, .limit = 0x2000, .file_offset = 0x100, .filename = name,
		.build_id_gnu = "abcd", .has_functions = true,
	};

	assert_non_null(p);
	strcpy(name, "/usr/bin/x");
	uint32_t a = opal_profile_mapping(p, &m);
	/* Same content from a different buffer: same id. */
	char other[64];
	strcpy(other, "/usr/bin/x");
	m.filename = other;
	uint32_t b = opal_profile_mapping(p, &m);
	assert_int_equal(a, 1);
	assert_int_equal(b, 1);
	/* The profile keeps its own copy of the string. */
	memset(name, 'Z', sizeof(name) - 1);
	memset(other, 'Y', sizeof(other) - 1);
	assert_string_equal(opal_profile_get_mapping(p, 1)->filename, "/usr/bin/x");
	assert_string_equal(opal_profile_get_mapping(p, 1)->build_id_gnu, "abcd");
	assert_null(opal_profile_get_mapping(p, 1)->file_id_htlhash);

	/* Any differing field gives a new mapping. */
	m.filename = "/usr/bin/x";
	m.has_inline_frames = true;
	assert_int_equal(opal_profile_mapping(p, &m), 2);
	m.file_offset = 0;
	assert_int_equal(opal_profile_mapping(p, &m), 3);
	m.build_id_gnu = NULL;
	assert_int_equal(opal_profile_mapping(p, &m), 4);
	assert_int_equal(opal_profile_n_mappings(p), 4);
	assert_null(opal_profile_get_mapping(p, 0));
	assert_null(opal_profile_get_mapping(p, 5));
	opal_profile_free(p);
}

static void test_location_dedup(void **state)
{
	struct opal_profile *p = opal_profile_new(1000000);
	struct opal_profile_mapping m = { .start = 0x1000, .limit = 0x2000, .filename = "/bin/y" };
	uint32_t mid = opal_profile_mapping(p, &m);
	char fn[32];
	strcpy(fn, "inner");
	struct opal_profile_line lines[2] = {
		{ .function = fn, .filename = "a.c", .line = 10 },
		{ .function = "outer", .filename = "a.c", .line = 20 },
	};

	uint32_t l1 = opal_profile_location(p, mid, 0x1234, OPAL_FRAME_NATIVE, lines, 2);
	strcpy(fn, "inner");
	uint32_t l2 = opal_profile_location(p, mid, 0x1234, OPAL_FRAME_NATIVE, lines, 2);
	assert_int_equal(l1, 1);
	assert_int_equal(l2, 1);
	/* Different inline chain, address, type, mapping: new locations. */
	assert_int_equal(opal_profile_location(p, mid, 0x1234, OPAL_FRAME_NATIVE, lines + 1, 1), 2);
	assert_int_equal(opal_profile_location(p, mid, 0x1235, OPAL_FRAME_NATIVE, lines, 2), 3);
	assert_int_equal(opal_profile_location(p, mid, 0x1234, OPAL_FRAME_KERNEL, lines, 2), 4);
	assert_int_equal(opal_profile_location(p, 0, 0x1234, OPAL_FRAME_NATIVE, NULL, 0), 5);
	assert_int_equal(opal_profile_location(p, 0, 0x1234, OPAL_FRAME_NATIVE, NULL, 0), 5);

	strcpy(fn, "changed");
	struct opal_profile_location_info info;
	assert_int_equal(opal_profile_get_location(p, 1, &info), 0);
	assert_int_equal(info.mapping_id, mid);
	assert_int_equal(info.address, 0x1234);
	assert_int_equal(info.n_lines, 2);
	assert_string_equal(info.lines[0].function, "inner");
	assert_string_equal(info.lines[1].function, "outer");
	assert_int_equal(info.lines[0].line, 10);
	/* Interned: equal strings share storage. */
	assert_ptr_equal(info.lines[0].filename, info.lines[1].filename);

	/* Unknown mapping and too deep inline chains are refused. */
	errno = 0;
	assert_int_equal(opal_profile_location(p, 9, 0x1, OPAL_FRAME_NATIVE, NULL, 0), 0);
	assert_int_equal(errno, EINVAL);
	struct opal_profile_line many[OPAL_PROFILE_MAX_LINES + 1] = { 0 };
	errno = 0;
	assert_int_equal(opal_profile_location(p, mid, 0x1, OPAL_FRAME_NATIVE, many,
					       OPAL_PROFILE_MAX_LINES + 1), 0);
	assert_int_equal(errno, E2BIG);
	assert_int_equal(opal_profile_n_locations(p), 5);
	assert_int_equal(opal_profile_get_location(p, 6, &info), -ENOENT);
	opal_profile_free(p);
}

static void test_process_dedup(void **state)
{
	struct opal_profile *p = opal_profile_new(1000000);
	struct opal_profile_process a = { .pid = 10, .executable_path = "/usr/bin/app",
					  .host_name = "h" };

	assert_int_equal(opal_profile_process(p, &a), 1);
	/* Same key (pid, path): same process; the first description is kept. */
	a.service_name = "svc";
	assert_int_equal(opal_profile_process(p, &a), 1);
	a.executable_path = "/usr/bin/other";
	assert_int_equal(opal_profile_process(p, &a), 2);
	a.pid = 11;
	assert_int_equal(opal_profile_process(p, &a), 3);
	const struct opal_profile_process *got = opal_profile_get_process(p, 1);
	assert_int_equal(got->pid, 10);
	assert_null(got->service_name);
	/* executable_name defaults to the basename of the path. */
	assert_string_equal(got->executable_name, "app");
	assert_string_equal(opal_profile_get_process(p, 2)->service_name, "svc");
	assert_null(opal_profile_get_process(p, 4));
	/* A process context published mid-run makes another process from then
	 * on; the same context again is the same one. */
	const struct opal_profile_attr ctx[] = { { "service.name", "pub" } },
				       ctx2[] = { { "service.name", "pub2" } };
	a.resource = ctx;
	a.n_resource = 1;
	assert_int_equal(opal_profile_process(p, &a), 4);
	assert_int_equal(opal_profile_process(p, &a), 4);
	a.resource = ctx2;
	assert_int_equal(opal_profile_process(p, &a), 5);
	assert_string_equal(opal_profile_get_process(p, 4)->resource[0].value, "pub");
	opal_profile_free(p);
}

static void test_sample_merge(void **state)
{
	struct opal_profile *p = opal_profile_new(50000000);
	struct opal_profile_process proc = { .pid = 1, .executable_path = "/a" };
	uint32_t pid = opal_profile_process(p, &proc);
	uint32_t l1 = opal_profile_location(p, 0, 0x10, OPAL_FRAME_NATIVE, NULL, 0);
	uint32_t l2 = opal_profile_location(p, 0, 0x20, OPAL_FRAME_NATIVE, NULL, 0);
	uint32_t stack[2] = { l1, l2 };
	uint64_t ts[3] = { 300, 100, 200 };
	uint32_t cpus[3] = { 0, 1, 0 };

	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t", stack, 2, ts, cpus, 1), 0);
	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t", stack, 2, ts + 1, cpus + 1, 1), 0);
	/* The thread renamed: its later samples keep the new name. */
	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t2", stack, 2, ts + 2, cpus + 2, 1), 0);
	/* Other tid or other stack: separate samples. */
	assert_int_equal(opal_profile_add_sample(p, pid, 6, "t", stack, 2, ts, cpus, 1), 0);
	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t", stack, 1, ts, cpus, 1), 0);
	assert_int_equal(opal_profile_n_samples(p), 4);
	assert_int_equal(opal_profile_sample_count(p), 5);

	struct opal_profile_sample_info si;
	assert_int_equal(opal_profile_get_sample(p, 0, &si), 0);
	assert_int_equal(si.tid, 5);
	assert_string_equal(si.thread_name, "t");
	assert_int_equal(si.n_locations, 2);
	assert_int_equal(si.location_ids[0], l1);
	assert_int_equal(si.n_times, 2);
	assert_int_equal(si.timestamps_unix_ns[1], 100);
	assert_int_equal(si.cpus[1], 1);
	assert_int_equal(opal_profile_get_sample(p, 1, &si), 0);
	assert_int_equal(si.tid, 5);
	assert_string_equal(si.thread_name, "t2");
	assert_int_equal(si.n_times, 1);
	assert_int_equal(si.timestamps_unix_ns[0], 200);
	assert_int_equal(opal_profile_get_sample(p, 4, &si), -ENOENT);

	/* Bad input is refused and changes nothing. */
	uint32_t bad[1] = { 99 };
	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t", bad, 1, ts, cpus, 1), -EINVAL);
	assert_int_equal(opal_profile_add_sample(p, 7, 5, "t", stack, 2, ts, cpus, 1), -EINVAL);
	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t", stack, 2, ts, cpus, 0), -EINVAL);
	assert_int_equal(opal_profile_n_samples(p), 4);
	assert_int_equal(opal_profile_sample_count(p), 5);

	/* Without set_time the range comes from the timestamps. */
	uint64_t start, end;
	opal_profile_time(p, &start, &end);
	assert_int_equal(start, 100);
	assert_int_equal(end, 300 + 50000000);
	opal_profile_set_time(p, 1000, 2000);
	opal_profile_set_time(p, 500, 1500);
	opal_profile_time(p, &start, &end);
	assert_int_equal(start, 500);
	assert_int_equal(end, 2000);
	opal_profile_free(p);
}

/* One add for every kind: CPU and off-CPU samples of one stack, and
 * samples under different thread contexts, stay apart; each reads back
 * with its kind, values and context. */
static void test_sample_kinds_and_contexts(void **state)
{
	struct opal_profile *p = opal_profile_new(50000000);
	struct opal_profile_process proc = { .pid = 1, .executable_path = "/a" };
	uint32_t pid = opal_profile_process(p, &proc);
	uint32_t stack[1] = { opal_profile_location(p, 0, 0x10, OPAL_FRAME_NATIVE, NULL, 0) };
	uint64_t ts[2] = { 100, 200 }, ns[2] = { 7000, 9000 };
	uint32_t cpus[2] = { 0, 1 };
	struct opal_profile_attr attr = { .key = "k", .value = "v" };
	struct opal_profile_trace_ctx a = { .has_link = true, .trace_id = { 1 }, .span_id = { 2 },
					    .trace_flags = 1, .attrs = &attr, .n_attrs = 1 };
	struct opal_profile_trace_ctx b = a;
	struct opal_profile_sample_info si;

	b.span_id[0] = 3;
	assert_int_equal(opal_profile_add_sample(p, pid, 5, "t", stack, 1, ts, cpus, 1), 0);
	assert_int_equal(opal_profile_add_sample_ctx(p, pid, 5, "t", stack, 1, ts, cpus, 1, &a), 0);
	assert_int_equal(opal_profile_add_sample_ctx(p, pid, 5, "t", stack, 1, ts, cpus, 1, &b), 0);
	assert_int_equal(opal_profile_add_off_cpu(p, pid, 5, "t", stack, 1, ts, cpus, ns, 1, NULL),
			 0);
	assert_int_equal(opal_profile_add_off_cpu(p, pid, 5, "t", stack, 1, ts, cpus, ns, 1, &a),
			 0);
	/* the same kind and context again: merged */
	assert_int_equal(opal_profile_add_off_cpu(p, pid, 5, "t", stack, 1, ts + 1, cpus + 1,
						  ns + 1, 1, &a), 0);
	assert_int_equal(opal_profile_add_sample_ctx(p, pid, 5, "t", stack, 1, ts + 1, cpus + 1, 1,
						     &a), 0);
	assert_int_equal(opal_profile_add_off_cpu(p, pid, 5, "t", stack, 1, ts, cpus, NULL, 1, &a),
			 -EINVAL);
	assert_int_equal(opal_profile_n_samples(p), 5);
	assert_int_equal(opal_profile_n_samples_of(p, true), 2);
	assert_int_equal(opal_profile_sample_count(p), 7);

	assert_int_equal(opal_profile_get_sample(p, 0, &si), 0);
	assert_false(si.off_cpu);
	assert_null(si.off_cpu_ns);
	assert_null(si.ctx);
	assert_int_equal(opal_profile_get_sample(p, 1, &si), 0);
	assert_false(si.off_cpu);
	assert_int_equal(si.n_times, 2);
	assert_non_null(si.ctx);
	assert_int_equal(si.ctx->span_id[0], 2);
	assert_int_equal(opal_profile_get_sample(p, 2, &si), 0);
	assert_int_equal(si.ctx->span_id[0], 3);
	assert_int_equal(opal_profile_get_sample(p, 3, &si), 0);
	assert_true(si.off_cpu);
	assert_null(si.ctx);
	assert_int_equal(si.off_cpu_ns[0], 7000);
	assert_int_equal(opal_profile_get_sample(p, 4, &si), 0);
	assert_true(si.off_cpu);
	assert_int_equal(si.n_times, 2);
	assert_int_equal(si.off_cpu_ns[1], 9000);
	assert_non_null(si.ctx);
	assert_int_equal(si.ctx->n_attrs, 1);
	assert_string_equal(si.ctx->attrs[0].key, "k");
	assert_string_equal(si.ctx->attrs[0].value, "v");
	opal_profile_free(p);
}

static void test_intern_table(void **state)
{
	struct opal_intern *t = opal_intern_new(1000);
	uint32_t idx;
	bool added;
	char key[32];

	assert_non_null(t);
	/* Enough keys to force several slot array growths. */
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		assert_int_equal(opal_intern_add(t, key, strlen(key), &idx, &added), 0);
		assert_true(added);
		assert_int_equal(idx, i);
	}
	for (int i = 999; i >= 0; i--) {
		snprintf(key, sizeof(key), "key-%d", i);
		assert_int_equal(opal_intern_add(t, key, strlen(key), &idx, &added), 0);
		assert_false(added);
		assert_int_equal(idx, i);
		assert_int_equal(opal_intern_find(t, key, strlen(key), &idx), 0);
		assert_string_equal(opal_intern_key(t, idx, NULL), key);
	}
	assert_int_equal(opal_intern_add(t, "new", 3, &idx, NULL), -E2BIG);
	assert_int_equal(opal_intern_find(t, "new", 3, &idx), -ENOENT);
	assert_int_equal(opal_intern_count(t), 1000);
	assert_null(opal_intern_key(t, 1000, NULL));
	opal_intern_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mapping_dedup_and_copy),
		cmocka_unit_test(test_location_dedup),
		cmocka_unit_test(test_process_dedup),
		cmocka_unit_test(test_sample_merge),
		cmocka_unit_test(test_sample_kinds_and_contexts),
		cmocka_unit_test(test_intern_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
