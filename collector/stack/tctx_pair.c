/* Thread context records waiting for their samples (tctx_pair.h). */
#include "stack/tctx_pair.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/htab.h"

int opal_tctx_pair_init(struct opal_tctx_pair *t, struct opal_counters *ctr)
{
	t->ctr = ctr;
	t->slots = calloc(OPAL_TCTX_PAIR_SLOTS, sizeof(*t->slots));
	return t->slots ? 0 : -ENOMEM;
}

void opal_tctx_pair_destroy(struct opal_tctx_pair *t)
{
	free(t->slots);
	t->slots = NULL;
}

static size_t slot_of(uint32_t cpu, uint32_t tid, uint64_t ktime)
{
	return opal_hash_u64(ktime ^ ((uint64_t)tid << 32) ^ cpu) % OPAL_TCTX_PAIR_SLOTS;
}

int opal_tctx_pair_put(struct opal_tctx_pair *t, const void *data, size_t size)
{
	const struct opal_tctx_event *e = data;
	struct opal_tctx_event *s;

	if (size < OPAL_TCTX_EVENT_HEAD || e->attrs_len > OPAL_TCTX_ATTRS_MAX ||
	    size != OPAL_TCTX_EVENT_HEAD + (size_t)e->attrs_len)
		return -EINVAL;
	s = &t->slots[slot_of(e->cpu, e->tid, e->ktime_ns)];
	if (s->kind)
		t->ctr->thread_ctx_unpaired++;   /* its sample never came, or comes too late */
	memcpy(s, data, size);
	return 0;
}

const struct opal_tctx_event *opal_tctx_pair_take(struct opal_tctx_pair *t,
						  const struct opal_sample_event *ev)
{
	struct opal_tctx_event *s = &t->slots[slot_of(ev->cpu, ev->tid, ev->ktime_ns)];

	if (!s->kind || s->cpu != ev->cpu || s->tid != ev->tid || s->ktime_ns != ev->ktime_ns) {
		t->ctr->thread_ctx_unpaired++;
		return NULL;
	}
	s->kind = 0;
	return s;
}
