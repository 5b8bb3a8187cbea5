/* Turns one CFI row, as evaluated by libdw (dwarf_frame_cfa,
 * dwarf_frame_register), into an opal_unwind_body (bpf/unwind_rule.h).
 * Only the x86-64 registers the unwinder tracks are read: CFA, return
 * address (16), RSP (7), RBP (6), RBX (3). */
#ifndef OPAL_COLLECTOR_UNWIND_EVAL_H
#define OPAL_COLLECTOR_UNWIND_EVAL_H

#include <stdbool.h>
#include <elfutils/libdw.h>
#include "bpf/unwind_rule.h"

/* Fills `out` (fully, padding-free) for the row `frame`; `signal` is
 * dwarf_frame_info's signal-frame flag (CIE augmentation 'S'). Never
 * fails: a row opal cannot represent becomes OPAL_CFA_INVALID with its
 * reason in aux; an unrepresentable RBP/RBX rule becomes
 * OPAL_REG_UNSUPPORTED (only fatal if a caller's CFA needs that register).
 *
 * Conventions (psABI x86-64 3.6.2 and libdw behaviour):
 * - the caller's RSP must be the CFA (libdw reports it as the value
 *   CFA + 0, its ABI default), else the row is INVALID (RSP);
 * - an "undefined" RBX is taken as SAME: RBX is callee-saved and elfutils'
 *   x86-64 ABI defaults list DWARF register 0 where RBX (3) is meant, so
 *   libdw reports every unmentioned RBX as undefined;
 * - a signal frame is accepted only with the Linux rt_sigframe layout
 *   (CFA = *(RSP + OPAL_SIGFRAME_RSP), RA/RBP/RBX at RSP + OPAL_SIGFRAME_*),
 *   and its ra/rbp/rbx fields then hold those AT_REG rules. */
void opal_unwind_eval_row(Dwarf_Frame *frame, bool signal, struct opal_unwind_body *out);

#endif
