/* The off-CPU samples waiting for their end records (offcpu.h). */
#include "stack/offcpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pending {
	struct opal_hnode node;
	struct opal_list link;
	size_t size;
	struct opal_sample_event *ev;   /* size bytes */
};

int opal_offcpu_init(struct opal_offcpu *o, struct opal_counters *ctr)
{
	memset(o, 0, sizeof(*o));
	opal_list_init(&o->order);
	o->ctr = ctr;
	return opal_htab_init(&o->by_tid, 10);
}

static void drop(struct opal_offcpu *o, struct pending *p)
{
	opal_htab_remove(&o->by_tid, &p->node);
	opal_list_del(&p->link);
	o->n--;
	o->bytes -= p->size;
	free(p->ev);
	free(p);
}

void opal_offcpu_destroy(struct opal_offcpu *o)
{
	struct opal_list *l;

	while ((l = opal_list_last(&o->order))) {
		drop(o, opal_container_of(l, struct pending, link));
		o->ctr->offcpu_unmatched++;
	}
	opal_htab_destroy(&o->by_tid);
}

static struct pending *find(const struct opal_offcpu *o, uint32_t tid)
{
	for (struct opal_hnode *x = opal_htab_first(&o->by_tid, opal_hash_u64(tid)); x;
	     x = opal_htab_next(x)) {
		struct pending *p = opal_container_of(x, struct pending, node);
		if (p->ev->tid == tid)
			return p;
	}
	return NULL;
}

int opal_offcpu_start(struct opal_offcpu *o, const struct opal_sample_event *ev, size_t size)
{
	struct pending *p = find(o, ev->tid);
	struct opal_list *l;

	if (p) {   /* its end record was lost */
		drop(o, p);
		o->ctr->offcpu_unmatched++;
	}
	while (o->n > 0 && (o->n >= OPAL_OFFCPU_MAX_THREADS ||
			    o->bytes + size > OPAL_OFFCPU_PENDING_BYTES) &&
	       (l = opal_list_last(&o->order))) {
		drop(o, opal_container_of(l, struct pending, link));
		o->ctr->offcpu_unmatched++;
	}
	p = calloc(1, sizeof(*p));
	if (p && !(p->ev = malloc(size))) {
		free(p);
		p = NULL;
	}
	if (!p) {
		o->ctr->offcpu_unmatched++;
		return -ENOMEM;
	}
	memcpy(p->ev, ev, size);
	p->size = size;
	opal_htab_insert(&o->by_tid, &p->node, opal_hash_u64(ev->tid));
	opal_list_add(&o->order, &p->link);
	o->n++;
	o->bytes += size;
	return 0;
}

struct opal_sample_event *opal_offcpu_end(struct opal_offcpu *o, const struct opal_offcpu_end *e,
					  size_t *size)
{
	struct pending *p = find(o, e->tid);
	struct opal_sample_event *ev;

	if (!p || p->ev->pid != e->pid) {
		o->ctr->offcpu_unmatched++;
		return NULL;
	}
	ev = p->ev;
	*size = p->size;
	p->ev = NULL;
	opal_htab_remove(&o->by_tid, &p->node);
	opal_list_del(&p->link);
	o->n--;
	o->bytes -= *size;
	free(p);
	ev->ktime_ns = e->ktime_ns;
	ev->cpu = e->cpu;
	ev->off_cpu_ns = e->off_cpu_ns;
	return ev;
}
