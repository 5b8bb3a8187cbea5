/* Span collection, body deduplication and rule finalisation. */
#include "unwind/table/unwind_assemble.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "base/array.h"
#include "base/htab.h"

#define ASSEMBLE_FIRST_CAP 256   /* bodies and spans first allocated */

static uint64_t body_hash(const struct opal_unwind_body *b)
{
	return opal_hash_u64(opal_hash_bytes(OPAL_HASH_SEED, b, sizeof(*b)));
}

/* Inserts index `idx` (of b->bodies) into the slot set. */
static void slot_insert(uint32_t *slots, size_t n_slots, const struct opal_unwind_body *bodies,
			uint32_t idx)
{
	size_t mask = n_slots - 1;
	for (size_t i = body_hash(&bodies[idx]) & mask;; i = (i + 1) & mask) {
		if (slots[i] == 0) {
			slots[i] = idx + 1;
			return;
		}
	}
}

static int rehash(struct opal_unwind_builder *b, size_t n_slots)
{
	uint32_t *slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_bodies; i++)
		slot_insert(slots, n_slots, b->bodies, (uint32_t)i);
	free(b->slots);
	b->slots = slots;
	b->n_slots = n_slots;
	return 0;
}

int opal_unwind_builder_init(struct opal_unwind_builder *b, size_t max_spans)
{
	static const struct opal_unwind_body gap = { .cfa = OPAL_UNWIND_PACK(OPAL_CFA_GAP, 0) };

	memset(b, 0, sizeof(*b));
	b->max_spans = max_spans;
	if (rehash(b, 64) < 0 || opal_unwind_builder_body(b, &gap) != 0) {
		opal_unwind_builder_free(b);
		return -ENOMEM;
	}
	return 0;
}

void opal_unwind_builder_free(struct opal_unwind_builder *b)
{
	free(b->spans);
	free(b->bodies);
	free(b->slots);
	memset(b, 0, sizeof(*b));
}

int64_t opal_unwind_builder_body(struct opal_unwind_builder *b, const struct opal_unwind_body *body)
{
	size_t mask = b->n_slots - 1;
	for (size_t i = body_hash(body) & mask; b->slots[i]; i = (i + 1) & mask) {
		uint32_t idx = b->slots[i] - 1;
		if (memcmp(&b->bodies[idx], body, sizeof(*body)) == 0)
			return idx;
	}
	if (b->n_bodies >= OPAL_UNWIND_MAX_BODIES)
		return -E2BIG;
	if (opal_array_reserve((void **)&b->bodies, &b->cap_bodies, b->n_bodies + 1,
			       sizeof(*b->bodies), ASSEMBLE_FIRST_CAP))
		return -ENOMEM;
	b->bodies[b->n_bodies] = *body;
	uint32_t idx = (uint32_t)b->n_bodies++;
	if (b->n_bodies * 2 >= b->n_slots) {
		if (rehash(b, b->n_slots * 2) < 0) {
			b->n_bodies--;
			return -ENOMEM;
		}
	} else {
		slot_insert(b->slots, b->n_slots, b->bodies, idx);
	}
	return idx;
}

int opal_unwind_builder_add(struct opal_unwind_builder *b, uint64_t start, uint64_t end,
			    uint32_t body)
{
	if (end - start > UINT32_MAX)
		return -E2BIG;
	if (b->n_spans > 0) {
		struct opal_unwind_span *last = &b->spans[b->n_spans - 1];
		if (last->start + last->len == start && last->body == body &&
		    end - last->start <= UINT32_MAX) {
			last->len = (uint32_t)(end - last->start);
			return 0;
		}
	}
	if (b->n_spans >= b->max_spans)
		return -E2BIG;
	if (opal_array_reserve((void **)&b->spans, &b->cap_spans, b->n_spans + 1,
			       sizeof(*b->spans), ASSEMBLE_FIRST_CAP))
		return -ENOMEM;
	b->spans[b->n_spans++] = (struct opal_unwind_span){
		.start = start, .len = (uint32_t)(end - start), .body = body,
	};
	return 0;
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct opal_unwind_span *a = pa, *b = pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->body < b->body ? -1 : a->body > b->body;
}

/* Output of the sweep: counts rules when `rules` is NULL, else writes
 * them (addresses relative to `base`, bodies not yet remapped). */
struct sweep {
	struct opal_unwind_rule *rules;
	size_t n;
	uint64_t base;
	uint32_t last_body;
	bool overflow;   /* an address beyond base + 4 GiB */
};

/* Appends a rule unless it repeats the previous body (equal neighbours
 * merge: the earlier rule already covers the address). */
static void emit(struct sweep *sw, uint64_t addr, uint32_t body)
{
	if (sw->n > 0 && sw->last_body == body)
		return;
	if (sw->rules) {
		if (addr - sw->base > UINT32_MAX)
			sw->overflow = true;
		sw->rules[sw->n] = (struct opal_unwind_rule){
			.addr = (uint32_t)(addr - sw->base), .body = body,
		};
	}
	sw->n++;
	sw->last_body = body;
}

/* Walks the sorted spans: trims overlaps, puts a GAP rule between spans
 * that do not touch and after the last one. */
static void sweep(const struct opal_unwind_builder *b, struct sweep *sw)
{
	uint64_t covered = 0;

	for (size_t i = 0; i < b->n_spans; i++) {
		const struct opal_unwind_span *s = &b->spans[i];
		uint64_t end = s->start + s->len;
		if (i > 0 && end <= covered)
			continue;   /* shadowed by earlier spans */
		uint64_t start = i > 0 && s->start < covered ? covered : s->start;
		if (i > 0 && start > covered)
			emit(sw, covered, 0);
		emit(sw, start, s->body);
		covered = end;
	}
	emit(sw, covered, 0);
}

int opal_unwind_builder_finish(struct opal_unwind_builder *b, uint32_t max_rules,
			       struct opal_unwind_table *out)
{
	struct sweep count = {0};
	uint32_t *remap;

	if (b->n_spans == 0)
		return -ENODATA;
	qsort(b->spans, b->n_spans, sizeof(*b->spans), span_cmp);
	sweep(b, &count);
	if (count.n > max_rules || count.n > OPAL_UNWIND_MAX_RULES)
		return -E2BIG;

	struct sweep sw = { .base = b->spans[0].start };
	sw.rules = malloc(count.n * sizeof(*sw.rules));
	remap = malloc(b->n_bodies * sizeof(*remap));
	if (!sw.rules || !remap) {
		free(sw.rules);
		free(remap);
		return -ENOMEM;
	}
	sweep(b, &sw);
	if (sw.overflow) {
		free(sw.rules);
		free(remap);
		return -E2BIG;
	}

	/* keep only referenced bodies, GAP first */
	for (size_t i = 0; i < b->n_bodies; i++)
		remap[i] = UINT32_MAX;
	remap[0] = 0;
	uint32_t n_bodies = 1;
	for (size_t i = 0; i < sw.n; i++) {
		if (remap[sw.rules[i].body] == UINT32_MAX)
			remap[sw.rules[i].body] = n_bodies++;
		sw.rules[i].body = remap[sw.rules[i].body];
	}
	out->bodies = malloc(n_bodies * sizeof(*out->bodies));
	if (!out->bodies) {
		free(sw.rules);
		free(remap);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->n_bodies; i++)
		if (remap[i] != UINT32_MAX)
			out->bodies[remap[i]] = b->bodies[i];
	free(remap);
	out->base = sw.base;
	out->rules = sw.rules;
	out->n_rules = (uint32_t)sw.n;
	out->n_bodies = n_bodies;
	out->stats.rules = out->n_rules;
	out->stats.bodies = out->n_bodies;
	out->stats.bytes = (uint64_t)sw.n * sizeof(struct opal_unwind_rule) +
			   (uint64_t)n_bodies * sizeof(struct opal_unwind_body);
	return 0;
}
