/* One unwind step: applies a rule body (unwind_rule.h) to a frame's
 * registers (unwind.h) and leaves the caller's registers in their place.
 * Shared by the BPF unwinder (bpf/sampler.bpf.c, reading the live user
 * stack) and the collector's userspace unwinder (collector/unwind/unwind_user.c,
 * reading a copy of it), so both walk identically.
 *
 * The includer defines, before including this file:
 *   OPAL_UNWIND_READ(ctx, dst, size, addr)  reads `size` bytes of user
 *       memory at `addr` into `dst`; evaluates to 0 or a negative value.
 * Rule semantics: docs/unwinding.md ("How the unwinder uses a rule"). */
#ifndef OPAL_BPF_UNWIND_STEP_H
#define OPAL_BPF_UNWIND_STEP_H

#include "unwind.h"

#ifndef OPAL_UNWIND_INLINE
#define OPAL_UNWIND_INLINE static inline __attribute__((always_inline))
#endif

/* Value of a register rule of the caller (RA, RBP or RBX): 0 and *out set,
 * -OPAL_UERR_REG_UNKNOWN when the rule cannot be followed here, or
 * -OPAL_UERR_UNREADABLE when a read fails. `self` is the DWARF number of
 * the register the rule is for (for SAME). */
OPAL_UNWIND_INLINE int opal_unwind_reg_value(__u8 rule, __s16 off, __u32 self, __u64 cfa,
					     const struct opal_unwind_regs *regs, void *rctx,
					     __u64 *out)
{
	__u32 reg = OPAL_UNWIND_REG(rule);
	__u64 v = 0;

	switch (OPAL_UNWIND_KIND(rule)) {
	case OPAL_REG_SAME:
		/* RBP or RBX only: a "same value" RA is an INVALID body */
		if (self > 15 || !(regs->valid & (1u << self)))
			return -OPAL_UERR_REG_UNKNOWN;
		*out = regs->r[self];
		return 0;
	case OPAL_REG_AT_CFA:
		if (OPAL_UNWIND_READ(rctx, &v, 8, cfa + (__s64)off) < 0)
			return -OPAL_UERR_UNREADABLE;
		*out = v;
		return 0;
	case OPAL_REG_AT_REG:
		if (!(regs->valid & (1u << reg)))
			return -OPAL_UERR_REG_UNKNOWN;
		if (OPAL_UNWIND_READ(rctx, &v, 8, regs->r[reg] + (__s64)off) < 0)
			return -OPAL_UERR_UNREADABLE;
		*out = v;
		return 0;
	case OPAL_REG_VAL_CFA:
		*out = cfa + (__s64)off;
		return 0;
	case OPAL_REG_IN_REG:
		if (!(regs->valid & (1u << reg)))
			return -OPAL_UERR_REG_UNKNOWN;
		*out = regs->r[reg];
		return 0;
	}
	return -OPAL_UERR_REG_UNKNOWN;   /* UNDEFINED, UNSUPPORTED */
}

/* The frame a signal interrupted: every register from the sigcontext at
 * RSP (struct sigcontext_64 order: r8-r15, rdi, rsi, rbp, rbx, rdx, rax,
 * rcx, rsp, rip). `sc` is scratch space of 17 u64. */
OPAL_UNWIND_INLINE int opal_unwind_signal(struct opal_unwind_regs *regs, __u64 *sc, void *rctx)
{
	if (!(regs->valid & (1u << OPAL_DWARF_RSP)))
		return -OPAL_UERR_REG_UNKNOWN;
	if (OPAL_UNWIND_READ(rctx, sc, 17 * 8, regs->r[OPAL_DWARF_RSP] + OPAL_SIGFRAME_MCONTEXT) < 0)
		return -OPAL_UERR_UNREADABLE;
	regs->r[0] = sc[13];    /* rax */
	regs->r[1] = sc[12];    /* rdx */
	regs->r[2] = sc[14];    /* rcx */
	regs->r[3] = sc[11];    /* rbx */
	regs->r[4] = sc[9];     /* rsi */
	regs->r[5] = sc[8];     /* rdi */
	regs->r[6] = sc[10];    /* rbp */
	regs->r[7] = sc[15];    /* rsp */
	regs->r[8] = sc[0];
	regs->r[9] = sc[1];
	regs->r[10] = sc[2];
	regs->r[11] = sc[3];
	regs->r[12] = sc[4];
	regs->r[13] = sc[5];
	regs->r[14] = sc[6];
	regs->r[15] = sc[7];
	regs->r[16] = sc[16];   /* rip */
	regs->valid = OPAL_REGS_ALL_VALID;
	regs->flags = OPAL_REGS_EXACT_PC;
	if (regs->r[16] == 0)
		return OPAL_STEP_END;
	return OPAL_STEP_OK;
}

/* Sets the caller's registers from the callee's `regs` and its CFA `cfa`,
 * with return address `ra`; RBP and RBX by their rules (unknown when not
 * recoverable: an error only if a later rule needs them). */
OPAL_UNWIND_INLINE int opal_unwind_finish(const struct opal_unwind_body *b,
					  struct opal_unwind_regs *regs, __u64 cfa, void *rctx)
{
	__u64 ra = 0, bp = 0, bx = 0;
	__u32 valid = (1u << OPAL_DWARF_RSP) | (1u << OPAL_DWARF_PC);
	int err;

	if (OPAL_UNWIND_KIND(b->ra) == OPAL_REG_UNDEFINED)
		return OPAL_STEP_END;
	err = opal_unwind_reg_value(b->ra, b->ra_off, OPAL_DWARF_PC, cfa, regs, rctx, &ra);
	if (err < 0)
		return err;
	if (ra == 0)
		return OPAL_STEP_END;   /* a zeroed return address ends some outermost frames */
	err = opal_unwind_reg_value(b->rbp, b->rbp_off, OPAL_DWARF_RBP, cfa, regs, rctx, &bp);
	if (err == -OPAL_UERR_UNREADABLE)
		return err;
	if (err == 0)
		valid |= 1u << OPAL_DWARF_RBP;
	err = opal_unwind_reg_value(b->rbx, b->rbx_off, OPAL_DWARF_RBX, cfa, regs, rctx, &bx);
	if (err == -OPAL_UERR_UNREADABLE)
		return err;
	if (err == 0)
		valid |= 1u << OPAL_DWARF_RBX;
	regs->r[OPAL_DWARF_PC] = ra;
	regs->r[OPAL_DWARF_RSP] = cfa;
	regs->r[OPAL_DWARF_RBP] = bp;
	regs->r[OPAL_DWARF_RBX] = bx;
	regs->valid = valid;
	regs->flags = 0;
	return OPAL_STEP_OK;
}

/* Unwinds one frame with rule body `b` (found for the frame's PC, or
 * PC - 1 unless OPAL_REGS_EXACT_PC): on OPAL_STEP_OK `regs` holds the
 * caller's frame (PC = return address, RSP = CFA; after a signal frame
 * every register and OPAL_REGS_EXACT_PC). Returns OPAL_STEP_OK,
 * OPAL_STEP_END at the outermost frame, or a negative enum opal_unwind_err.
 * The CFA must lie above RSP, or at it when the return address is in a
 * register (except for a signal frame, whose interrupted RSP may be on
 * another stack, and an RBP-based REG rule marked
 * OPAL_CFA_AUX_STACK_SWITCH), so a walk moves up the stack.
 * `sc` is scratch space of 17 u64 for a signal frame. */
OPAL_UNWIND_INLINE int opal_unwind_step(const struct opal_unwind_body *b,
					struct opal_unwind_regs *regs, __u64 *sc, void *rctx)
{
	__u32 reg = OPAL_UNWIND_REG(b->cfa);
	__u64 sp = regs->r[OPAL_DWARF_RSP], cfa = 0, v = 0;

	switch (OPAL_UNWIND_KIND(b->cfa)) {
	case OPAL_CFA_GAP:
		return -OPAL_UERR_NO_UNWIND_INFO;
	case OPAL_CFA_SIGNAL:
		return opal_unwind_signal(regs, sc, rctx);
	case OPAL_CFA_REG:
		if (!(regs->valid & (1u << reg)))
			return -OPAL_UERR_REG_UNKNOWN;
		cfa = regs->r[reg] + (__s64)b->cfa_off;
		break;
	case OPAL_CFA_DEREF:
		if (!(regs->valid & (1u << reg)))
			return -OPAL_UERR_REG_UNKNOWN;
		if (OPAL_UNWIND_READ(rctx, &v, 8, regs->r[reg] + (__s64)b->cfa_off) < 0)
			return -OPAL_UERR_UNREADABLE;
		cfa = v + (__s64)b->aux;
		break;
	case OPAL_CFA_PLT:
		/* the psABI PLT expression looks at the PC itself; PLT code
		 * never calls, so it is only seen interrupted (exact PC) */
		cfa = sp + (__s64)b->cfa_off +
		      ((regs->r[OPAL_DWARF_PC] & 15) >= (__u64)(__s64)b->aux ? 8 : 0);
		break;
	default:
		return -OPAL_UERR_INVALID_CFI;   /* INVALID and unknown kinds */
	}
	/* the CFA is the caller's RSP: above ours, or equal when the return
	 * address is in a register (nothing of the frame is on the stack);
	 * anywhere after a switch of stacks (the 256-frame bound still holds) */
	if (!(regs->valid & (1u << OPAL_DWARF_RSP)) ||
	    ((cfa < sp || (cfa == sp && OPAL_UNWIND_KIND(b->ra) != OPAL_REG_IN_REG)) &&
	     !(b->cfa == OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RBP) &&
	       b->aux == OPAL_CFA_AUX_STACK_SWITCH)))
		return -OPAL_UERR_BAD_FRAME;
	return opal_unwind_finish(b, regs, cfa, rctx);
}

/* x86-64 instructions at which a frame-pointer function's RBP is still
 * its caller's: its entry (push %rbp, after an endbr64 or not), the next
 * instruction (mov %rsp,%rbp) and its return (ret, rep ret). Matched
 * against the little-endian bytes at the PC. */
#define OPAL_X86_PUSH_RBP        0x55ull
#define OPAL_X86_RET             0xc3ull
#define OPAL_X86_REP_RET         0xc3f3ull
#define OPAL_X86_ENDBR64_PUSH    0x55fa1e0ff3ull
#define OPAL_X86_MOV_RSP_RBP     0xe58948ull

/* Frame-pointer step for code without a table (JIT, files without CFI):
 * CFA = RBP + 16, return address at RBP + 8, caller's RBP at RBP. `code`
 * holds the 8 bytes at the PC (0 when unknown); when the PC is exact (the
 * leaf, or a frame a signal interrupted) and they are one of the
 * instructions above, the frame has no frame pointer yet (or any more):
 * the return address is at RSP (RSP + 8 after the push) and RBP passes
 * through. Returns OPAL_STEP_OK, OPAL_STEP_END when RBP is 0 (the x86-64
 * psABI's mark of the outermost frame, set by _start) or the saved return
 * address is 0, or a negative enum opal_unwind_err. */
OPAL_UNWIND_INLINE int opal_unwind_fp_step(struct opal_unwind_regs *regs, __u64 code, void *rctx)
{
	__u64 bp = regs->r[OPAL_DWARF_RBP], sp = regs->r[OPAL_DWARF_RSP];
	__u64 pair[2] = { 0, 0 };
	__u32 ra_at = 16;   /* no prologue: the return address is at RBP + 8 */

	if (regs->flags & OPAL_REGS_EXACT_PC) {
		if ((code & 0xff) == OPAL_X86_PUSH_RBP || (code & 0xff) == OPAL_X86_RET ||
		    (code & 0xffff) == OPAL_X86_REP_RET ||
		    (code & 0xffffffffffull) == OPAL_X86_ENDBR64_PUSH)
			ra_at = 0;
		else if ((code & 0xffffff) == OPAL_X86_MOV_RSP_RBP)
			ra_at = 8;
	}
	if (ra_at != 16) {
		if (!(regs->valid & (1u << OPAL_DWARF_RSP)))
			return -OPAL_UERR_REG_UNKNOWN;
		if (OPAL_UNWIND_READ(rctx, &pair[1], 8, sp + ra_at) < 0)
			return -OPAL_UERR_UNREADABLE;
		if (pair[1] == 0)
			return OPAL_STEP_END;
		regs->r[OPAL_DWARF_PC] = pair[1];
		regs->r[OPAL_DWARF_RSP] = sp + ra_at + 8;
		regs->valid &= 1u << OPAL_DWARF_RBP;
		regs->valid |= (1u << OPAL_DWARF_RSP) | (1u << OPAL_DWARF_PC);
		regs->flags = 0;
		return OPAL_STEP_OK;
	}
	if (!(regs->valid & (1u << OPAL_DWARF_RBP)))
		return -OPAL_UERR_REG_UNKNOWN;
	if (bp == 0)
		return OPAL_STEP_END;
	if (bp < sp || bp + 16 <= sp)
		return -OPAL_UERR_BAD_FRAME;
	if (OPAL_UNWIND_READ(rctx, pair, 16, bp) < 0)
		return -OPAL_UERR_UNREADABLE;
	if (pair[1] == 0)
		return OPAL_STEP_END;
	regs->r[OPAL_DWARF_PC] = pair[1];
	regs->r[OPAL_DWARF_RSP] = bp + 16;
	regs->r[OPAL_DWARF_RBP] = pair[0];
	regs->valid = (1u << OPAL_DWARF_RSP) | (1u << OPAL_DWARF_PC) | (1u << OPAL_DWARF_RBP);
	regs->flags = 0;
	return OPAL_STEP_OK;
}

/* CPython's perf trampoline (Python/asm_trampoline.S, 3.12 and 3.13 on
 * x86-64) is "sub $8,%rsp; call *%rcx; add $8,%rsp; ret": at its return
 * address the bytes 48 83 c4 08 c3, with the return address 8 bytes
 * above RSP and no frame pointer. */
#define OPAL_PY_TRAMPOLINE_TAIL      0xc308c48348ull
#define OPAL_PY_TRAMPOLINE_TAIL_MASK 0xffffffffffull

/* Step out of a frame in JIT code (anonymous executable memory, no
 * tables): `code` holds the 8 bytes at the frame's PC (0 when they could
 * not be read). A PC at the tail of CPython's perf trampoline takes its
 * fixed frame (RBP and RBX pass through unchanged); anything else is a
 * frame-pointer step (V8 and HotSpot keep RBP as the frame pointer),
 * where JIT code is never the outermost frame: RBP 0 or a return address
 * 0 is -OPAL_UERR_NO_UNWIND_INFO rather than a clean end. Returns
 * OPAL_STEP_OK or a negative enum opal_unwind_err. */
OPAL_UNWIND_INLINE int opal_unwind_jit_step(struct opal_unwind_regs *regs, __u64 code, void *rctx)
{
	__u64 sp = regs->r[OPAL_DWARF_RSP], ra = 0;
	int rc;

	if ((code & OPAL_PY_TRAMPOLINE_TAIL_MASK) == OPAL_PY_TRAMPOLINE_TAIL) {
		if (!(regs->valid & (1u << OPAL_DWARF_RSP)))
			return -OPAL_UERR_REG_UNKNOWN;
		if (OPAL_UNWIND_READ(rctx, &ra, 8, sp + 8) < 0)
			return -OPAL_UERR_UNREADABLE;
		if (ra == 0)
			return -OPAL_UERR_NO_UNWIND_INFO;
		regs->r[OPAL_DWARF_PC] = ra;
		regs->r[OPAL_DWARF_RSP] = sp + 16;
		regs->valid &= (1u << OPAL_DWARF_RBP) | (1u << OPAL_DWARF_RBX);
		regs->valid |= (1u << OPAL_DWARF_RSP) | (1u << OPAL_DWARF_PC);
		regs->flags = 0;
		return OPAL_STEP_OK;
	}
	rc = opal_unwind_fp_step(regs, code, rctx);
	return rc == OPAL_STEP_END ? -OPAL_UERR_NO_UNWIND_INFO : rc;
}

#endif
