/* Building one unit's index (sym_index_impl.h): a single walk of the DIE
 * tree, the way libdw's __libdw_visit_scopes walks it for dwarf_getscopes,
 * keeping every DIE that has addresses and could therefore be where
 * dwarf_getscopes stops:
 *  - every child of the unit and of a kept scope is looked at, imported
 *    units (DW_TAG_imported_unit, dwz) are walked in place, as if their
 *    children were children of the importer (units of tag
 *    DW_TAG_compile_unit excepted, as libdw does);
 *  - a DIE is kept when dwarf_ranges gives it a non-empty range that is
 *    no tombstone of discarded code (sym_tombstone.h; libdw takes those
 *    as real); libdw never descends into a DIE that does not hold the
 *    address, so DIEs without ranges (namespaces, types) are not
 *    descended either;
 *  - a kept DIE is descended when its tag is one libdw descends into.
 * Any DWARF that would make libdw's walk fail (bad child/sibling links,
 * unreadable ranges, import cycles) refuses the unit, which sends its
 * addresses back to the per-address path: the index never answers where
 * libdw would not have. The line table is copied alongside.
 *
 * Bounds: OPAL_SYM_INDEX_MAX_DEPTH nested scopes, _MAX_DIES visited DIEs,
 * _MAX_NODES kept DIEs, _MAX_RANGES ranges, _MAX_ROWS line rows,
 * _MAX_IMPORTS nested imports; exceeding any refuses the unit. */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/dwarf_name.h"
#include "symbolize/sym_index_impl.h"

struct level {
	Dwarf_Die die;     /* current child */
	uint32_t owner;    /* node whose children these are; IX_NONE: the unit */
	size_t scratch;    /* first of this level's child ranges in b->scratch */
	unsigned imports;  /* imported units opened on this level */
	bool alt;          /* the current child lives in the alt file */
	bool done;         /* no more children */
};

struct import {
	Dwarf_Die die;     /* the DW_TAG_imported_unit DIE */
	bool alt;          /* where the importer lives */
};

struct builder {
	struct opal_sym_index *ix;
	struct ix_cu *cu;
	struct level levels[OPAL_SYM_INDEX_MAX_DEPTH];
	unsigned depth;
	struct import imports[OPAL_SYM_INDEX_MAX_IMPORTS];
	unsigned n_imports;
	struct ix_span *scratch;
	size_t n_scratch, cap_scratch;
	size_t cap_nodes, cap_kids, n_ranges, dies;
	uint32_t seq;
	bool refused, enomem;
};

static bool refuse(struct builder *b)
{
	b->refused = true;
	return false;
}

static bool no_memory(struct builder *b)
{
	b->enomem = true;
	return false;
}

/* Grows *arr (of elem-sized items, *cap of them) to hold `need`. */
static bool grow(struct builder *b, void **arr, size_t *cap, size_t need, size_t elem)
{
	return ix_reserve(arr, cap, need, elem, 64) || no_memory(b);
}

static enum ix_kind kind_of(int tag)
{
	switch (tag) {
	case DW_TAG_subprogram:
		return IX_KIND_SUBPROGRAM;
	case DW_TAG_inlined_subroutine:
		return IX_KIND_INLINED;
	case DW_TAG_entry_point:
		return IX_KIND_ENTRY;
	default:
		return IX_KIND_OTHER;
	}
}

/* Keeps the DIE of level `l` when it has a non-empty range: returns its
 * node, IX_NONE when it has none, or IX_NONE with b->refused/enomem. */
static uint32_t add_node(struct builder *b, struct level *l, int tag)
{
	Dwarf_Die *die = &l->die;
	if (!(dwarf_hasattr(die, DW_AT_low_pc) && dwarf_hasattr(die, DW_AT_high_pc)) &&
	    !dwarf_hasattr(die, DW_AT_ranges))
		return IX_NONE;   /* dwarf_ranges would give nothing */
	struct ix_cu *cu = b->cu;
	uint32_t id = cu->n_nodes;
	size_t first = b->n_scratch;
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (lo >= hi || opal_dwarf_dead(lo, b->ix->zero_is_code))
			continue;
		if (++b->n_ranges > OPAL_SYM_INDEX_MAX_RANGES) {
			refuse(b);
			return IX_NONE;
		}
		if (!grow(b, (void **)&b->scratch, &b->cap_scratch, b->n_scratch + 1,
			  sizeof(*b->scratch)))
			return IX_NONE;
		b->scratch[b->n_scratch++] = (struct ix_span){ lo, hi, 0, id, b->seq++ };
	}
	if (off < 0 && !ix_ranges_error_tolerated(b->ix, die)) {
		refuse(b);
		return IX_NONE;
	}
	if (b->n_scratch == first)
		return IX_NONE;
	if (id >= OPAL_SYM_INDEX_MAX_NODES) {
		refuse(b);
		return IX_NONE;
	}
	if (!grow(b, (void **)&cu->nodes, &b->cap_nodes, (size_t)id + 1, sizeof(*cu->nodes)))
		return IX_NONE;
	cu->nodes[id] = (struct ix_node){
		.off = dwarf_dieoffset(die),
		.parent = l->imports ? IX_NONE : l->owner,
		.call_file = IX_NONE,
		.kind = (uint8_t)kind_of(tag),
		.flags = l->alt ? IX_NODE_ALT : 0,
	};
	cu->n_nodes++;
	return id;
}

/* Moves the child ranges gathered on level `l` into cu->kids, sorted, as
 * the children of l->owner. */
static bool finish_level(struct builder *b, struct level *l)
{
	struct ix_cu *cu = b->cu;
	size_t n = b->n_scratch - l->scratch;
	if (!grow(b, (void **)&cu->kids, &b->cap_kids, cu->n_kids + n, sizeof(*cu->kids)))
		return false;
	struct ix_span *dst = cu->kids + cu->n_kids;
	if (n) {
		memcpy(dst, b->scratch + l->scratch, n * sizeof(*dst));
		ix_spans_sort(dst, n);
	}
	if (l->owner == IX_NONE) {
		cu->top = cu->n_kids;
		cu->n_top = (uint32_t)n;
	} else {
		cu->nodes[l->owner].kids = cu->n_kids;
		cu->nodes[l->owner].n_kids = (uint32_t)n;
	}
	cu->n_kids += (uint32_t)n;
	b->n_scratch = l->scratch;
	return true;
}

static bool push_level(struct builder *b, Dwarf_Die *first, uint32_t owner, bool alt)
{
	if (b->depth >= OPAL_SYM_INDEX_MAX_DEPTH)
		return refuse(b);
	b->levels[b->depth++] = (struct level){
		.die = *first, .owner = owner, .scratch = b->n_scratch, .alt = alt,
	};
	return true;
}

static bool advance(struct builder *b, struct level *l)
{
	int r = dwarf_siblingof(&l->die, &l->die);
	if (r < 0)
		return refuse(b);
	l->done = r > 0;
	return true;
}

/* The child of `l` is a DW_TAG_imported_unit: continue with the imported
 * unit's children in place, or with the next sibling when libdw skips
 * the import. */
static bool enter_import(struct builder *b, struct level *l)
{
	Dwarf_Die target, first;
	Dwarf_Attribute a;
	if (!dwarf_formref_die(dwarf_attr(&l->die, DW_AT_import, &a), &target) ||
	    dwarf_tag(&target) == DW_TAG_compile_unit || dwarf_child(&target, &first) != 0)
		return advance(b, l);
	for (unsigned i = 0; i < b->n_imports; i++)
		if (b->imports[i].die.addr == l->die.addr)
			return refuse(b);   /* a cycle: libdw fails the lookup */
	if (b->n_imports >= OPAL_SYM_INDEX_MAX_IMPORTS)
		return refuse(b);
	Dwarf *owner = dwarf_cu_getdwarf(target.cu);
	if (owner != b->ix->dw && (!b->ix->alt || owner != b->ix->alt))
		return refuse(b);
	b->imports[b->n_imports++] = (struct import){ l->die, l->alt };
	l->imports++;
	l->alt = owner != b->ix->dw;
	l->die = first;
	return true;
}

/* Back from the imported unit opened last on `l`. */
static bool leave_import(struct builder *b, struct level *l)
{
	struct import *im = &b->imports[--b->n_imports];
	l->imports--;
	l->alt = im->alt;
	l->die = im->die;
	return advance(b, l);
}

static bool walk(struct builder *b, Dwarf_Die *cudie)
{
	Dwarf_Die first;
	int r = dwarf_child(cudie, &first);
	if (r < 0)
		return refuse(b);
	if (!push_level(b, r == 0 ? &first : cudie, IX_NONE, false))
		return false;
	b->levels[0].done = r > 0;
	while (b->depth > 0) {
		struct level *l = &b->levels[b->depth - 1];
		if (l->done) {
			if (l->imports) {
				if (!leave_import(b, l))
					return false;
				continue;
			}
			if (!finish_level(b, l))
				return false;
			b->depth--;
			if (b->depth > 0 && !advance(b, &b->levels[b->depth - 1]))
				return false;
			continue;
		}
		int tag = dwarf_tag(&l->die);
		if (tag == DW_TAG_imported_unit) {
			if (!enter_import(b, l))
				return false;
			continue;
		}
		if (++b->dies > OPAL_SYM_INDEX_MAX_DIES)
			return refuse(b);
		uint32_t node = add_node(b, l, tag);
		if (b->refused || b->enomem)
			return false;
		if (node != IX_NONE && ix_may_have_scopes(tag) && dwarf_haschildren(&l->die) > 0) {
			r = dwarf_child(&l->die, &first);
			if (r < 0)
				return refuse(b);
			if (r == 0) {
				if (!push_level(b, &first, node, l->alt))
					return false;
				continue;
			}
		}
		if (!advance(b, l))
			return false;
	}
	return true;
}

/* Copies the unit's line table (libdw's order: by address, an
 * end_sequence row before a row starting at the same address). */
static bool copy_lines(struct builder *b, Dwarf_Die *cudie)
{
	struct ix_cu *cu = b->cu;
	Dwarf_Files *files;
	size_t nfiles;
	if (dwarf_getsrcfiles(cudie, &files, &nfiles) == 0 && nfiles > 0) {
		cu->paths = calloc(nfiles, sizeof(*cu->paths));
		if (!cu->paths)
			return no_memory(b);
		cu->files = files;
		cu->n_files = nfiles;
	}
	Dwarf_Lines *lines;
	size_t n;
	if (dwarf_getsrclines(cudie, &lines, &n) != 0 || n == 0)
		return true;
	if (n > OPAL_SYM_INDEX_MAX_ROWS || cu->n_files > IX_ROW_MAX_FILES)
		return refuse(b);
	cu->row_addr = malloc(n * sizeof(*cu->row_addr));
	cu->row_line = malloc(n * sizeof(*cu->row_line));
	cu->row_file = malloc(n * sizeof(*cu->row_file));
	if (!cu->row_addr || !cu->row_line || !cu->row_file)
		return no_memory(b);
	for (size_t i = 0; i < n; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr addr;
		bool end;
		int lineno;
		Dwarf_Files *lf;
		size_t idx;
		if (!l || dwarf_lineaddr(l, &addr) != 0)
			return refuse(b);
		if (i == 0)
			cu->row_base = addr;
		/* Sorted rows: only a unit spanning 4 GiB or more is refused. */
		if (addr < cu->row_base || addr - cu->row_base > UINT32_MAX)
			return refuse(b);
		cu->row_addr[i] = (uint32_t)(addr - cu->row_base);
		cu->row_line[i] = 0;
		cu->row_file[i] = IX_ROW_NO_FILE;
		if (dwarf_lineendsequence(l, &end) != 0 || end) {
			cu->row_file[i] = IX_ROW_END;
			continue;
		}
		if (dwarf_lineno(l, &lineno) == 0)
			cu->row_line[i] = lineno;
		if (dwarf_line_file(l, &lf, &idx) == 0) {
			if (lf != cu->files || idx >= cu->n_files)
				return refuse(b);   /* rows name another table */
			cu->row_file[i] = (uint16_t)idx;
		}
	}
	cu->n_rows = n;
	return true;
}

void ix_cu_free(struct ix_cu *cu)
{
	if (!cu)
		return;
	free(cu->nodes);
	free(cu->kids);
	free(cu->row_addr);
	free(cu->row_line);
	free(cu->row_file);
	free(cu->paths);
	ix_ptrmap_free(&cu->demangled);
	ix_ptrmap_free(&cu->by_origin);
	opal_arena_free(&cu->strings);
	free(cu);
}

struct ix_cu *ix_cu_build(struct opal_sym_index *ix, struct ix_unit *u, Dwarf_Die *cudie,
			  bool *enomem)
{
	*enomem = false;
	struct ix_cu *cu = calloc(1, sizeof(*cu));
	if (!cu) {
		*enomem = true;
		return NULL;
	}
	cu->entry.kind = IX_ENTRY_UNIT;
	cu->ix = ix;
	cu->unit = u;
	cu->cudie = *cudie;
	cu->scoped = opal_dwarf_scoped_language(cudie);
	/* Bounded through the pool: a unit whose strings push it past the
	 * whole budget is dropped and refused after the lookup. */
	opal_arena_init(&cu->strings, 0);

	struct builder *b = calloc(1, sizeof(*b));
	if (!b) {
		ix_cu_free(cu);
		*enomem = true;
		return NULL;
	}
	b->ix = ix;
	b->cu = cu;
	bool ok = walk(b, cudie) && copy_lines(b, cudie);
	*enomem = b->enomem;
	free(b->scratch);
	free(b);
	if (!ok) {
		ix_cu_free(cu);
		return NULL;
	}
	/* Trim the growth slack: the pool charges what stays allocated. */
	if (cu->n_nodes) {
		struct ix_node *p = realloc(cu->nodes, cu->n_nodes * sizeof(*p));
		if (p)
			cu->nodes = p;
	}
	if (cu->n_kids) {
		struct ix_span *p = realloc(cu->kids, cu->n_kids * sizeof(*p));
		if (p)
			cu->kids = p;
	}
	cu->charged = sizeof(*cu) + cu->n_nodes * sizeof(*cu->nodes) +
		      cu->n_kids * sizeof(*cu->kids) + cu->n_rows * (sizeof(*cu->row_addr) + sizeof(*cu->row_line) +
				     sizeof(*cu->row_file)) +
		      cu->n_files * sizeof(*cu->paths);
	return cu;
}

bool ix_node_die(struct ix_cu *cu, const struct ix_node *n, Dwarf_Die *die)
{
	Dwarf *d = (n->flags & IX_NODE_ALT) ? cu->ix->alt : cu->ix->dw;
	return d && dwarf_offdie(d, n->off, die) != NULL;
}
