/* What opal needs of an ELF file's layout: PT_LOAD segments (for
 * runtime address -> ELF virtual address) and the GNU build ID.
 * Parsed with libelf; every count is bounded because the collector reads
 * any user's files as root. */
#ifndef OPAL_ELFINFO_H
#define OPAL_ELFINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fileid.h"

#define OPAL_ELF_MAX_LOADS 32   /* files with more PT_LOADs are rejected */

struct opal_load_segment {
	uint64_t vaddr;    /* p_vaddr */
	uint64_t offset;   /* p_offset */
	uint64_t filesz;   /* p_filesz */
	uint64_t memsz;    /* p_memsz */
	uint32_t flags;    /* p_flags (PF_X, PF_W, PF_R) */
};

struct opal_elf_info {
	uint16_t e_type;                         /* ET_EXEC, ET_DYN, ... */
	size_t n_loads;
	struct opal_load_segment loads[OPAL_ELF_MAX_LOADS];
	size_t build_id_len;                     /* 0 when the file has none */
	uint8_t build_id[OPAL_BUILD_ID_MAX];
};

/* Reads program headers and the NT_GNU_BUILD_ID note of the ELF open on
 * `fd` (position untouched; libelf reads with pread). Returns 0, -ENOEXEC
 * for a non-ELF or malformed file, -E2BIG for more than OPAL_ELF_MAX_LOADS
 * PT_LOADs, or -errno. */
int opal_elf_info_from_fd(int fd, struct opal_elf_info *out);

/* Maps a file offset to an ELF virtual address through the PT_LOAD whose
 * [p_offset, p_offset + max(p_filesz, p_memsz)) holds it:
 * vaddr = off + p_vaddr - p_offset. Returns 0 or -ENOENT. */
int opal_elf_offset_to_vaddr(const struct opal_elf_info *info, uint64_t off,
			     uint64_t *vaddr);

/* Load bias of a mapping [start, limit) of the file at `file_offset`:
 * runtime address = ELF virtual address + bias. The PT_LOAD is the one
 * whose executable flag matches `executable` (the mapping's 'x'
 * permission) and that overlaps the mapping's page-aligned file range most;
 * the flag matters because small lld-linked files put several PT_LOADs in
 * one file page, mapped several times with different permissions. Returns
 * 0 or -ENOENT when no PT_LOAD overlaps. */
int opal_elf_load_bias(const struct opal_elf_info *info, uint64_t start, uint64_t limit,
		       uint64_t file_offset, bool executable, uint64_t *bias);

#endif
