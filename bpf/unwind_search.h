/* The rule search over a file's paged rules array (unwind_rule.h), shared
 * by the BPF unwinder (bpf/sampler.bpf.c) and the collector's lookups
 * (collector/unwind/unwind_maps.c), so both find the same rule.
 *
 * The includer defines, before including this file:
 *   OPAL_RULES_ELEM(ctx, kp, k)  a pointer to 4 KiB element `k` (__u32)
 *       of the rules array `ctx`, or NULL when there is none; `kp` points
 *       at a __u32 the lookup may use to hold the key.
 * Layout and bounds: unwind_rule.h; docs/unwinding.md ("Lookup"). */
#ifndef OPAL_BPF_UNWIND_SEARCH_H
#define OPAL_BPF_UNWIND_SEARCH_H

#include "unwind_rule.h"

#ifndef OPAL_UNWIND_INLINE
#define OPAL_UNWIND_INLINE static inline __attribute__((always_inline))
#endif

/* All ones when a > b (both below 2^32: the difference wraps), else
 * zero. The searches move their bounds through it, not through a branch:
 * a branch per probe doubles the verifier's paths, and a verifier that
 * keeps the bounds precise (Linux 6.18.44 does) prunes none of them. */
#define OPAL_ABOVE(a, b) ((__u32)(((__u64)(b) - (__u64)(a)) >> 32))

/* min(x, c) without a branch. */
#define OPAL_MIN_U32(x, c) ((x) ^ (((x) ^ (c)) & OPAL_ABOVE((x), (c))))

/* The rule covering *key (ELF virtual address - info->base) in the table
 * `info` describes, whose rules array is `rules`: the last rule whose
 * addr <= *key. Returns its body index (>= 0), OPAL_SEARCH_BELOW or
 * OPAL_SEARCH_MISSING. Two element lookups: an index page (chosen by the
 * info's `top`) and a rule page; `kp` holds their keys. The key and the
 * info are read through their pointers after each lookup rather than
 * kept: BPF has four registers that survive a call, and a spilled value
 * grows a stack frame that 6.1 counts into opal_switch's 512 bytes. */
OPAL_UNWIND_INLINE int opal_unwind_search(void *rules, const struct opal_unwind_table_info *info,
					  const __u32 *key, __u32 *kp)
{
	const struct opal_unwind_index_page *ip;
	const struct opal_unwind_rule_page *rp;
	__u32 e = 0, lo = 0, hi, page;

	if (info->n_rules == 0 || *key < info->top[0])
		return OPAL_SEARCH_BELOW;
	/* the index page: how many of the others start at or below key */
	for (__u32 i = 1; i < OPAL_UNWIND_MAX_INDEX; i++)
		e += OPAL_ABOVE(info->n_index, i) & ~OPAL_ABOVE(info->top[i], *key) & 1;
	ip = OPAL_RULES_ELEM(rules, kp, e);
	if (!ip)
		return OPAL_SEARCH_MISSING;
	/* the rule page: the last of the index page's pages starting at or
	 * below key (its first one does: top[e]) */
	hi = (info->n_rules + OPAL_UNWIND_PAGE_RULES - 1) / OPAL_UNWIND_PAGE_RULES -
	     e * OPAL_UNWIND_INDEX_PAGES;
	hi = OPAL_MIN_U32(hi, OPAL_UNWIND_INDEX_PAGES);
	for (int i = 0; i < OPAL_UNWIND_INDEX_STEPS; i++) {
		if (lo >= hi)
			break;
		__u32 mid = lo + ((hi - lo) >> 1);
		__u32 above = OPAL_ABOVE(ip->addr[mid & (OPAL_UNWIND_INDEX_PAGES - 1)], *key);
		lo = (lo & above) | ((mid + 1) & ~above);
		hi = (mid & above) | (hi & ~above);
	}
	if (lo == 0)
		return OPAL_SEARCH_MISSING;   /* an index inconsistent with top */
	page = e * OPAL_UNWIND_INDEX_PAGES + lo - 1;
	rp = OPAL_RULES_ELEM(rules, kp, info->n_index + page);
	if (!rp)
		return OPAL_SEARCH_MISSING;
	/* the rule, within the page */
	hi = OPAL_MIN_U32(info->n_rules - page * OPAL_UNWIND_PAGE_RULES, OPAL_UNWIND_PAGE_RULES);
	lo = 0;
	for (int i = 0; i < OPAL_UNWIND_PAGE_STEPS; i++) {
		if (lo >= hi)
			break;
		__u32 mid = lo + ((hi - lo) >> 1);
		__u32 above = OPAL_ABOVE(rp->r[mid & (OPAL_UNWIND_PAGE_RULES - 1)].addr, *key);
		lo = (lo & above) | ((mid + 1) & ~above);
		hi = (mid & above) | (hi & ~above);
	}
	if (lo == 0)
		return OPAL_SEARCH_MISSING;
	return (int)(rp->r[(lo - 1) & (OPAL_UNWIND_PAGE_RULES - 1)].body & 0x7fffffff);
}

#endif
