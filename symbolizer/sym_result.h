/* Limits and helpers around struct opal_sym_result (symbolize.h) shared by
 * the native and kernel symbolizers, the in-memory cache and the SQLite
 * frame codec. The limits bound what a hostile ELF/DWARF file or a corrupt
 * cache row can make us allocate. */
#ifndef OPAL_SYM_RESULT_H
#define OPAL_SYM_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

/* Header of a block shared read-only by the results that view it
 * (opal_sym_result.shared): ONE malloc'd allocation starting with this
 * header and holding everything the views point to, freed with free()
 * by whoever drops the last reference (opal_sym_result_free). */
struct opal_sym_shared {
	uint32_t refs;   /* holders, atomic: views are released from any thread */
};

/* Adds a holder to `sh` (the caller already holds one, or a lock keeps
 * the block alive). */
static inline void opal_sym_shared_ref(struct opal_sym_shared *sh)
{
	__atomic_fetch_add(&sh->refs, 1, __ATOMIC_RELAXED);
}

/* Drops a holder; frees the block with the last one. */
void opal_sym_shared_unref(struct opal_sym_shared *sh);

/* Deep copy of `src` into `dst` (which is overwritten, not freed); the
 * copy owns its memory (dst->shared is NULL) whether `src` is shared or
 * not. Returns 0 or -ENOMEM (dst is then empty). */
int opal_sym_result_copy(struct opal_sym_result *dst, const struct opal_sym_result *src);

/* Heap bytes owned by `r` (frames array and strings): the in-memory cache
 * budgets with it. */
size_t opal_sym_result_bytes(const struct opal_sym_result *r);

#endif
