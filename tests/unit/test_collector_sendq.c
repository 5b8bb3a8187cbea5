/* Unit tests of collector/sendq.c: the bounded queue of unacknowledged
 * intervals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/sendq.h"

static struct opal_sendq_entry entry(uint64_t seq, size_t len, size_t n_ids)
{
	struct opal_sendq_entry e = { .seq = seq, .len = len, .n_ids = n_ids };

	e.buf = malloc(len ? len : 1);
	memset(e.buf, (int)seq, len);
	if (n_ids) {
		e.ids = calloc(n_ids, sizeof(*e.ids));
		e.ids[0].b[0] = (uint8_t)seq;
	}
	return e;
}

static void test_order_and_ack(void **state)
{
	(void)state;
	struct opal_sendq q;

	assert_int_equal(opal_sendq_init(&q, 1000), 0);
	assert_int_equal(opal_sendq_first_seq(&q, 7), 7);
	for (uint64_t s = 1; s <= 40; s++) {   /* past the initial capacity: grows */
		struct opal_sendq_entry e = entry(s, 10, 1);
		assert_int_equal(opal_sendq_push(&q, &e), 0);
	}
	assert_int_equal(q.n, 40);
	assert_int_equal(q.bytes, 400);
	assert_int_equal(opal_sendq_first_seq(&q, 41), 1);
	for (size_t i = 0; i < q.n; i++) {
		assert_int_equal(opal_sendq_at(&q, i)->seq, i + 1);
		assert_int_equal(opal_sendq_at(&q, i)->buf[0], (uint8_t)(i + 1));
		assert_int_equal(opal_sendq_at(&q, i)->ids[0].b[0], (uint8_t)(i + 1));
	}
	/* ack out of order: a middle one, the first, an unknown one */
	assert_int_equal(opal_sendq_ack(&q, 20), 1);
	assert_int_equal(opal_sendq_ack(&q, 20), 0);
	assert_int_equal(opal_sendq_ack(&q, 1), 1);
	assert_int_equal(opal_sendq_ack(&q, 99), 0);
	assert_int_equal(q.n, 38);
	assert_int_equal(q.bytes, 380);
	assert_false(opal_sendq_has(&q, 20));
	assert_true(opal_sendq_has(&q, 21));
	assert_int_equal(opal_sendq_first_seq(&q, 41), 2);
	uint64_t prev = 0;
	for (size_t i = 0; i < q.n; i++) {
		struct opal_sendq_entry *e = opal_sendq_at(&q, i);
		assert_true(e->seq > prev);
		assert_true(e->seq != 20);
		assert_int_equal(e->buf[0], (uint8_t)e->seq);   /* payload moved with its seq */
		prev = e->seq;
	}
	assert_int_equal(prev, 40);
	opal_sendq_destroy(&q);
}

static void test_byte_bound_drops_oldest(void **state)
{
	(void)state;
	struct opal_sendq q;
	struct opal_sendq_entry e;

	assert_int_equal(opal_sendq_init(&q, 100), 0);
	e = entry(1, 40, 0);
	assert_int_equal(opal_sendq_push(&q, &e), 0);
	e = entry(2, 40, 0);
	assert_int_equal(opal_sendq_push(&q, &e), 0);
	e = entry(3, 40, 0);   /* 120 > 100: seq 1 goes */
	assert_int_equal(opal_sendq_push(&q, &e), 1);
	assert_int_equal(q.n, 2);
	assert_int_equal(q.bytes, 80);
	assert_int_equal(opal_sendq_first_seq(&q, 4), 2);
	e = entry(4, 90, 0);   /* 170: seqs 2 and 3 go */
	assert_int_equal(opal_sendq_push(&q, &e), 2);
	assert_int_equal(q.n, 1);
	assert_int_equal(opal_sendq_at(&q, 0)->seq, 4);
	/* a single entry above the bound is still kept: it is the newest */
	e = entry(5, 500, 0);
	assert_int_equal(opal_sendq_push(&q, &e), 1);
	assert_int_equal(q.n, 1);
	assert_int_equal(opal_sendq_at(&q, 0)->seq, 5);
	assert_int_equal(q.bytes, 500);
	opal_sendq_destroy(&q);
}

static void test_entry_count_bound(void **state)
{
	(void)state;
	struct opal_sendq q;
	int dropped = 0;

	assert_int_equal(opal_sendq_init(&q, 1u << 30), 0);
	for (uint64_t s = 1; s <= OPAL_SENDQ_MAX + 5; s++) {
		struct opal_sendq_entry e = entry(s, 1, 0);
		int r = opal_sendq_push(&q, &e);
		assert_true(r >= 0);
		dropped += r;
	}
	assert_int_equal(dropped, 5);
	assert_int_equal(q.n, OPAL_SENDQ_MAX);
	assert_int_equal(opal_sendq_first_seq(&q, 0), 6);
	opal_sendq_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_ack),
		cmocka_unit_test(test_byte_bound_drops_oldest),
		cmocka_unit_test(test_entry_count_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
