/* Span collection, body deduplication and rule finalisation. */
#include "unwind_build.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 256;
	while (ncap < need)
		ncap *= 2;
	void *nv = realloc(*v, ncap * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

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
	if (grow((void **)&b->bodies, &b->cap_bodies, b->n_bodies + 1, sizeof(*b->bodies)))
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
	if (b->n_spans > 0) {
		struct opal_unwind_span *last = &b->spans[b->n_spans - 1];
		if (last->end == start && last->body == body) {
			last->end = end;
			return 0;
		}
	}
	if (b->n_spans >= b->max_spans)
		return -E2BIG;
	if (grow((void **)&b->spans, &b->cap_spans, b->n_spans + 1, sizeof(*b->spans)))
		return -ENOMEM;
	b->spans[b->n_spans] = (struct opal_unwind_span){
		.start = start, .end = end, .body = body, .seq = (uint32_t)b->n_spans,
	};
	b->n_spans++;
	return 0;
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct opal_unwind_span *a = pa, *b = pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

struct raw_rule {
	uint64_t addr;
	uint32_t body;
};

/* Appends a rule unless it repeats the previous body (equal neighbours
 * merge: the earlier rule already covers the address). */
static void emit(struct raw_rule *v, size_t *n, uint64_t addr, uint32_t body)
{
	if (*n > 0 && v[*n - 1].body == body)
		return;
	v[(*n)++] = (struct raw_rule){ .addr = addr, .body = body };
}

int opal_unwind_builder_finish(struct opal_unwind_builder *b, uint32_t max_rules,
			       struct opal_unwind_table *out)
{
	struct raw_rule *raw = NULL;
	uint32_t *remap = NULL;
	size_t n = 0;
	int rc = -ENOMEM;

	if (b->n_spans == 0)
		return -ENODATA;
	qsort(b->spans, b->n_spans, sizeof(*b->spans), span_cmp);
	/* every span yields at most itself and one gap before it, plus the
	 * final gap */
	raw = malloc((2 * b->n_spans + 1) * sizeof(*raw));
	remap = malloc(b->n_bodies * sizeof(*remap));
	if (!raw || !remap)
		goto out;

	uint64_t covered = 0;
	bool have = false;
	for (size_t i = 0; i < b->n_spans; i++) {
		const struct opal_unwind_span *s = &b->spans[i];
		if (have && s->end <= covered)
			continue;   /* shadowed by earlier spans */
		uint64_t start = have && s->start < covered ? covered : s->start;
		if (have && start > covered)
			emit(raw, &n, covered, 0);
		emit(raw, &n, start, s->body);
		covered = s->end;
		have = true;
	}
	emit(raw, &n, covered, 0);

	rc = -E2BIG;
	if (n > max_rules || n > OPAL_UNWIND_MAX_RULES || raw[n - 1].addr - raw[0].addr > UINT32_MAX)
		goto out;

	/* keep only referenced bodies, GAP first */
	for (size_t i = 0; i < b->n_bodies; i++)
		remap[i] = UINT32_MAX;
	remap[0] = 0;
	uint32_t n_bodies = 1;
	for (size_t i = 0; i < n; i++)
		if (remap[raw[i].body] == UINT32_MAX)
			remap[raw[i].body] = n_bodies++;

	rc = -ENOMEM;
	out->rules = malloc(n * sizeof(*out->rules));
	out->bodies = malloc(n_bodies * sizeof(*out->bodies));
	if (!out->rules || !out->bodies) {
		free(out->rules);
		free(out->bodies);
		out->rules = NULL;
		out->bodies = NULL;
		goto out;
	}
	out->base = raw[0].addr;
	for (size_t i = 0; i < n; i++) {
		out->rules[i].addr = (uint32_t)(raw[i].addr - out->base);
		out->rules[i].body = remap[raw[i].body];
	}
	for (size_t i = 0; i < b->n_bodies; i++)
		if (remap[i] != UINT32_MAX)
			out->bodies[remap[i]] = b->bodies[i];
	out->n_rules = (uint32_t)n;
	out->n_bodies = n_bodies;
	out->stats.rules = out->n_rules;
	out->stats.bodies = out->n_bodies;
	out->stats.bytes = (uint64_t)n * sizeof(struct opal_unwind_rule) +
			   (uint64_t)n_bodies * sizeof(struct opal_unwind_body);
	rc = 0;
out:
	free(raw);
	free(remap);
	return rc;
}
