/* Atomic replacement of an output file: readers see the old file or the
 * complete new one, never a partial write. */
#ifndef OPAL_OUTFILE_H
#define OPAL_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes `len` bytes to "<path>.tmp" (mode 0644), fsyncs it and renames it
 * over `path`. On failure the temporary file is removed and `path` is left
 * as it was. Returns 0 or -errno. */
int opal_outfile_write(const char *path, const uint8_t *buf, size_t len);

/* The same without the fsync, for copies that can be rebuilt or lost (the
 * flame graph's recent profiles): after a power loss such a file may be
 * empty or short, which its readers must treat as unreadable. */
int opal_outfile_write_unsynced(const char *path, const uint8_t *buf, size_t len);

#endif
