/* Bounds check of a CFI instruction stream (a CIE's initial instructions
 * or an FDE's instructions) before libdw runs it. libdw's interpreter
 * (execute_cfi) grows the frame state to the highest register number a
 * rule names (it accepts up to ~134M registers: gigabytes per lookup) and
 * copies the whole state on every DW_CFA_remember_state; opal only lets it
 * run programs whose register numbers and remember_state nesting are
 * small, and charges each lookup what it may copy and interpret. */
#ifndef OPAL_COLLECTOR_UNWIND_PROG_H
#define OPAL_COLLECTOR_UNWIND_PROG_H

#include <stdbool.h>
#include <stdint.h>

/* x86-64 DWARF register numbers stop below 130 (psABI 3.6.2); rules naming
 * higher numbers, or remember_state nested deeper, make a program unusable. */
#define OPAL_CFI_MAX_REGNO 255
#define OPAL_CFI_MAX_DEPTH 64

struct opal_cfi_prog {
	bool ok;              /* within the bounds above, operands complete */
	uint32_t max_reg;     /* highest register number given a rule */
	uint32_t remembers;   /* DW_CFA_remember_state count */
	uint64_t bytes;       /* instruction bytes */
};

/* Walks the DW_CFA instructions (DWARF 5 section 6.4.2 plus the GNU
 * extensions libdw knows) in [p, end) the way libdw decodes them; the walk
 * stops at an opcode libdw rejects, since libdw stops there too.
 * `ptr_enc` is the DW_EH_PE encoding of DW_CFA_set_loc's operand (the
 * FDE pointer encoding). Fills `out`; never reads outside [p, end). */
void opal_cfi_prog_check(const uint8_t *p, const uint8_t *end, uint8_t ptr_enc,
			 struct opal_cfi_prog *out);

/* Upper bound of the bytes libdw interprets or copies for one
 * dwarf_cfi_addrframe in an FDE with program `fde` under CIE program
 * `cie`: both instruction streams, the initial state copy and one state
 * copy per remember_state. */
uint64_t opal_cfi_lookup_cost(const struct opal_cfi_prog *cie, const struct opal_cfi_prog *fde);

#endif
