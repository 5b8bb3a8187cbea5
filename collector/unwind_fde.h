/* FDE address ranges of a raw CFI section (.eh_frame or .debug_frame),
 * read with libdw's dwarf_next_cfi. libdw has no FDE iterator that yields
 * decoded ranges, so the initial_location / address_range pointers are
 * decoded here from the CIE's 'R' augmentation (DW_EH_PE_* encodings of the
 * LSB "Exception Frames" spec; .debug_frame uses plain 8-byte addresses). */
#ifndef OPAL_COLLECTOR_UNWIND_FDE_H
#define OPAL_COLLECTOR_UNWIND_FDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libelf.h>

struct opal_fde_range {
	uint64_t lo, hi;   /* [lo, hi) in ELF virtual addresses, lo < hi */
	uint32_t cost;     /* CFI instruction bytes libdw interprets to reach
			    * any row of this FDE (FDE entry + CIE initial
			    * instructions): the work bound per row lookup */
};

struct opal_fde_list {
	struct opal_fde_range *v;   /* n entries, in section order; malloc'd */
	size_t n, cap;
};

struct opal_fde_scan_stats {
	uint32_t skipped;   /* FDEs whose CIE or pointer encoding is unusable, or whose range is empty or overflows */
	uint32_t errors;    /* malformed entries: the scan stopped there */
};

/* Appends to `out` the range of every FDE in `data` (the whole section
 * contents; `sh_addr` is the section's ELF virtual address, needed for
 * DW_EH_PE_pcrel). `eh_frame` selects .eh_frame rules (CIE pointers
 * relative, 'z' augmentation with 'R' encoding) over .debug_frame rules.
 * At most `max_fdes` FDEs and `max_fdes` CIEs are accepted; a malformed
 * entry ends the scan (counted in st->errors) keeping the FDEs before it.
 * Returns 0, -E2BIG when the section holds more than max_fdes FDEs or
 * CIEs, or -ENOMEM. `out` stays valid (and owned by the caller) either way. */
int opal_fde_scan(const unsigned char *e_ident, Elf_Data *data, bool eh_frame,
		  uint64_t sh_addr, size_t max_fdes, struct opal_fde_list *out,
		  struct opal_fde_scan_stats *st);

void opal_fde_list_free(struct opal_fde_list *l);

#endif
