/* Unit tests of collector/stack/offcpu.c: an off-CPU sample record waits
 * for its thread's end record, which gives it its value and time; records
 * without partner are counted. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "collector/stack/offcpu.h"

static struct opal_sample_event ev_of(uint32_t pid, uint32_t tid, uint64_t t)
{
	struct opal_sample_event ev;

	memset(&ev, 0, OPAL_SAMPLE_HEAD_SIZE);
	ev.kind = OPAL_EVENT_SAMPLE;
	ev.flags = OPAL_SAMPLE_OFF_CPU;
	ev.pid = pid;
	ev.tid = tid;
	ev.ktime_ns = t;
	ev.kstack_n = 1;
	ev.kstack[0] = 0xffffffff81000000ull + tid;
	return ev;
}

static struct opal_offcpu_end end_of(uint32_t pid, uint32_t tid, uint64_t t, uint64_t ns)
{
	return (struct opal_offcpu_end){ .kind = OPAL_EVENT_OFFCPU_END, .pid = pid, .tid = tid,
					 .cpu = 1, .ktime_ns = t, .off_cpu_ns = ns };
}

static void test_pairs(void **state)
{
	(void)state;
	static struct opal_sample_event a, b;
	struct opal_counters ctr = { 0 };
	struct opal_offcpu o;
	struct opal_offcpu_end e;
	struct opal_sample_event *got;
	size_t size = 0;

	assert_int_equal(opal_offcpu_init(&o, &ctr), 0);
	a = ev_of(10, 11, 1000);
	b = ev_of(10, 12, 1500);
	assert_int_equal(opal_offcpu_start(&o, &a, OPAL_SAMPLE_HEAD_SIZE), 0);
	assert_int_equal(opal_offcpu_start(&o, &b, OPAL_SAMPLE_HEAD_SIZE), 0);
	/* thread 12 runs again first, on another CPU */
	e = end_of(10, 12, 9000, 7500);
	got = opal_offcpu_end(&o, &e, &size);
	assert_non_null(got);
	assert_int_equal(size, OPAL_SAMPLE_HEAD_SIZE);
	assert_int_equal(got->tid, 12);
	assert_int_equal(got->off_cpu_ns, 7500);
	assert_int_equal(got->ktime_ns, 9000);
	assert_int_equal(got->cpu, 1);
	assert_int_equal(got->kstack[0], 0xffffffff81000000ull + 12);
	free(got);
	/* an end whose sample was lost, and a second end for the same block */
	e = end_of(10, 13, 9000, 10);
	assert_null(opal_offcpu_end(&o, &e, &size));
	e = end_of(10, 12, 9100, 10);
	assert_null(opal_offcpu_end(&o, &e, &size));
	assert_int_equal(ctr.offcpu_unmatched, 2);
	/* a thread's next block replaces a sample whose end was lost */
	a.ktime_ns = 2000;
	assert_int_equal(opal_offcpu_start(&o, &a, OPAL_SAMPLE_HEAD_SIZE), 0);
	assert_int_equal(ctr.offcpu_unmatched, 3);
	assert_int_equal(o.n, 1);
	/* the same tid in another process (pid reuse) does not match */
	e = end_of(99, 11, 9000, 10);
	assert_null(opal_offcpu_end(&o, &e, &size));
	e = end_of(10, 11, 5000, 3000);
	got = opal_offcpu_end(&o, &e, &size);
	assert_non_null(got);
	assert_int_equal(got->off_cpu_ns, 3000);
	free(got);
	assert_int_equal(o.n, 0);
	assert_int_equal(o.bytes, 0);
	opal_offcpu_destroy(&o);
}

static void test_bound(void **state)
{
	(void)state;
	static struct opal_sample_event a;
	struct opal_counters ctr = { 0 };
	struct opal_offcpu o;
	struct opal_offcpu_end e;
	struct opal_sample_event *got;
	size_t size;

	/* whichever bound is the lower for records of this size */
	size_t max = OPAL_OFFCPU_PENDING_BYTES / OPAL_SAMPLE_HEAD_SIZE;
	if (max > OPAL_OFFCPU_MAX_THREADS)
		max = OPAL_OFFCPU_MAX_THREADS;

	assert_int_equal(opal_offcpu_init(&o, &ctr), 0);
	for (uint32_t tid = 1; tid <= max + 5; tid++) {
		a = ev_of(1, tid, tid);
		assert_int_equal(opal_offcpu_start(&o, &a, OPAL_SAMPLE_HEAD_SIZE), 0);
	}
	assert_int_equal(o.n, max);
	assert_true(o.bytes <= OPAL_OFFCPU_PENDING_BYTES);
	assert_int_equal(ctr.offcpu_unmatched, 5);
	/* the oldest went first */
	e = end_of(1, 5, 1, 1);
	assert_null(opal_offcpu_end(&o, &e, &size));
	e = end_of(1, 6, 1, 1);
	got = opal_offcpu_end(&o, &e, &size);
	assert_non_null(got);
	free(got);
	opal_offcpu_destroy(&o);
	assert_int_equal(ctr.offcpu_unmatched, 6 + max - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pairs),
		cmocka_unit_test(test_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
