/* Userspace continuation of deferred walks (unwind_user.h). */
#include "unwind_user.h"

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
	struct copy_reader *r = ctx;
	const struct opal_stack_copy *c = r->c;

	if (addr < c->addr || addr - c->addr > c->len || size > c->len - (addr - c->addr)) {
		/* within a stack's reach above the copy: the stack goes on */
		if (addr >= c->addr && addr - c->addr < OPAL_STACK_REACH)
			r->beyond = true;
		return -1;
	}
	memcpy(dst, c->data + (addr - c->addr), size);
	return 0;
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
	__u64 sc[17];
	int rc;

	/* the same bound as BPF: at most OPAL_MAX_USER_FRAMES steps */
	for (int i = 0; i < OPAL_MAX_USER_FRAMES && *n > 0 && *n <= OPAL_MAX_USER_FRAMES; i++) {
		uint8_t f = 0;
		rc = resolve(ctx, regs->r[OPAL_DWARF_PC], regs->flags & OPAL_REGS_EXACT_PC, &body);
		if (rc == OPAL_UW_END)
			return 0;
		if (rc == OPAL_UW_WAIT)
			return OPAL_UW_WAIT;
		if (rc == OPAL_UW_FP) {
			rc = opal_unwind_fp_step(regs, &rd);
			f = OPAL_UFRAME_FP;
		} else if (rc == OPAL_UW_RULE) {
			/* a signal trampoline's PC is no call's return address */
			if (OPAL_UNWIND_KIND(body.cfa) == OPAL_CFA_SIGNAL)
				flags[*n - 1] &= (uint8_t)~OPAL_UFRAME_RETURN;
			rc = opal_unwind_step(&body, regs, sc, &rd);
		}
		if (rc == OPAL_STEP_END)
			return 0;
		if (rc == -OPAL_UERR_UNREADABLE && rd.beyond && !stack->to_end)
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
