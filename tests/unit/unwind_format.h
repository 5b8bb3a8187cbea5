/* For unit tests: a readable form of an unwind rule body (collector/unwind/
 * table/unwind_table.h), to compare built tables with readelf's
 * --debug-dump=frames-interp and to name a mismatch in a failure message.
 *
 * test_unwind_body_format writes into buf[len] and returns buf: "gap",
 * "invalid(REASON)", or "cfa=CFA ra=R rbp=R rbx=R" with CFA one of
 * "rsp+16" (reg+off), "[rbp-24]+0" (deref + aux), "plt(rsp+8,11)",
 * "signal", and each R one of "same", "c-8" (saved at CFA-8), "v-16"
 * (value CFA-16), "[rbp-8]" (saved at reg+off), "rdi" (in register),
 * "undef", "unsupported". */
#ifndef OPAL_TEST_UNWIND_FORMAT_H
#define OPAL_TEST_UNWIND_FORMAT_H

#include <stdio.h>

#include "collector/unwind/table/unwind_table.h"

static const char *test_unwind_reg_name(unsigned reg)
{
	static const char *const names[16] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
	};
	return names[reg & 15];
}

static const char *test_unwind_invalid_name(int why)
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
static int test_unwind_format_reg(char *buf, size_t len, __u8 packed, int off)
{
	unsigned reg = OPAL_UNWIND_REG(packed);
	switch (OPAL_UNWIND_KIND(packed)) {
	case OPAL_REG_SAME: return snprintf(buf, len, "same");
	case OPAL_REG_AT_CFA: return snprintf(buf, len, "c%+d", off);
	case OPAL_REG_AT_REG: return snprintf(buf, len, "[%s%+d]", test_unwind_reg_name(reg), off);
	case OPAL_REG_VAL_CFA: return snprintf(buf, len, "v%+d", off);
	case OPAL_REG_IN_REG: return snprintf(buf, len, "%s", test_unwind_reg_name(reg));
	case OPAL_REG_UNDEFINED: return snprintf(buf, len, "undef");
	case OPAL_REG_UNSUPPORTED: return snprintf(buf, len, "unsupported");
	}
	return snprintf(buf, len, "?");
}

static __attribute__((unused)) const char *test_unwind_body_format(const struct opal_unwind_body *b,
								    char *buf, size_t len)
{
	char cfa[48], ra[32], rbp[32], rbx[32];
	unsigned reg = OPAL_UNWIND_REG(b->cfa);

	switch (OPAL_UNWIND_KIND(b->cfa)) {
	case OPAL_CFA_GAP:
		snprintf(buf, len, "gap");
		return buf;
	case OPAL_CFA_INVALID:
		snprintf(buf, len, "invalid(%s)", test_unwind_invalid_name(b->aux));
		return buf;
	case OPAL_CFA_REG:
		snprintf(cfa, sizeof(cfa), "%s%+d", test_unwind_reg_name(reg), b->cfa_off);
		break;
	case OPAL_CFA_DEREF:
		snprintf(cfa, sizeof(cfa), "[%s%+d]%+d", test_unwind_reg_name(reg), b->cfa_off, b->aux);
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
	test_unwind_format_reg(ra, sizeof(ra), b->ra, b->ra_off);
	test_unwind_format_reg(rbp, sizeof(rbp), b->rbp, b->rbp_off);
	test_unwind_format_reg(rbx, sizeof(rbx), b->rbx, b->rbx_off);
	snprintf(buf, len, "cfa=%s ra=%s rbp=%s rbx=%s", cfa, ra, rbp, rbx);
	return buf;
}

#endif
