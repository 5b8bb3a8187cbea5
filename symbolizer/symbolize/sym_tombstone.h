/* DWARF of code the linker discarded. With -ffunction-sections
 * -Wl,--gc-sections the DWARF of an unused function stays, and the linker
 * writes a tombstone where it pointed at the discarded code (DWARF 5
 * leaves the value to the linker, §2.17 and the DWARF 6 "tombstone"
 * proposal): GNU ld 2.40 writes 0 (1 in DWARF 4 .debug_ranges, where
 * (0, 0) would end the list), lld 14 writes 0, and lld with
 * -z dead-reloc-in-nonalloc or later versions -1 or -2 (the maximum
 * address). A tombstoned DW_AT_low_pc keeps its DW_AT_high_pc length, so
 * the discarded function seems to cover [0, its size): in a PIE that is
 * where _start and the first functions are. */
#ifndef OPAL_SYM_TOMBSTONE_H
#define OPAL_SYM_TOMBSTONE_H

#include <stdbool.h>
#include <elfutils/libdw.h>
#include <libelf.h>

/* Whether address 0 can hold code in `elf` (the main file or its debug
 * file, which keeps the program headers): only when an executable PT_LOAD
 * starts at p_vaddr 0 without mapping the ELF header there (p_offset > 0).
 * In every usual layout address 0 holds the ELF header (ET_DYN) or is
 * below the first segment (ET_EXEC). False without program headers. */
bool opal_elf_zero_is_code(Elf *elf);

/* True when a DWARF range or line sequence starting at `lo` is a
 * tombstone: lo is 0 where address 0 holds no code, or one of the two
 * highest addresses. */
static inline bool opal_dwarf_dead(Dwarf_Addr lo, bool zero_is_code)
{
	return (lo == 0 && !zero_is_code) || lo >= (Dwarf_Addr)-2;
}

#endif
