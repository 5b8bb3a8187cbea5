/* Unit tests of collector/send/aggregate.c: merging samples into stacks per
 * (process, thread, frames), mapping lists per process, bounds, and the
 * packed Interval message. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/send/aggregate.h"
#include "shared/wire_frames.h"

#define NATIVE OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE
#define KERNEL OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL
#define ERROR  OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_ERROR

static struct opal_mapping_desc map_exe = {
	.start = 0x1000, .limit = 0x2000, .file_offset = 0, .load_bias = 0x400,
	.has_file_id = true, .file_id = { { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 } },
	.build_id_len = 3, .build_id = { 0xaa, 0xbb, 0xcc }, .path = "/bin/app",
};
static struct opal_mapping_desc map_libc = {
	.start = 0x7000, .limit = 0x9000, .file_offset = 0x1000, .load_bias = 0x6000,
	.has_file_id = true, .file_id = { { 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0 } },
	.path = "/lib/libc.so.6",
};
static struct opal_mapping_desc map_unused = {
	.start = 0xa000, .limit = 0xb000, .has_file_id = true,
	.file_id = { { 5 } }, .path = "/lib/unused.so",
};
static struct opal_mapping_desc map_vdso = {
	.start = 0xc000, .limit = 0xd000, .path = "[vdso]",
};

static struct opal_proc_info info_app = {
	.comm = "app", .exe = "/bin/app", .service_name = "svc-a",
	.container_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
};
static struct opal_proc_info info_other = {
	.comm = "other", .exe = "/bin/other", .service_name = "",
};

static struct opal_frame F(uint8_t kind, uint64_t addr, const struct opal_mapping_desc *m,
			   bool ret)
{
	return (struct opal_frame){ .address = addr, .mapping = m, .kind = kind,
				    .return_address = ret };
}

static struct opal_agg *new_agg(size_t stacks, size_t samples, size_t bytes)
{
	struct opal_agg_limits lim = { stacks, samples, bytes };
	struct opal_agg *a = opal_agg_new(&lim);
	assert_non_null(a);
	return a;
}

static int add(struct opal_agg *a, uint32_t pid, uint32_t tid, uint32_t cpu, uint64_t t,
	       const struct opal_proc_info *info, const char *tname, const struct opal_frame *f,
	       size_t n)
{
	struct opal_agg_sample s = {
		.pid = pid, .tid = tid, .cpu = cpu, .time_unix_ns = t, .thread_name = tname,
		.proc = info, .frames = f, .n_frames = n,
	};
	return opal_agg_add(a, &s);
}

static Opal__Wire__V1__Interval *pack(struct opal_agg *a, opal_file_id **ids, size_t *n_ids)
{
	Opal__Wire__V1__CollectorCounters ctr = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	struct opal_interval_meta m = {
		.seq = 7, .run_id = 0x1234, .start_unix_ns = 100, .end_unix_ns = 200,
		.idle_samples = 3, .counters = &ctr, .final = true,
	};
	struct opal_sendq_entry e = { 0 };

	ctr.samples_total = 42;
	ctr.maps_reads = 5;
	assert_int_equal(opal_agg_pack(a, &m, &e), 0);
	*ids = e.ids;
	*n_ids = e.n_ids;
	free(e.code_ids);
	Opal__Wire__V1__Interval *iv = opal__wire__v1__interval__unpack(NULL, e.len, e.buf);
	free(e.buf);
	assert_non_null(iv);
	return iv;
}

static Opal__Wire__V1__Process *find_proc(Opal__Wire__V1__Interval *iv, uint32_t pid,
					  const char *exe)
{
	for (size_t i = 0; i < iv->n_processes; i++)
		if (iv->processes[i]->pid == pid &&
		    strcmp(iv->processes[i]->executable_path, exe) == 0)
			return iv->processes[i];
	fail_msg("process %u %s missing", pid, exe);
	return NULL;
}

static Opal__Wire__V1__Thread *find_thread(Opal__Wire__V1__Process *p, uint32_t tid)
{
	for (size_t i = 0; i < p->n_threads; i++)
		if (p->threads[i]->tid == tid)
			return p->threads[i];
	fail_msg("thread %u missing", tid);
	return NULL;
}

/* Frame i of a packed stack (the collector sends the packed form only). */
static Opal__Wire__V1__Frame frame_at(const Opal__Wire__V1__Stack *st, size_t i)
{
	Opal__Wire__V1__Frame out;
	size_t code_at = 0;

	assert_int_equal(st->n_frames, 0);
	assert_int_equal(opal_wire_stack_frames_check(st), 0);
	assert_true(i < opal_wire_stack_n_frames(st));
	for (size_t j = 0; j <= i; j++)
		out = *opal_wire_stack_frame(st, j, &code_at, &out);
	return out;
}

static void test_merge_and_pack(void **state)
{
	(void)state;
	struct opal_agg *a = new_agg(100, 1000, 1 << 20);
	/* stack A: kernel leaf, then app -> libc */
	struct opal_frame sa[] = {
		F(KERNEL, 0xffffffff81000010, NULL, false),
		F(KERNEL, 0xffffffff81000020, NULL, true),
		F(NATIVE, 0x1400, &map_exe, false),
		F(NATIVE, 0x1500, &map_exe, true),
		F(NATIVE, 0x1100, &map_libc, true),
	};
	/* stack B: same as A but the leaf differs */
	struct opal_frame sb[] = {
		F(NATIVE, 0x1404, &map_exe, false),
		F(NATIVE, 0xc010, &map_vdso, true),
		F(ERROR, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING, NULL, false),
	};
	/* a copy of map_exe (a re-read of maps gives a new description) */
	struct opal_mapping_desc exe2 = map_exe;
	struct opal_frame sa2[5];
	memcpy(sa2, sa, sizeof(sa));
	sa2[2].mapping = sa2[3].mapping = &exe2;

	assert_int_equal(add(a, 10, 10, 0, 1000, &info_app, "app", sa, 5), 0);
	assert_int_equal(add(a, 10, 10, 1, 1001, &info_app, "app", sb, 3), 0);
	assert_int_equal(add(a, 10, 10, 1, 1002, &info_app, "app-renamed", sa2, 5), 0);
	assert_int_equal(add(a, 10, 11, 0, 1003, &info_app, "worker", sa, 5), 0);
	assert_int_equal(add(a, 20, 20, 1, 1004, &info_other, "other", sb, 3), 0);
	/* same pid, new executable (exec): a separate process */
	assert_int_equal(add(a, 10, 10, 0, 1005, &info_other, "other", sb, 3), 0);
	assert_int_equal(opal_agg_n_samples(a), 6);
	assert_int_equal(opal_agg_n_stacks(a), 6);

	opal_file_id *ids;
	size_t n_ids;
	Opal__Wire__V1__Interval *iv = pack(a, &ids, &n_ids);
	assert_int_equal(iv->seq, 7);
	assert_int_equal(iv->run_id, 0x1234);
	assert_int_equal(iv->start_unix_ns, 100);
	assert_int_equal(iv->end_unix_ns, 200);
	assert_int_equal(iv->idle_samples, 3);
	assert_true(iv->final);
	assert_non_null(iv->counters);
	assert_int_equal(iv->counters->samples_total, 42);
	assert_int_equal(iv->counters->maps_reads, 5);
	assert_int_equal(iv->n_processes, 3);

	Opal__Wire__V1__Process *p = find_proc(iv, 10, "/bin/app");
	assert_string_equal(p->comm, "app");
	assert_string_equal(p->service_name, "svc-a");
	assert_string_equal(p->container_id, info_app.container_id);
	/* only the mappings its frames use: app, libc, vdso (not map_unused) */
	assert_int_equal(p->n_mappings, 3);
	assert_int_equal(p->mappings[0]->start, 0x1000);
	assert_int_equal(p->mappings[0]->load_bias, 0x400);
	assert_int_equal(p->mappings[0]->file_id.len, 16);
	assert_memory_equal(p->mappings[0]->file_id.data, map_exe.file_id.b, 16);
	assert_int_equal(p->mappings[0]->gnu_build_id.len, 3);
	assert_string_equal(p->mappings[0]->path, "/bin/app");
	assert_int_equal(p->mappings[1]->file_offset, 0x1000);
	assert_string_equal(p->mappings[1]->path, "/lib/libc.so.6");
	assert_int_equal(p->mappings[1]->gnu_build_id.len, 0);
	assert_string_equal(p->mappings[2]->path, "[vdso]");
	assert_int_equal(p->mappings[2]->file_id.len, 0);
	assert_int_equal(p->n_threads, 3);

	/* Thread 10 renamed itself after two samples: its stacks stay under
	 * the name each was sampled with. */
	Opal__Wire__V1__Thread *t10 = find_thread(p, 10);
	assert_string_equal(t10->name, "app");
	assert_int_equal(t10->n_stacks, 2);
	Opal__Wire__V1__Thread *t10r = p->threads[1];
	assert_int_equal(t10r->tid, 10);
	assert_string_equal(t10r->name, "app-renamed");
	assert_int_equal(t10r->n_stacks, 1);
	assert_int_equal(t10r->stacks[0]->n_timestamps_unix_ns, 1);
	assert_int_equal(t10r->stacks[0]->timestamps_unix_ns[0], 1002);
	Opal__Wire__V1__Stack *s = t10->stacks[0];
	assert_int_equal(s->n_timestamps_unix_ns, 1);
	assert_int_equal(s->n_cpus, 1);
	assert_int_equal(s->timestamps_unix_ns[0], 1000);
	assert_int_equal(s->cpus[0], 0);
	assert_int_equal(opal_wire_stack_n_frames(s), 5);
	assert_int_equal(frame_at(s, 0).kind, KERNEL);
	assert_int_equal(frame_at(s, 0).address, 0xffffffff81000010);
	assert_false(frame_at(s, 0).return_address);
	assert_true(frame_at(s, 1).return_address);
	assert_int_equal(frame_at(s, 2).kind, NATIVE);
	assert_int_equal(frame_at(s, 2).address, 0x1400);
	assert_int_equal(frame_at(s, 2).mapping_index, 0);
	assert_false(frame_at(s, 2).return_address);
	assert_int_equal(frame_at(s, 4).mapping_index, 1);
	assert_true(frame_at(s, 4).return_address);
	Opal__Wire__V1__Stack *sB = t10->stacks[1];
	assert_int_equal(opal_wire_stack_n_frames(sB), 3);
	assert_int_equal(frame_at(sB, 1).mapping_index, 2);
	assert_int_equal(frame_at(sB, 2).kind, ERROR);
	assert_int_equal(frame_at(sB, 2).address, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);

	Opal__Wire__V1__Thread *t11 = find_thread(p, 11);
	assert_int_equal(t11->n_stacks, 1);
	assert_int_equal(t11->stacks[0]->n_timestamps_unix_ns, 1);
	assert_int_equal(t11->stacks[0]->timestamps_unix_ns[0], 1003);

	Opal__Wire__V1__Process *p20 = find_proc(iv, 20, "/bin/other");
	assert_string_equal(p20->service_name, "");
	assert_string_equal(p20->container_id, "");
	assert_int_equal(p20->n_mappings, 2);   /* app + vdso, its own indexes */
	assert_int_equal(frame_at(p20->threads[0]->stacks[0], 1).mapping_index, 1);
	Opal__Wire__V1__Process *p10b = find_proc(iv, 10, "/bin/other");
	assert_string_equal(p10b->comm, "other");

	/* file IDs: distinct and sorted (exe 01.., libc 09..) */
	assert_int_equal(n_ids, 2);
	assert_memory_equal(ids[0].b, map_exe.file_id.b, 16);
	assert_memory_equal(ids[1].b, map_libc.file_id.b, 16);
	free(ids);
	opal__wire__v1__interval__free_unpacked(iv, NULL);

	/* reset: the next interval starts empty */
	opal_agg_reset(a);
	assert_int_equal(opal_agg_n_samples(a), 0);
	iv = pack(a, &ids, &n_ids);
	assert_int_equal(iv->n_processes, 0);
	assert_int_equal(n_ids, 0);
	assert_null(ids);
	opal__wire__v1__interval__free_unpacked(iv, NULL);
	(void)map_unused;
	opal_agg_free(a);
}

static void test_stack_bound(void **state)
{
	(void)state;
	struct opal_agg *a = new_agg(2, 1000, 1 << 20);
	struct opal_frame f1[] = { F(NATIVE, 0x1400, &map_exe, false) };
	struct opal_frame f2[] = { F(NATIVE, 0x1408, &map_exe, false) };
	struct opal_frame f3[] = { F(NATIVE, 0x1410, &map_exe, false) };
	struct opal_frame f4[] = { F(NATIVE, 0x7010, &map_libc, false) };

	assert_int_equal(add(a, 1, 1, 0, 1, &info_app, "a", f1, 1), 0);
	assert_int_equal(add(a, 1, 1, 0, 2, &info_app, "a", f2, 1), 0);
	/* full: new stacks, threads, processes and mappings are refused */
	assert_int_equal(add(a, 1, 1, 0, 3, &info_app, "a", f3, 1), -ENOSPC);
	assert_int_equal(add(a, 1, 2, 0, 3, &info_app, "a", f1, 1), -ENOSPC);
	assert_int_equal(add(a, 2, 2, 0, 3, &info_app, "a", f1, 1), -ENOSPC);
	assert_int_equal(add(a, 1, 1, 0, 3, &info_app, "a", f4, 1), -ENOSPC);
	/* ... but samples of known stacks still merge */
	assert_int_equal(add(a, 1, 1, 0, 4, &info_app, "a", f1, 1), 0);
	assert_int_equal(opal_agg_n_stacks(a), 2);
	assert_int_equal(opal_agg_n_samples(a), 3);

	opal_file_id *ids;
	size_t n;
	Opal__Wire__V1__Interval *iv = pack(a, &ids, &n);
	assert_int_equal(iv->n_processes, 1);
	assert_int_equal(iv->processes[0]->n_mappings, 1);
	assert_int_equal(iv->processes[0]->n_threads, 1);
	assert_int_equal(iv->processes[0]->threads[0]->stacks[0]->n_timestamps_unix_ns, 2);
	free(ids);
	opal__wire__v1__interval__free_unpacked(iv, NULL);
	opal_agg_free(a);
}

static void test_sample_and_byte_bounds(void **state)
{
	(void)state;
	struct opal_frame f1[] = { F(NATIVE, 0x1400, &map_exe, false) };
	struct opal_agg *a = new_agg(100, 3, 1 << 20);

	for (int i = 0; i < 3; i++)
		assert_int_equal(add(a, 1, 1, 0, (uint64_t)i, &info_app, "a", f1, 1), 0);
	assert_int_equal(add(a, 1, 1, 0, 9, &info_app, "a", f1, 1), -ENOSPC);
	assert_int_equal(opal_agg_n_samples(a), 3);
	opal_agg_free(a);

	/* byte bound: the packed size stays below the bound plus the fixed
	 * Interval header, however many distinct deep stacks arrive */
	const size_t bound = 4096;
	a = new_agg(100000, 100000, bound);
	struct opal_frame deep[100];
	int accepted = 0, refused = 0;
	for (int s = 0; s < 200; s++) {
		for (int i = 0; i < 100; i++)
			deep[i] = F(NATIVE, 0x1000 + (uint64_t)s * 0x100 + (uint64_t)i, &map_exe, i > 0);
		int r = add(a, 1, 1, 0, (uint64_t)s, &info_app, "a", deep, 100);
		if (r == 0)
			accepted++;
		else if (r == -ENOSPC)
			refused++;
		else
			fail_msg("add: %d", r);
	}
	assert_true(accepted >= 1);
	assert_true(refused >= 1);
	Opal__Wire__V1__CollectorCounters ctr = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	struct opal_interval_meta m = { .seq = 1, .counters = &ctr };
	struct opal_sendq_entry e = { 0 };
	assert_int_equal(opal_agg_pack(a, &m, &e), 0);
	/* one stack of 100 frames is ~1.3 KiB: the estimate bounds the real size */
	assert_true(e.len <= bound + 2 * 1500 + 128);
	free(e.buf);
	free(e.ids);
	free(e.code_ids);
	opal_agg_free(a);
}

static void test_native_frame_needs_mapping(void **state)
{
	(void)state;
	struct opal_agg *a = new_agg(10, 10, 1 << 20);
	struct opal_frame bad[] = { F(NATIVE, 0x1400, NULL, false) };

	assert_int_equal(add(a, 1, 1, 0, 1, &info_app, "a", bad, 1), -EINVAL);
	opal_agg_free(a);
}

/* Off-CPU samples of the same frames are a Stack of their own, counted
 * apart from the CPU samples, and forgotten by a reset. */
static void test_off_cpu_counted_apart(void **state)
{
	(void)state;
	struct opal_agg *a = new_agg(10, 10, 1 << 20);
	struct opal_frame f[] = { F(NATIVE, 0x1400, &map_exe, false) };
	struct opal_agg_sample s = {
		.pid = 1, .tid = 1, .time_unix_ns = 5, .thread_name = "a", .proc = &info_app,
		.frames = f, .n_frames = 1, .off_cpu = true, .off_cpu_ns = 7000,
	};

	assert_int_equal(add(a, 1, 1, 0, 4, &info_app, "a", f, 1), 0);
	assert_int_equal(opal_agg_add(a, &s), 0);
	s.time_unix_ns = 6;
	s.off_cpu_ns = 9000;
	assert_int_equal(opal_agg_add(a, &s), 0);
	assert_int_equal(opal_agg_n_samples(a), 3);
	assert_int_equal(opal_agg_n_off_cpu(a), 2);
	assert_int_equal(opal_agg_n_stacks(a), 2);

	opal_file_id *ids;
	size_t n_ids;
	Opal__Wire__V1__Interval *iv = pack(a, &ids, &n_ids);
	Opal__Wire__V1__Thread *t = find_thread(find_proc(iv, 1, "/bin/app"), 1);
	size_t off = 0, on = 0;
	for (size_t i = 0; i < t->n_stacks; i++) {
		if (t->stacks[i]->n_off_cpu_ns) {
			assert_int_equal(t->stacks[i]->n_off_cpu_ns, 2);
			assert_int_equal(t->stacks[i]->off_cpu_ns[0] + t->stacks[i]->off_cpu_ns[1], 16000);
			off++;
		} else {
			on++;
		}
	}
	assert_int_equal(off, 1);
	assert_int_equal(on, 1);
	free(ids);
	opal__wire__v1__interval__free_unpacked(iv, NULL);

	opal_agg_reset(a);
	assert_int_equal(opal_agg_n_off_cpu(a), 0);
	opal_agg_free(a);
}

/* Interpreter frames packed: their code IDs in frame_code_id in frame
 * order, their instruction index as the address, among native frames. */
static void test_interpreted_frames_packed(void **state)
{
	(void)state;
	struct opal_agg *a = new_agg(10, 10, 1 << 20);
	struct opal_frame f[] = {
		{ .kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED, .address = 12,
		  .code_id = 0xc0de1 },
		{ .kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED,
		  .address = 4294967295u, .code_id = 0xc0de2 },
		F(NATIVE, 0x1500, &map_exe, true),
	};

	assert_int_equal(add(a, 1, 1, 0, 4, &info_app, "a", f, 3), 0);
	opal_file_id *ids;
	size_t n_ids;
	Opal__Wire__V1__Interval *iv = pack(a, &ids, &n_ids);
	const Opal__Wire__V1__Stack *st = find_thread(find_proc(iv, 1, "/bin/app"), 1)->stacks[0];
	assert_int_equal(st->n_frame_code_id, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(frame_at(st, i).kind, OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED);
		assert_int_equal(frame_at(st, i).code_id, f[i].code_id);
		assert_int_equal(frame_at(st, i).address, f[i].address);
		assert_false(frame_at(st, i).return_address);
	}
	assert_int_equal(frame_at(st, 2).kind, NATIVE);
	assert_int_equal(frame_at(st, 2).address, 0x1500);
	assert_int_equal(frame_at(st, 2).code_id, 0);
	assert_true(frame_at(st, 2).return_address);
	free(ids);
	opal__wire__v1__interval__free_unpacked(iv, NULL);
	opal_agg_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_and_pack),
		cmocka_unit_test(test_stack_bound),
		cmocka_unit_test(test_sample_and_byte_bounds),
		cmocka_unit_test(test_native_frame_needs_mapping),
		cmocka_unit_test(test_off_cpu_counted_apart),
		cmocka_unit_test(test_interpreted_frames_packed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
