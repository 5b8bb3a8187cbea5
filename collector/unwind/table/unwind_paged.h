/* A built unwind table in the BPF layout of bpf/unwind_rule.h: its rules
 * as 4 KiB index and rule pages, and the search BPF runs over them
 * (bpf/unwind_search.h), for the collector's own lookups. */
#ifndef OPAL_COLLECTOR_UNWIND_PAGED_H
#define OPAL_COLLECTOR_UNWIND_PAGED_H

#include <stddef.h>
#include <stdint.h>
#include "unwind/table/unwind_table.h"

/* The 4 KiB elements of the rules array of a table of `n_rules` rules
 * (at most OPAL_UNWIND_MAX_RULES): index pages, then rule pages. */
uint32_t opal_unwind_paged_elems(uint32_t n_rules);

/* Writes table `t`'s rules in the paged layout into `dst`
 * (opal_unwind_paged_elems(t->n_rules) * OPAL_UNWIND_PAGE_BYTES bytes,
 * all written) and its info (base, counts, entry `entry`, index) into
 * *info. t->n_rules <= OPAL_UNWIND_MAX_RULES. */
void opal_unwind_paged_fill(const struct opal_unwind_table *t, uint64_t entry, void *dst,
			    struct opal_unwind_table_info *info);

/* The body index of the rule for ELF virtual address `vaddr` in the
 * paged rules `elems` (`n_elems` elements) of the table `info` describes:
 * >= 0, OPAL_SEARCH_BELOW (outside the table's rules: no unwind info) or
 * OPAL_SEARCH_MISSING (an element past n_elems). The same search as BPF. */
int opal_unwind_paged_lookup(const void *elems, uint32_t n_elems,
			     const struct opal_unwind_table_info *info, uint64_t vaddr);

#endif
