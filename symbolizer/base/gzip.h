/* gzip (RFC 1952) of a buffer in one call, with libdeflate: what the
 * per-interval outputs (pprof files, OTLP/HTTP bodies) are compressed with.
 * At level 1 it took half of zlib's CPU for a warm interval's pprof, and
 * its output was 4% smaller (docs/performance.md, "Symbolizer steady
 * state"). */
#ifndef OPAL_BASE_GZIP_H
#define OPAL_BASE_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Level 1, the fastest: what Go's runtime/pprof writes profiles with. A
 * warm interval is encoded and compressed every few seconds; level 6 cost
 * about three times the CPU for ~15% smaller files. */
#define OPAL_GZIP_LEVEL 1

/* Compresses `len` bytes (at most UINT_MAX / 2) into a new buffer: *out
 * (the caller free()s it), *out_len bytes. Returns 0, -E2BIG, -ENOMEM,
 * -EIO. */
int opal_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len);

#endif
