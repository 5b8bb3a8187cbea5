/* Bounded decompression of ELF debug data: the one check every ELF file
 * passes before libelf or libdw may decompress any of it, and opal's own
 * decompression of zstd sections, which elfutils 0.188 cannot read.
 *
 * What is counted, from the headers alone (nothing is inflated first):
 * every SHF_COMPRESSED section by its Chdr ch_size (ELFCOMPRESS_ZLIB and
 * ELFCOMPRESS_ZSTD, gABI), every `.zdebug*` section by its zlib-gnu
 * header ("ZLIB" + 8-byte big-endian size) and `.gnu_debugdata`
 * (MiniDebugInfo) by the uncompressed size its xz index declares. Since
 * libdwfl inflates `.gnu_debugdata` without a bound and an xz index is
 * only verified after the data, that section is then also decoded here
 * with liblzma's memory limit and an output bound of what it declared,
 * and the compressed sections of the ELF inside are counted too. A file
 * whose sum is over the budget, or whose headers lie, is refused whole. */
#ifndef OPAL_DEBUGINFO_BOUND_H
#define OPAL_DEBUGINFO_BOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/metrics.h"

#define OPAL_DECOMP_DEFAULT_BUDGET (512ull << 20)   /* bytes, --max-decompress */

struct opal_decomp_scan {
	uint64_t declared;    /* decompressed bytes the file's sections declare */
	size_t n_zstd;        /* ELFCOMPRESS_ZSTD sections (opal_decomp_open inflates them) */
	bool refused;
	enum opal_metric_decomp reason;   /* when refused (the /metrics label) */
	char why[200];        /* when refused: one line naming the section */
};

/* Sets the budget (bytes of decompressed data one file may declare;
 * 0: the default). Thread-safe; read by every later scan. */
void opal_decomp_set_budget(uint64_t bytes);
uint64_t opal_decomp_budget(void);

/* Scans the ELF file open on `fd` (pread only; position untouched).
 * Returns 0 with s->refused false when the file may be handed to libelf
 * or libdw, -EFBIG with s->refused, s->reason and s->why set when it must
 * not (the refusal is counted in /metrics and logged), -ENOEXEC for a file
 * that is not ELF (nothing to decompress: the caller's own checks judge
 * it), or -errno/-ENOMEM. */
int opal_decomp_scan_fd(int fd, struct opal_decomp_scan *s);

/* The descriptor to give libdw for the ELF file on `fd`, after
 * opal_decomp_scan_fd: a duplicate of `fd` when no section is zstd, else
 * a memfd holding a copy of the file whose zstd sections are decompressed
 * (ZSTD_findDecompressedSize must equal ch_size; the output buffer is
 * ch_size bytes) and no longer flagged SHF_COMPRESSED. Returns the new
 * descriptor (the caller closes it), -EFBIG when refused (s as above), or
 * -errno. A file that is not ELF is duplicated unchanged. */
int opal_decomp_open(int fd, struct opal_decomp_scan *s);

#endif
