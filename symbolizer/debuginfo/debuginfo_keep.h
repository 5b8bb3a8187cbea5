/* The debug parts of an ELF file, as `objcopy --only-keep-debug` keeps
 * them, written with libelf: what gets uploaded to a central symbolizer
 * instead of the whole binary. Written in-process (no objcopy child)
 * because the sandboxed symbolizer may not fork or exec. */
#ifndef OPAL_KEEPDEBUG_H
#define OPAL_KEEPDEBUG_H

#include <stddef.h>

/* Writes to `out_fd` (empty, writable, seekable) a copy of the ELF open on
 * `in_fd` with: the ELF header, the program headers (file offsets and
 * sizes rewritten to the new layout, or a zero file size where the bytes
 * are gone), every section header in the same order (so symbol section
 * indexes stay valid), the bytes of every non-allocated section (DWARF,
 * .symtab, .strtab, .gnu_debugdata, .gnu_debugaltlink, ...) and of
 * allocated notes (the build ID); other allocated sections become
 * SHT_NOBITS with their addresses and sizes kept. Compressed sections are
 * copied as they are. ET_EXEC and ET_DYN files are accepted, and ET_REL
 * files without allocated sections (dwz's shared DWARF file, copied
 * whole).
 * Bounds (the input is any user's binary): section alignments up to 4096,
 * and the copy at most the input's size plus 16 MiB.
 * Returns 0; -ENOEXEC (not ELF or another type), -EBADMSG (malformed, or
 * an alignment over the bound), -EFBIG (the copy would outgrow the bound),
 * or -errno; `why` (may be NULL) then gets a reason. */
int opal_keep_debug_write(int in_fd, int out_fd, char *why, size_t why_len);

#endif
