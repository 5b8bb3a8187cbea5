/* Unit tests of collector/send/sendq.c: the bounded queue of unacknowledged
 * intervals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/send/sendq.h"

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

/* Pushes seq with `len` bytes and marks it sent on connection `conn`
 * (0: not sent), as the sender does. Returns push's result. */
static int push_sent(struct opal_sendq *q, uint64_t seq, size_t len, uint64_t conn)
{
	struct opal_sendq_entry e = entry(seq, len, 0);
	int r = opal_sendq_push(q, &e);

	opal_sendq_at(q, q->n - 1)->sent_conn = conn;
	return r;
}

/* An entry pushed out while in flight on the live connection is not lost
 * yet: its Ack forgets it, and a queued entry's Ack is not a loss. */
static void test_in_flight_eviction_acknowledged(void **state)
{
	(void)state;
	struct opal_sendq q;
	bool found;

	assert_int_equal(opal_sendq_init(&q, 100), 0);
	assert_int_equal(opal_sendq_set_conn(&q, 1), 0);
	assert_int_equal(push_sent(&q, 1, 40, 1), 0);
	assert_int_equal(push_sent(&q, 2, 40, 1), 0);
	assert_int_equal(push_sent(&q, 3, 40, 0), 0);   /* 1 pushed out in flight */
	assert_int_equal(q.n, 2);
	assert_int_equal(q.n_evicted, 1);
	assert_int_equal(opal_sendq_acked(&q, 1, &found), 0);
	assert_false(found);
	assert_int_equal(q.n_evicted, 0);
	assert_int_equal(opal_sendq_acked(&q, 2, &found), 0);
	assert_true(found);
	assert_int_equal(q.n, 1);
	assert_int_equal(opal_sendq_set_conn(&q, 0), 0);   /* nothing pending */
	opal_sendq_destroy(&q);
}

/* In-flight entries pushed out and never acknowledged are lost when a later
 * seq is acknowledged (the symbolizer acknowledges in order) or when the
 * connection ends; entries of an older connection are lost at once. */
static void test_in_flight_eviction_lost(void **state)
{
	(void)state;
	struct opal_sendq q;
	bool found;

	assert_int_equal(opal_sendq_init(&q, 100), 0);
	opal_sendq_set_conn(&q, 1);
	assert_int_equal(push_sent(&q, 1, 40, 1), 0);
	assert_int_equal(push_sent(&q, 2, 40, 1), 0);
	assert_int_equal(push_sent(&q, 3, 40, 1), 0);   /* 1 out, in flight */
	assert_int_equal(push_sent(&q, 4, 40, 1), 0);   /* 2 out, in flight */
	assert_int_equal(q.n_evicted, 2);
	/* Ack of 2: 1 was skipped (lost), 2 arrived */
	assert_int_equal(opal_sendq_acked(&q, 2, &found), 1);
	assert_false(found);
	assert_int_equal(q.n_evicted, 0);
	assert_int_equal(push_sent(&q, 5, 40, 1), 0);   /* 3 out, in flight */
	assert_int_equal(push_sent(&q, 6, 40, 1), 0);   /* 4 out, in flight */
	/* Ack of 5 (queued): 3 and 4 were skipped */
	assert_int_equal(opal_sendq_acked(&q, 5, &found), 2);
	assert_true(found);
	assert_int_equal(push_sent(&q, 7, 40, 1), 0);
	assert_int_equal(push_sent(&q, 8, 40, 1), 0);   /* 6 out, in flight */
	assert_int_equal(opal_sendq_set_conn(&q, 0), 1);   /* connection gone: 6 lost */
	/* disconnected: 7 went out on a dead connection, so pushing it out loses it */
	assert_int_equal(push_sent(&q, 9, 40, 0), 1);
	/* reconnected, 8 and 9 not yet re-sent: lost at once as well */
	opal_sendq_set_conn(&q, 2);
	assert_int_equal(push_sent(&q, 10, 90, 0), 2);
	assert_int_equal(q.n, 1);
	assert_int_equal(q.n_evicted, 0);
	opal_sendq_destroy(&q);
}

/* The remembered in-flight seqs are bounded by OPAL_SENDQ_MAX: past it the
 * oldest counts as lost. */
static void test_in_flight_memory_bound(void **state)
{
	(void)state;
	struct opal_sendq q;
	uint64_t lost = 0;

	assert_int_equal(opal_sendq_init(&q, 1), 0);
	opal_sendq_set_conn(&q, 1);
	for (uint64_t s = 1; s <= OPAL_SENDQ_MAX + 4; s++) {   /* each push evicts the previous */
		int r = push_sent(&q, s, 1, 1);
		assert_true(r >= 0);
		lost += (uint64_t)r;
	}
	assert_int_equal(lost, 3);
	assert_int_equal(q.n_evicted, OPAL_SENDQ_MAX);
	assert_int_equal(q.evicted[0], 4);   /* 1..3 were counted */
	assert_int_equal(opal_sendq_set_conn(&q, 0), OPAL_SENDQ_MAX);
	opal_sendq_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_ack),
		cmocka_unit_test(test_byte_bound_drops_oldest),
		cmocka_unit_test(test_entry_count_bound),
		cmocka_unit_test(test_in_flight_eviction_acknowledged),
		cmocka_unit_test(test_in_flight_eviction_lost),
		cmocka_unit_test(test_in_flight_memory_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
