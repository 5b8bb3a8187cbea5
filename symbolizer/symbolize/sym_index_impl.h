/* Internals shared by sym_index.c (unit table, pool, lookups),
 * sym_index_unit.c (building one unit's index) and sym_index_names.c
 * (function names, enclosing-scope maps). Not a public interface. */
#ifndef OPAL_SYM_INDEX_IMPL_H
#define OPAL_SYM_INDEX_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <elfutils/libdw.h>

#include "base/arena.h"
#include "symbolize/sym_index.h"
#include "symbolize/sym_tombstone.h"

#define IX_NONE UINT32_MAX

/* One address range of a scope (or of a unit), in a list sorted by `lo`;
 * `maxhi` is the largest `hi` of this entry and all earlier ones, so a
 * backward scan for the entries holding an address can stop early. */
struct ix_span {
	Dwarf_Addr lo, hi, maxhi;
	uint32_t id;   /* node, or unit, the range belongs to */
	uint32_t seq;  /* insertion order: the tie-break of equal ranges */
};

/* Sorts `n` spans by (lo, hi, seq) and fills in maxhi. */
void ix_spans_sort(struct ix_span *s, size_t n);

/* Smallest id among the spans of the sorted list holding `pc`, or
 * IX_NONE. Scans back from the last span starting at or below pc while
 * maxhi says an earlier one may still hold it: one or two steps for the
 * nested, disjoint ranges compilers emit, at most n for overlapping ones. */
uint32_t ix_spans_first_id(const struct ix_span *s, size_t n, Dwarf_Addr pc);

/* ---- pool: process-wide LRU of evictable index parts ----------------- */

enum ix_entry_kind { IX_ENTRY_UNIT, IX_ENTRY_SCOPES };

struct ix_entry {
	struct ix_entry *prev, *next;   /* most recently used at the head */
	size_t bytes;                   /* charged to the pool */
	unsigned pins;                  /* in use by the running lookup: not evicted */
	enum ix_entry_kind kind;
	bool linked;
};

/* All pool functions run under the pool lock, taken by the public
 * functions of sym_index.c. */
void ix_pool_touch(struct ix_entry *e);
/* Makes room for `bytes` more (evicting unpinned entries, LRU first) and
 * charges them: links `e` when not yet linked. False (nothing charged)
 * when `bytes` exceeds the budget. */
bool ix_pool_charge(struct ix_entry *e, size_t bytes);
void ix_pool_remove(struct ix_entry *e);

/* ---- one unit's index ------------------------------------------------ */

enum ix_kind { IX_KIND_OTHER = 0, IX_KIND_SUBPROGRAM, IX_KIND_INLINED, IX_KIND_ENTRY };

enum {
	IX_NODE_ALT = 1,            /* DIE lives in the .gnu_debugaltlink file */
	IX_NODE_ORIGIN_DONE = 2,    /* abstract origin checked */
	IX_NODE_ORIGIN_BAD = 4,     /* ... and it does not resolve */
	IX_NODE_CALL_DONE = 8,      /* call_line/call_file read */
	IX_NODE_NAME_DONE = 16,     /* name computed (may be NULL) */
};

/* A DIE with addresses that dwarf_getscopes could stop at. */
struct ix_node {
	Dwarf_Off off;         /* DIE offset in its file */
	const char *name;      /* after IX_NODE_NAME_DONE: cu->strings, or NULL */
	uint32_t parent;       /* physical parent node; IX_NONE at a unit's top */
	uint32_t kids, n_kids; /* its children's ranges: cu->kids[kids ..] */
	uint32_t call_line;    /* after IX_NODE_CALL_DONE; 0 unknown */
	uint32_t call_file;    /* after IX_NODE_CALL_DONE; IX_NONE unknown */
	uint8_t kind, flags;
};

/* row_file values besides file indexes: no valid file, end_sequence. */
#define IX_ROW_NO_FILE UINT16_MAX
#define IX_ROW_END     (UINT16_MAX - 1)
#define IX_ROW_MAX_FILES IX_ROW_END   /* bigger file tables refuse the unit */

struct ix_unit;
struct opal_sym_index;

/* Makes room in *arr (`elem`-byte elements, *cap of them allocated) for
 * `need`: the capacity becomes `first` (when 0) and doubles until they
 * fit. False on ENOMEM (or a byte count past SIZE_MAX), with *arr and
 * *cap as they were. */
bool ix_reserve(void **arr, size_t *cap, size_t need, size_t elem, size_t first);

/* Small open-addressing map from a pointer to a pointer. */
struct ix_ptrmap {
	const void **keys;
	void **vals;
	size_t cap, n;   /* cap: power of two or 0 */
};
void *ix_ptrmap_get(const struct ix_ptrmap *m, const void *key);
bool ix_ptrmap_put(struct ix_ptrmap *m, const void *key, void *val);   /* false: ENOMEM */
void ix_ptrmap_del(struct ix_ptrmap *m, const void *key);
void ix_ptrmap_free(struct ix_ptrmap *m);
size_t ix_ptrmap_bytes(const struct ix_ptrmap *m);

struct ix_cu {
	struct ix_entry entry;           /* first: pool entries cast back */
	struct opal_sym_index *ix;
	struct ix_unit *unit;
	Dwarf_Die cudie;
	bool scoped;                     /* C++/Rust names get qualified */
	struct ix_node *nodes;
	uint32_t n_nodes;
	struct ix_span *kids;            /* every node's child ranges, grouped */
	uint32_t n_kids;
	uint32_t top, n_top;             /* the unit's top-level ranges in kids */
	/* The line table in libdw's order (by address, an end_sequence row
	 * before a row starting at the same address), as parallel arrays so
	 * that the binary search reads 4 bytes per row: row i starts at
	 * row_base + row_addr[i]. */
	Dwarf_Addr row_base;
	uint32_t *row_addr;
	int32_t *row_line;
	uint16_t *row_file;
	size_t n_rows;
	Dwarf_Files *files;              /* libdw's file table of the unit */
	size_t n_files;
	const char **paths;              /* n_files joined paths, lazily */
	struct ix_ptrmap demangled;      /* linkage name pointer -> name */
	struct ix_ptrmap by_origin;      /* abstract origin address -> name */
	struct opal_arena strings;       /* names, paths, map storage */
	size_t charged;                  /* bytes charged so far */
};

/* Builds the index of unit `u` whose DIE is `cudie`. Returns the index,
 * NULL when the unit is refused (bounds, DWARF libdw itself would fail
 * on, or over the pool budget); *enomem tells ENOMEM apart. */
struct ix_cu *ix_cu_build(struct opal_sym_index *ix, struct ix_unit *u, Dwarf_Die *cudie,
			  bool *enomem);
void ix_cu_free(struct ix_cu *cu);

/* Re-reads the DIE of a node. False when libdw cannot. */
bool ix_node_die(struct ix_cu *cu, const struct ix_node *n, Dwarf_Die *die);

/* ---- names ------------------------------------------------------------ */

/* Name of a function node as sym_dwfl.c's die_function_name gives it,
 * kept in the unit's strings (NULL: no name). *enomem set on ENOMEM. */
const char *ix_node_name(struct ix_cu *cu, struct ix_node *n, bool *enomem);

/* Enclosing-scope map of one unit (for qualified names). */
struct ix_scopes;
void ix_scopes_free(struct ix_scopes *s);
/* Drops an evicted map from its file's table and frees it. */
void ix_scopes_evict(struct ix_scopes *s);

/* ---- the file ------------------------------------------------------------ */

struct ix_unit {
	Dwarf_Die cudie;        /* the unit DIE */
	Dwarf_Off off;          /* its offset */
	uint32_t ranges, n_ranges;   /* its own ranges in ix->own, sorted */
	bool has_pc_attrs;      /* DW_AT_low_pc or DW_AT_ranges on the unit DIE */
	bool refused;
	bool lines_parsed;      /* libdw holds its line table (counted once) */
	struct ix_cu *cu;       /* NULL until built, or after eviction */
};

struct opal_sym_index {
	Dwarf *dw, *alt;
	bool zero_is_code;       /* ranges at 0 are code, not tombstones */
	bool units_built;
	struct ix_unit *units;  /* by offset */
	size_t n_units;
	struct ix_span *own;    /* units' own ranges, grouped per unit */
	size_t n_own;
	struct ix_span *all;    /* every unit range, sorted: CU fallback table */
	size_t n_all;
	struct ix_arun {        /* .debug_aranges runs (libdwfl's view) */
		Dwarf_Addr start;
		Dwarf_Off cu_off;
	} *aruns;
	size_t n_aruns;
	Dwarf_Addr aranges_end;  /* end of the last arange */
	int sections[2][2];      /* [main, alt][ranges, rnglists]: -1 unknown */
	struct ix_ptrmap scopes; /* unit DIE address -> struct ix_scopes */
	size_t base_bytes;       /* unit table, counted for the index's life */
	size_t libdw_rows;       /* rows of the line tables libdw parsed for us */
};

/* True when libdw reports a missing range section rather than bad DWARF
 * for `die` whose dwarf_ranges failed (pc_match in libdw ignores that
 * case and treats the DIE as not holding the address). */
bool ix_ranges_error_tolerated(struct opal_sym_index *ix, Dwarf_Die *die);

/* libdw's may_have_scopes: tags that dwarf_getscopes descends into. */
bool ix_may_have_scopes(int tag);

#endif
