/* Facts about this host for the Hello message: host name, kernel release
 * and the running kernel's GNU build ID (from /sys/kernel/notes). */
#ifndef OPAL_COLLECTOR_HOSTINFO_H
#define OPAL_COLLECTOR_HOSTINFO_H

#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"

#define OPAL_KERNEL_NOTES_MAX (64u << 10)   /* bytes of /sys/kernel/notes read */

struct opal_host_info {
	char hostname[256];
	char kernel_release[65];
	uint8_t kernel_build_id[OPAL_BUILD_ID_MAX];
	size_t kernel_build_id_len;   /* 0 when the kernel has none */
	char machine_id[33];          /* /etc/machine-id (host.id), "" when unreadable */
};

/* The machine ID in `len` bytes of machine-id(5) text: 32 lowercase hex
 * digits and an optional newline. Writes it with a NUL into `out`;
 * returns 0 or -EINVAL. */
int opal_machine_id_parse(const char *text, size_t len, char out[33]);

/* Finds the NT_GNU_BUILD_ID note with name "GNU" in `len` bytes of ELF
 * notes (Elf_Nhdr: 4-byte namesz, descsz, type; name and descriptor each
 * padded to 4 bytes, the layout of /sys/kernel/notes and of PT_NOTE with
 * 4-byte alignment). Copies its descriptor into `out` (`cap` bytes).
 * Returns the descriptor length, -ENOENT when absent, -EINVAL when a note
 * runs past the end, or -E2BIG when the descriptor exceeds `cap`. */
int opal_notes_build_id(const uint8_t *notes, size_t len, uint8_t *out, size_t cap);

/* Fills `h` (uname, /sys/kernel/notes, /etc/machine-id). A missing build ID is not an
 * error (logged). Returns 0 or -errno from uname. */
int opal_host_info_read(struct opal_host_info *h);

#endif
