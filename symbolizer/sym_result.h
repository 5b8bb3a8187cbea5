/* Limits and helpers around struct opal_sym_result (symbolize.h) shared by
 * the native and kernel symbolizers, the in-memory cache and the SQLite
 * frame codec. The limits bound what a hostile ELF/DWARF file or a corrupt
 * cache row can make us allocate. */
#ifndef OPAL_SYM_RESULT_H
#define OPAL_SYM_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include "symbolize.h"

/* Longest inline chain kept for one address; deeper chains are cut at the
 * innermost OPAL_SYM_MAX_FRAMES frames' outermost end (the real function
 * is then missing, which only happens for absurd or hostile DWARF). */
#define OPAL_SYM_MAX_FRAMES 64

/* Longest function name or source path kept, in bytes without the NUL;
 * longer strings are cut on a UTF-8 character boundary. */
#define OPAL_SYM_MAX_NAME 4096

/* Copies at most OPAL_SYM_MAX_NAME bytes of `s` into a new heap string,
 * as whole UTF-8 characters, each byte that is not part of valid UTF-8
 * replaced by '?'. NULL for s == NULL or ENOMEM. */
char *opal_sym_strdup(const char *s);

/* True when `len` bytes at `s` are valid UTF-8 (RFC 3629). */
bool opal_sym_utf8_valid(const char *s, size_t len);

/* Deep copy of `src` into `dst` (which is overwritten, not freed).
 * Returns 0 or -ENOMEM (dst is then empty). */
int opal_sym_result_copy(struct opal_sym_result *dst, const struct opal_sym_result *src);

/* Heap bytes owned by `r` (frames array and strings): the in-memory cache
 * budgets with it. */
size_t opal_sym_result_bytes(const struct opal_sym_result *r);

#endif
