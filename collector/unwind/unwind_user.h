/* The userspace half of the unwinder: continues a walk the BPF program
 * deferred (a process, mapping or table it did not have yet) over the
 * copy of the user stack the sample carries, with the same step function
 * (bpf/unwind_step.h) and the same frame rules as bpf/sampler.bpf.c:
 * rule lookup at PC - 1 for return addresses, frame pointers where a
 * mapping has no table or a PC no FDE (taken back when the caller found
 * lies in no mapping), OPAL_MAX_USER_FRAMES frames at most, and an error
 * frame for every walk that does not reach the outermost frame. */
#ifndef OPAL_COLLECTOR_UNWIND_USER_H
#define OPAL_COLLECTOR_UNWIND_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/unwind.h"

/* A copy of user memory: `n` regions (bpf/unwind.h), each `len` bytes of
 * the process at `addr`. */
struct opal_stack_copy {
	struct opal_stack_copy_region {
		uint64_t addr;
		const uint8_t *data;
		size_t len;
		/* true when the copy stops because the memory after it was
		 * unreadable (the end of the stack) or is not the same stack
		 * (a signal stack's top); false when it stops at the copy
		 * size limit (reading past it means truncation, not an
		 * error) */
		bool to_end;
	} r[OPAL_STACK_REGIONS];
	size_t n;
};

/* Resolver results besides a negative enum opal_unwind_err
 * (-OPAL_UERR_NO_MAPPING, -OPAL_UERR_NO_UNWIND_INFO). */
#define OPAL_UW_RULE 0   /* *body holds the rule (for a gap rule, *code as for
			  * OPAL_UW_FP) */
#define OPAL_UW_FP   1   /* the mapping has no table: step with frame pointers;
			  * *code holds the 8 bytes at an exact pc (else 0),
			  * for opal_unwind_fp_step */
#define OPAL_UW_END  2   /* the outermost frame (entry code without CFI) */
#define OPAL_UW_WAIT 3   /* the table is being built: stop, retry the walk later */
#define OPAL_UW_JIT  4   /* JIT code (anonymous executable memory): *code holds
			  * the 8 bytes at pc (0 if unreadable), for
			  * opal_unwind_jit_step */

/* Finds the rule for the frame at `pc`: in its mapping, at ELF virtual
 * address pc - bias, minus 1 unless `exact` (a return address). */
typedef int (*opal_unwind_resolve_fn)(void *ctx, uint64_t pc, bool exact,
				      struct opal_unwind_body *body, uint64_t *code);

/* Continues the walk whose last frame is pcs[*n - 1] with registers
 * `regs` (*n >= 1): appends callers to pcs[]/flags[] (OPAL_UFRAME_*) until
 * the outermost frame, an error (appended as an OPAL_UFRAME_ERROR entry
 * holding the enum opal_unwind_err), or OPAL_MAX_USER_FRAMES frames (then
 * an OPAL_UERR_TRUNCATED error when a caller exists). Reads beyond the copy
 * end the walk with OPAL_UERR_TRUNCATED if the copy was cut at its size
 * limit, else OPAL_UERR_UNREADABLE. pcs/flags hold OPAL_USTACK_SLOTS
 * entries. Updates *n; `regs` is clobbered. Returns 0, or OPAL_UW_WAIT
 * when the resolver asked to wait (pcs/flags/regs then are partial). */
int opal_unwind_user_walk(opal_unwind_resolve_fn resolve, void *ctx,
			   struct opal_unwind_regs *regs, const struct opal_stack_copy *stack,
			   uint64_t *pcs, uint8_t *flags, size_t *n);

#endif
