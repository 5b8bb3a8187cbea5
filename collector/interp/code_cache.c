/* Code object bytes for the sender (code_cache.h). */
#include "interp/code_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int opal_code_cache_init(struct opal_code_cache *c, size_t max_bytes, struct opal_counters *ctr)
{
	memset(c, 0, sizeof(*c));
	if (opal_htab_init(&c->by_id, 8) < 0)
		return -ENOMEM;
	if (opal_htab_init(&c->by_key, 8) < 0) {
		opal_htab_destroy(&c->by_id);
		return -ENOMEM;
	}
	opal_list_init(&c->lru);
	c->max_bytes = max_bytes ? max_bytes : OPAL_CODE_CACHE_DEFAULT_BYTES;
	c->ctr = ctr;
	return 0;
}

static void unkey(struct opal_code_cache *c, struct opal_code_entry *e)
{
	if (!e->keyed)
		return;
	opal_htab_remove(&c->by_key, &e->by_key);
	opal_list_del(&e->proc);
	e->keyed = false;
}

static void drop(struct opal_code_cache *c, struct opal_code_entry *e)
{
	unkey(c, e);
	opal_htab_remove(&c->by_id, &e->by_id);
	opal_list_del(&e->lru);
	c->n--;
	c->bytes -= e->bytes;
	free(e);
}

void opal_code_cache_destroy(struct opal_code_cache *c)
{
	struct opal_list *l;

	while ((l = opal_list_last(&c->lru)))
		drop(c, opal_container_of(l, struct opal_code_entry, lru));
	opal_htab_destroy(&c->by_id);
	opal_htab_destroy(&c->by_key);
}

uint64_t opal_code_id(uint64_t serial, uint64_t addr, uint32_t check)
{
	return opal_hash_u64(opal_hash_u64(serial) ^ opal_hash_u64(addr + check) ^ check);
}

static uint64_t key_hash(uint64_t serial, uint64_t addr, uint32_t check)
{
	return opal_hash_u64(serial * 0x9e3779b97f4a7c15ull ^ addr ^ (uint64_t)check << 32);
}

struct opal_code_entry *opal_code_cache_find(struct opal_code_cache *c, uint64_t serial,
					     uint64_t addr, uint32_t check)
{
	uint64_t h = key_hash(serial, addr, check);

	for (struct opal_hnode *n = opal_htab_first(&c->by_key, h); n; n = opal_htab_next(n)) {
		struct opal_code_entry *e = opal_container_of(n, struct opal_code_entry, by_key);
		if (e->serial == serial && e->addr == addr && e->check == check) {
			opal_list_move_front(&c->lru, &e->lru);
			return e;
		}
	}
	return NULL;
}

struct opal_code_entry *opal_code_cache_by_id(struct opal_code_cache *c, uint64_t code_id)
{
	for (struct opal_hnode *n = opal_htab_first(&c->by_id, opal_hash_u64(code_id)); n;
	     n = opal_htab_next(n)) {
		struct opal_code_entry *e = opal_container_of(n, struct opal_code_entry, by_id);
		if (e->code_id == code_id)
			return e;
	}
	return NULL;
}

/* Copies `src` into the buffer at *at, pointing `dst` there. */
static void copy_blob(ProtobufCBinaryData *dst, const ProtobufCBinaryData *src, uint8_t **at)
{
	dst->len = src->len;
	dst->data = src->len ? *at : NULL;
	if (src->len)
		memcpy(*at, src->data, src->len);
	*at += src->len;
}

struct opal_code_entry *opal_code_cache_add(struct opal_code_cache *c, struct opal_list *proc_entries,
					    uint64_t serial, uint64_t addr, uint32_t check,
					    const Opal__Wire__V1__CodeObject *msg)
{
	const ProtobufCBinaryData *src[5] = { &msg->code, &msg->name, &msg->qualname,
					      &msg->filename, &msg->line_table };
	size_t data = 0;
	struct opal_code_entry *e;

	for (int i = 0; i < 5; i++)
		data += src[i]->len;
	if (!(e = calloc(1, sizeof(*e) + data)))
		return NULL;
	e->serial = serial;
	e->addr = addr;
	e->check = check;
	e->code_id = opal_code_id(serial, addr, check);
	e->bytes = sizeof(*e) + data;
	e->msg = *msg;
	e->msg.code_id = e->code_id;
	if (msg->cpython) {
		e->layout = *msg->cpython;
		e->msg.cpython = &e->layout;
	}
	uint8_t *at = (uint8_t *)(e + 1);
	ProtobufCBinaryData *dst[5] = { &e->msg.code, &e->msg.name, &e->msg.qualname,
					&e->msg.filename, &e->msg.line_table };
	for (int i = 0; i < 5; i++)
		copy_blob(dst[i], src[i], &at);
	opal_htab_insert(&c->by_id, &e->by_id, opal_hash_u64(e->code_id));
	opal_htab_insert(&c->by_key, &e->by_key, key_hash(serial, addr, check));
	opal_list_add(proc_entries, &e->proc);
	e->keyed = true;
	opal_list_add(&c->lru, &e->lru);
	c->n++;
	c->bytes += e->bytes;
	while ((c->bytes > c->max_bytes || c->n > OPAL_CODE_CACHE_MAX_ENTRIES) && c->n > 1) {
		struct opal_list *l = opal_list_last(&c->lru);
		drop(c, opal_container_of(l, struct opal_code_entry, lru));
		c->ctr->interp_code_evicted++;
	}
	return e;
}

void opal_code_cache_forget_process(struct opal_code_cache *c, struct opal_list *proc_entries)
{
	while (!opal_list_empty(proc_entries))
		unkey(c, opal_container_of(proc_entries->next, struct opal_code_entry, proc));
}
