/* Symbol table index (sym_symtab.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/sym_symtab.h"

struct ent {
	GElf_Addr value;    /* module address */
	GElf_Addr size;     /* st_size; 0 in the sizeless list */
	GElf_Addr maxend;   /* sized list: largest end of this and earlier entries */
	uint32_t idx;       /* index in libdwfl's symbol table */
	uint8_t bind;       /* binding_value below */
};

/* An allocated section of the main file, as libdwfl's relocation map
 * holds it (module addresses). */
struct secref {
	GElf_Addr start, end;
	size_t ndx;
};

struct opal_symtab {
	Dwfl_Module *mod;
	int first_global;   /* dwfl_module_getsymtab_first_global */
	struct ent *sized, *sizeless;
	size_t n_sized, n_sizeless;
	struct secref *secs;   /* sorted by start, end, index */
	size_t n_secs;
};

/* libdwfl's preference among bindings, higher is better. */
static uint8_t binding_value(const GElf_Sym *s)
{
	switch (GELF_ST_BIND(s->st_info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	default:
		return 0;
	}
}

static int cmp_ent(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

void opal_symtab_free(struct opal_symtab *t)
{
	if (!t)
		return;
	free(t->sized);
	free(t->sizeless);
	free(t->secs);
	free(t);
}

static int cmp_secref(const void *a, const void *b)
{
	const struct secref *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return (x->ndx > y->ndx) - (x->ndx < y->ndx);
}

/* The SHF_ALLOC sections of the module's main file, the map libdwfl's
 * same_section looks addresses up in. Returns 0 or -ENOMEM. */
static int index_sections(struct opal_symtab *t)
{
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(t->mod, &bias);
	size_t n = 0, cap = 0;
	Elf_Scn *scn = NULL;

	if (!elf || elf_getshdrnum(elf, &cap) < 0)
		return 0;
	if (cap == 0)
		return 0;
	if (!(t->secs = calloc(cap, sizeof(*t->secs))))
		return -ENOMEM;
	while ((scn = elf_nextscn(elf, scn)) != NULL && n < cap) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
			continue;
		t->secs[n++] = (struct secref){ sh.sh_addr + bias, sh.sh_addr + bias + sh.sh_size,
						elf_ndxscn(scn) };
	}
	t->n_secs = n;
	qsort(t->secs, n, sizeof(*t->secs), cmp_secref);
	return 0;
}

/* libdwfl's section lookup of a module address: a section's end counts
 * as inside it unless the next section starts there. Returns the
 * section index, or SHN_UNDEF outside every section. */
static size_t section_of(const struct opal_symtab *t, GElf_Addr addr)
{
	size_t lo = 0, hi = t->n_secs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < t->secs[mid].start) {
			hi = mid;
		} else if (addr > t->secs[mid].end) {
			lo = mid + 1;
		} else {
			if (addr == t->secs[mid].end && mid + 1 < t->n_secs &&
			    addr == t->secs[mid + 1].start)
				mid++;
			return t->secs[mid].ndx;
		}
	}
	return SHN_UNDEF;
}

int opal_symtab_new(Dwfl_Module *mod, struct opal_symtab **out)
{
	*out = NULL;
	struct opal_symtab *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->mod = mod;
	int n = dwfl_module_getsymtab(mod);
	t->first_global = n > 0 ? dwfl_module_getsymtab_first_global(mod) : -1;
	if (n <= 1 || t->first_global < 0) {   /* libdwfl finds nothing either */
		*out = t;
		return 0;
	}
	if ((unsigned)n > OPAL_SYMTAB_MAX_SYMS) {
		free(t);
		return -ENOTSUP;
	}
	t->sized = malloc((size_t)n * sizeof(*t->sized));
	t->sizeless = malloc((size_t)n * sizeof(*t->sizeless));
	if (!t->sized || !t->sizeless || index_sections(t) < 0) {
		opal_symtab_free(t);
		return -ENOMEM;
	}
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		GElf_Word shndx;
		Elf *elf;
		Dwarf_Addr bias;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &value, &shndx, &elf, &bias);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF || type == STT_SECTION ||
		    type == STT_FILE || type == STT_TLS)
			continue;   /* never a candidate in libdwfl's search */
		if (value != sym.st_value + bias) {
			/* Resolved or relocated values take libdwfl's second
			 * look at st_value: not replicated here. */
			opal_symtab_free(t);
			return -ENOTSUP;
		}
		struct ent e = { value, sym.st_size, 0, (uint32_t)i, binding_value(&sym) };
		if (sym.st_size)
			t->sized[t->n_sized++] = e;
		else
			t->sizeless[t->n_sizeless++] = e;
	}
	qsort(t->sized, t->n_sized, sizeof(*t->sized), cmp_ent);
	qsort(t->sizeless, t->n_sizeless, sizeof(*t->sizeless), cmp_ent);
	GElf_Addr m = 0;
	for (size_t i = 0; i < t->n_sized; i++) {
		struct ent *e = &t->sized[i];
		GElf_Addr end = e->value + e->size < e->value ? UINT64_MAX : e->value + e->size;
		if (end > m)
			m = end;
		e->maxend = m;
	}
	*out = t;
	return 0;
}

/* First entry with value > addr. */
static size_t upper(const struct ent *e, size_t n, GElf_Addr addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e[mid].value <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int cmp_idx(const void *a, const void *b)
{
	const struct ent *x = *(const struct ent *const *)a, *y = *(const struct ent *const *)b;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* libdwfl's try_sym_value over the sized symbols holding the address,
 * in table order: the winner or NULL. */
static const struct ent *sized_winner(const struct ent *const *hits, size_t n)
{
	const struct ent *c = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct ent *h = hits[i];
		if (!c || c->value < h->value || c->bind < h->bind)
			c = h;
		else if (c->value == h->value &&
			 ((c->size > h->size && c->bind <= h->bind) ||
			  (c->size >= h->size && c->bind < h->bind)))
			c = h;
	}
	return c;
}

/* libdwfl's same_section as dwfl_module_addrinfo uses it (values not
 * adjusted): an absolute symbol only at its own address, else the
 * address and the symbol's value in the same section of libdwfl's map
 * (section_of; both outside every section counts as the same). */
static bool same_section(const struct opal_symtab *t, uint32_t idx, GElf_Addr addr)
{
	GElf_Sym sym;
	GElf_Addr value;
	GElf_Word shndx;
	Elf *elf;
	Dwarf_Addr bias;
	if (!dwfl_module_getsym_info(t->mod, (int)idx, &sym, &value, &shndx, &elf, &bias))
		return false;
	if (shndx >= SHN_LORESERVE)
		return value == addr;
	return section_of(t, addr) == section_of(t, value);
}

/* The last sizeless symbol at exactly `addr` with table index in
 * [lo, hi) that passes same_section, or NULL. */
static const struct ent *sizeless_at(const struct opal_symtab *t, GElf_Addr addr, uint32_t lo,
				     uint32_t hi)
{
	size_t i = upper(t->sizeless, t->n_sizeless, addr);
	for (; i > 0 && t->sizeless[i - 1].value == addr; i--) {
		const struct ent *e = &t->sizeless[i - 1];   /* descending idx */
		if (e->idx >= lo && e->idx < hi && same_section(t, e->idx, addr))
			return e;
	}
	return NULL;
}

/* libdwfl's fallback when no sized symbol holds `addr` (its two passes,
 * globals then locals, both done): the sizeless symbol (an assembly label
 * such as _start) nearest below `addr`, unless a symbol starting at or
 * below `addr` reaches past the label (libdwfl's min_label), and only in
 * the address's section. Of labels at that value, the last one libdwfl's
 * passes meet wins: the highest-index local, else the highest-index
 * global. `gstart` is the first index of the global pass. */
static const struct ent *sizeless_below(const struct opal_symtab *t, GElf_Addr addr,
					uint32_t gstart)
{
	size_t i = upper(t->sizeless, t->n_sizeless, addr);
	if (i == 0)
		return NULL;
	GElf_Addr label = t->sizeless[i - 1].value;
	size_t j = upper(t->sized, t->n_sized, addr);
	if (j > 0 && t->sized[j - 1].maxend > label)
		return NULL;
	const struct ent *glob = NULL;
	for (; i > 0 && t->sizeless[i - 1].value == label; i--) {
		const struct ent *e = &t->sizeless[i - 1];   /* descending idx */
		if (!same_section(t, e->idx, addr))
			continue;
		if (e->idx < gstart)
			return e;
		if (!glob)
			glob = e;
	}
	return glob;
}

const char *opal_symtab_lookup(const struct opal_symtab *t, GElf_Addr addr, GElf_Sym *sym,
			       GElf_Off *off, bool *ask_libdwfl)
{
	*ask_libdwfl = false;
	if (t->first_global < 0)
		return NULL;
	const struct ent *glob[OPAL_SYMTAB_MAX_HITS], *loc[OPAL_SYMTAB_MAX_HITS];
	size_t ng = 0, nl = 0;
	uint32_t fg = (uint32_t)t->first_global;
	uint32_t gstart = fg == 0 ? 1 : fg;
	for (size_t i = upper(t->sized, t->n_sized, addr); i > 0 && t->sized[i - 1].maxend > addr;
	     i--) {
		const struct ent *e = &t->sized[i - 1];
		if (addr - e->value >= e->size)
			continue;
		if (ng + nl == OPAL_SYMTAB_MAX_HITS) {
			*ask_libdwfl = true;
			return NULL;
		}
		if (e->idx >= gstart)
			glob[ng++] = e;
		else
			loc[nl++] = e;
	}
	qsort(glob, ng, sizeof(glob[0]), cmp_idx);
	const struct ent *w = sized_winner(glob, ng);
	/* a global sizeless symbol exactly at addr ends libdwfl's search
	 * before the locals */
	if (!w)
		w = sizeless_at(t, addr, gstart, UINT32_MAX);
	if (!w && fg > 1) {
		qsort(loc, nl, sizeof(loc[0]), cmp_idx);
		w = sized_winner(loc, nl);
	}
	if (!w)
		w = sizeless_below(t, addr, gstart);
	if (!w)
		return NULL;
	GElf_Addr value;
	GElf_Word shndx;
	Elf *elf;
	Dwarf_Addr bias;
	const char *name = dwfl_module_getsym_info(t->mod, (int)w->idx, sym, &value, &shndx, &elf,
						   &bias);
	*off = addr - w->value;
	return name;
}
