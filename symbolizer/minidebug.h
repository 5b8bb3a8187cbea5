/* MiniDebugInfo (the .gnu_debugdata section: an xz-compressed ELF holding
 * a .symtab of the functions .dynsym lacks, as Fedora's and GDB's
 * "MiniDebugInfo" define it), decompressed with liblzma. */
#ifndef OPAL_MINIDEBUG_H
#define OPAL_MINIDEBUG_H

#include <stddef.h>
#include <libelf.h>

#define OPAL_MINIDEBUG_MAX_IN   (64u << 20)   /* compressed section bytes accepted */
#define OPAL_MINIDEBUG_MAX_OUT  (256u << 20)  /* decompressed bytes accepted */

/* Decompresses the .gnu_debugdata section of `elf` into a malloc'd buffer
 * (*buf, *len; the caller frees). The payload is not checked to be ELF.
 * Returns 0, -ENOENT when there is no such section, -EBADMSG for data
 * that is not valid xz, -EFBIG over the bounds above, or -ENOMEM. */
int opal_minidebug_extract(Elf *elf, void **buf, size_t *len);

/* Like opal_minidebug_extract, but from raw xz bytes (`in`, `in_len`). */
int opal_minidebug_decompress(const void *in, size_t in_len, void **buf, size_t *len);

#endif
