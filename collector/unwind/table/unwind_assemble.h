/* Assembling a table from evaluated CFI rows: ranges ("spans") with their
 * bodies are collected in any order, bodies are deduplicated, and
 * finalisation sorts the spans, resolves overlaps, inserts GAP rules between
 * FDEs and merges equal neighbours. No libdw here: unwind_table.c feeds it. */
#ifndef OPAL_COLLECTOR_UNWIND_BUILD_H
#define OPAL_COLLECTOR_UNWIND_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include "unwind/table/unwind_table.h"

/* 16 bytes: the builder holds up to max_spans of them at once. */
struct opal_unwind_span {
	uint64_t start;   /* ELF virtual address */
	uint32_t len;     /* bytes, > 0 */
	uint32_t body;    /* index into the builder's bodies */
};

struct opal_unwind_builder {
	struct opal_unwind_span *spans;
	size_t n_spans, cap_spans, max_spans;
	struct opal_unwind_body *bodies;
	size_t n_bodies, cap_bodies;
	uint32_t *slots;       /* open-addressing set of body indices + 1, 0 = empty */
	size_t n_slots;        /* power of two, > 2 * n_bodies */
};

/* Empty builder holding at most `max_spans` spans; bodies[0] is GAP.
 * Returns 0 or -ENOMEM. */
int opal_unwind_builder_init(struct opal_unwind_builder *b, size_t max_spans);

void opal_unwind_builder_free(struct opal_unwind_builder *b);

/* Index of body `body` (added when new, at most OPAL_UNWIND_MAX_BODIES).
 * Returns the index >= 0, -E2BIG or -ENOMEM. */
int64_t opal_unwind_builder_body(struct opal_unwind_builder *b, const struct opal_unwind_body *body);

/* Adds [start, end) -> body index; extends the previous span instead when
 * it ends at `start` with the same body (consecutive rows of one FDE).
 * Requires start < end. Returns 0, -E2BIG past max_spans or for a span
 * of 4 GiB or more, or -ENOMEM. */
int opal_unwind_builder_add(struct opal_unwind_builder *b, uint64_t start, uint64_t end,
			    uint32_t body);

/* Produces out->base, rules, bodies, n_rules, n_bodies (stats untouched
 * except rules/bodies/bytes). Overlapping spans (duplicate or overlapping
 * FDEs of a malformed section): the earlier-starting one wins, ties go to
 * the shorter, then the lower body index, so the result is deterministic.
 * Returns 0, -ENODATA without spans, -E2BIG beyond `max_rules` rules or a
 * table wider than 4 GiB, or -ENOMEM. */
int opal_unwind_builder_finish(struct opal_unwind_builder *b, uint32_t max_rules,
			       struct opal_unwind_table *out);

#endif
