/* Userspace continuation of deferred walks (unwind_user.h). */
#include "unwind/unwind_user.h"

#include <string.h>

/* Largest distance from the copy's start still taken for "the stack
 * continues" (the default stack limit is 8 MiB). */
#define OPAL_STACK_REACH (64ull << 20)

/* Reads of the stack copy; `beyond` records a read past its end. */
struct copy_reader {
	const struct opal_stack_copy *c;
	bool beyond;
};

static int copy_read(void *ctx, void *dst, uint32_t size, uint64_t addr)
{
	struct copy_reader *rd = ctx;
	const struct opal_stack_copy *c = rd->c;

	for (size_t i = 0; i < c->n && i < OPAL_STACK_REGIONS; i++) {
		const struct opal_stack_copy_region *r = &c->r[i];
		if (addr >= r->addr && addr - r->addr <= r->len && size <= r->len - (addr - r->addr)) {
			memcpy(dst, r->data + (addr - r->addr), size);
			return 0;
		}
	}
	/* within a stack's reach above a region cut at the size limit: the
	 * stack goes on */
	for (size_t i = 0; i < c->n && i < OPAL_STACK_REGIONS; i++)
		if (!c->r[i].to_end && addr >= c->r[i].addr && addr - c->r[i].addr < OPAL_STACK_REACH)
			rd->beyond = true;
	return -1;
}

#define OPAL_UNWIND_READ(ctx, dst, size, addr) copy_read((ctx), (dst), (size), (addr))
#include "bpf/unwind_step.h"

static void push(uint64_t *pcs, uint8_t *flags, size_t *n, uint64_t v, uint8_t f)
{
	if (*n >= OPAL_USTACK_SLOTS)
		return;
	pcs[*n] = v;
	flags[*n] = f;
	(*n)++;
}

int opal_unwind_user_walk(opal_unwind_resolve_fn resolve, void *ctx,
			   struct opal_unwind_regs *regs, const struct opal_stack_copy *stack,
			   uint64_t *pcs, uint8_t *flags, size_t *n)
{
	struct copy_reader rd = { .c = stack };
	struct opal_unwind_body body;
	bool fp_gap = false;
	__u64 sc[17];
	int rc;

	/* the same bound as BPF: at most OPAL_MAX_USER_FRAMES steps */
	for (int i = 0; i < OPAL_MAX_USER_FRAMES && *n > 0 && *n <= OPAL_MAX_USER_FRAMES; i++) {
		uint64_t code = 0;
		uint8_t f = 0;
		rc = resolve(ctx, regs->r[OPAL_DWARF_PC], regs->flags & OPAL_REGS_EXACT_PC, &body,
			     &code);
		if (rc == -OPAL_UERR_NO_MAPPING && fp_gap) {
			/* the frame-pointer guess found no code: not a frame */
			(*n)--;
			rc = -OPAL_UERR_NO_UNWIND_INFO;
		}
		fp_gap = false;
		if (rc == OPAL_UW_END)
			return 0;
		if (rc == OPAL_UW_WAIT)
			return OPAL_UW_WAIT;
		if (rc == OPAL_UW_RULE && OPAL_UNWIND_KIND(body.cfa) == OPAL_CFA_GAP) {
			/* no FDE: code built without unwind tables may keep
			 * frame pointers; as in BPF, a failed step (or an
			 * outermost-frame answer) means no unwind info, unless
			 * it read past the copy */
			rc = opal_unwind_fp_step(regs, code, &rd);
			if (rc != OPAL_STEP_OK && !(rc == -OPAL_UERR_UNREADABLE && rd.beyond))
				rc = -OPAL_UERR_NO_UNWIND_INFO;
			f = OPAL_UFRAME_FP;
			fp_gap = rc == OPAL_STEP_OK;
		} else if (rc == OPAL_UW_JIT) {
			rc = opal_unwind_jit_step(regs, code, &rd);
			f = OPAL_UFRAME_FP;
		} else if (rc == OPAL_UW_FP) {
			rc = opal_unwind_fp_step(regs, code, &rd);
			f = OPAL_UFRAME_FP;
		} else if (rc == OPAL_UW_RULE) {
			/* a signal trampoline's PC is no call's return address */
			if (OPAL_UNWIND_KIND(body.cfa) == OPAL_CFA_SIGNAL)
				flags[*n - 1] &= (uint8_t)~OPAL_UFRAME_RETURN;
			rc = opal_unwind_step(&body, regs, sc, &rd);
		}
		if (rc == OPAL_STEP_END)
			return 0;
		if (rc == -OPAL_UERR_UNREADABLE && rd.beyond)
			rc = -OPAL_UERR_TRUNCATED;   /* the stack goes on past the copy */
		if (rc < 0) {
			push(pcs, flags, n, (uint64_t)-rc, OPAL_UFRAME_ERROR);
			return 0;
		}
		if (*n >= OPAL_MAX_USER_FRAMES) {
			push(pcs, flags, n, OPAL_UERR_TRUNCATED, OPAL_UFRAME_ERROR);
			return 0;
		}
		if (!(regs->flags & OPAL_REGS_EXACT_PC))
			f |= OPAL_UFRAME_RETURN;
		push(pcs, flags, n, regs->r[OPAL_DWARF_PC], f);
	}
	return 0;
}
