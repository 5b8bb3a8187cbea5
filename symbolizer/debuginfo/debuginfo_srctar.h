/* Source tarballs (debuginfo type "sources"): a tar archive, optionally
 * compressed (gzip, xz, ...), read with libarchive. Member paths are
 * compared with their leading "/" and "./" removed, so that the
 * debuginfod request /buildid/ID/source/ABSOLUTE/PATH finds the member
 * "ABSOLUTE/PATH" or "./ABSOLUTE/PATH". */
#ifndef OPAL_SRCTAR_H
#define OPAL_SRCTAR_H

#include <stddef.h>

#define OPAL_SRCTAR_MAX_ENTRIES 200000          /* archive members walked */
#define OPAL_SRCTAR_MAX_MEMBER  (64u << 20)     /* bytes of one served member */

/* Both functions decompress the archive as a stream (libarchive: memory
 * bounded by its buffers) and stop before the members' declared sizes
 * (tar headers) sum to more than opal_decomp_budget() (debuginfo_bound.h),
 * which bounds the bytes decompressed; that refusal is counted in
 * /metrics as over_budget. */

/* Checks that the file open on `fd` is a readable archive with at least
 * one regular file. Returns the number of regular files, or -EBADMSG (the
 * reason in `why`), -E2BIG over OPAL_SRCTAR_MAX_ENTRIES, -EFBIG over the
 * budget, or -errno. */
int opal_srctar_validate(int fd, char *why, size_t why_len);

/* Reads member `path` of the archive open on `fd` into a malloc'd buffer.
 * Returns 0 and *buf, *len (caller frees), -ENOENT when absent, -EFBIG
 * over OPAL_SRCTAR_MAX_MEMBER or the budget, -EBADMSG for a damaged
 * archive, -ENOMEM. */
int opal_srctar_read_member(int fd, const char *path, void **buf, size_t *len);

#endif
