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
	uint64_t cost;     /* bytes libdw may interpret or copy for one row
			    * lookup in this FDE (opal_cfi_lookup_cost) */
	bool usable;       /* its and its CIE's programs pass
			    * opal_cfi_prog_check: libdw may run it */
};

struct opal_fde_list {
	struct opal_fde_range *v;   /* n entries, in section order; malloc'd */
	size_t n, cap;
};

struct opal_fde_scan_stats {
	uint32_t skipped;   /* FDEs with an empty range */
	uint32_t errors;    /* entries dwarf_next_cfi could not parse (skipped
			     * when the parse advanced, as libdw does, else
			     * the scan ends there) */
};

/* Appends to `out` the range of every FDE in `data` (the whole section
 * contents; `sh_addr` is the section's ELF virtual address, needed for
 * DW_EH_PE_pcrel), walking the entry chain exactly as libdw's linear FDE
 * search does. `eh_frame` selects .eh_frame rules (CIE pointers relative,
 * 'z' augmentation with 'R' encoding) over .debug_frame rules (8-byte
 * addresses). At most `max_fdes` FDEs and `max_fdes` CIEs are accepted.
 * Returns 0; -E2BIG when the section holds more; -ENOEXEC when an FDE's
 * range cannot be decoded (its CIE is off the chain or has an augmentation
 * or pointer encoding opal does not decode, or the range overflows), since
 * libdw could still pick such an FDE for addresses the builder walks; or
 * -ENOMEM. `out` stays valid (and owned by the caller) either way. */
int opal_fde_scan(const unsigned char *e_ident, Elf_Data *data, bool eh_frame,
		  uint64_t sh_addr, size_t max_fdes, struct opal_fde_list *out,
		  struct opal_fde_scan_stats *st);

void opal_fde_list_free(struct opal_fde_list *l);

#endif
