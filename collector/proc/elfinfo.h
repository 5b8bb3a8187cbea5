/* What opal needs of an ELF file's layout: PT_LOAD segments (for
 * runtime address -> ELF virtual address), the GNU build ID and the
 * .gnu_debuglink (name and CRC-32 of the separate debug file).
 * Parsed with libelf; every count is bounded because the collector reads
 * any user's files as root. */
#ifndef OPAL_ELFINFO_H
#define OPAL_ELFINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"

#define OPAL_ELF_MAX_LOADS 32   /* files with more PT_LOADs are rejected */
/* Bytes of a .gnu_debuglink file name with its NUL (NAME_MAX + 1); longer
 * names are ignored. */
#define OPAL_ELF_DEBUGLINK_MAX 256
/* Sections looked at for .gnu_debuglink; a file with more has none read. */
#define OPAL_ELF_MAX_SECTIONS 65536

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
	bool has_debuglink;                      /* a well-formed .gnu_debuglink was read */
	char debuglink[OPAL_ELF_DEBUGLINK_MAX];  /* its file name, NUL-terminated ("" if none) */
	uint32_t debuglink_crc;                  /* its CRC-32 (zlib's), in host byte order */
};

/* Reads program headers, the NT_GNU_BUILD_ID note and the .gnu_debuglink
 * section of the ELF open on `fd` (position untouched; libelf reads with
 * pread). .gnu_debuglink follows the GDB manual ("Debugging Information in
 * Separate Files"): a NUL-terminated file name, zero padding to a 4-byte
 * boundary, then the CRC-32 in the file's byte order. A missing, malformed
 * or oversized one (name of OPAL_ELF_DEBUGLINK_MAX bytes or more, more than
 * OPAL_ELF_MAX_SECTIONS sections) only leaves has_debuglink false. The name
 * is stored as found: callers check it is a plain file name. Returns 0,
 * -ENOEXEC for a non-ELF or malformed file, -E2BIG for more than
 * OPAL_ELF_MAX_LOADS PT_LOADs, or -errno. */
int opal_elf_info_from_fd(int fd, struct opal_elf_info *out);

/* Maps a file offset to an ELF virtual address through the PT_LOAD whose
 * [p_offset, p_offset + p_filesz) holds it: vaddr = off + p_vaddr -
 * p_offset. Not p_memsz: the bytes past p_filesz (.bss) are not in the
 * file, and a segment whose p_memsz exceeds its p_filesz would otherwise
 * claim the file offsets of the segments after it. Returns 0 or -ENOENT. */
int opal_elf_offset_to_vaddr(const struct opal_elf_info *info, uint64_t off,
			     uint64_t *vaddr);

/* Load bias of a mapping [start, limit) of the file at `file_offset`:
 * runtime address = ELF virtual address + bias. The PT_LOAD is the one
 * whose executable flag matches `executable` (the mapping's 'x'
 * permission) and whose [p_offset, p_offset + p_filesz), widened down to
 * a page, overlaps the mapping's file range most;
 * the flag matters because small lld-linked files put several PT_LOADs in
 * one file page, mapped several times with different permissions. Returns
 * 0 or -ENOENT when no PT_LOAD overlaps. */
int opal_elf_load_bias(const struct opal_elf_info *info, uint64_t start, uint64_t limit,
		       uint64_t file_offset, bool executable, uint64_t *bias);

#endif
