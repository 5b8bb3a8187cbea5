/* CFI row -> opal_unwind_body classification (see unwind_eval.h). The
 * patterns matched are the shapes libdw gives back: a reg+offset CFA is a
 * single DW_OP_bregx; register rules are DW_OP_call_frame_cfa-based
 * location expressions, DW_OP_stack_value-terminated value expressions,
 * DW_OP_regx for DW_CFA_register, and DW_CFA_expression rules are the CFI
 * expression with DW_OP_call_frame_cfa pushed first. */
#include "unwind/table/unwind_eval.h"

#include <dwarf.h>
#include <stdint.h>
#include <string.h>

struct reg_rule {
	uint8_t kind;   /* enum opal_reg_kind */
	uint8_t reg;
	int64_t off;
};

static bool op_breg(const Dwarf_Op *op, unsigned *reg, int64_t *off)
{
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
		*reg = op->atom - DW_OP_breg0;
		*off = (int64_t)op->number;
		return true;
	}
	if (op->atom == DW_OP_bregx) {
		if (op->number > 0xffff)
			return false;
		*reg = (unsigned)op->number;
		*off = (int64_t)op->number2;
		return true;
	}
	return false;
}

static bool op_reg(const Dwarf_Op *op, unsigned *reg)
{
	if (op->atom >= DW_OP_reg0 && op->atom <= DW_OP_reg31) {
		*reg = op->atom - DW_OP_reg0;
		return true;
	}
	if (op->atom == DW_OP_regx && op->number <= 0xffff) {
		*reg = (unsigned)op->number;
		return true;
	}
	return false;
}

/* Value of a DW_OP_litN or DW_OP_constNu literal. */
static bool op_literal(const Dwarf_Op *op, uint64_t *v)
{
	if (op->atom >= DW_OP_lit0 && op->atom <= DW_OP_lit31) {
		*v = op->atom - DW_OP_lit0;
		return true;
	}
	switch (op->atom) {
	case DW_OP_const1u:
	case DW_OP_const2u:
	case DW_OP_const4u:
	case DW_OP_constu:
		*v = op->number;
		return true;
	}
	return false;
}

static struct reg_rule classify_reg(Dwarf_Frame *frame, int regno)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t n = 0;
	struct reg_rule r = { .kind = OPAL_REG_UNSUPPORTED };
	bool value = false;
	unsigned reg;
	int64_t off;

	if (dwarf_frame_register(frame, regno, mem, &ops, &n) != 0)
		return r;
	if (n == 0) {
		r.kind = ops == NULL ? OPAL_REG_SAME : OPAL_REG_UNDEFINED;
		return r;
	}
	if (ops[n - 1].atom == DW_OP_stack_value) {
		value = true;
		n--;
	}
	if (n == 1 && !value && op_reg(&ops[0], &reg)) {
		if (reg <= 15) {
			r.kind = OPAL_REG_IN_REG;
			r.reg = (uint8_t)reg;
		}
		return r;
	}
	if (n == 0 || ops[0].atom != DW_OP_call_frame_cfa)
		return r;
	if (n == 1) {
		r.kind = value ? OPAL_REG_VAL_CFA : OPAL_REG_AT_CFA;
		return r;
	}
	if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
		r.kind = value ? OPAL_REG_VAL_CFA : OPAL_REG_AT_CFA;
		r.off = (int64_t)ops[1].number;
		return r;
	}
	/* DW_CFA_expression: CFA pushed, then the CFI's own expression whose
	 * top of stack is the save address. */
	if (n == 2 && !value && op_breg(&ops[1], &reg, &off) && reg <= 15) {
		r.kind = OPAL_REG_AT_REG;
		r.reg = (uint8_t)reg;
		r.off = off;
	}
	return r;
}

/* Stores rule `r` as a packed byte and 16-bit offset; offsets that do not
 * fit make the rule unsupported. */
static void store_reg(struct reg_rule r, __u8 *packed, __s16 *off)
{
	if (r.off < INT16_MIN || r.off > INT16_MAX) {
		r.kind = OPAL_REG_UNSUPPORTED;
		r.reg = 0;
		r.off = 0;
	}
	*packed = OPAL_UNWIND_PACK(r.kind, r.reg);
	*off = (__s16)r.off;
}

static void set_invalid(struct opal_unwind_body *out, enum opal_unwind_invalid why)
{
	memset(out, 0, sizeof(*out));
	out->cfa = OPAL_UNWIND_PACK(OPAL_CFA_INVALID, 0);
	out->aux = (__s16)why;
}

/* The psABI lazy-binding PLT stub expression (binutils emits it for .plt):
 * breg7 A; breg16 0; lit15; and; litK; ge; lit3; shl; plus. */
static bool match_plt(const Dwarf_Op *ops, size_t n, int64_t *off, uint64_t *threshold)
{
	unsigned reg;
	int64_t rip_off;
	uint64_t mask, k, shift;

	if (n != 9)
		return false;
	if (!op_breg(&ops[0], &reg, off) || reg != OPAL_DWARF_RSP ||
	    !op_breg(&ops[1], &reg, &rip_off) || reg != OPAL_DWARF_RA || rip_off != 0 ||
	    !op_literal(&ops[2], &mask) || mask != 15 || ops[3].atom != DW_OP_and ||
	    !op_literal(&ops[4], &k) || k > 16 || ops[5].atom != DW_OP_ge ||
	    !op_literal(&ops[6], &shift) || shift != 3 || ops[7].atom != DW_OP_shl ||
	    ops[8].atom != DW_OP_plus)
		return false;
	*threshold = k;
	return true;
}

/* Fills the CFA part of `out`; false when it is not representable. */
static bool classify_cfa(Dwarf_Frame *frame, struct opal_unwind_body *out)
{
	Dwarf_Op *ops = NULL;
	size_t n = 0;
	unsigned reg;
	int64_t off;
	uint64_t k;

	if (dwarf_frame_cfa(frame, &ops, &n) != 0 || n == 0)
		return false;
	if (!op_breg(&ops[0], &reg, &off) || reg > 15 || off < INT32_MIN || off > INT32_MAX)
		return false;
	out->cfa_off = (__s32)off;
	if (n == 1) {
		out->cfa = OPAL_UNWIND_PACK(OPAL_CFA_REG, reg);
		return true;
	}
	if (ops[1].atom == DW_OP_deref && (n == 2 || (n == 3 && ops[2].atom == DW_OP_plus_uconst &&
						       ops[2].number <= INT16_MAX))) {
		out->cfa = OPAL_UNWIND_PACK(OPAL_CFA_DEREF, reg);
		out->aux = n == 3 ? (__s16)ops[2].number : 0;
		return true;
	}
	if (match_plt(ops, n, &off, &k)) {
		out->cfa = OPAL_UNWIND_PACK(OPAL_CFA_PLT, OPAL_DWARF_RSP);
		out->aux = (__s16)k;
		return true;
	}
	return false;
}

static bool is_at_rsp(struct reg_rule r, int64_t off)
{
	return r.kind == OPAL_REG_AT_REG && r.reg == OPAL_DWARF_RSP && r.off == off;
}

/* Linux rt_sigframe as described by glibc's __restore_rt CFI. */
static void classify_signal(Dwarf_Frame *frame, struct opal_unwind_body *out)
{
	struct reg_rule ra = classify_reg(frame, OPAL_DWARF_RA);
	struct reg_rule rsp = classify_reg(frame, OPAL_DWARF_RSP);
	struct reg_rule rbp = classify_reg(frame, OPAL_DWARF_RBP);
	struct reg_rule rbx = classify_reg(frame, OPAL_DWARF_RBX);
	struct opal_unwind_body cfa = {0};

	if (!classify_cfa(frame, &cfa) ||
	    cfa.cfa != OPAL_UNWIND_PACK(OPAL_CFA_DEREF, OPAL_DWARF_RSP) ||
	    cfa.cfa_off != OPAL_SIGFRAME_RSP || cfa.aux != 0 ||
	    !is_at_rsp(ra, OPAL_SIGFRAME_RIP) || !is_at_rsp(rsp, OPAL_SIGFRAME_RSP) ||
	    !is_at_rsp(rbp, OPAL_SIGFRAME_RBP) || !is_at_rsp(rbx, OPAL_SIGFRAME_RBX)) {
		set_invalid(out, OPAL_INVALID_SIGNAL);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->cfa = OPAL_UNWIND_PACK(OPAL_CFA_SIGNAL, OPAL_DWARF_RSP);
	store_reg(ra, &out->ra, &out->ra_off);
	store_reg(rbp, &out->rbp, &out->rbp_off);
	store_reg(rbx, &out->rbx, &out->rbx_off);
}

void opal_unwind_eval_row(Dwarf_Frame *frame, bool signal, struct opal_unwind_body *out)
{
	struct reg_rule ra, rsp, rbp, rbx;

	if (signal) {
		classify_signal(frame, out);
		return;
	}
	memset(out, 0, sizeof(*out));
	if (!classify_cfa(frame, out)) {
		set_invalid(out, OPAL_INVALID_CFA_EXPR);
		return;
	}
	rsp = classify_reg(frame, OPAL_DWARF_RSP);
	if (!(rsp.kind == OPAL_REG_SAME || rsp.kind == OPAL_REG_UNDEFINED ||
	      (rsp.kind == OPAL_REG_VAL_CFA && rsp.off == 0))) {
		set_invalid(out, OPAL_INVALID_RSP);
		return;
	}
	ra = classify_reg(frame, OPAL_DWARF_RA);
	if (ra.kind == OPAL_REG_SAME || ra.kind == OPAL_REG_UNSUPPORTED ||
	    ra.off < INT16_MIN || ra.off > INT16_MAX) {
		set_invalid(out, OPAL_INVALID_RA);
		return;
	}
	rbp = classify_reg(frame, OPAL_DWARF_RBP);
	rbx = classify_reg(frame, OPAL_DWARF_RBX);
	if (rbx.kind == OPAL_REG_UNDEFINED)
		rbx.kind = OPAL_REG_SAME;
	store_reg(ra, &out->ra, &out->ra_off);
	store_reg(rbp, &out->rbp, &out->rbp_off);
	store_reg(rbx, &out->rbx, &out->rbx_off);
}
