/* Address index over a file's DWARF: answers "which inline chain and
 * source line holds this address" with binary searches instead of a walk
 * of the DIE tree per address (dwarf_getscopes).
 *
 * Per file, a unit table is built once on the first lookup: every
 * compile/partial unit with its DW_AT_low_pc/high_pc/ranges, plus the runs
 * of .debug_aranges. The unit holding an address is chosen exactly as
 * sym_dwfl.c's per-address path chooses it (libdwfl's aranges, checked
 * against the unit's own ranges; else the units' ranges, for clang which
 * emits no .debug_aranges).
 *
 * Per unit, an index is built lazily on the first address that falls into
 * it, in one bounded walk of its DIEs: the scopes with addresses
 * (subprograms, inlined subroutines, lexical blocks, ...) that libdw's
 * dwarf_getscopes would descend, each with its ranges sorted under its
 * parent, plus a copy of the unit's line table. A lookup descends that
 * tree (first child in DIE order holding the address, as libdw does),
 * follows the parents for the inline chain, and binary-searches the line
 * rows. Function names, DW_AT_call_file/DW_AT_call_line and source paths
 * are computed on first use and kept in the unit's index.
 *
 * Memory: every unit index and name-scope map is charged to one
 * process-wide pool with a byte budget (opal_sym_index_set_budget);
 * building past the budget evicts the least recently used ones, of any
 * file. A unit whose own index would exceed the budget, or the walk bounds
 * below, is "refused": its addresses are answered by the caller's
 * per-address path. The pool is guarded by one mutex: indexes of
 * different files may be used from different threads, one index by one
 * thread at a time (the symbolizer's lock). */
#ifndef OPAL_SYM_INDEX_H
#define OPAL_SYM_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <elfutils/libdw.h>
#include "symbolize/symbolize.h"

/* Default pool budget in bytes (all files together). */
#define OPAL_SYM_INDEX_DEFAULT_BUDGET (256u << 20)

/* Bounds on what one unit's DWARF can make the walk do or allocate. */
#define OPAL_SYM_INDEX_MAX_DEPTH   128         /* nested scopes */
#define OPAL_SYM_INDEX_MAX_DIES    (1u << 24)  /* DIEs visited per unit */
#define OPAL_SYM_INDEX_MAX_NODES   (1u << 22)  /* scopes with addresses */
#define OPAL_SYM_INDEX_MAX_RANGES  (1u << 23)  /* their address ranges */
#define OPAL_SYM_INDEX_MAX_ROWS    (1u << 24)  /* line table rows */
#define OPAL_SYM_INDEX_MAX_IMPORTS 16          /* nested DW_TAG_imported_unit */

struct opal_sym_index;

/* Creates the (empty) index of `dw`, which is borrowed and must outlive
 * the index. `dw` may be the DWARF of a separate debug file; its
 * .gnu_debugaltlink file is reached through libdw. `zero_is_code`
 * (opal_elf_zero_is_code of the file) decides whether ranges starting at
 * 0 are the tombstones of discarded code (sym_tombstone.h), which are
 * left out like empty ones. NULL on ENOMEM. */
struct opal_sym_index *opal_sym_index_new(Dwarf *dw, bool zero_is_code);

/* Frees the index and returns its bytes to the pool. NULL is a no-op. */
void opal_sym_index_free(struct opal_sym_index *ix);

enum opal_sym_index_status {
	OPAL_SYM_INDEX_NO_UNIT = 0,  /* no unit holds the address */
	OPAL_SYM_INDEX_FRAMES,       /* `out` holds the inline chain */
	OPAL_SYM_INDEX_NO_SCOPE,     /* a unit holds it, no function scope does */
	OPAL_SYM_INDEX_REFUSED,      /* a unit holds it but is not indexed */
};

/* What a lookup found besides frames. */
struct opal_sym_index_hit {
	Dwarf_Die cudie;   /* the unit (NO_SCOPE, REFUSED, FRAMES) */
	char *file;        /* NO_SCOPE: source path of the line row at the
			    * address, heap (caller frees), or NULL */
	uint32_t line;     /* NO_SCOPE: its line, 0 when no row holds pc */
};

/* Looks up DWARF address `pc` (module address minus the DWARF bias).
 * FRAMES: `out` (zeroed first) gets the inline chain, innermost first, at
 * most OPAL_SYM_MAX_FRAMES frames, with the same names, files and lines
 * sym_dwfl.c's per-address path gives. Other statuses leave out->n == 0
 * and fill `hit` as documented there.
 * Returns an enum opal_sym_index_status, or -ENOMEM (out and hit empty). */
int opal_sym_index_lookup(struct opal_sym_index *ix, Dwarf_Addr pc, struct opal_sym_result *out,
			  struct opal_sym_index_hit *hit);

/* Line table rows libdw has parsed for the units this index built: libdw
 * keeps each unit's table (some 56 bytes a row in elfutils 0.188) until
 * the DWARF is closed, whatever the pool evicts. */
size_t opal_sym_index_libdw_rows(const struct opal_sym_index *ix);

/* Sets the pool budget in bytes (0 selects OPAL_SYM_INDEX_DEFAULT_BUDGET),
 * process-wide, and evicts down to it: the symbolizer's --max-index-memory,
 * applied at start-up and on SIGHUP. */
void opal_sym_index_set_budget(size_t bytes);

struct opal_sym_index_stats {
	uint64_t bytes;          /* unit indexes and scope maps now */
	uint64_t budget;         /* their bound (the pinned entries of a running
				  * lookup may pass it until it ends) */
	uint64_t peak_bytes;     /* highest `bytes` seen */
	uint64_t table_bytes;    /* unit tables of the open indexes: not
				  * evicted, ~100 bytes per unit */
	uint64_t units_built;    /* unit indexes built (again after eviction too) */
	uint64_t units_evicted;
	uint64_t units_refused;  /* over a bound: per-address path */
};

/* Pool-wide counters since the process started. */
void opal_sym_index_stats(struct opal_sym_index_stats *out);

#endif
