/* The result of symbolizing one address (struct opal_sym_result) and the
 * debug-quality ranks, with the limits and helpers shared by the native and
 * kernel symbolizers, the in-memory cache, the SQLite frame codec, the
 * debug-info sources and the fleet side. The limits bound what a hostile
 * ELF/DWARF file or a corrupt cache row can make us allocate. */
#ifndef OPAL_SYM_RESULT_H
#define OPAL_SYM_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One source-level frame. For an inline chain at one address, frames[0] is
 * the innermost inlined callee and frames[n-1] the real (outermost)
 * function; frames[i].inlined is true for every frame inlined into
 * frames[i+1]; frames[i].line/file are where frames[i] was executing (for
 * i > 0: the call site of frames[i-1], DW_AT_call_file/DW_AT_call_line). */
struct opal_sym_frame {
	char *function;     /* demangled name, or NULL when unknown */
	char *file;         /* source path, or NULL */
	uint32_t line;      /* 0 when unknown */
	bool inlined;
};

struct opal_sym_shared;

struct opal_sym_result {
	size_t n;                       /* 0: unresolved (keep mapping+address) */
	struct opal_sym_frame *frames;  /* n entries, heap; free with opal_sym_result_free */
	char *module;                   /* kernel: module name ("" for vmlinux), else NULL */
	/* NULL when frames, strings and module are owned by this result;
	 * else they live in this shared read-only block (the in-memory
	 * cache's entry, below) of which the result holds one
	 * reference: read them, never change or free them one by one. */
	struct opal_sym_shared *shared;
};

/* Frees what `r` owns, or drops its reference to a shared block; leaves
 * `r` empty. Safe on an empty result and on NULL. */
void opal_sym_result_free(struct opal_sym_result *r);

/* Quality of what was found for a file, best last (stored in SQLite). */
enum opal_debug_quality {
	OPAL_DEBUG_NONE = 0,        /* nothing usable: frames stay file+0xADDR */
	OPAL_DEBUG_DYNSYM = 1,
	OPAL_DEBUG_SYMTAB = 2,
	OPAL_DEBUG_DWARF_LINES = 3,
	OPAL_DEBUG_DWARF_INLINE = 4,
};

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


/* Heap bytes owned by `r` (frames array and strings): the in-memory cache
 * budgets with it. */
size_t opal_sym_result_bytes(const struct opal_sym_result *r);

#endif
