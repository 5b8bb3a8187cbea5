/* Unwind table extraction: checks the ELF layout against the file size and
 * the limits, copies each CFI section into a CFI-only image for libdw
 * (unwind_image.c), enumerates its FDE ranges (unwind_fde.c), walks each
 * FDE row by row with libdw (dwarf_cfi_addrframe + dwarf_frame_info give
 * the row's [start, end)), classifies each row (unwind_eval.c) and
 * assembles the sorted rules (unwind_assemble.c). */
#include "unwind/table/unwind_table.h"

#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shared/log.h"
#include "unwind/table/unwind_assemble.h"
#include "unwind/table/unwind_eval.h"
#include "unwind/table/unwind_fde.h"
#include "unwind/table/unwind_go.h"
#include "unwind/table/unwind_image.h"

#define MAX_EXEC_LOADS 32   /* as OPAL_ELF_MAX_LOADS: more PT_LOADs are rejected */

void opal_unwind_limits_default(struct opal_unwind_limits *lim)
{
	*lim = (struct opal_unwind_limits){
		.max_fdes = 1u << 20,
		.max_rows_per_fde = 1u << 14,
		.max_rules = OPAL_UNWIND_MAX_RULES,
		.max_section_bytes = 64ull << 20,
		.max_work = 4ull << 30,
	};
}

/* Where the ELF bytes come from: a descriptor (pread) or memory. */
struct elf_src {
	int fd;
	const uint8_t *mem;
	uint64_t size;
};

static int src_read(const struct elf_src *s, uint64_t off, void *buf, size_t len)
{
	if (off > s->size || len > s->size - off)
		return -1;
	if (s->mem) {
		memcpy(buf, s->mem + off, len);
		return 0;
	}
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(s->fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (n <= 0)
			return -1;   /* error, or the file shrank under us */
		done += (size_t)n;
	}
	return 0;
}

struct exec_range {
	uint64_t lo, hi;
	uint64_t offset, filesz;   /* the segment's file bytes */
};

struct cfi_section {
	Elf_Scn *scn;
	GElf_Shdr sh;
	uint64_t size;       /* contents, uncompressed */
	bool compressed;     /* SHF_COMPRESSED */
	bool gnu_zlib;       /* .zdebug_frame */
	bool size_unknown;   /* compression header unreadable */
};

struct layout {
	struct exec_range exec[MAX_EXEC_LOADS];
	size_t n_exec;
	struct cfi_section eh_frame, debug_frame;
	GElf_Shdr gopclntab;   /* sh_size 0: none */
};

static bool in_file(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Records the executable PT_LOADs: FDEs outside them are not code. */
static int read_exec_loads(Elf *elf, struct layout *lo)
{
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum) != 0)
		return -ENOEXEC;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			return -ENOEXEC;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0)
			continue;
		if (lo->n_exec == MAX_EXEC_LOADS)
			return -E2BIG;
		if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			return -ENOEXEC;
		lo->exec[lo->n_exec++] = (struct exec_range){ ph.p_vaddr, ph.p_vaddr + ph.p_memsz,
							      ph.p_offset, ph.p_filesz };
	}
	return 0;
}

/* Uncompressed size of .debug_frame: SHF_COMPRESSED (Elf64_Chdr) or GNU
 * .zdebug ("ZLIB" + 8-byte big-endian size). */
static void debug_frame_size(const struct elf_src *src, struct cfi_section *cs)
{
	cs->size = cs->sh.sh_size;
	if (cs->compressed) {
		Elf64_Chdr ch;
		if (cs->sh.sh_size < sizeof(ch) ||
		    src_read(src, cs->sh.sh_offset, &ch, sizeof(ch)) < 0 ||
		    ch.ch_type != ELFCOMPRESS_ZLIB)
			cs->size_unknown = true;
		else
			cs->size = ch.ch_size;
	} else if (cs->gnu_zlib) {
		uint8_t hdr[12];
		if (cs->sh.sh_size < sizeof(hdr) ||
		    src_read(src, cs->sh.sh_offset, hdr, sizeof(hdr)) < 0 ||
		    memcmp(hdr, "ZLIB", 4) != 0) {
			cs->size_unknown = true;
			return;
		}
		cs->size = 0;
		for (int i = 4; i < 12; i++)
			cs->size = (cs->size << 8) | hdr[i];
	}
}

/* Finds .eh_frame and .debug_frame (the first of each name) and checks
 * that every section with contents lies inside the file. */
static int find_sections(Elf *elf, const struct elf_src *src, const struct opal_unwind_limits *lim,
			 struct layout *lo)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOEXEC;
	/* libelf has already bounded the section count by the file size */
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			return -ENOEXEC;
		if (sh.sh_type == SHT_NOBITS)
			continue;
		if (!in_file(sh.sh_offset, sh.sh_size, src->size))
			return -ENOEXEC;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		struct cfi_section *cs = NULL;
		if (!name || sh.sh_size == 0)
			continue;
		/* Go's internal linker names it so in PIE files */
		if ((strcmp(name, ".gopclntab") == 0 || strcmp(name, ".data.rel.ro.gopclntab") == 0) &&
		    lo->gopclntab.sh_size == 0 && sh.sh_size <= lim->max_section_bytes)
			lo->gopclntab = sh;
		if (strcmp(name, ".eh_frame") == 0 && !lo->eh_frame.scn) {
			if (sh.sh_flags & SHF_COMPRESSED)
				return -ENOEXEC;
			if (sh.sh_size > lim->max_section_bytes)
				return -E2BIG;
			cs = &lo->eh_frame;
		} else if ((strcmp(name, ".debug_frame") == 0 || strcmp(name, ".zdebug_frame") == 0) &&
			   !lo->debug_frame.scn) {
			cs = &lo->debug_frame;
			cs->gnu_zlib = name[1] == 'z';
		}
		if (!cs)
			continue;
		cs->scn = scn;
		cs->sh = sh;
		cs->compressed = (sh.sh_flags & SHF_COMPRESSED) != 0;
		cs->size = sh.sh_size;
		if (cs == &lo->debug_frame)
			debug_frame_size(src, cs);
	}
	return 0;
}

/* Copies section `cs` (decompressed) into a CFI-only image for libdw. */
static int load_section(const struct elf_src *src, const struct cfi_section *cs, bool eh_frame,
			struct opal_cfi_image *img)
{
	int rc = opal_cfi_image_init(img, eh_frame, (size_t)cs->size, cs->sh.sh_addr);
	if (rc < 0)
		return rc;
	if (cs->compressed || cs->gnu_zlib) {
		/* libelf inflates into a buffer of the header's size, which the
		 * caller bounded, and fails unless the stream has that size */
		int ok = cs->compressed ? elf_compress(cs->scn, 0, 0) : elf_compress_gnu(cs->scn, 0, 0);
		Elf_Data *d = ok >= 0 ? elf_getdata(cs->scn, NULL) : NULL;
		if (!d || !d->d_buf || d->d_size != cs->size)
			return -ENOEXEC;
		memcpy(img->bytes, d->d_buf, (size_t)cs->size);
	} else if (src_read(src, cs->sh.sh_offset, img->bytes, (size_t)cs->size) < 0) {
		return -ENOEXEC;
	}
	return opal_cfi_image_open(img);
}

static bool in_exec(const struct layout *lo, uint64_t a, uint64_t b)
{
	for (size_t i = 0; i < lo->n_exec; i++)
		if (a >= lo->exec[i].lo && b <= lo->exec[i].hi)
			return true;
	return false;
}

struct walker {
	struct opal_unwind_builder bld;
	const struct opal_unwind_limits *lim;
	struct opal_unwind_stats *st;
};

static int add_invalid(struct walker *w, uint64_t a, uint64_t b, enum opal_unwind_invalid why)
{
	struct opal_unwind_body body = {
		.cfa = OPAL_UNWIND_PACK(OPAL_CFA_INVALID, 0), .aux = (__s16)why,
	};
	int64_t idx = opal_unwind_builder_body(&w->bld, &body);
	if (idx < 0)
		return (int)idx;
	return opal_unwind_builder_add(&w->bld, a, b, (uint32_t)idx);
}

/* Evaluates every row of [lo, hi) of `cfi`: each dwarf_cfi_addrframe
 * reruns the FDE's CFI from its start, costing up to `cost` bytes. */
static int walk_rows(struct walker *w, Dwarf_CFI *cfi, uint64_t lo, uint64_t hi, uint64_t cost)
{
	uint64_t pc = lo;
	uint32_t rows = 0;

	while (pc < hi) {
		struct opal_unwind_body body;
		Dwarf_Frame *frame = NULL;
		Dwarf_Addr rs, re;
		bool signal = false;

		if (rows == w->lim->max_rows_per_fde) {
			w->st->truncated_fdes++;
			return add_invalid(w, pc, hi, OPAL_INVALID_ROW_LIMIT);
		}
		w->st->work += cost;
		if (w->st->work > w->lim->max_work)
			return -E2BIG;
		if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0 ||
		    dwarf_frame_info(frame, &rs, &re, &signal) < 0 || rs > pc || re <= pc) {
			free(frame);
			w->st->cfi_errors++;
			return add_invalid(w, pc, hi, OPAL_INVALID_CFI_ERROR);
		}
		opal_unwind_eval_row(frame, signal, &body);
		free(frame);
		rows++;
		w->st->rows++;
		if (OPAL_UNWIND_KIND(body.cfa) == OPAL_CFA_INVALID)
			w->st->invalid_rows++;
		else if (OPAL_UNWIND_KIND(body.rbp) == OPAL_REG_UNSUPPORTED ||
			 OPAL_UNWIND_KIND(body.rbx) == OPAL_REG_UNSUPPORTED)
			w->st->unsupported_regs++;

		uint64_t end = re < hi ? re : hi;
		int64_t idx = opal_unwind_builder_body(&w->bld, &body);
		if (idx < 0)
			return (int)idx;
		int rc = opal_unwind_builder_add(&w->bld, pc, end, (uint32_t)idx);
		if (rc < 0)
			return rc;
		pc = end;
	}
	return 0;
}

static int range_cmp(const void *pa, const void *pb)
{
	const struct opal_fde_range *a = pa, *b = pb;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->hi > b->hi) - (a->hi < b->hi);
}

/* Sorts the FDEs by address and keeps the usable ones inside an
 * executable PT_LOAD that overlap no other FDE of the section (usable or
 * not): for an address in two FDEs libdw may pick either, so neither can be
 * trusted nor its cost bounded. The result is sorted and disjoint. */
static void select_fdes(const struct layout *lo, struct opal_fde_list *l,
			struct opal_unwind_stats *st)
{
	size_t n = 0;
	uint64_t max_hi = 0;

	qsort(l->v, l->n, sizeof(*l->v), range_cmp);
	for (size_t i = 0; i < l->n; i++) {
		struct opal_fde_range r = l->v[i];
		bool overlap = (i > 0 && max_hi > r.lo) || (i + 1 < l->n && l->v[i + 1].lo < r.hi);
		if (r.hi > max_hi)
			max_hi = r.hi;
		if (r.usable && !overlap && in_exec(lo, r.lo, r.hi))
			l->v[n++] = r;
		else
			st->fdes_skipped++;
	}
	l->n = n;
}

static int scan_image(const struct opal_cfi_image *img, bool eh_frame, uint64_t sh_addr,
		      const struct layout *lo, const struct opal_unwind_limits *lim,
		      struct opal_fde_list *out, struct opal_unwind_stats *st)
{
	struct opal_fde_scan_stats fs = {0};
	const unsigned char *ident = (const unsigned char *)elf_getident(img->elf, NULL);

	if (!ident)
		return -ENOEXEC;
	int rc = opal_fde_scan(ident, img->data, eh_frame, sh_addr, lim->max_fdes, out, &fs);
	st->fdes_skipped += fs.skipped;
	st->cfi_errors += fs.errors;
	if (rc == 0)
		select_fdes(lo, out, st);
	return rc;
}

/* Walks the parts of .debug_frame FDE `r` that none of the sorted,
 * disjoint .eh_frame FDEs `covered` covers. */
static int walk_uncovered(struct walker *w, Dwarf_CFI *cfi, const struct opal_fde_range *r,
			  const struct opal_fde_list *covered, bool *walked)
{
	size_t lo = 0, hi = covered->n;
	uint64_t pos = r->lo;

	/* first covered range ending after r->lo */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (covered->v[mid].hi <= r->lo)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; pos < r->hi; i++) {
		uint64_t stop = i < covered->n && covered->v[i].lo < r->hi ? covered->v[i].lo : r->hi;
		if (stop > pos) {
			int rc = walk_rows(w, cfi, pos, stop, r->cost);
			if (rc < 0)
				return rc;
			*walked = true;
		}
		if (i >= covered->n || covered->v[i].lo >= r->hi)
			break;
		pos = covered->v[i].hi > pos ? covered->v[i].hi : pos;
	}
	return 0;
}

/* Walks every .eh_frame FDE; `fdes` receives them (sorted, disjoint) for
 * the .debug_frame pass. */
static int build_eh(const struct elf_src *src, const struct layout *lo, struct walker *w,
		    struct opal_fde_list *fdes)
{
	struct opal_cfi_image img;
	Dwarf_CFI *cfi = NULL;
	int rc;

	if (!lo->eh_frame.scn)
		return 0;
	rc = load_section(src, &lo->eh_frame, true, &img);
	if (rc == 0)
		rc = scan_image(&img, true, lo->eh_frame.sh.sh_addr, lo, w->lim, fdes, w->st);
	if (rc == 0 && fdes->n > 0) {
		cfi = dwarf_getcfi_elf(img.elf);
		if (!cfi) {
			w->st->cfi_errors++;
			fdes->n = 0;
		}
	}
	for (size_t i = 0; cfi && i < fdes->n && rc == 0; i++) {
		rc = walk_rows(w, cfi, fdes->v[i].lo, fdes->v[i].hi, fdes->v[i].cost);
		w->st->fdes_eh++;
	}
	if (cfi)
		dwarf_cfi_end(cfi);
	opal_cfi_image_free(&img);
	return rc;
}

/* Walks the parts of the FDEs of .debug_frame `cs` (read from `src`: the
 * file itself or its debug file) that no .eh_frame FDE covers; `lo` gives
 * the file's executable segments. A .debug_frame that is too large,
 * unreadable or malformed is ignored. */
static int build_debug(const struct elf_src *src, const struct cfi_section *cs,
		       const struct layout *lo, struct walker *w,
		       const struct opal_fde_list *eh_fdes)
{
	struct opal_fde_list fdes = {0};
	struct opal_cfi_image img;
	Dwarf *dbg = NULL;
	Dwarf_CFI *cfi = NULL;
	int rc;

	if (!cs->scn)
		return 0;
	if (cs->size_unknown || cs->size == 0 || cs->size > w->lim->max_section_bytes) {
		w->st->debug_frame_skipped = true;
		opal_debug("unwind: .debug_frame ignored (%llu bytes, bound %llu)",
			   (unsigned long long)cs->size,
			   (unsigned long long)w->lim->max_section_bytes);
		return 0;
	}
	rc = load_section(src, cs, false, &img);
	if (rc == 0)
		rc = scan_image(&img, false, 0, lo, w->lim, &fdes, w->st);
	if (rc == 0) {
		dbg = dwarf_begin_elf(img.elf, DWARF_C_READ, NULL);
		cfi = dbg ? dwarf_getcfi(dbg) : NULL;
	}
	if (rc == -ENOEXEC || (rc == 0 && !cfi)) {
		w->st->cfi_errors++;
		w->st->debug_frame_skipped = true;
		rc = 0;
	}
	for (size_t i = 0; cfi && rc == 0 && i < fdes.n; i++) {
		bool walked = false;
		rc = walk_uncovered(w, cfi, &fdes.v[i], eh_fdes, &walked);
		if (walked)
			w->st->fdes_debug++;
	}
	opal_fde_list_free(&fdes);
	if (dbg)
		dwarf_end(dbg);
	opal_cfi_image_free(&img);
	return rc;
}

static bool x86_64_elf(Elf *elf, GElf_Ehdr *eh)
{
	return elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, eh) &&
	       eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_ident[EI_DATA] == ELFDATA2LSB &&
	       eh->e_machine == EM_X86_64;
}

/* The .debug_frame of the debug file `delf` (separate debug info of the
 * file laid out as `lo`), into *cs: only when the debug file has the same
 * executable segments (objcopy --only-keep-debug keeps the program
 * headers), so that its addresses are the file's. Anything else leaves
 * *cs empty: the table is built without it. */
static void debug_file_frame(Elf *delf, const struct elf_src *dsrc, const struct layout *lo,
			     const struct opal_unwind_limits *lim, struct cfi_section *cs)
{
	struct layout dlo = {0};
	GElf_Ehdr eh;

	memset(cs, 0, sizeof(*cs));
	if (!x86_64_elf(delf, &eh) || read_exec_loads(delf, &dlo) < 0 || dlo.n_exec != lo->n_exec ||
	    find_sections(delf, dsrc, lim, &dlo) < 0)
		return;
	/* addresses only: the debug file's segments hold no file bytes */
	for (size_t i = 0; i < lo->n_exec; i++)
		if (dlo.exec[i].lo != lo->exec[i].lo || dlo.exec[i].hi != lo->exec[i].hi)
			return;
	*cs = dlo.debug_frame;
}

/* Go code without CFI (unwind_go.h): what it reads of the file. */
struct go_file {
	const struct elf_src *src;
	const struct layout *lo;
	const struct opal_fde_list *eh_fdes;
};

static int go_read_text(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	const struct go_file *g = ctx;
	for (size_t i = 0; i < g->lo->n_exec; i++) {
		const struct exec_range *e = &g->lo->exec[i];
		if (vaddr >= e->lo && vaddr - e->lo <= e->filesz && len <= e->filesz - (vaddr - e->lo))
			return src_read(g->src, e->offset + (vaddr - e->lo), buf, len);
	}
	return -1;
}

/* Code in an executable segment that no .eh_frame FDE (sorted, disjoint)
 * overlaps: the C objects of a cgo binary keep their own CFI. */
static bool go_usable(void *ctx, uint64_t lo, uint64_t hi)
{
	const struct go_file *g = ctx;
	const struct opal_fde_list *l = g->eh_fdes;
	size_t a = 0, b = l->n;

	if (!in_exec(g->lo, lo, hi))
		return false;
	while (a < b) {   /* first FDE ending after lo */
		size_t mid = a + (b - a) / 2;
		if (l->v[mid].hi <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	return a == l->n || l->v[a].lo >= hi;
}

/* Rules from .gopclntab for a Go binary, stripped or not: its
 * .debug_frame (which Go's linker writes from the same pcsp tables, and
 * `-s -w` drops) knows neither the frames that end a walk nor those that
 * switch stacks, so the table is preferred. Returns 0, 1 when the table
 * cannot be read (the file keeps its other rules), or a builder error. */
static int build_go(const struct elf_src *src, const struct layout *lo, struct walker *w,
		    const struct opal_fde_list *eh_fdes)
{
	struct go_file g = { src, lo, eh_fdes };
	struct opal_unwind_go_file file = { go_read_text, go_usable, &g };
	struct opal_unwind_go_stats gs;
	uint64_t size = lo->gopclntab.sh_size;

	uint8_t *tab = malloc(size);
	if (!tab)
		return -ENOMEM;
	int rc = src_read(src, lo->gopclntab.sh_offset, tab, size) < 0 ? -ENOEXEC :
		 opal_unwind_go_rules(tab, size, &file, &w->bld, &gs);
	free(tab);
	if (rc == -ENOEXEC) {
		w->st->go_table_errors++;
		opal_debug("unwind: .gopclntab not usable");
		return 1;
	}
	w->st->go_funcs += gs.funcs;
	w->st->go_funcs_skipped += gs.skipped;
	return rc;
}

static int build_elf(Elf *elf, const struct elf_src *src, Elf *delf, const struct elf_src *dsrc,
		     const struct opal_unwind_limits *lim, struct opal_unwind_table *out)
{
	struct layout lo = {0};
	struct walker w = { .lim = lim, .st = &out->stats };
	struct opal_fde_list eh_fdes = {0};
	struct cfi_section *debug_frame = &lo.debug_frame, from_debug_file = {0};
	const struct elf_src *debug_src = src;
	GElf_Ehdr eh;
	int rc;

	if (!x86_64_elf(elf, &eh) || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
		return -ENOEXEC;
	rc = read_exec_loads(elf, &lo);
	if (rc == 0)
		rc = find_sections(elf, src, lim, &lo);
	if (rc < 0)
		return rc;
	/* stripped files lose their .debug_frame to the debug file */
	if (!lo.debug_frame.scn && delf) {
		debug_file_frame(delf, dsrc, &lo, lim, &from_debug_file);
		if (from_debug_file.scn) {
			debug_frame = &from_debug_file;
			debug_src = dsrc;
			out->stats.debug_file = true;
		}
	}
	bool go = lo.gopclntab.sh_size > 0;
	if (!lo.eh_frame.scn && !debug_frame->scn && !go)
		return -ENODATA;
	uint32_t max_rules = lim->max_rules < OPAL_UNWIND_MAX_RULES ? lim->max_rules
								    : OPAL_UNWIND_MAX_RULES;
	/* adjacent FDEs often end and start with the same body and merge at
	 * finish, so allow more spans than rules */
	rc = opal_unwind_builder_init(&w.bld, (size_t)max_rules + max_rules / 2);
	if (rc < 0)
		return rc;
	rc = build_eh(src, &lo, &w, &eh_fdes);
	if (rc == 0 && go)
		rc = build_go(src, &lo, &w, &eh_fdes);
	if (rc == 1 || (rc == 0 && !go))
		rc = build_debug(debug_src, debug_frame, &lo, &w, &eh_fdes);
	if (rc == 0)
		rc = opal_unwind_builder_finish(&w.bld, max_rules, out);
	opal_fde_list_free(&eh_fdes);
	opal_unwind_builder_free(&w.bld);
	return rc;
}

static int build(Elf *elf, const struct elf_src *src, Elf *delf, const struct elf_src *dsrc,
		 const struct opal_unwind_limits *lim, struct opal_unwind_table *out)
{
	struct opal_unwind_limits def;

	if (!lim) {
		opal_unwind_limits_default(&def);
		lim = &def;
	}
	int rc = build_elf(elf, src, delf, dsrc, lim, out);
	if (rc < 0)
		opal_unwind_table_free(out);
	return rc;
}

/* libelf's handle of the regular file on `fd` and its size; NULL when it
 * is none. ELF_C_READ reads with pread on demand: no mmap, so a
 * concurrent truncation is a read error instead of SIGBUS. */
static Elf *open_elf(int fd, struct elf_src *src, int *err)
{
	struct stat st;

	*err = -ENOEXEC;
	if (fstat(fd, &st) < 0) {
		*err = -errno;
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	*src = (struct elf_src){ .fd = fd, .size = (uint64_t)st.st_size };
	return elf_begin(fd, ELF_C_READ, NULL);
}

int opal_unwind_table_build_debug(int fd, int debug_fd, const struct opal_unwind_limits *lim,
				  struct opal_unwind_table *out)
{
	struct elf_src src, dsrc;
	int err, derr;

	memset(out, 0, sizeof(*out));
	Elf *elf = open_elf(fd, &src, &err);
	if (!elf)
		return err;
	Elf *delf = debug_fd >= 0 ? open_elf(debug_fd, &dsrc, &derr) : NULL;
	int rc = build(elf, &src, delf, &dsrc, lim, out);
	if (delf)
		elf_end(delf);
	elf_end(elf);
	return rc;
}

int opal_unwind_table_build(int fd, const struct opal_unwind_limits *lim,
			    struct opal_unwind_table *out)
{
	return opal_unwind_table_build_debug(fd, -1, lim, out);
}

int opal_unwind_table_build_mem(const void *image, size_t size,
				const struct opal_unwind_limits *lim,
				struct opal_unwind_table *out)
{
	memset(out, 0, sizeof(*out));
	if (size == 0)
		return -ENOEXEC;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	/* libelf wants a mutable buffer that outlives the handle */
	char *copy = malloc(size);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, image, size);
	Elf *elf = elf_memory(copy, size);
	int rc = -ENOEXEC;
	if (elf) {
		struct elf_src src = { .fd = -1, .mem = (const uint8_t *)copy, .size = size };
		rc = build(elf, &src, NULL, NULL, lim, out);
		elf_end(elf);
	}
	free(copy);
	return rc;
}

void opal_unwind_table_free(struct opal_unwind_table *t)
{
	free(t->rules);
	free(t->bodies);
	memset(t, 0, sizeof(*t));
}
