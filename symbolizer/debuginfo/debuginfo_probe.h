/* What an ELF file offers as debug data, read from its section headers
 * with libelf without parsing DWARF: used to rank debug-info candidates
 * and to validate uploads. Every offset and count is checked against the
 * file size, since uploads and debug files are untrusted. */
#ifndef OPAL_ELF_PROBE_H
#define OPAL_ELF_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/sym_result.h"
#include "shared/fileid.h"

#define OPAL_ELF_PROBE_MAX_SECTIONS 65535u   /* more is refused as malformed */
#define OPAL_ELF_PROBE_MAX_PHDRS    4096u
#define OPAL_ELF_LINK_NAME_MAX      256      /* bytes of a debuglink/altlink name */

struct opal_elf_probe {
	uint16_t e_type;              /* ET_EXEC, ET_DYN, ... */
	uint16_t e_machine;
	size_t build_id_len;          /* 0: no NT_GNU_BUILD_ID note */
	uint8_t build_id[OPAL_BUILD_ID_MAX];
	bool has_text;                /* an allocated executable PROGBITS section with bytes */
	bool has_alloc;               /* any allocated section (a dwz shared file has none) */
	bool has_debug_info;          /* .debug_info with bytes */
	bool has_debug_line;
	bool debug_unreadable;        /* some .debug_* section is compressed, neither zlib nor zstd */
	bool has_symtab;              /* .symtab holding at least one function */
	bool has_dynsym;              /* .dynsym holding at least one function */
	bool has_debugdata;           /* .gnu_debugdata (MiniDebugInfo) present */
	bool has_gopclntab;           /* Go's function table, .gopclntab (or
				       * .data.rel.ro.gopclntab in Go's PIE files) */
	bool debugdata_symtab;        /* ... and its xz payload holds a .symtab with functions */
	bool has_debuglink;
	char debuglink[OPAL_ELF_LINK_NAME_MAX];   /* .gnu_debuglink file name */
	uint32_t debuglink_crc;
	bool has_altlink;
	char altlink[OPAL_ELF_LINK_NAME_MAX];     /* .gnu_debugaltlink file name (dwz) */
	size_t altlink_build_id_len;
	uint8_t altlink_build_id[OPAL_BUILD_ID_MAX];
};

/* Probes the ELF file open on `fd` (read with pread; position untouched).
 * Returns 0; -ENOEXEC when the file is not ELF; -EBADMSG when it is
 * truncated or malformed (a header, section or note beyond the end of the
 * file, too many sections); or -errno. On a negative return, `why`
 * (why_len bytes, may be NULL) holds a one-line reason. */
int opal_elf_probe_fd(int fd, struct opal_elf_probe *out, char *why, size_t why_len);

/* Coarse quality from a probe, without reading DWARF: DWARF_LINES when
 * usable .debug_info and .debug_line exist (the real rank, lines or
 * inline, needs libdw), SYMTAB for .symtab, Go's .gopclntab or
 * MiniDebugInfo symbols, DYNSYM, else NONE. DWARF compressed with a type
 * other than zlib and zstd counts as absent (nothing reads it; zstd is
 * decompressed by opal, debuginfo_bound.h). `what` gets a static
 * description. */
enum opal_debug_quality opal_elf_probe_quality(const struct opal_elf_probe *p, const char **what);

/* CRC-32 (zlib's, as .gnu_debuglink uses) of the whole file open on `fd`,
 * read with pread. Returns 0, -EFBIG over OPAL_CRC_MAX_BYTES, or -errno. */
#define OPAL_CRC_MAX_BYTES (16ull << 30)
int opal_file_crc32(int fd, uint32_t *crc);

#endif
