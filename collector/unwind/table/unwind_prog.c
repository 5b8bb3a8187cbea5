/* CFI program bounds check (see unwind_prog.h). */
#include "unwind/table/unwind_prog.h"

#include <dwarf.h>
#include <string.h>

/* libdw's Dwarf_Frame: a header then 16 bytes per register. */
#define FRAME_HEADER_BYTES 96
#define FRAME_REG_BYTES    16

struct cursor {
	const uint8_t *p, *end;
	bool bad;   /* an operand ran past the end */
};

static uint64_t uleb(struct cursor *c)
{
	uint64_t v = 0;
	for (unsigned shift = 0;; shift += 7) {
		if (c->p >= c->end) {
			c->bad = true;
			return 0;
		}
		uint8_t b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
}

static void skip(struct cursor *c, uint64_t n)
{
	if (n > (uint64_t)(c->end - c->p)) {
		c->bad = true;
		c->p = c->end;
		return;
	}
	c->p += n;
}

/* DW_FORM_block operand: ULEB128 length, then that many bytes. */
static void skip_block(struct cursor *c)
{
	uint64_t n = uleb(c);
	if (!c->bad)
		skip(c, n);
}

/* Size of a DW_EH_PE-encoded value; 0 for LEB128, -1 when unknown. */
static int enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		return 8;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		return 4;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		return 2;
	case DW_EH_PE_uleb128:
	case DW_EH_PE_sleb128:
		return 0;
	}
	return -1;
}

/* A register that gets a rule (libdw allocates state up to it). */
static void rule_reg(struct opal_cfi_prog *out, uint64_t reg)
{
	if (reg > OPAL_CFI_MAX_REGNO)
		out->ok = false;
	else if (reg > out->max_reg)
		out->max_reg = (uint32_t)reg;
}

void opal_cfi_prog_check(const uint8_t *p, const uint8_t *end, uint8_t ptr_enc,
			 struct opal_cfi_prog *out)
{
	struct cursor c = { .p = p, .end = end };
	uint32_t depth = 0;

	memset(out, 0, sizeof(*out));
	out->ok = true;
	out->bytes = (uint64_t)(end - p);
	while (c.p < c.end && out->ok && !c.bad) {
		uint8_t op = *c.p++;
		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			continue;
		case DW_CFA_offset:
			rule_reg(out, op & 0x3f);
			uleb(&c);
			continue;
		case DW_CFA_restore:
			rule_reg(out, op & 0x3f);
			continue;
		}
		switch (op) {
		case DW_CFA_nop:
			break;
		case DW_CFA_GNU_window_save:
			rule_reg(out, 31);   /* libdw's SPARC shorthand names r8-r31 */
			break;
		case DW_CFA_set_loc: {
			int n = enc_size(ptr_enc);
			if (n < 0)
				out->ok = false;
			else if (n == 0)
				uleb(&c);
			else
				skip(&c, (uint64_t)n);
			break;
		}
		case DW_CFA_advance_loc1:
			skip(&c, 1);
			break;
		case DW_CFA_advance_loc2:
			skip(&c, 2);
			break;
		case DW_CFA_advance_loc4:
			skip(&c, 4);
			break;
		case DW_CFA_MIPS_advance_loc8:
			skip(&c, 8);
			break;
		case DW_CFA_offset_extended:
		case DW_CFA_register:
		case DW_CFA_val_offset:
		case DW_CFA_GNU_negative_offset_extended:
		case DW_CFA_offset_extended_sf:
		case DW_CFA_val_offset_sf:
			rule_reg(out, uleb(&c));
			uleb(&c);   /* sleb operands have the same length rule */
			break;
		case DW_CFA_restore_extended:
		case DW_CFA_undefined:
		case DW_CFA_same_value:
			rule_reg(out, uleb(&c));
			break;
		case DW_CFA_remember_state:
			out->remembers++;
			if (++depth > OPAL_CFI_MAX_DEPTH)
				out->ok = false;
			break;
		case DW_CFA_restore_state:
			if (depth > 0)
				depth--;
			break;
		case DW_CFA_def_cfa:
		case DW_CFA_def_cfa_sf:
			uleb(&c);
			uleb(&c);
			break;
		case DW_CFA_def_cfa_register:
		case DW_CFA_def_cfa_offset:
		case DW_CFA_def_cfa_offset_sf:
		case DW_CFA_GNU_args_size:
			uleb(&c);
			break;
		case DW_CFA_def_cfa_expression:
			skip_block(&c);
			break;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			rule_reg(out, uleb(&c));
			skip_block(&c);
			break;
		default:
			/* libdw rejects the opcode and stops interpreting */
			return;
		}
	}
	if (c.bad)
		out->ok = false;
}

uint64_t opal_cfi_lookup_cost(const struct opal_cfi_prog *cie, const struct opal_cfi_prog *fde)
{
	uint32_t regs = (cie->max_reg > fde->max_reg ? cie->max_reg : fde->max_reg) + 1;
	if (regs < 17)
		regs = 17;   /* the ABI defaults name registers up to 16 */
	uint64_t state = FRAME_HEADER_BYTES + (uint64_t)FRAME_REG_BYTES * regs;
	return cie->bytes + fde->bytes +
	       (1 + (uint64_t)cie->remembers + fde->remembers) * state;
}
