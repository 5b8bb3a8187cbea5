/* libdwfl sessions for native symbolization (sym_dwfl.h).
 *
 * Addresses: the file is reported with dwfl_report_elf(base 0,
 * add_p_vaddr) rather than dwfl_report_offline, because the offline
 * reporter places ET_DYN files at a made-up base address; with base 0 the
 * module bias is 0 for ET_EXEC, PIE and shared libraries alike, so module
 * addresses are the ELF virtual addresses the collector sends. The bias is
 * still read back and applied, so a non-zero one could not go unnoticed.
 *
 * Inline chains follow eu-addr2line -i: dwarf_getscopes finds the
 * innermost scope at the PC, dwarf_getscopes_die lists its physical
 * parents, and every DW_TAG_inlined_subroutine in that list contributes a
 * frame whose caller line is its DW_AT_call_file/DW_AT_call_line. Both
 * walk the unit's DIEs per call (~100 us per address on libc), so
 * lookups go through an address index built once per unit (sym_index.h)
 * that gives the same answers; this per-address path stays for units the
 * index refuses and as the reference the index is tested against.
 *
 * Quality ranking (enum opal_debug_quality): DWARF_INLINE when a bounded
 * walk of the DWARF finds inlined subroutines or function definitions with
 * scope children (compiler output with -g or -g1), DWARF_LINES when it
 * finds line tables but no such scopes (e.g. the assembler's DWARF), else
 * SYMTAB when a full symbol table exists (.symtab in the file or its debug
 * file), DYNSYM for .dynsym only, NONE otherwise; a Go binary ranks as its
 * .gopclntab gives (sym_go.h: DWARF_INLINE with inline trees) and is
 * symbolized from it, DWARF and symbols serving what it does not cover. */
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "base/sym_result.h"
#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_sources.h"
#include "symbolize/demangle.h"
#include "symbolize/dwarf_name.h"
#include "symbolize/sym_dwfl.h"
#include "symbolize/sym_go.h"
#include "symbolize/sym_index.h"
#include "symbolize/sym_symtab.h"
#include "symbolize/sym_tombstone.h"

/* Bounds on the work a hostile or huge DWARF file can cause. */
#define SCAN_MAX_UNITS  4096        /* units walked to rank quality */
#define SCAN_MAX_DIES   200000      /* DIEs walked to rank quality */
#define SCAN_MAX_DEPTH  32          /* DIE nesting followed while ranking */
#define CU_INDEX_MAX_UNITS  (1u << 20)
#define CU_INDEX_MAX_RANGES (1u << 22)
#define CU_INDEX_BACKSCAN   64      /* overlapping ranges checked per lookup */

/* One address range of a compile unit, for files without .debug_aranges
 * (clang, rustc), where dwfl_module_addrdie in elfutils 0.188 finds no
 * CU. */
struct cu_range {
	Dwarf_Addr lo, hi;   /* [lo, hi) in DWARF addresses */
	Dwarf_Off cu_off;    /* offset of the CU DIE */
};

struct opal_dwfl_file {
	Dwfl *dwfl;
	Dwfl_Module *mod;          /* NULL when the file is unusable */
	GElf_Addr main_bias;       /* module address = ELF vaddr + main_bias */
	Dwarf *dwarf;              /* NULL without usable DWARF */
	Dwarf_Addr dwarf_bias;     /* DWARF address = module address - dwarf_bias */
	bool zero_is_code;         /* address 0 holds code (sym_tombstone.h) */
	enum opal_debug_quality quality;
	bool refused;              /* refused before decompression (debuginfo_bound.h) */
	char reason[240];
	size_t section_bytes;      /* DWARF sections in memory (opal_dwfl_memory) */
	struct opal_sym_index *index;   /* NULL until the first DWARF lookup */
	struct opal_symtab *symtab;     /* NULL until the first symbol lookup */
	bool symtab_tried;
	bool cu_index_built;            /* per-address path's unit table */
	struct cu_range *cu_ranges;
	size_t n_cu_ranges;
	struct opal_gopclntab *go;      /* Go's own table, NULL when not Go */
};

/* Only find_elf could read it, and find_elf is never called: every file
 * is reported with its descriptor. */
static char *debuginfo_path;

/* Separate debug info comes only from opal's sources, in opal's order
 * (debuginfo_sources.h): libdwfl's standard finder would search paths next to
 * the binary and ask debuginfod by itself. */
static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = opal_sym_sources_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

/* True when the unit holds an inlined subroutine or a function definition
 * with children (parameters, locals, blocks), which compilers emit and
 * assemblers do not. `*budget` counts down the DIEs visited across
 * units. */
static bool unit_has_scopes(Dwarf_Die *cudie, size_t *budget)
{
	Dwarf_Die stack[SCAN_MAX_DEPTH];
	size_t depth = 0;

	if (dwarf_child(cudie, &stack[0]) != 0)
		return false;
	depth = 1;
	while (depth > 0 && *budget > 0) {
		Dwarf_Die *d = &stack[depth - 1];
		Dwarf_Attribute a;
		(*budget)--;
		int tag = dwarf_tag(d);
		if (tag == DW_TAG_inlined_subroutine)
			return true;
		if (tag == DW_TAG_subprogram && dwarf_haschildren(d) > 0 &&
		    !dwarf_attr(d, DW_AT_declaration, &a))
			return true;
		if (depth < SCAN_MAX_DEPTH && dwarf_haschildren(d) > 0 &&
		    dwarf_child(d, &stack[depth]) == 0) {
			depth++;
			continue;
		}
		while (depth > 0) {
			Dwarf_Die sib;
			if (dwarf_siblingof(&stack[depth - 1], &sib) == 0) {
				stack[depth - 1] = sib;
				break;
			}
			depth--;
		}
	}
	return false;
}

static enum opal_debug_quality rank_dwarf(Dwarf *dw)
{
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie, subdie;
	size_t units = 0, budget = SCAN_MAX_DIES;
	bool lines = false;

	while (units++ < SCAN_MAX_UNITS && budget > 0 &&
	       dwarf_get_units(dw, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
		Dwarf_Attribute a;
		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		if (dwarf_attr(&cudie, DW_AT_stmt_list, &a))
			lines = true;
		if (unit_has_scopes(&cudie, &budget))
			return OPAL_DEBUG_DWARF_INLINE;
	}
	return lines ? OPAL_DEBUG_DWARF_LINES : OPAL_DEBUG_NONE;
}

static enum opal_debug_quality rank_symbols(Dwfl_Module *mod, const char **what)
{
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	bool has_symtab = false;
	size_t n_dynsym = 0;
	Elf_Scn *scn = NULL;

	while (elf && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0)
			continue;
		if (sh.sh_type == SHT_SYMTAB && sh.sh_size / sh.sh_entsize > 1)
			has_symtab = true;
		else if (sh.sh_type == SHT_DYNSYM)
			n_dynsym = sh.sh_size / sh.sh_entsize;
	}
	int n = dwfl_module_getsymtab(mod);
	if (n <= 1) {
		*what = "no symbols";
		return OPAL_DEBUG_NONE;
	}
	/* More symbols than .dynsym holds means libdwfl found a full table
	 * elsewhere (a debug file, or MiniDebugInfo's .gnu_debugdata). */
	if (has_symtab || (size_t)n > n_dynsym) {
		*what = ".symtab without DWARF";
		return OPAL_DEBUG_SYMTAB;
	}
	*what = ".dynsym only";
	return OPAL_DEBUG_DYNSYM;
}

/* In-memory size of the DWARF sections of `dw`'s ELF: compressed ones
 * are held decompressed, the others are mapped. */
static size_t dwarf_section_bytes(Dwarf *dw)
{
	Elf *elf = dwarf_getelf(dw);
	size_t shstrndx, total = 0;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *n;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(n = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    (strncmp(n, ".debug_", 7) != 0 && strncmp(n, ".zdebug_", 8) != 0))
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
			total += ch.ch_size;
		else
			total += sh.sh_size;
	}
	return total;
}

static void set_unusable(struct opal_dwfl_file *f, const char *why)
{
	f->mod = NULL;
	f->quality = OPAL_DEBUG_NONE;
	snprintf(f->reason, sizeof(f->reason), "%s", why);
}

int opal_dwfl_open_refused(const char *why, struct opal_dwfl_file **out)
{
	struct opal_dwfl_file *f = calloc(1, sizeof(*f));
	if (!(*out = f))
		return -ENOMEM;
	snprintf(f->reason, sizeof(f->reason), "%s", why);
	f->quality = OPAL_DEBUG_NONE;
	f->refused = true;
	return 0;
}

int opal_dwfl_open(int fd, const char *name, struct opal_dwfl_file **out)
{
	*out = NULL;
	/* Before libelf or libdw sees a byte: the file's declared
	 * decompressed sizes against the budget, and zstd sections (which
	 * elfutils 0.188 cannot read) decompressed by opal into a memfd. */
	struct opal_decomp_scan scan;
	int dfd = opal_decomp_open(fd, &scan);
	if (dfd == -EFBIG && scan.refused) {
		char why[sizeof(scan.why) + 40];
		snprintf(why, sizeof(why), "refused before decompression: %s", scan.why);
		return opal_dwfl_open_refused(why, out);
	}
	if (dfd < 0)
		return dfd;
	struct opal_dwfl_file *f = calloc(1, sizeof(*f));
	if (f && !(f->dwfl = dwfl_begin(&offline_callbacks))) {
		free(f);
		f = NULL;
	}
	if (!f) {
		close(dfd);
		return -ENOMEM;
	}
	const char *file_name = name && *name ? name : "[unknown]";
	Dwfl_Module *mod = dwfl_report_elf(f->dwfl, file_name, file_name, dfd, 0, true);
	if (!mod) {
		/* dwfl_report_elf consumes the descriptor only on success. */
		close(dfd);
		char why[sizeof(f->reason)];
		snprintf(why, sizeof(why), "not usable ELF: %s", dwfl_errmsg(-1));
		set_unusable(f, why);
		*out = f;
		return 0;
	}
	dwfl_report_end(f->dwfl, NULL, NULL);
	f->mod = mod;

	GElf_Ehdr eh;
	Elf *elf = dwfl_module_getelf(mod, &f->main_bias);
	if (!elf || !gelf_getehdr(elf, &eh)) {
		set_unusable(f, "no ELF header");
		*out = f;
		return 0;
	}
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
		char why[64];
		snprintf(why, sizeof(why), "unsupported ELF type %u", (unsigned)eh.e_type);
		set_unusable(f, why);
		*out = f;
		return 0;
	}

	f->zero_is_code = opal_elf_zero_is_code(elf);
	f->dwarf = dwfl_module_getdwarf(mod, &f->dwarf_bias);
	if (f->dwarf) {
		f->section_bytes = dwarf_section_bytes(f->dwarf);
		f->quality = rank_dwarf(f->dwarf);
		if (f->quality == OPAL_DEBUG_DWARF_INLINE)
			snprintf(f->reason, sizeof(f->reason), "dwarf with inline scopes");
		else if (f->quality == OPAL_DEBUG_DWARF_LINES)
			snprintf(f->reason, sizeof(f->reason), "dwarf line tables only");
		else
			f->dwarf = NULL;   /* DWARF without units or lines: useless */
	}
	/* A Go binary is named from its own table whether or not it has DWARF:
	 * stripped and unstripped builds then give the same names, the ones Go
	 * prints (docs/go.md: where Go's DWARF differs) */
	enum opal_debug_quality go_quality = OPAL_DEBUG_NONE;
	if ((f->go = opal_sym_go_open(elf, &go_quality))) {
		f->quality = go_quality;
		snprintf(f->reason, sizeof(f->reason), "go pclntab%s",
			 go_quality == OPAL_DEBUG_DWARF_INLINE ? " with inline trees" : "");
	} else if (!f->dwarf) {
		const char *what;
		f->quality = rank_symbols(mod, &what);
		snprintf(f->reason, sizeof(f->reason), "%s", what);
	}
	*out = f;
	return 0;
}

void opal_dwfl_close(struct opal_dwfl_file *f)
{
	if (!f)
		return;
	opal_sym_index_free(f->index);   /* refers to the Dwfl's DWARF */
	opal_symtab_free(f->symtab);
	opal_gopclntab_free(f->go);   /* refers to the Dwfl's ELF */
	dwfl_end(f->dwfl);   /* closes the duplicated descriptor */
	free(f->cu_ranges);
	free(f);
}

/* elfutils 0.188's struct Dwarf_Line, rounded: libdw's cost of a row. */
#define LIBDW_LINE_BYTES 56

size_t opal_dwfl_memory(const struct opal_dwfl_file *f)
{
	size_t rows = f->index ? opal_sym_index_libdw_rows(f->index) : 0;
	return f->section_bytes + rows * LIBDW_LINE_BYTES;
}

bool opal_dwfl_refused(const struct opal_dwfl_file *f)
{
	return f->refused;
}

enum opal_debug_quality opal_dwfl_quality(const struct opal_dwfl_file *f, const char **reason)
{
	if (reason)
		*reason = f->reason;
	return f->quality;
}

int opal_dwfl_rank(int fd, enum opal_debug_quality *q, char *why, size_t why_len)
{
	struct opal_dwfl_file *f;
	const char *reason;
	int err = opal_dwfl_open(fd, "[upload]", &f);

	if (err < 0)
		return err;
	*q = opal_dwfl_quality(f, &reason);
	snprintf(why, why_len, "%s", reason);
	opal_dwfl_close(f);
	return 0;
}

static int cmp_cu_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return (x->hi > y->hi) - (x->hi < y->hi);
}

/* Builds the sorted CU range index once per session. Failure (ENOMEM)
 * leaves an empty index: lookups then fall back to symbols. */
static void build_cu_index(struct opal_dwfl_file *f)
{
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie, subdie;
	size_t units = 0, cap = 0;

	f->cu_index_built = true;
	while (units++ < CU_INDEX_MAX_UNITS &&
	       dwarf_get_units(f->dwarf, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;
		while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
			if (hi <= lo || opal_dwarf_dead(lo, f->zero_is_code))
				continue;
			if (f->n_cu_ranges >= CU_INDEX_MAX_RANGES)
				goto done;
			if (f->n_cu_ranges == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct cu_range *r = realloc(f->cu_ranges, ncap * sizeof(*r));
				if (!r)
					goto done;
				f->cu_ranges = r;
				cap = ncap;
			}
			f->cu_ranges[f->n_cu_ranges++] =
				(struct cu_range){ lo, hi, dwarf_dieoffset(&cudie) };
		}
	}
done:
	qsort(f->cu_ranges, f->n_cu_ranges, sizeof(*f->cu_ranges), cmp_cu_range);
}

/* Whether a range of `die` that is no tombstone (sym_tombstone.h) holds
 * `pc`: dwarf_haspc, which takes tombstones for code. */
static bool live_pc(const struct opal_dwfl_file *f, Dwarf_Die *die, Dwarf_Addr pc)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0)
		if (pc >= lo && pc < hi)
			return !opal_dwarf_dead(lo, f->zero_is_code);
	return false;
}

/* Finds the CU DIE covering module address `addr`; sets *pc to the DWARF
 * address to use inside it. */
static bool find_cu(struct opal_dwfl_file *f, Dwarf_Addr addr, Dwarf_Die *cudie, Dwarf_Addr *pc)
{
	Dwarf_Addr bias;
	Dwarf_Die *d = dwfl_module_addrdie(f->mod, addr, &bias);
	/* libdwfl answers with the CU of the closest .debug_aranges entry
	 * below the address, even past that entry's end (e.g. for _start
	 * after main's CU): check the CU's own ranges when it has any. */
	if (d && (live_pc(f, d, addr - bias) ||
		  (!dwarf_hasattr(d, DW_AT_low_pc) && !dwarf_hasattr(d, DW_AT_ranges)))) {
		*cudie = *d;
		*pc = addr - bias;
		return true;
	}
	if (!f->cu_index_built)
		build_cu_index(f);
	Dwarf_Addr p = addr - f->dwarf_bias;
	size_t lo = 0, hi = f->n_cu_ranges;
	while (lo < hi) {   /* first range with lo > p */
		size_t mid = lo + (hi - lo) / 2;
		if (f->cu_ranges[mid].lo <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < CU_INDEX_BACKSCAN; i--, k++) {
		const struct cu_range *r = &f->cu_ranges[i - 1];
		if (p >= r->lo && p < r->hi && dwarf_offdie(f->dwarf, r->cu_off, cudie)) {
			*pc = p;
			return true;
		}
	}
	return false;
}

/* "ns::Class::name" for a C++/Rust function DIE that has no linkage name
 * (GCC omits it for functions with internal linkage). */
static char *qualified_name(Dwarf_Die *die, const char *name)
{
	Dwarf_Die decl;
	const char *parts[OPAL_DWARF_MAX_SCOPES];
	opal_dwarf_declaration(die, &decl);
	size_t np = opal_dwarf_scope_names(&decl, parts);
	return opal_dwarf_qualify(parts, np, name);
}

/* Demangled linkage name, else the plain name (qualified for C++/Rust),
 * following abstract origins and specifications (an inlined instance
 * carries neither itself). */
static char *die_function_name(Dwarf_Die *die, bool scoped)
{
	static const unsigned int linkage[] = { DW_AT_linkage_name, DW_AT_MIPS_linkage_name };
	Dwarf_Attribute a;
	for (size_t i = 0; i < sizeof(linkage) / sizeof(linkage[0]); i++) {
		const char *s = dwarf_formstring(dwarf_attr_integrate(die, linkage[i], &a));
		if (s && *s)
			return opal_demangle(s);
	}
	const char *s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	if (!s || !*s)
		return NULL;
	if (scoped && strnlen(s, OPAL_SYM_MAX_NAME + 1) <= OPAL_SYM_MAX_NAME)
		return qualified_name(die, s);
	return opal_sym_strdup(s);
}

/* Joins a relative source path with the CU's DW_AT_comp_dir, so that
 * every frame names its file the same way (eu-addr2line -A). */
static char *source_path(Dwarf_Die *cudie, const char *src)
{
	if (!src || !*src || strcmp(src, "???") == 0)
		return NULL;
	Dwarf_Attribute a;
	const char *dir = src[0] == '/' ? NULL :
		dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &a));
	if (!dir || !*dir)
		return opal_sym_strdup(src);
	size_t dl = strnlen(dir, OPAL_SYM_MAX_NAME), sl = strnlen(src, OPAL_SYM_MAX_NAME);
	char *buf = malloc(dl + sl + 2);
	if (!buf)
		return NULL;
	memcpy(buf, dir, dl);
	buf[dl] = '/';
	memcpy(buf + dl + 1, src, sl);
	buf[dl + 1 + sl] = '\0';
	char *out = opal_sym_strdup(buf);
	free(buf);
	return out;
}

/* The line table row holding `pc`: the last row at or below it, provided
 * that row does not end a sequence (libdw sorts rows by address, with an
 * end_sequence row before a row starting at the same address). Unlike
 * dwarf_getsrc_die this never lends the last row of one sequence to the
 * padding or foreign code that follows it. */
static bool line_at(Dwarf_Die *cudie, Dwarf_Addr pc, const char **src, int *lineno)
{
	Dwarf_Lines *lines;
	size_t n, lo = 0, hi;
	if (dwarf_getsrclines(cudie, &lines, &n) != 0 || n == 0)
		return false;
	hi = n;
	while (lo < hi) {   /* first row above pc */
		size_t mid = lo + (hi - lo) / 2;
		Dwarf_Addr a;
		if (dwarf_lineaddr(dwarf_onesrcline(lines, mid), &a) != 0)
			return false;
		if (a <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || lo == n)   /* before all rows, or past the last end */
		return false;
	Dwarf_Line *l = dwarf_onesrcline(lines, lo - 1);
	bool end;
	if (!l || dwarf_lineendsequence(l, &end) != 0 || end)
		return false;
	if (dwarf_lineno(l, lineno) != 0 || *lineno <= 0)
		return false;
	*src = dwarf_linesrc(l, NULL, NULL);
	return true;
}

static bool is_function_scope(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_entry_point;
}

/* Fills `out` from the DWARF scopes at `pc` of `cudie`; n stays 0 when no
 * function scope holds the PC, or only the tombstoned one of discarded
 * code (its nested scopes are tombstoned alike). Returns 0 or -ENOMEM. */
static int dwarf_frames(const struct opal_dwfl_file *f, Dwarf_Die *cudie, Dwarf_Addr pc,
			struct opal_sym_result *out)
{
	Dwarf_Die *scopes = NULL, *chain = NULL;
	int ns = dwarf_getscopes(cudie, pc, &scopes);
	if (ns <= 0 || !live_pc(f, &scopes[0], pc)) {
		free(scopes);
		return 0;
	}
	Dwarf_Die innermost = scopes[0];
	free(scopes);
	int nc = dwarf_getscopes_die(&innermost, &chain);
	if (nc <= 0) {
		free(chain);
		return 0;
	}

	bool scoped = opal_dwarf_scoped_language(cudie);
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
		files = NULL;

	out->frames = calloc(OPAL_SYM_MAX_FRAMES, sizeof(*out->frames));
	if (!out->frames) {
		free(chain);
		return -ENOMEM;
	}
	Dwarf_Die *callee = NULL;   /* previous function scope (inlined) */
	for (int i = 0; i < nc && out->n < OPAL_SYM_MAX_FRAMES; i++) {
		Dwarf_Die *d = &chain[i];
		int tag = dwarf_tag(d);
		if (!is_function_scope(tag))
			continue;
		struct opal_sym_frame *fr = &out->frames[out->n++];
		fr->inlined = tag == DW_TAG_inlined_subroutine;
		fr->function = die_function_name(d, scoped);
		if (!callee) {
			const char *src;
			int lineno;
			if (line_at(cudie, pc, &src, &lineno)) {
				fr->line = (uint32_t)lineno;
				fr->file = source_path(cudie, src);
			}
		} else {
			Dwarf_Attribute a;
			Dwarf_Word cfile, cline;
			if (dwarf_formudata(dwarf_attr(callee, DW_AT_call_line, &a), &cline) == 0 &&
			    cline > 0 && cline <= UINT32_MAX)
				fr->line = (uint32_t)cline;
			if (files && fr->line &&
			    dwarf_formudata(dwarf_attr(callee, DW_AT_call_file, &a), &cfile) == 0 &&
			    cfile < nfiles)
				fr->file = source_path(cudie, dwarf_filesrc(files, cfile, NULL, NULL));
		}
		if (tag != DW_TAG_inlined_subroutine)
			break;   /* the real function: outer scopes are not callers */
		callee = d;
	}
	free(chain);
	if (out->n == 0) {
		free(out->frames);
		out->frames = NULL;
	} else if (out->n < OPAL_SYM_MAX_FRAMES) {
		struct opal_sym_frame *shrunk = realloc(out->frames, out->n * sizeof(*shrunk));
		if (shrunk)
			out->frames = shrunk;
	}
	return 0;
}

/* The function symbol of the ELF symbol table that names `addr`, only when
 * the address lies inside it: a symbol's name never covers the gap after
 * its end; a sizeless symbol (assembly such as ld.so's _start) names the
 * bytes after it that libdwfl gives it, up to the next symbol in its
 * section. With `indexed`, the session's symbol index (sym_symtab.h)
 * answers instead of libdwfl's scan of the whole table, when the table
 * can be indexed. Returns 0 with *name (owned by libdwfl; NULL: none) and
 * *sym, or -ENOMEM. */
static int symbol_at(struct opal_dwfl_file *f, Dwarf_Addr addr, bool indexed, const char **name,
		     GElf_Sym *sym)
{
	GElf_Off off;
	GElf_Word shndx;
	Elf *elf;
	Dwarf_Addr bias;
	bool ask_libdwfl = true;
	*name = NULL;
	if (indexed && !f->symtab_tried) {
		f->symtab_tried = true;
		if (opal_symtab_new(f->mod, &f->symtab) == -ENOMEM)
			return -ENOMEM;
	}
	const char *n = NULL;
	if (indexed && f->symtab)
		n = opal_symtab_lookup(f->symtab, addr, sym, &off, &ask_libdwfl);
	if (ask_libdwfl)
		n = dwfl_module_addrinfo(f->mod, addr, &off, sym, &shndx, &elf, &bias);
	if (!n || !*n)
		return 0;
	int type = GELF_ST_TYPE(sym->st_info);
	if ((type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE) &&
	    (sym->st_size == 0 || off < sym->st_size))
		*name = n;
	return 0;
}

/* One frame from the ELF symbol table (symbol_at). */
static int symbol_frame(struct opal_dwfl_file *f, Dwarf_Addr addr, bool indexed,
			struct opal_sym_result *out)
{
	const char *name;
	GElf_Sym sym;
	int r = symbol_at(f, addr, indexed, &name, &sym);
	if (r < 0 || !name)
		return r;
	out->frames = calloc(1, sizeof(*out->frames));
	if (!out->frames)
		return -ENOMEM;
	out->frames[0].function = opal_demangle(name);
	if (!out->frames[0].function) {
		free(out->frames);
		out->frames = NULL;
		return -ENOMEM;
	}
	out->n = 1;
	return 0;
}

/* One name form for the function a DWARF chain ends in (docs/formats.md,
 * "Function names"): in C++ and Rust units, the demangled name of the
 * sized ELF symbol holding `addr`, when there is one: the linkage name as
 * c++filt prints it, with parameters and GCC's clone suffixes
 * ("[clone .isra.0]", ".constprop.0", ".cold"), which DWARF lacks (a
 * clone's DIE names its origin; internal-linkage functions and lambdas
 * often have no DW_AT_linkage_name). That symbol covers the same bytes as
 * the function's DIE. In C the DWARF name stays (a symbol may be an
 * alias, and clone suffixes are not part of C names), unless DWARF gave
 * none. Inlined frames have no symbol of their own and keep the DWARF
 * name. Returns 0 or -ENOMEM. */
static int name_physical_frame(struct opal_dwfl_file *f, Dwarf_Addr addr, bool indexed,
			       Dwarf_Die *cudie, struct opal_sym_result *out)
{
	struct opal_sym_frame *fr = &out->frames[out->n - 1];
	if (fr->inlined || (fr->function && !opal_dwarf_scoped_language(cudie)))
		return 0;
	const char *name;
	GElf_Sym sym;
	int r = symbol_at(f, addr, indexed, &name, &sym);
	if (r < 0 || !name || sym.st_size == 0)
		return r;
	char *d = opal_demangle(name);
	if (!d)
		return -ENOMEM;
	free(fr->function);
	fr->function = d;
	return 0;
}

/* The symbol frame of `addr`, with the source line of `cudie` at `pc`
 * when given: code with line rows but no function DIE (e.g. an alias or
 * a function whose DIE lacks ranges) keeps its line. */
static int symbol_with_line(struct opal_dwfl_file *f, Dwarf_Addr addr, bool indexed,
			    Dwarf_Die *cudie, Dwarf_Addr pc, struct opal_sym_result *out)
{
	int r = symbol_frame(f, addr, indexed, out);
	if (r == 0 && out->n == 1 && cudie) {
		const char *src;
		int lineno;
		if (line_at(cudie, pc, &src, &lineno)) {
			out->frames[0].line = (uint32_t)lineno;
			out->frames[0].file = source_path(cudie, src);
		}
	}
	return r;
}

/* DWARF frames of `pc` in `cudie` from libdw's scope walk, else the
 * symbol frame. */
static int lookup_in_unit(struct opal_dwfl_file *f, Dwarf_Addr addr, bool indexed,
			  Dwarf_Die *cudie, Dwarf_Addr pc, struct opal_sym_result *out)
{
	int r = dwarf_frames(f, cudie, pc, out);
	if (r == 0 && out->n > 0)
		r = name_physical_frame(f, addr, indexed, cudie, out);
	if (r < 0) {
		opal_sym_result_free(out);
		return r;
	}
	if (out->n > 0)
		return 0;
	return symbol_with_line(f, addr, indexed, cudie, pc, out);
}

int opal_dwfl_lookup_scopes(struct opal_dwfl_file *f, uint64_t vaddr, struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	if (!f->mod)
		return 0;
	Dwarf_Addr addr = vaddr + f->main_bias, pc = 0;
	Dwarf_Die cudie;
	if (f->dwarf && find_cu(f, addr, &cudie, &pc))
		return lookup_in_unit(f, addr, false, &cudie, pc, out);
	return symbol_frame(f, addr, false, out);
}

static int lookup_dwarf(struct opal_dwfl_file *f, uint64_t vaddr, struct opal_sym_result *out);

int opal_dwfl_lookup(struct opal_dwfl_file *f, uint64_t vaddr, struct opal_sym_result *out)
{
	int r;

	memset(out, 0, sizeof(*out));
	if (!f->mod)
		return 0;
	if (f->go && (r = opal_sym_go_lookup(f->go, vaddr, out)) < 0)
		return r;
	if (out->n > 0)
		return 0;
	/* not Go code: a C object of a cgo binary, or another file */
	return lookup_dwarf(f, vaddr, out);
}

static int lookup_dwarf(struct opal_dwfl_file *f, uint64_t vaddr, struct opal_sym_result *out)
{
	if (f->dwarf && !f->index)
		f->index = opal_sym_index_new(f->dwarf, f->zero_is_code);
	Dwarf_Addr addr = vaddr + f->main_bias, pc = addr - f->dwarf_bias;
	if (!f->index)   /* no DWARF (or no memory for an index) */
		return f->dwarf ? opal_dwfl_lookup_scopes(f, vaddr, out) :
				  symbol_frame(f, addr, true, out);

	struct opal_sym_index_hit hit;
	int r = opal_sym_index_lookup(f->index, pc, out, &hit);
	switch (r) {
	case OPAL_SYM_INDEX_FRAMES:
		r = name_physical_frame(f, addr, true, &hit.cudie, out);
		if (r < 0)
			opal_sym_result_free(out);
		return r;
	case OPAL_SYM_INDEX_NO_UNIT:
		return symbol_frame(f, addr, true, out);
	case OPAL_SYM_INDEX_NO_SCOPE:
		r = symbol_frame(f, addr, true, out);
		if (r == 0 && out->n == 1 && hit.line) {
			out->frames[0].line = hit.line;
			out->frames[0].file = hit.file;
			hit.file = NULL;
		}
		free(hit.file);
		return r;
	case OPAL_SYM_INDEX_REFUSED:
		return lookup_in_unit(f, addr, true, &hit.cudie, pc, out);
	default:
		return r;
	}
}
