/* Stack-delta rules of Go functions from the binary's own .gopclntab:
 * stripped Go binaries have no CFI (`-ldflags='-s -w'` drops the
 * .debug_frame Go's linker writes, and Go writes no .eh_frame), and that
 * .debug_frame knows neither TOPFRAME nor SPWRITE functions. Per function the pcsp
 * table gives the stack pointer's offset from the function's entry at
 * every PC, which is exactly what the BPF unwinder needs: CFA = RSP +
 * offset + 8, return address at CFA - 8. The caller's RBP is at CFA - 16
 * once the prologue has saved it (checked on the instruction bytes: Go
 * 1.16-1.20's `MOVQ BP, off(SP)` after `SUBQ $off+8, SP`, Go 1.21+'s
 * `PUSHQ BP; MOVQ SP, BP`), else unchanged. Functions the runtime marks
 * TOPFRAME (runtime.goexit, runtime.mstart, runtime.rt0_go) end the walk;
 * functions marked SPWRITE (they switch stacks: systemstack, mcall,
 * morestack, gogo) are left as GAP, the frame-pointer guess, unless they
 * keep a frame pointer (time.now, nanotime1: they call the vDSO on the
 * system stack): their body's CFA is then RBP + 16 on the goroutine's
 * stack, marked OPAL_CFA_AUX_STACK_SWITCH.
 *
 * Formats: the pcHeader magics 0xfffffffa (Go 1.16, 1.17), 0xfffffff0
 * (1.18, 1.19) and 0xfffffff1 (1.20+), little-endian, pointer size 8, PC
 * quantum 1 (x86-64). Layouts: Go's src/runtime/symtab.go (pcHeader,
 * functab, pcvalue, step) and runtime2.go (_func); docs/go.md. The table
 * comes from any user's file and is read as root: every offset is checked
 * against the section, every walk ends at its sub-table's end, and the
 * spans go through the builder's bounds. */
#ifndef OPAL_COLLECTOR_UNWIND_GO_H
#define OPAL_COLLECTOR_UNWIND_GO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "unwind/table/unwind_assemble.h"

/* What the reader needs of the file around the table. */
struct opal_unwind_go_file {
	/* reads `len` bytes of code at ELF virtual address `vaddr`; 0 or < 0 */
	int (*read_text)(void *ctx, uint64_t vaddr, void *buf, size_t len);
	/* true when [lo, hi) is code the rules may describe (inside an
	 * executable PT_LOAD, not covered by .eh_frame) */
	bool (*usable)(void *ctx, uint64_t lo, uint64_t hi);
	void *ctx;
};

struct opal_unwind_go_stats {
	uint32_t funcs;     /* functions whose rules were added */
	uint32_t skipped;   /* functions left out: not usable code, SPWRITE,
			     * or a pcsp table that does not decode */
};

/* Adds the rules of every function of the .gopclntab bytes `tab` (`size`
 * bytes, the whole section) to `b`. Returns 0; -ENOEXEC when the header,
 * the function table or its entries are malformed or of another format
 * (nothing added then); -E2BIG or -ENOMEM from the builder (the caller
 * fails the table). */
int opal_unwind_go_rules(const uint8_t *tab, size_t size, const struct opal_unwind_go_file *file,
			 struct opal_unwind_builder *b, struct opal_unwind_go_stats *st);

#endif
