/* The paged BPF layout of an unwind table (unwind_paged.h). */
#include "unwind/table/unwind_paged.h"

#include <string.h>

struct paged {
	const uint8_t *elems;
	uint32_t n;
};

static const void *paged_elem(const struct paged *p, uint32_t k)
{
	return k < p->n ? p->elems + (size_t)k * OPAL_UNWIND_PAGE_BYTES : NULL;
}

#define OPAL_RULES_ELEM(ctx, kp, k) (*(kp) = (k), paged_elem((ctx), *(kp)))
#include "bpf/unwind_search.h"

_Static_assert(sizeof(struct opal_unwind_rule_page) == OPAL_UNWIND_PAGE_BYTES, "rule page");
_Static_assert(sizeof(struct opal_unwind_index_page) == OPAL_UNWIND_PAGE_BYTES, "index page");
_Static_assert(OPAL_UNWIND_MAX_INDEX * OPAL_UNWIND_INDEX_PAGES * OPAL_UNWIND_PAGE_RULES ==
		       OPAL_UNWIND_MAX_RULES, "the index covers every rule");

static uint32_t rule_pages(uint32_t n_rules)
{
	return (n_rules + OPAL_UNWIND_PAGE_RULES - 1) / OPAL_UNWIND_PAGE_RULES;
}

static uint32_t index_pages(uint32_t n_rules)
{
	return (rule_pages(n_rules) + OPAL_UNWIND_INDEX_PAGES - 1) / OPAL_UNWIND_INDEX_PAGES;
}

uint32_t opal_unwind_paged_elems(uint32_t n_rules)
{
	return index_pages(n_rules) + rule_pages(n_rules);
}

void opal_unwind_paged_fill(const struct opal_unwind_table *t, uint64_t entry, void *dst,
			    struct opal_unwind_table_info *info)
{
	uint32_t n_index = index_pages(t->n_rules), n_pages = rule_pages(t->n_rules);
	struct opal_unwind_index_page *ip = dst;
	struct opal_unwind_rule_page *rp = (struct opal_unwind_rule_page *)(ip + n_index);

	memset(info, 0, sizeof(*info));
	info->base = t->base;
	info->n_rules = t->n_rules;
	info->n_bodies = t->n_bodies;
	info->entry = entry;
	info->n_index = n_index;
	memset(dst, 0, (size_t)(n_index + n_pages) * OPAL_UNWIND_PAGE_BYTES);
	for (uint32_t p = 0; p < n_pages; p++) {
		uint32_t first = p * OPAL_UNWIND_PAGE_RULES;
		ip[p / OPAL_UNWIND_INDEX_PAGES].addr[p % OPAL_UNWIND_INDEX_PAGES] = t->rules[first].addr;
		if (p % OPAL_UNWIND_INDEX_PAGES == 0)
			info->top[p / OPAL_UNWIND_INDEX_PAGES] = t->rules[first].addr;
	}
	if (t->n_rules)
		memcpy(rp, t->rules, (size_t)t->n_rules * sizeof(*t->rules));
}

int opal_unwind_paged_lookup(const void *elems, uint32_t n_elems,
			     const struct opal_unwind_table_info *info, uint64_t vaddr)
{
	struct paged p = { elems, n_elems };
	uint32_t key, kp;

	if (vaddr < info->base || vaddr - info->base > UINT32_MAX)
		return OPAL_SEARCH_BELOW;
	key = (uint32_t)(vaddr - info->base);
	return opal_unwind_search((void *)&p, info, &key, &kp);
}
