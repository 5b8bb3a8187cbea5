/* MiniDebugInfo (the .gnu_debugdata section: an xz-compressed ELF holding
 * a .symtab of the functions .dynsym lacks, as Fedora's and GDB's
 * "MiniDebugInfo" define it), decompressed with liblzma within the size
 * its xz index declares (xz file format 1.0.4, sections 2.1.2 and 4). */
#ifndef OPAL_MINIDEBUG_H
#define OPAL_MINIDEBUG_H

#include <stddef.h>
#include <stdint.h>
#include <libelf.h>

#define OPAL_MINIDEBUG_MAX_IN   (64u << 20)   /* compressed section bytes accepted */
#define OPAL_MINIDEBUG_MAX_OUT  (256u << 20)  /* decompressed bytes accepted */

/* Decompresses the .gnu_debugdata section of `elf` into a malloc'd buffer
 * (*buf, *len; the caller frees), after checking the size its index
 * declares against OPAL_MINIDEBUG_MAX_OUT and opal_decomp_budget(). The
 * payload is not checked to be ELF. Returns 0, -ENOENT when there is no
 * such section, -EBADMSG for data that is not valid xz or decodes to
 * another size than declared, -EFBIG over the bounds, or -ENOMEM. */
int opal_minidebug_extract(Elf *elf, void **buf, size_t *len);

/* The uncompressed size the index of the single xz stream `in` (`in_len`
 * bytes, the whole section) declares: 0 and *size, or -EBADMSG when the
 * footer or index cannot be read or the stream does not fill `in`. */
int opal_minidebug_declared(const void *in, size_t in_len, uint64_t *size);

/* Decodes the xz stream `in` into a malloc'd buffer of at most `max_out`
 * bytes (liblzma's decoder memory limit applies too). Returns 0 with
 * *buf, *len; -EFBIG when the data decodes to more than `max_out` bytes
 * or needs more decoder memory; -EBADMSG for invalid xz; or -ENOMEM. */
int opal_minidebug_decompress(const void *in, size_t in_len, size_t max_out, void **buf,
			      size_t *len);

#endif
