/* Unit tests of collector/sampler/sampling.c (ring buffer sizing; as root, the
 * real BPF sampler: samples of a busy loop with kernel and user stacks,
 * exclusion, idle counting, exec/exit events) and collector/base/clock.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/base/clock.h"
#include "collector/sampler/sampling.h"
#include "collector/stack/samples.h"

static void test_ringbuf_size(void **state)
{
	(void)state;
	size_t rec = OPAL_SAMPLE_FIXED_SIZE;   /* what sampling.c sizes CPU samples with */

	assert_int_equal(opal_ringbuf_size(2, 20, rec), OPAL_RINGBUF_MIN);
	/* 64 CPUs at 1 kHz: 64000 records/s, half a second, power of two */
	uint32_t s = opal_ringbuf_size(64, 1000, rec);
	assert_true((uint64_t)s >= 64ull * 1000 * rec / 2);
	assert_int_equal(s & (s - 1), 0);
	assert_true(s / 2 < 64ull * 1000 * rec / 2);
	assert_int_equal(opal_ringbuf_size(8192, 100000, rec), OPAL_RINGBUF_MAX);

	/* off-CPU: the default 1% on 2 CPUs fits the smallest ring; every
	 * switch gets the largest off-CPU ring; a bigger CPU ring is kept */
	rec = OPAL_SAMPLE_HEAD_SIZE;
	assert_int_equal(opal_offcpu_ringbuf_size(2, 10000, OPAL_RINGBUF_MIN, rec),
			 OPAL_RINGBUF_MIN);
	assert_int_equal(opal_offcpu_ringbuf_size(2, 1000000, OPAL_RINGBUF_MIN, rec),
			 OPAL_RINGBUF_OFFCPU);
	s = opal_offcpu_ringbuf_size(2, 100000, OPAL_RINGBUF_MIN, rec);
	assert_true((uint64_t)s >= 2ull * OPAL_OFFCPU_SWITCH_RATE / 10 * rec / 2);
	assert_int_equal(s & (s - 1), 0);
	assert_true(s < OPAL_RINGBUF_OFFCPU);
	assert_int_equal(opal_offcpu_ringbuf_size(2, 10000, OPAL_RINGBUF_MAX, rec),
			 OPAL_RINGBUF_MAX);
}

static void test_clock_offset(void **state)
{
	(void)state;
	struct timespec r, m;
	uint64_t off = opal_mono_to_real_offset_ns();

	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	uint64_t real = (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec;
	uint64_t mono = (uint64_t)m.tv_sec * 1000000000ull + (uint64_t)m.tv_nsec;
	int64_t diff = (int64_t)(mono + off - real);
	assert_true(diff > -5000000 && diff < 5000000);   /* within 5 ms */
	uint64_t a = opal_mono_ns(), b = opal_mono_ns();
	assert_true(b >= a);
}

struct seen {
	pid_t self, child;
	int self_samples, self_with_user, other_samples;
	int child_exec, child_exit;
	uint64_t first_ktime, last_ktime;
	bool bad;
};

static int on_record(void *ctx, void *data, size_t size)
{
	struct seen *s = ctx;
	uint32_t kind;

	memcpy(&kind, data, sizeof(kind));
	if (kind == OPAL_EVENT_SAMPLE) {
		const struct opal_sample_event *e = data;
		if (!opal_sample_event_valid(data, size) || e->pid == 0)
			s->bad = true;
		if (e->pid == (uint32_t)s->self) {
			s->self_samples++;
			if (e->ustack_n > 0 && e->ustack[0] != 0)
				s->self_with_user++;
			if (e->tid != (uint32_t)s->self || strncmp(e->comm, "test_collector_", 15))
				s->bad = true;
		} else {
			s->other_samples++;
		}
		if (!s->first_ktime)
			s->first_ktime = e->ktime_ns;
		s->last_ktime = e->ktime_ns;
	} else if (kind == OPAL_EVENT_EXEC || kind == OPAL_EVENT_EXIT) {
		const struct opal_proc_event *e = data;
		if (size < sizeof(*e))
			s->bad = true;
		if (e->pid == (uint32_t)s->child) {
			if (kind == OPAL_EVENT_EXEC)
				s->child_exec++;
			else
				s->child_exit++;
		}
	} else {
		s->bad = true;
	}
	return 0;
}

static volatile uint64_t sink;

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Runs for `ms` of this thread's CPU time: the CPU clock it is sampled by
 * counts only that, so the sample counts below hold on a loaded machine. */
static void spin_ms(int ms)
{
	uint64_t end = cpu_ns() + (uint64_t)ms * 1000000ull;
	while (cpu_ns() < end)
		sink++;
}

static void test_bpf_sampler(void **state)
{
	(void)state;
	struct opal_sampling smp;
	struct seen s = { .self = getpid() };
	char why[256];
	uint64_t c0[OPAL_CTR_MAX], c1[OPAL_CTR_MAX];

	if (geteuid() != 0)
		fail_msg("this test loads the BPF sampler: run it as root (make test does)");
	uint64_t t0 = opal_mono_ns();
	int err = opal_sampling_start(&smp, 997, 2u << 20, 0, 0, on_record, &s, why, sizeof(why));
	if (err)
		fail_msg("opal_sampling_start: %s", why);
	assert_int_equal(smp.period_ns, 1000000000ull / 997);

	/* drained as it goes: every sample of this process, unknown to the
	 * unwinder here, carries a copy of its stack */
	for (int i = 0; i < 30; i++) {
		spin_ms(10);
		opal_sampling_drain(&smp);
	}
	pid_t child = fork();
	if (child == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	s.child = child;
	waitpid(child, NULL, 0);
	for (int i = 0; i < 5; i++)
		opal_sampling_poll(&smp, 50);
	assert_false(s.bad);
	assert_true(s.self_samples >= 100);           /* ~300 expected at ~1 kHz */
	assert_true(s.self_with_user >= s.self_samples * 9 / 10);
	assert_int_equal(s.child_exec, 1);
	assert_int_equal(s.child_exit, 1);
	assert_true(s.first_ktime >= t0);             /* ktime is CLOCK_MONOTONIC */
	assert_true(s.last_ktime <= opal_mono_ns());
	assert_int_equal(opal_sampling_counters(&smp, c0), 0);
	assert_true(c0[OPAL_CTR_SAMPLES] >= (uint64_t)s.self_samples);
	assert_int_equal(c0[OPAL_CTR_EXCLUDED], 0);

	/* excluded: counted in BPF, not delivered */
	assert_int_equal(opal_sampling_exclude(&smp, s.self), 0);
	int before = s.self_samples;
	spin_ms(200);
	opal_sampling_drain(&smp);
	assert_true(s.self_samples <= before + 2);    /* records already in flight */
	assert_int_equal(opal_sampling_counters(&smp, c1), 0);
	assert_true(c1[OPAL_CTR_EXCLUDED] >= 100);
	assert_true(c1[OPAL_CTR_SAMPLES] >= c0[OPAL_CTR_SAMPLES] + 100);
	assert_int_equal(opal_sampling_unexclude(&smp, s.self), 0);
	assert_int_equal(smp.n_excluded, 0);
	assert_int_equal(opal_sampling_unexclude(&smp, 1), 0);   /* not excluded: no-op */

	usleep(200000);

	/* stopped: no more samples */
	opal_sampling_stop(&smp);
	opal_sampling_drain(&smp);
	/* every program run was counted once: idle ones (pid 0, never
	 * delivered), excluded, lost and delivered ones */
	assert_int_equal(opal_sampling_counters(&smp, c0), 0);
	assert_true(c0[OPAL_CTR_IDLE] >= c1[OPAL_CTR_IDLE]);
	assert_int_equal(c0[OPAL_CTR_SAMPLES], c0[OPAL_CTR_IDLE] + c0[OPAL_CTR_EXCLUDED] +
						 c0[OPAL_CTR_LOST] + (uint64_t)s.self_samples +
						 (uint64_t)s.other_samples);
	before = s.self_samples;
	spin_ms(100);
	opal_sampling_drain(&smp);
	assert_int_equal(s.self_samples, before);
	opal_sampling_destroy(&smp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ringbuf_size),
		cmocka_unit_test(test_clock_offset),
		cmocka_unit_test(test_bpf_sampler),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
