/* Compact binary encoding of a struct opal_sym_result for the SQLite
 * frames table (sym_sqlite.h). Layout, version 1 (varint = unsigned LEB128):
 *   u8 version (1)
 *   u8 flags            bit 0: module string follows
 *   [varint len, bytes] module
 *   varint n            frame count, at most OPAL_SYM_MAX_FRAMES
 *   n times:
 *     u8 flags          bit 0: inlined, bit 1: function, bit 2: file
 *     varint line       at most UINT32_MAX
 *     [varint len, bytes] function, then [varint len, bytes] file
 * Strings are valid UTF-8 of at most OPAL_SYM_MAX_NAME bytes, without
 * NULs. */
#ifndef OPAL_SYM_CODEC_H
#define OPAL_SYM_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "symbolize/symbolize.h"

#define OPAL_SYM_CODEC_VERSION 1

/* Encodes `r` into a new heap buffer (*buf, *len bytes; caller frees).
 * Strings over OPAL_SYM_MAX_NAME are cut as opal_sym_strdup does, frames
 * past OPAL_SYM_MAX_FRAMES dropped. Returns 0 or -ENOMEM. */
int opal_sym_encode(const struct opal_sym_result *r, uint8_t **buf, size_t *len);

/* Decodes `len` bytes into `out` (zeroed first; free with
 * opal_sym_result_free). Returns 0, -EBADMSG for anything malformed,
 * truncated, over the bounds or of another version, or -ENOMEM. */
int opal_sym_decode(const uint8_t *buf, size_t len, struct opal_sym_result *out);

#endif
