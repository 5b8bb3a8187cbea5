/* Reading a built unwind table: the reference lookup the BPF unwinder
 * mirrors. */
#include "unwind/table/unwind_table.h"

static const struct opal_unwind_body gap_body = { .cfa = OPAL_UNWIND_PACK(OPAL_CFA_GAP, 0) };

const struct opal_unwind_body *opal_unwind_table_lookup(const struct opal_unwind_table *t,
							uint64_t vaddr, uint64_t *start,
							uint64_t *end)
{
	uint32_t lo = 0, hi = t->n_rules;

	if (start)
		*start = 0;
	if (end)
		*end = UINT64_MAX;
	if (t->n_rules == 0)
		return &gap_body;
	if (vaddr < t->base || vaddr - t->base > UINT32_MAX) {
		if (vaddr < t->base && end)
			*end = t->base;
		if (vaddr >= t->base && start)
			*start = t->base + (uint64_t)UINT32_MAX + 1;
		return &gap_body;
	}
	uint32_t key = (uint32_t)(vaddr - t->base);
	/* lo ends as the number of rules with addr <= key; each probe halves
	 * [lo, hi), so OPAL_UNWIND_SEARCH_STEPS probes cover MAX_RULES */
	for (int step = 0; step < OPAL_UNWIND_SEARCH_STEPS && lo < hi; step++) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->rules[mid].addr <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		if (end)
			*end = t->base + t->rules[0].addr;
		return &gap_body;
	}
	const struct opal_unwind_rule *r = &t->rules[lo - 1];
	if (start)
		*start = t->base + r->addr;
	if (end && lo < t->n_rules)
		*end = t->base + t->rules[lo].addr;
	if (r->body >= t->n_bodies)
		return &gap_body;
	return &t->bodies[r->body];
}
