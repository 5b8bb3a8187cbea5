/* Unit tests of collector/sampler/lifeq.c: lifecycle records held until
 * the samples taken before them are delivered. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "bpf/sampler.h"
#include "collector/sampler/lifeq.h"

struct got {
	uint32_t pids[16];
	size_t sizes[16];
	size_t n;
};

static void collect(void *ctx, void *rec, size_t size)
{
	struct got *g = ctx;
	struct opal_proc_event e;

	assert_true(g->n < 16);
	memcpy(&e, rec, sizeof(e));
	g->pids[g->n] = e.pid;
	g->sizes[g->n++] = size;
}

static void same_as_big(void *ctx, void *rec, size_t size)
{
	assert_int_equal(size, sizeof(struct opal_exit_event));
	assert_memory_equal(rec, ctx, size);
	((struct opal_exit_event *)ctx)->seen = 1;   /* delivered */
}

static int push_event(struct opal_lifeq *q, uint32_t kind, uint32_t pid, uint64_t t)
{
	struct opal_proc_event e = { .kind = kind, .pid = pid, .ktime_ns = t };

	return opal_lifeq_push(q, &e, sizeof(e));
}

static void test_release_by_time(void **state)
{
	(void)state;
	struct opal_lifeq q;
	struct got g = { 0 };

	assert_int_equal(opal_lifeq_init(&q, 4096), 0);
	assert_int_equal(push_event(&q, OPAL_EVENT_EXEC, 1, 100), 0);
	assert_int_equal(push_event(&q, OPAL_EVENT_EXIT, 2, 200), 0);
	assert_int_equal(push_event(&q, OPAL_EVENT_EXIT, 3, 300), 0);
	/* a sample taken at 100: nothing before it */
	opal_lifeq_release(&q, 100, collect, &g);
	assert_int_equal(g.n, 0);
	/* a sample at 250: the two older events first, in order */
	opal_lifeq_release(&q, 250, collect, &g);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.pids[0], 1);
	assert_int_equal(g.pids[1], 2);
	assert_int_equal(g.sizes[0], sizeof(struct opal_proc_event));
	/* the end of a drain: the rest, and the queue starts over */
	opal_lifeq_release(&q, UINT64_MAX, collect, &g);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.pids[2], 3);
	assert_int_equal(q.head, 0);
	assert_int_equal(q.tail, 0);
	opal_lifeq_destroy(&q);
}

static void test_bounds(void **state)
{
	(void)state;
	static struct opal_exit_event big;
	struct opal_lifeq q;
	struct got g = { 0 };
	size_t n = 0;

	big.seen = 0;

	/* exactly as many 16-byte events as fit 24 bytes each, then -ENOSPC */
	assert_int_equal(opal_lifeq_init(&q, 24 * 5), 0);
	while (push_event(&q, OPAL_EVENT_EXIT, (uint32_t)n + 10, n) == 0)
		n++;
	assert_int_equal(n, 5);
	assert_int_equal(push_event(&q, OPAL_EVENT_EXIT, 99, 99), -ENOSPC);
	/* shorter than a proc event: refused */
	assert_int_equal(opal_lifeq_push(&q, &big, 15), -EINVAL);
	opal_lifeq_release(&q, UINT64_MAX, collect, &g);
	assert_int_equal(g.n, 5);
	opal_lifeq_destroy(&q);

	/* an exit event with VMAs is held whole */
	assert_int_equal(opal_lifeq_init(&q, 2 * sizeof(big) + 16), 0);
	big.kind = OPAL_EVENT_EXIT;
	big.pid = 7;
	big.ktime_ns = 5;
	big.n_vmas = OPAL_MAX_VMAS;
	big.vmas[OPAL_MAX_VMAS - 1].inode = 1234;
	assert_int_equal(opal_lifeq_push(&q, &big, sizeof(big)), 0);
	opal_lifeq_release(&q, 6, same_as_big, &big);
	assert_int_equal(big.seen, 1);
	opal_lifeq_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_by_time),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
