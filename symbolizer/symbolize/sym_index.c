/* Per-file DWARF address index (sym_index.h): the unit table, the choice
 * of unit for an address, the byte-bounded pool of unit indexes, and the
 * lookup that turns a unit index into frames. Building one unit's index
 * is sym_index_unit.c, names are sym_index_names.c.
 *
 * Unit choice replicates sym_dwfl.c's find_cu, which relies on libdwfl's
 * dwfl_module_addrdie (elfutils libdwfl/cu.c): .debug_aranges entries
 * merged into runs per unit, the run starting at or below the address
 * (past the very last arange's end nothing), accepted when that unit's
 * DIE ranges hold the address or the unit DIE has no address attributes
 * at all; otherwise the sorted table of all unit ranges, searched
 * backwards from the address for at most CU_BACKSCAN entries. Unlike
 * libdwfl, aranges entries and ranges that are the tombstones of
 * discarded code (sym_tombstone.h) are left out. */
#include <dwarf.h>
#include <errno.h>
#include <gelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/sym_result.h"
#include "symbolize/sym_index_impl.h"

#define MAX_UNITS    (1u << 20)   /* units in one file's table */
#define MAX_UNIT_RANGES (1u << 22)
#define CU_BACKSCAN  64           /* as sym_dwfl.c's CU_INDEX_BACKSCAN */

/* ---- spans ---------------------------------------------------------------- */

static bool span_less(const struct ix_span *x, const struct ix_span *y)
{
	if (x->lo != y->lo)
		return x->lo < y->lo;
	if (x->hi != y->hi)
		return x->hi < y->hi;
	return x->seq < y->seq;
}

static int cmp_span(const void *a, const void *b)
{
	return span_less(a, b) ? -1 : span_less(b, a);
}

/* Natural merge sort: compilers list functions in DIE order, which is
 * mostly address order backwards or forwards, i.e. a few long runs. */
static bool merge_sort(struct ix_span *s, size_t n)
{
	size_t *bounds = malloc((n + 1) * sizeof(*bounds));
	struct ix_span *tmp = malloc(n * sizeof(*tmp));
	if (!bounds || !tmp) {
		free(bounds);
		free(tmp);
		return false;
	}
	size_t nb = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		if (j < n && span_less(&s[j], &s[j - 1])) {
			while (j < n && span_less(&s[j], &s[j - 1]))
				j++;
			for (size_t a = i, b = j - 1; a < b; a++, b--) {   /* strictly descending */
				struct ix_span t = s[a];
				s[a] = s[b];
				s[b] = t;
			}
		} else {
			while (j < n && !span_less(&s[j], &s[j - 1]))
				j++;
		}
		bounds[nb++] = i;
		i = j;
	}
	bounds[nb] = n;
	while (nb > 1) {   /* merge neighbouring runs pairwise */
		size_t out = 0;
		for (size_t r = 0; r < nb; r += 2) {
			size_t lo = bounds[r], mid = bounds[r + 1];
			size_t hi = r + 2 <= nb ? bounds[r + 2] : mid;
			if (r + 1 < nb) {
				size_t a = lo, b = mid, k = 0;
				while (a < mid && b < hi)
					tmp[k++] = span_less(&s[b], &s[a]) ? s[b++] : s[a++];
				while (a < mid)
					tmp[k++] = s[a++];
				while (b < hi)
					tmp[k++] = s[b++];
				memcpy(s + lo, tmp, k * sizeof(*s));
			}
			bounds[out++] = lo;
		}
		bounds[out] = n;
		nb = out;
	}
	free(bounds);
	free(tmp);
	return true;
}

bool ix_reserve(void **arr, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return true;
	size_t ncap = *cap ? *cap : first;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return false;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elem)
		return false;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return false;
	*arr = p;
	*cap = ncap;
	return true;
}

void ix_spans_sort(struct ix_span *s, size_t n)
{
	bool sorted = true;
	for (size_t i = 1; i < n && sorted; i++)
		sorted = !span_less(&s[i], &s[i - 1]);
	if (!sorted && !merge_sort(s, n))
		qsort(s, n, sizeof(*s), cmp_span);   /* no memory for runs: in place */
	Dwarf_Addr m = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].hi > m)
			m = s[i].hi;
		s[i].maxhi = m;
	}
}

/* Index of the first span with lo > pc. */
static size_t spans_upper(const struct ix_span *s, size_t n, Dwarf_Addr pc)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint32_t ix_spans_first_id(const struct ix_span *s, size_t n, Dwarf_Addr pc)
{
	uint32_t best = IX_NONE;
	for (size_t i = spans_upper(s, n, pc); i > 0 && s[i - 1].maxhi > pc; i--)
		if (s[i - 1].hi > pc && s[i - 1].id < best)
			best = s[i - 1].id;
	return best;
}

bool ix_may_have_scopes(int tag)
{
	switch (tag) {
	case DW_TAG_compile_unit:
	case DW_TAG_module:
	case DW_TAG_lexical_block:
	case DW_TAG_with_stmt:
	case DW_TAG_catch_block:
	case DW_TAG_try_block:
	case DW_TAG_entry_point:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_subprogram:
	case DW_TAG_namespace:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
		return true;
	default:
		return false;
	}
}

/* ---- pool ------------------------------------------------------------------ */

static struct {
	pthread_mutex_t lock;
	size_t budget, bytes;
	struct ix_entry *head, *tail;
	struct opal_sym_index_stats stats;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .budget = OPAL_SYM_INDEX_DEFAULT_BUDGET };

static void pool_unlink(struct ix_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		pool.head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		pool.tail = e->prev;
	e->prev = e->next = NULL;
}

static void pool_push(struct ix_entry *e)
{
	e->prev = NULL;
	e->next = pool.head;
	if (pool.head)
		pool.head->prev = e;
	pool.head = e;
	if (!pool.tail)
		pool.tail = e;
}

void ix_pool_touch(struct ix_entry *e)
{
	if (e->linked && pool.head != e) {
		pool_unlink(e);
		pool_push(e);
	}
}

void ix_pool_remove(struct ix_entry *e)
{
	if (!e->linked)
		return;
	pool_unlink(e);
	pool.bytes -= e->bytes;
	e->bytes = 0;
	e->linked = false;
}

/* Frees an entry and detaches it from its file. */
static void pool_evict(struct ix_entry *e)
{
	ix_pool_remove(e);
	if (e->kind == IX_ENTRY_UNIT) {
		struct ix_cu *cu = (struct ix_cu *)e;
		pool.stats.units_evicted++;
		cu->unit->cu = NULL;
		ix_cu_free(cu);
	} else {
		ix_scopes_evict((struct ix_scopes *)e);
	}
}

static void pool_shrink(size_t want_free)
{
	struct ix_entry *e = pool.tail;
	while (e && pool.bytes + want_free > pool.budget) {
		struct ix_entry *prev = e->prev;
		if (!e->pins)
			pool_evict(e);
		e = prev;
	}
}

bool ix_pool_charge(struct ix_entry *e, size_t bytes)
{
	if (bytes > pool.budget || e->bytes + bytes > pool.budget)
		return false;
	e->pins++;   /* not evicted to make room for itself */
	pool_shrink(bytes);
	e->pins--;
	pool.bytes += bytes;
	e->bytes += bytes;
	if (pool.bytes > pool.stats.peak_bytes)
		pool.stats.peak_bytes = pool.bytes;
	if (!e->linked) {
		e->linked = true;
		pool_push(e);
	} else {
		ix_pool_touch(e);
	}
	return true;
}

void opal_sym_index_set_budget(size_t bytes)
{
	pthread_mutex_lock(&pool.lock);
	pool.budget = bytes ? bytes : OPAL_SYM_INDEX_DEFAULT_BUDGET;
	pool_shrink(0);
	pthread_mutex_unlock(&pool.lock);
}

void opal_sym_index_stats(struct opal_sym_index_stats *out)
{
	pthread_mutex_lock(&pool.lock);
	*out = pool.stats;
	out->bytes = pool.bytes;
	out->budget = pool.budget;
	pthread_mutex_unlock(&pool.lock);
}

/* ---- range sections ------------------------------------------------------------ */

static bool has_section(Dwarf *dw, const char *name)
{
	Elf *elf = dwarf_getelf(dw);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *n;
		if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		/* libdw accepts the old GNU ".zdebug_" spelling as well. */
		if (strcmp(n, name) == 0 ||
		    (strncmp(n, ".zdebug_", 8) == 0 && strcmp(n + 8, name + 7) == 0))
			return sh.sh_type != SHT_NOBITS;
	}
	return false;
}

bool ix_ranges_error_tolerated(struct opal_sym_index *ix, Dwarf_Die *die)
{
	Dwarf *d = dwarf_cu_getdwarf(die->cu);
	int which = d == ix->dw ? 0 : 1;
	Dwarf_Half version = 0;
	if (dwarf_cu_info(die->cu, &version, NULL, NULL, NULL, NULL, NULL, NULL) != 0)
		return false;
	int sec = version < 5 ? 0 : 1;
	if (ix->sections[which][sec] < 0)
		ix->sections[which][sec] =
			has_section(d, sec == 0 ? ".debug_ranges" : ".debug_rnglists");
	return ix->sections[which][sec] == 0;
}

/* ---- unit table --------------------------------------------------------------- */

struct opal_sym_index *opal_sym_index_new(Dwarf *dw, bool zero_is_code)
{
	struct opal_sym_index *ix = calloc(1, sizeof(*ix));
	if (!ix)
		return NULL;
	ix->dw = dw;
	ix->zero_is_code = zero_is_code;
	memset(ix->sections, -1, sizeof(ix->sections));
	return ix;
}

static struct ix_span *push_span(struct ix_span **arr, size_t *n, size_t *cap)
{
	if (!ix_reserve((void **)arr, cap, *n + 1, sizeof(**arr), 256))
		return NULL;
	return &(*arr)[(*n)++];
}

/* The unit table: every compile/partial unit with its DIE ranges (the
 * same walk as sym_dwfl.c's build_cu_index), and the aranges runs.
 * Returns 0 or -ENOMEM. */
static int build_units_once(struct opal_sym_index *ix)
{
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie, subdie;
	size_t cap_units = 0, cap_own = 0, cap_all = 0, seen = 0;

	ix->alt = dwarf_getalt(ix->dw);
	while (seen++ < MAX_UNITS &&
	       dwarf_get_units(ix->dw, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		if (!ix_reserve((void **)&ix->units, &cap_units, ix->n_units + 1,
				sizeof(*ix->units), 64))
			return -ENOMEM;
		struct ix_unit *u = &ix->units[ix->n_units];
		*u = (struct ix_unit){
			.cudie = cudie,
			.off = dwarf_dieoffset(&cudie),
			.ranges = (uint32_t)ix->n_own,
			.has_pc_attrs = dwarf_hasattr(&cudie, DW_AT_low_pc) ||
					dwarf_hasattr(&cudie, DW_AT_ranges),
		};
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;
		while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
			if (hi <= lo || opal_dwarf_dead(lo, ix->zero_is_code))
				continue;
			if (ix->n_all >= MAX_UNIT_RANGES)
				break;
			struct ix_span *o = push_span(&ix->own, &ix->n_own, &cap_own);
			struct ix_span *a = push_span(&ix->all, &ix->n_all, &cap_all);
			if (!o || !a)
				return -ENOMEM;
			*o = (struct ix_span){ lo, hi, 0, (uint32_t)ix->n_units, (uint32_t)ix->n_own };
			*a = (struct ix_span){ lo, hi, 0, (uint32_t)ix->n_units, (uint32_t)ix->n_all };
		}
		u->n_ranges = (uint32_t)(ix->n_own - u->ranges);
		ix_spans_sort(ix->own + u->ranges, u->n_ranges);
		ix->n_units++;
	}
	ix_spans_sort(ix->all, ix->n_all);

	Dwarf_Aranges *ar;
	size_t nar;
	if (dwarf_getaranges(ix->dw, &ar, &nar) == 0 && nar > 0) {
		ix->aruns = malloc(nar * sizeof(*ix->aruns));
		if (!ix->aruns)
			return -ENOMEM;
		Dwarf_Off last = 0;
		for (size_t i = 0; i < nar; i++) {
			Dwarf_Addr addr;
			Dwarf_Word len;
			Dwarf_Off off;
			if (dwarf_getarangeinfo(dwarf_onearange(ar, i), &addr, &len, &off) != 0)
				break;
			if (opal_dwarf_dead(addr, ix->zero_is_code))
				continue;   /* a discarded function's entry */
			if (ix->n_aruns == 0 || off != last)
				ix->aruns[ix->n_aruns++] = (struct ix_arun){ addr, off };
			last = off;
			ix->aranges_end = addr + len;
		}
	}
	ix->base_bytes = sizeof(*ix) + cap_units * sizeof(*ix->units) +
			 (cap_own + cap_all) * sizeof(struct ix_span) +
			 nar * sizeof(*ix->aruns);
	ix->units_built = true;
	return 0;
}

static int build_units(struct opal_sym_index *ix)
{
	int r = build_units_once(ix);
	if (r < 0) {   /* start over next time */
		free(ix->units);
		free(ix->own);
		free(ix->all);
		free(ix->aruns);
		ix->units = NULL;
		ix->own = ix->all = NULL;
		ix->aruns = NULL;
		ix->n_units = ix->n_own = ix->n_all = ix->n_aruns = 0;
	}
	return r;
}

static struct ix_unit *unit_at(struct opal_sym_index *ix, Dwarf_Off off)
{
	size_t lo = 0, hi = ix->n_units;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ix->units[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ix->n_units && ix->units[lo].off == off ? &ix->units[lo] : NULL;
}

/* libdwfl's addrarange: the run whose start is at or below pc. */
static const struct ix_arun *arun_at(const struct opal_sym_index *ix, Dwarf_Addr pc)
{
	size_t l = 0, u = ix->n_aruns;
	while (l < u) {
		size_t idx = (l + u) / 2;
		Dwarf_Addr start = ix->aruns[idx].start;
		if (pc < start) {
			u = idx;
			continue;
		}
		if (pc > start) {
			if (idx + 1 < ix->n_aruns) {
				if (pc >= ix->aruns[idx + 1].start) {
					l = idx + 1;
					continue;
				}
			} else if (pc > ix->aranges_end) {
				break;
			}
		}
		return &ix->aruns[idx];
	}
	return NULL;
}

static struct ix_unit *find_unit(struct opal_sym_index *ix, Dwarf_Addr pc)
{
	const struct ix_arun *run = arun_at(ix, pc);
	struct ix_unit *u = run ? unit_at(ix, run->cu_off) : NULL;
	if (u && (!u->has_pc_attrs ||
		  ix_spans_first_id(ix->own + u->ranges, u->n_ranges, pc) != IX_NONE))
		return u;
	size_t i = spans_upper(ix->all, ix->n_all, pc);
	for (size_t k = 0; i > 0 && k < CU_BACKSCAN; i--, k++) {
		const struct ix_span *r = &ix->all[i - 1];
		if (pc >= r->lo && pc < r->hi)
			return &ix->units[r->id];
	}
	return NULL;
}

size_t opal_sym_index_libdw_rows(const struct opal_sym_index *ix)
{
	pthread_mutex_lock(&pool.lock);
	size_t n = ix->libdw_rows;
	pthread_mutex_unlock(&pool.lock);
	return n;
}

void opal_sym_index_free(struct opal_sym_index *ix)
{
	if (!ix)
		return;
	pthread_mutex_lock(&pool.lock);
	for (size_t i = 0; i < ix->n_units; i++) {
		struct ix_cu *cu = ix->units[i].cu;
		if (cu) {
			ix_pool_remove(&cu->entry);
			ix_cu_free(cu);
		}
	}
	for (size_t i = 0; i < ix->scopes.cap; i++) {
		struct ix_scopes *s = ix->scopes.vals[i];
		if (ix->scopes.keys[i] && s) {
			ix_pool_remove((struct ix_entry *)s);
			ix_scopes_free(s);
		}
	}
	pool.stats.table_bytes -= ix->base_bytes;
	pthread_mutex_unlock(&pool.lock);
	ix_ptrmap_free(&ix->scopes);
	free(ix->units);
	free(ix->own);
	free(ix->all);
	free(ix->aruns);
	free(ix);
}

/* ---- lookups ------------------------------------------------------------------ */

static const char no_path[] = "";   /* paths[i] computed: no path */

/* sym_dwfl.c's source_path, kept in the unit's strings. */
static const char *file_path(struct ix_cu *cu, uint32_t idx, bool *enomem)
{
	if (idx >= cu->n_files)
		return NULL;
	if (cu->paths[idx])
		return cu->paths[idx] == no_path ? NULL : cu->paths[idx];
	const char *src = dwarf_filesrc(cu->files, idx, NULL, NULL);
	char *joined = NULL;
	if (src && *src && strcmp(src, "???") != 0) {
		Dwarf_Attribute a;
		const char *dir = src[0] == '/' ? NULL :
			dwarf_formstring(dwarf_attr(&cu->cudie, DW_AT_comp_dir, &a));
		if (!dir || !*dir) {
			joined = opal_sym_strdup(src);
		} else {
			size_t dl = strnlen(dir, OPAL_SYM_MAX_NAME);
			size_t sl = strnlen(src, OPAL_SYM_MAX_NAME);
			char *buf = malloc(dl + sl + 2);
			if (buf) {
				memcpy(buf, dir, dl);
				buf[dl] = '/';
				memcpy(buf + dl + 1, src, sl);
				buf[dl + 1 + sl] = '\0';
				joined = opal_sym_strdup(buf);
				free(buf);
			}
		}
		if (!joined) {
			*enomem = true;
			return NULL;
		}
	}
	const char *kept = no_path;
	if (joined) {
		kept = opal_arena_memdup0(&cu->strings, joined, strlen(joined));
		free(joined);
		if (!kept) {
			*enomem = true;
			return NULL;
		}
	}
	cu->paths[idx] = kept;
	return kept == no_path ? NULL : kept;
}

/* sym_dwfl.c's line_at: the row at or below pc unless it ends a sequence
 * or names no line. Returns its index, or SIZE_MAX. */
static size_t row_at(const struct ix_cu *cu, Dwarf_Addr pc)
{
	if (cu->n_rows == 0 || pc < cu->row_base)
		return SIZE_MAX;   /* before all rows */
	if (pc - cu->row_base > UINT32_MAX)
		return SIZE_MAX;   /* past the last row, which ends a sequence */
	uint32_t key = (uint32_t)(pc - cu->row_base);
	size_t lo = 0, hi = cu->n_rows;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cu->row_addr[mid] <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || lo == cu->n_rows)
		return SIZE_MAX;
	lo--;
	if (cu->row_file[lo] == IX_ROW_END || cu->row_line[lo] <= 0)
		return SIZE_MAX;
	return lo;
}

/* The source path of row `i`. */
static const char *row_path(struct ix_cu *cu, size_t i, bool *enomem)
{
	uint16_t f = cu->row_file[i];
	return f == IX_ROW_NO_FILE ? NULL : file_path(cu, f, enomem);
}

/* dwarf_getscopes gives up when the innermost inlined instance on the
 * path has no resolvable DW_AT_abstract_origin. (It also gives up when its
 * second walk, over the origin's unit, does not reach the origin DIE; that
 * is not replicated: compilers put origins where that walk goes.) */
static bool origin_bad(struct ix_cu *cu, struct ix_node *n)
{
	if (!(n->flags & IX_NODE_ORIGIN_DONE)) {
		Dwarf_Die die, origin;
		Dwarf_Attribute a;
		bool bad = !ix_node_die(cu, n, &die) ||
			   !dwarf_formref_die(dwarf_attr(&die, DW_AT_abstract_origin, &a), &origin);
		n->flags |= IX_NODE_ORIGIN_DONE | (bad ? IX_NODE_ORIGIN_BAD : 0);
	}
	return n->flags & IX_NODE_ORIGIN_BAD;
}

static void read_call(struct ix_cu *cu, struct ix_node *n)
{
	if (n->flags & IX_NODE_CALL_DONE)
		return;
	Dwarf_Die die;
	if (ix_node_die(cu, n, &die)) {
		Dwarf_Attribute a;
		Dwarf_Word v;
		if (dwarf_formudata(dwarf_attr(&die, DW_AT_call_line, &a), &v) == 0 && v > 0 &&
		    v <= UINT32_MAX)
			n->call_line = (uint32_t)v;
		if (dwarf_formudata(dwarf_attr(&die, DW_AT_call_file, &a), &v) == 0 &&
		    v < cu->n_files)
			n->call_file = (uint32_t)v;
	}
	n->flags |= IX_NODE_CALL_DONE;
}

static char *dup_or_null(const char *s, bool *enomem)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*enomem = true;
	return d;
}

/* The inline chain at pc, as sym_dwfl.c's dwarf_frames builds it from
 * dwarf_getscopes + dwarf_getscopes_die. Returns 0 (out->n may be 0) or
 * -ENOMEM. */
static int cu_frames(struct ix_cu *cu, Dwarf_Addr pc, struct opal_sym_result *out)
{
	uint32_t inner = IX_NONE, inl = IX_NONE;
	const struct ix_span *kids = cu->kids + cu->top;
	uint32_t n_kids = cu->n_top;
	/* Child ids exceed their parent's: the descent ends. */
	for (;;) {
		uint32_t k = ix_spans_first_id(kids, n_kids, pc);
		if (k == IX_NONE)
			break;
		inner = k;
		if (cu->nodes[k].kind == IX_KIND_INLINED)
			inl = k;
		kids = cu->kids + cu->nodes[k].kids;
		n_kids = cu->nodes[k].n_kids;
	}
	if (inner == IX_NONE || (inl != IX_NONE && origin_bad(cu, &cu->nodes[inl])))
		return 0;

	size_t n = 0;
	for (uint32_t i = inner; i != IX_NONE && n < OPAL_SYM_MAX_FRAMES; i = cu->nodes[i].parent) {
		uint8_t kind = cu->nodes[i].kind;
		if (kind == IX_KIND_OTHER)
			continue;
		n++;
		if (kind != IX_KIND_INLINED)
			break;
	}
	if (n == 0)
		return 0;
	out->frames = calloc(n, sizeof(*out->frames));
	if (!out->frames)
		return -ENOMEM;
	bool enomem = false;
	struct ix_node *callee = NULL;
	for (uint32_t i = inner; i != IX_NONE && out->n < n; i = cu->nodes[i].parent) {
		struct ix_node *node = &cu->nodes[i];
		if (node->kind == IX_KIND_OTHER)
			continue;
		struct opal_sym_frame *fr = &out->frames[out->n++];
		fr->inlined = node->kind == IX_KIND_INLINED;
		fr->function = dup_or_null(ix_node_name(cu, node, &enomem), &enomem);
		if (!callee) {
			size_t row = row_at(cu, pc);
			if (row != SIZE_MAX) {
				fr->line = (uint32_t)cu->row_line[row];
				fr->file = dup_or_null(row_path(cu, row, &enomem), &enomem);
			}
		} else {
			read_call(cu, callee);
			fr->line = callee->call_line;
			if (fr->line && callee->call_file != IX_NONE)
				fr->file = dup_or_null(file_path(cu, callee->call_file, &enomem),
						       &enomem);
		}
		if (enomem) {
			opal_sym_result_free(out);
			return -ENOMEM;
		}
		callee = node;
	}
	return 0;
}

/* The built index of `u`, building it now; NULL when refused (*err 0)
 * or on ENOMEM (*err -ENOMEM). */
static struct ix_cu *unit_index(struct opal_sym_index *ix, struct ix_unit *u, Dwarf_Die *cudie,
				int *err)
{
	*err = 0;
	if (u->cu) {
		ix_pool_touch(&u->cu->entry);
		return u->cu;
	}
	if (u->refused)
		return NULL;
	bool enomem;
	struct ix_cu *cu = ix_cu_build(ix, u, cudie, &enomem);
	if (!cu && enomem) {
		*err = -ENOMEM;
		return NULL;
	}
	if (cu && !ix_pool_charge(&cu->entry, cu->charged)) {
		ix_cu_free(cu);
		cu = NULL;
	}
	if (!cu) {
		u->refused = true;
		pool.stats.units_refused++;
		return NULL;
	}
	pool.stats.units_built++;
	u->cu = cu;
	if (!u->lines_parsed) {
		u->lines_parsed = true;
		ix->libdw_rows += cu->n_rows;
	}
	return cu;
}

/* Charges what the lookup added to the unit's strings; a unit that no
 * longer fits in the whole budget is dropped and refused. */
static void recharge(struct ix_cu *cu)
{
	size_t now = cu->charged + cu->strings.used + ix_ptrmap_bytes(&cu->demangled) +
		     ix_ptrmap_bytes(&cu->by_origin);
	if (now <= cu->entry.bytes)
		return;
	if (!ix_pool_charge(&cu->entry, now - cu->entry.bytes)) {
		struct ix_unit *u = cu->unit;
		ix_pool_remove(&cu->entry);
		ix_cu_free(cu);
		u->cu = NULL;
		u->refused = true;
		pool.stats.units_refused++;
	}
}

int opal_sym_index_lookup(struct opal_sym_index *ix, Dwarf_Addr pc, struct opal_sym_result *out,
			  struct opal_sym_index_hit *hit)
{
	memset(out, 0, sizeof(*out));
	memset(hit, 0, sizeof(*hit));
	pthread_mutex_lock(&pool.lock);
	int r = 0;
	if (!ix->units_built) {
		r = build_units(ix);
		if (r < 0)
			goto out;
		pool.stats.table_bytes += ix->base_bytes;
	}
	struct ix_unit *u = find_unit(ix, pc);
	if (!u) {
		r = OPAL_SYM_INDEX_NO_UNIT;
		goto out;
	}
	hit->cudie = u->cudie;
	struct ix_cu *cu = unit_index(ix, u, &hit->cudie, &r);
	if (!cu) {
		if (r == 0)
			r = OPAL_SYM_INDEX_REFUSED;
		goto out;
	}
	cu->entry.pins++;
	r = cu_frames(cu, pc, out);
	if (r == 0 && out->n > 0) {
		r = OPAL_SYM_INDEX_FRAMES;
	} else if (r == 0) {
		r = OPAL_SYM_INDEX_NO_SCOPE;
		size_t row = row_at(cu, pc);
		if (row != SIZE_MAX) {
			bool enomem = false;
			hit->line = (uint32_t)cu->row_line[row];
			hit->file = dup_or_null(row_path(cu, row, &enomem), &enomem);
			if (enomem) {
				hit->line = 0;
				r = -ENOMEM;
			}
		}
	}
	cu->entry.pins--;
	recharge(cu);
out:
	pthread_mutex_unlock(&pool.lock);
	return r;
}
