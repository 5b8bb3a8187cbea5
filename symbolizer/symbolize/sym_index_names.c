/* Function names for the index (sym_index_impl.h), computed exactly as
 * sym_dwfl.c's die_function_name does (with the helpers of dwarf_name.h
 * both share): the demangled linkage name, else DW_AT_name (both
 * followed through DW_AT_abstract_origin and DW_AT_specification),
 * qualified for C++/Rust with the enclosing namespaces and classes of the
 * declaration when no linkage name exists.
 *
 * Those enclosing scopes are what dwarf_getscopes_die lists, which walks
 * the unit from its start for every call. Here one walk per unit builds an
 * enclosing-scope map instead: every DIE libdw's scope walk would descend
 * (a "container") with its tag, name and parent, and every
 * DW_TAG_subprogram visited with its container. Declarations of another
 * tag, and units whose map would pass the walk bounds, use libdw's
 * per-DIE walk as before. Maps are pool entries (evicted LRU). */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "base/sym_result.h"
#include "symbolize/demangle.h"
#include "symbolize/dwarf_name.h"
#include "symbolize/sym_index_impl.h"

/* ---- pointer map -------------------------------------------------------- */

static size_t ptr_hash(const void *p, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

void *ix_ptrmap_get(const struct ix_ptrmap *m, const void *key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = ptr_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->keys[i])
			return NULL;
		if (m->keys[i] == key)
			return m->vals[i];
	}
}

static bool ptrmap_grow(struct ix_ptrmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 16;
	const void **keys = calloc(ncap, sizeof(*keys));
	void **vals = calloc(ncap, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return false;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = ptr_hash(m->keys[i], ncap);
		while (keys[j])
			j = (j + 1) & (ncap - 1);
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = ncap;
	return true;
}

bool ix_ptrmap_put(struct ix_ptrmap *m, const void *key, void *val)
{
	if ((m->n + 1) * 2 > m->cap && !ptrmap_grow(m))
		return false;
	size_t i = ptr_hash(key, m->cap);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return true;
}

void ix_ptrmap_del(struct ix_ptrmap *m, const void *key)
{
	if (!m->cap)
		return;
	size_t i = ptr_hash(key, m->cap);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		return;
	/* Backward-shift deletion keeps every probe chain unbroken. */
	size_t j = i;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->keys[j])
			break;
		size_t home = ptr_hash(m->keys[j], m->cap);
		bool between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (between)
			continue;
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
	m->keys[i] = NULL;
	m->vals[i] = NULL;
	m->n--;
}

void ix_ptrmap_free(struct ix_ptrmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

size_t ix_ptrmap_bytes(const struct ix_ptrmap *m)
{
	return m->cap * (sizeof(*m->keys) + sizeof(*m->vals));
}

/* ---- enclosing-scope maps ----------------------------------------------- */

struct container {
	const char *name;   /* dwarf_diename, owned by libdw */
	uint32_t parent;    /* IX_NONE for the unit */
	int tag;
};

struct decl {
	Dwarf_Off off;
	uint32_t container;
};

/* A subtree the map does not descend: [start, end) of DIE offsets. */
struct skipped {
	Dwarf_Off start, end;
	bool scope;         /* libdw's walk would descend it */
};

struct ix_scopes {
	struct ix_entry entry;   /* first: pool entries cast back */
	struct opal_sym_index *ix;
	const void *key;         /* the unit DIE's address */
	struct container *cont;
	size_t n_cont, cap_cont;
	struct decl *decls;      /* subprograms among the visited DIEs, by offset */
	size_t n_decls, cap_decls;
	struct skipped *skip;    /* by offset; they do not nest */
	size_t n_skip, cap_skip;
	bool complete;           /* false: walk bounds or bad DWARF, ask libdw */
};

void ix_scopes_free(struct ix_scopes *s)
{
	if (!s)
		return;
	free(s->cont);
	free(s->decls);
	free(s->skip);
	free(s);
}

void ix_scopes_evict(struct ix_scopes *s)
{
	ix_ptrmap_del(&s->ix->scopes, s->key);
	ix_scopes_free(s);
}

#define MAP_FIRST_CAP 64   /* containers, declarations, skipped subtrees */

/* Tags whose children the map follows: the ones that name scopes. The
 * other tags libdw descends (functions, blocks) hold the declarations of
 * local classes only; those are left to libdw's own walk. */
static bool map_descends(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
	       tag == DW_TAG_structure_type || tag == DW_TAG_compile_unit ||
	       tag == DW_TAG_module || tag == DW_TAG_partial_unit;
}

struct scope_level {
	Dwarf_Die die;
	uint32_t container;
	size_t pending;     /* skipped subtrees of this level still without an end */
};

/* Ends the skipped subtrees opened since `mark` at offset `end`. */
static void end_pending(struct ix_scopes *s, size_t *open, size_t mark, Dwarf_Off end)
{
	while (*open > mark)
		s->skip[s->n_skip - (*open)--].end = end;
}

/* Walks the unit like dwarf_getscopes_die does (imports aside: a
 * declaration is looked for in its own unit), descending only the tags
 * map_descends accepts and recording the other subtrees with children as
 * skipped. Returns false on ENOMEM; bounds and bad DWARF leave the map
 * incomplete instead. */
static bool scopes_walk(struct ix_scopes *s, Dwarf_Die *udie)
{
	struct scope_level *stack = malloc(OPAL_SYM_INDEX_MAX_DEPTH * sizeof(*stack));
	if (!stack ||
	    !ix_reserve((void **)&s->cont, &s->cap_cont, 1, sizeof(*s->cont), MAP_FIRST_CAP)) {
		free(stack);
		return false;
	}
	s->cont[s->n_cont++] = (struct container){ NULL, IX_NONE, dwarf_tag(udie) };
	size_t depth = 0, dies = 0, open = 0;   /* open: skipped without end, newest last */
	Dwarf_Die first;
	int r = dwarf_child(udie, &first);
	bool ok = true;
	if (r == 0)
		stack[depth++] = (struct scope_level){ first, 0, 0 };
	s->complete = r >= 0;
	while (depth > 0 && s->complete) {
		struct scope_level *l = &stack[depth - 1];
		int tag = dwarf_tag(&l->die);
		if (++dies > OPAL_SYM_INDEX_MAX_DIES) {
			s->complete = false;
			break;
		}
		l->pending = open;
		if (tag == DW_TAG_subprogram) {
			if (!ix_reserve((void **)&s->decls, &s->cap_decls, s->n_decls + 1,
					sizeof(*s->decls), MAP_FIRST_CAP)) {
				ok = false;
				break;
			}
			s->decls[s->n_decls++] = (struct decl){ dwarf_dieoffset(&l->die), l->container };
		}
		if (tag != DW_TAG_imported_unit && dwarf_haschildren(&l->die) > 0) {
			if (map_descends(tag)) {
				r = dwarf_child(&l->die, &first);
				if (r < 0 || (r == 0 && depth >= OPAL_SYM_INDEX_MAX_DEPTH)) {
					s->complete = false;
					break;
				}
				if (r == 0) {
					if (!ix_reserve((void **)&s->cont, &s->cap_cont, s->n_cont + 1,
							sizeof(*s->cont), MAP_FIRST_CAP)) {
						ok = false;
						break;
					}
					s->cont[s->n_cont] = (struct container){
						dwarf_diename(&l->die), l->container, tag };
					stack[depth++] = (struct scope_level){
						first, (uint32_t)s->n_cont++, open };
					continue;
				}
			} else {
				if (!ix_reserve((void **)&s->skip, &s->cap_skip, s->n_skip + 1,
						sizeof(*s->skip), MAP_FIRST_CAP)) {
					ok = false;
					break;
				}
				s->skip[s->n_skip++] = (struct skipped){
					dwarf_dieoffset(&l->die), UINT64_MAX, ix_may_have_scopes(tag) };
				open++;
			}
		}
		/* Next sibling, climbing out of finished levels: a subtree ends
		 * where the next sibling of it or of an ancestor starts. */
		while (depth > 0) {
			struct scope_level *cur = &stack[depth - 1];
			r = dwarf_siblingof(&cur->die, &cur->die);
			if (r < 0) {
				s->complete = false;
				break;
			}
			if (r == 0) {
				end_pending(s, &open, cur->pending, dwarf_dieoffset(&cur->die));
				break;
			}
			depth--;
		}
	}
	free(stack);
	return ok;
}

/* The map of the unit `udie`, built on first use. NULL on ENOMEM (with
 * *enomem set) or when over the pool budget. */
static struct ix_scopes *scopes_get(struct opal_sym_index *ix, Dwarf_Die *udie, bool *enomem)
{
	struct ix_scopes *s = ix_ptrmap_get(&ix->scopes, udie->addr);
	if (s) {
		ix_pool_touch(&s->entry);
		return s;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !scopes_walk(s, udie)) {
		ix_scopes_free(s);
		*enomem = true;
		return NULL;
	}
	s->entry.kind = IX_ENTRY_SCOPES;
	s->ix = ix;
	s->key = udie->addr;
	size_t bytes = sizeof(*s) + s->cap_cont * sizeof(*s->cont) +
		       s->cap_decls * sizeof(*s->decls) + s->cap_skip * sizeof(*s->skip);
	if (!ix_pool_charge(&s->entry, bytes)) {
		ix_scopes_free(s);
		return NULL;
	}
	if (!ix_ptrmap_put(&ix->scopes, s->key, s)) {
		ix_pool_remove(&s->entry);
		ix_scopes_free(s);
		*enomem = true;
		return NULL;
	}
	return s;
}

enum { FOUND, UNREACHABLE, ASK_LIBDW };

/* Where the map puts the subprogram at `off`: its container, or why not. */
static int map_find(const struct ix_scopes *s, Dwarf_Off off, uint32_t *container)
{
	size_t lo = 0, hi = s->n_decls;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->decls[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->n_decls && s->decls[lo].off == off) {
		*container = s->decls[lo].container;
		return FOUND;
	}
	lo = 0;
	hi = s->n_skip;
	while (lo < hi) {   /* first skipped subtree starting at or after off */
		size_t mid = lo + (hi - lo) / 2;
		if (s->skip[mid].start < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && off < s->skip[lo - 1].end)   /* inside a skipped subtree */
		return s->skip[lo - 1].scope ? ASK_LIBDW : UNREACHABLE;
	return ASK_LIBDW;   /* not where the walk saw a DIE: let libdw judge */
}

/* Enclosing scope names of `decl`, innermost first, into parts[] (at
 * most OPAL_DWARF_MAX_SCOPES). Returns their count; *enomem on ENOMEM. */
static size_t enclosing_names(struct opal_sym_index *ix, Dwarf_Die *decl, const char **parts,
			      bool *enomem)
{
	size_t np = 0;
	Dwarf_Die udie;
	struct ix_scopes *s = NULL;
	if (dwarf_tag(decl) == DW_TAG_subprogram && dwarf_diecu(decl, &udie, NULL, NULL)) {
		s = scopes_get(ix, &udie, enomem);
		if (*enomem)
			return 0;
	}
	uint32_t c;
	int where = s && s->complete ? map_find(s, dwarf_dieoffset(decl), &c) : ASK_LIBDW;
	if (where == UNREACHABLE)
		return 0;   /* libdw's walk would not find it either */
	if (where == FOUND) {
		for (; c != IX_NONE && np < OPAL_DWARF_MAX_SCOPES &&
		       opal_dwarf_names_scope(s->cont[c].tag);
		     c = s->cont[c].parent)
			parts[np++] = opal_dwarf_scope_label(s->cont[c].tag, s->cont[c].name);
		return np;
	}
	return opal_dwarf_scope_names(decl, parts);   /* as the per-address path does */
}

/* Keeps heap string `s` (freed) in the unit's strings. */
static const char *keep(struct ix_cu *cu, char *s, bool *enomem)
{
	if (!s) {
		*enomem = true;
		return NULL;
	}
	const char *k = opal_arena_memdup0(&cu->strings, s, strlen(s));
	free(s);
	if (!k)
		*enomem = true;
	return k;
}

static const char *qualified(struct ix_cu *cu, Dwarf_Die *die, const char *name, bool *enomem)
{
	Dwarf_Die decl;
	opal_dwarf_declaration(die, &decl);
	const char *parts[OPAL_DWARF_MAX_SCOPES];
	size_t np = enclosing_names(cu->ix, &decl, parts, enomem);
	if (*enomem)
		return NULL;
	return keep(cu, opal_dwarf_qualify(parts, np, name), enomem);
}

/* Demangled `linkage`, remembered per string (inlined copies of one
 * function share their linkage name string in .debug_str). */
static const char *demangled(struct ix_cu *cu, const char *linkage, bool *enomem)
{
	const char *d = ix_ptrmap_get(&cu->demangled, linkage);
	if (d)
		return d;
	d = keep(cu, opal_demangle(linkage), enomem);
	if (d && !ix_ptrmap_put(&cu->demangled, linkage, (void *)d)) {
		*enomem = true;
		return NULL;
	}
	return d;
}

static const char *function_name(struct ix_cu *cu, Dwarf_Die *die, bool *enomem)
{
	static const unsigned int linkage[] = { DW_AT_linkage_name, DW_AT_MIPS_linkage_name };
	Dwarf_Attribute a;
	for (size_t i = 0; i < sizeof(linkage) / sizeof(linkage[0]); i++) {
		const char *s = dwarf_formstring(dwarf_attr_integrate(die, linkage[i], &a));
		if (s && *s)
			return demangled(cu, s, enomem);
	}
	const char *s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	if (!s || !*s)
		return NULL;
	if (cu->scoped && strnlen(s, OPAL_SYM_MAX_NAME + 1) <= OPAL_SYM_MAX_NAME)
		return qualified(cu, die, s, enomem);
	return keep(cu, opal_sym_strdup(s), enomem);
}

/* Inlined instances name nothing themselves: all the attributes
 * function_name reads come through their DW_AT_abstract_origin, so
 * instances of one origin share one name. Returns that origin's address
 * (the memo key), or NULL when the node's own DIE decides. */
static const void *origin_key(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	Dwarf_Die origin;
	if (dwarf_hasattr(die, DW_AT_linkage_name) || dwarf_hasattr(die, DW_AT_MIPS_linkage_name) ||
	    dwarf_hasattr(die, DW_AT_name) ||
	    !dwarf_formref_die(dwarf_attr(die, DW_AT_abstract_origin, &a), &origin))
		return NULL;
	return origin.addr;
}

static const char no_name[] = "";   /* memo value of "no name" */

const char *ix_node_name(struct ix_cu *cu, struct ix_node *n, bool *enomem)
{
	if (n->flags & IX_NODE_NAME_DONE)
		return n->name;
	Dwarf_Die die;
	const char *name = NULL;
	if (ix_node_die(cu, n, &die)) {
		const void *key = origin_key(&die);
		const char *memo = key ? ix_ptrmap_get(&cu->by_origin, key) : NULL;
		if (memo) {
			name = memo == no_name ? NULL : memo;
		} else {
			name = function_name(cu, &die, enomem);
			if (*enomem)
				return NULL;
			if (key && !ix_ptrmap_put(&cu->by_origin, key,
						  (void *)(name ? name : no_name))) {
				*enomem = true;
				return NULL;
			}
		}
	}
	n->name = name;
	n->flags |= IX_NODE_NAME_DONE;
	return name;
}
