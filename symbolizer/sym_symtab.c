/* Symbol table index (sym_symtab.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sym_symtab.h"

struct ent {
	GElf_Addr value;    /* module address */
	GElf_Addr size;     /* st_size; 0 in the sizeless list */
	GElf_Addr maxend;   /* sized list: largest end of this and earlier entries */
	uint32_t idx;       /* index in libdwfl's symbol table */
	uint8_t bind;       /* binding_value below */
};

struct opal_symtab {
	Dwfl_Module *mod;
	int first_global;   /* dwfl_module_getsymtab_first_global */
	struct ent *sized, *sizeless;
	size_t n_sized, n_sizeless;
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
	free(t);
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
	if (!t->sized || !t->sizeless) {
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

/* libdwfl's same_section for a sizeless symbol at exactly `addr`. */
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
		return true;   /* absolute: matches its own address only */
	Elf_Scn *scn = NULL;
	GElf_Addr a = addr - bias;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && a >= sh.sh_addr && a < sh.sh_addr + sh.sh_size)
			return elf_ndxscn(scn) == shndx;
	}
	return false;
}

/* The last sizeless symbol at exactly `addr` with table index in
 * [lo, hi) that is in the address's section, or NULL. */
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
	if (!w)
		w = sizeless_at(t, addr, gstart, UINT32_MAX);
	if (!w && fg > 1) {
		qsort(loc, nl, sizeof(loc[0]), cmp_idx);
		w = sized_winner(loc, nl);
		if (!w)
			w = sizeless_at(t, addr, 1, fg);
	}
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
