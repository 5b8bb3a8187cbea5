/* Code objects of the collectors' interpreter frames (code_table.h). */
#include "interp/code_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "interp/python_wire.h"

#define BUCKETS (1u << 16)

struct entry {
	struct entry *chain;          /* same bucket */
	struct entry *prev, *next;    /* LRU, most recent first */
	uint64_t conn, code_id;
	size_t bytes;
	struct opal_py_code code;     /* parsed; its strings and table are owned */
};

struct opal_code_table {
	pthread_mutex_t lock;
	struct entry *buckets[BUCKETS];
	struct entry lru;             /* list head */
	struct opal_code_table_stats st;
};

struct opal_code_table *opal_code_table_new(void)
{
	struct opal_code_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->lru.prev = t->lru.next = &t->lru;
	return t;
}

static uint32_t bucket(uint64_t conn, uint64_t code_id)
{
	uint64_t h = (code_id ^ (conn * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;

	return (uint32_t)(h >> 48) & (BUCKETS - 1);
}

static void unlink_lru(struct entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void push_front(struct opal_code_table *t, struct entry *e)
{
	e->next = t->lru.next;
	e->prev = &t->lru;
	t->lru.next->prev = e;
	t->lru.next = e;
}

static struct entry **slot_of(struct opal_code_table *t, uint64_t conn, uint64_t code_id)
{
	struct entry **s = &t->buckets[bucket(conn, code_id)];

	while (*s && ((*s)->conn != conn || (*s)->code_id != code_id))
		s = &(*s)->chain;
	return s;
}

static void drop(struct opal_code_table *t, struct entry *e)
{
	struct entry **s = slot_of(t, e->conn, e->code_id);

	*s = e->chain;
	unlink_lru(e);
	t->st.entries--;
	t->st.bytes -= e->bytes;
	opal_py_code_free(&e->code);
	free(e);
}

void opal_code_table_free(struct opal_code_table *t)
{
	if (!t)
		return;
	while (t->lru.next != &t->lru)
		drop(t, t->lru.next);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int opal_code_table_put(struct opal_code_table *t, uint64_t conn,
			const Opal__Wire__V1__CodeObject *msg)
{
	struct entry *e = calloc(1, sizeof(*e));
	int err;

	if (!e)
		return -ENOMEM;
	if (msg->runtime != OPAL__WIRE__V1__RUNTIME__RUNTIME_CPYTHON || !msg->cpython)
		err = -EINVAL;
	else
		err = opal_py_code_from_wire(msg, &e->code);
	pthread_mutex_lock(&t->lock);
	if (err < 0) {
		if (err == -EINVAL)
			t->st.invalid++;
		pthread_mutex_unlock(&t->lock);
		free(e);
		return err;
	}
	e->conn = conn;
	e->code_id = msg->code_id;
	e->bytes = sizeof(*e) + opal_py_code_bytes(&e->code);
	struct entry **s = slot_of(t, conn, msg->code_id);
	if (*s)
		drop(t, *s);   /* sent again (a code object re-read): the newer wins */
	s = slot_of(t, conn, msg->code_id);
	*s = e;
	push_front(t, e);
	t->st.entries++;
	t->st.bytes += e->bytes;
	t->st.added++;
	while ((t->st.bytes > OPAL_CODE_TABLE_MAX_BYTES ||
		t->st.entries > OPAL_CODE_TABLE_MAX_ENTRIES) && t->lru.prev != e) {
		drop(t, t->lru.prev);
		t->st.evicted++;
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int opal_code_table_with(struct opal_code_table *t, uint64_t conn, uint64_t code_id,
			 uint32_t lasti, int (*use)(void *arg, const struct opal_code_frame *f),
			 void *arg)
{
	struct opal_code_frame f = { 0 };
	struct entry *e;
	int r;

	pthread_mutex_lock(&t->lock);
	e = *slot_of(t, conn, code_id);
	if (!e) {
		t->st.unknown++;
		pthread_mutex_unlock(&t->lock);
		return -ENOENT;
	}
	unlink_lru(e);
	push_front(t, e);
	f.function = e->code.qualname;
	f.file = e->code.filename;
	f.first_line = e->code.first_line;
	f.line = lasti == UINT32_MAX ? e->code.first_line : opal_py_code_line(&e->code, lasti);
	r = use(arg, &f);
	pthread_mutex_unlock(&t->lock);
	return r;
}

void opal_code_table_drop_conn(struct opal_code_table *t, uint64_t conn)
{
	pthread_mutex_lock(&t->lock);
	for (struct entry *e = t->lru.next, *next; e != &t->lru; e = next) {
		next = e->next;
		if (e->conn == conn)
			drop(t, e);
	}
	pthread_mutex_unlock(&t->lock);
}

void opal_code_table_stats(struct opal_code_table *t, struct opal_code_table_stats *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	pthread_mutex_unlock(&t->lock);
}
