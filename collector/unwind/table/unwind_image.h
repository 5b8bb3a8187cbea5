/* A CFI section (.eh_frame or .debug_frame) copied alone into a minimal
 * in-memory x86-64 ELF (ELF header, the section, .shstrtab; no program
 * headers, no .eh_frame_hdr, no other DWARF) for libdw.
 *
 * Why: given the real file, libdw finds FDEs through .eh_frame_hdr's search
 * table, which a crafted file can point at "hidden" entries off the FDE
 * chain; every lookup could then interpret megabytes of CFI, and rows
 * could come from an FDE the builder never bounded. With only the section,
 * libdw scans the same chain dwarf_next_cfi walks (unwind_fde.c), and
 * dwarf_begin_elf loads no other debug section. */
#ifndef OPAL_COLLECTOR_UNWIND_IMAGE_H
#define OPAL_COLLECTOR_UNWIND_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libelf.h>

struct opal_cfi_image {
	uint8_t *buf;       /* the whole image, malloc'd */
	size_t len;
	uint8_t *bytes;     /* where the section contents go: `size` bytes in buf */
	size_t size;
	Elf *elf;           /* after opal_cfi_image_open */
	Elf_Data *data;     /* the section's data inside the image */
};

/* Allocates the image for a section of `size` bytes at ELF virtual address
 * `sh_addr` (kept: .eh_frame decodes pc-relative pointers from it) and
 * writes its headers; the caller then fills img->bytes. `eh_frame` picks
 * the section name. Returns 0, -E2BIG when the size overflows, or -ENOMEM. */
int opal_cfi_image_init(struct opal_cfi_image *img, bool eh_frame, size_t size, uint64_t sh_addr);

/* Opens the filled image with libelf. Returns 0 or -ENOEXEC. */
int opal_cfi_image_open(struct opal_cfi_image *img);

/* Ends the Elf handle and frees the image; safe on a zeroed struct. Any
 * libdw handle made from img->elf must be released first. */
void opal_cfi_image_free(struct opal_cfi_image *img);

#endif
