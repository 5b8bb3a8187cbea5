/* Reading a built unwind table: the reference lookup the BPF unwinder
 * mirrors, and a readable form of a rule body for logs and tests. */
#include <stdio.h>

#include "unwind_table.h"

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

static const char *reg_name(unsigned reg)
{
	static const char *const names[16] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
	};
	return names[reg & 15];
}

static const char *invalid_name(int why)
{
	switch (why) {
	case OPAL_INVALID_CFA_EXPR: return "cfa-expr";
	case OPAL_INVALID_RA: return "ra";
	case OPAL_INVALID_RSP: return "rsp";
	case OPAL_INVALID_SIGNAL: return "signal";
	case OPAL_INVALID_ROW_LIMIT: return "row-limit";
	case OPAL_INVALID_CFI_ERROR: return "cfi-error";
	}
	return "?";
}

/* One register rule in readelf-like notation: c-8 = at CFA-8. */
static int format_reg(char *buf, size_t len, __u8 packed, int off)
{
	unsigned reg = OPAL_UNWIND_REG(packed);
	switch (OPAL_UNWIND_KIND(packed)) {
	case OPAL_REG_SAME: return snprintf(buf, len, "same");
	case OPAL_REG_AT_CFA: return snprintf(buf, len, "c%+d", off);
	case OPAL_REG_AT_REG: return snprintf(buf, len, "[%s%+d]", reg_name(reg), off);
	case OPAL_REG_VAL_CFA: return snprintf(buf, len, "v%+d", off);
	case OPAL_REG_IN_REG: return snprintf(buf, len, "%s", reg_name(reg));
	case OPAL_REG_UNDEFINED: return snprintf(buf, len, "undef");
	case OPAL_REG_UNSUPPORTED: return snprintf(buf, len, "unsupported");
	}
	return snprintf(buf, len, "?");
}

const char *opal_unwind_body_format(const struct opal_unwind_body *b, char *buf, size_t len)
{
	char cfa[48], ra[32], rbp[32], rbx[32];
	unsigned reg = OPAL_UNWIND_REG(b->cfa);

	switch (OPAL_UNWIND_KIND(b->cfa)) {
	case OPAL_CFA_GAP:
		snprintf(buf, len, "gap");
		return buf;
	case OPAL_CFA_INVALID:
		snprintf(buf, len, "invalid(%s)", invalid_name(b->aux));
		return buf;
	case OPAL_CFA_REG:
		snprintf(cfa, sizeof(cfa), "%s%+d", reg_name(reg), b->cfa_off);
		break;
	case OPAL_CFA_DEREF:
		snprintf(cfa, sizeof(cfa), "[%s%+d]%+d", reg_name(reg), b->cfa_off, b->aux);
		break;
	case OPAL_CFA_PLT:
		snprintf(cfa, sizeof(cfa), "plt(rsp%+d,%d)", b->cfa_off, b->aux);
		break;
	case OPAL_CFA_SIGNAL:
		snprintf(cfa, sizeof(cfa), "signal");
		break;
	default:
		snprintf(buf, len, "?");
		return buf;
	}
	format_reg(ra, sizeof(ra), b->ra, b->ra_off);
	format_reg(rbp, sizeof(rbp), b->rbp, b->rbp_off);
	format_reg(rbx, sizeof(rbx), b->rbx, b->rbx_off);
	snprintf(buf, len, "cfa=%s ra=%s rbp=%s rbx=%s", cfa, ra, rbp, rbx);
	return buf;
}
