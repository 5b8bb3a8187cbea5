/* Decoding of Go's pclntab (see gopclntab.h for the formats and sources):
 * the header, the function table, _func records, pc-value tables, file
 * names through the per-CU file table, and the inline tree. Locating the
 * table is gopclntab_find.c's job. */
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include "symbolize/gopclntab_impl.h"

/* runtime/symtab.go (1.19 and 1.21+), cmd/internal/objabi/funcdata.go */
#define PCDATA_INLTREEINDEX 2
#define FUNCDATA_INLTREE    3

/* A pc-value varint has at most 5 bytes (32 bits of value). */
#define VARINT_MAX_BYTES 5

/* Functions the strict header check decodes. */
#define STRICT_FUNCS 16

/* One _func record (runtime2.go), its fields decoded. */
struct gofunc {
	uint64_t entry;
	uint32_t nameoff, pcfile, pcln, npcdata, cuoff, start_line;
	uint8_t nfuncdata;
	const uint8_t *pcdata;     /* npcdata u32 offsets into pctab */
	const uint8_t *funcdata;   /* nfuncdata u32 offsets (1.18+) or pointers (1.16) */
};

const struct gopcln_seg *gopcln_seg_of(const struct opal_gopclntab *r, uint64_t vaddr)
{
	for (unsigned i = 0; i < r->nsegs; i++) {
		const struct gopcln_seg *s = &r->segs[i];
		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz)
			return s;
	}
	return NULL;
}

const uint8_t *gopcln_map(const struct opal_gopclntab *r, uint64_t vaddr, uint64_t len)
{
	const struct gopcln_seg *s = gopcln_seg_of(r, vaddr);
	if (!s || s->filesz - (vaddr - s->vaddr) < len)
		return NULL;
	return r->img + s->offset + (vaddr - s->vaddr);
}

/* functab entry size: {uintptr entry, uintptr funcoff} before 1.18,
 * {uint32 entryoff, uint32 funcoff} since (runtime/symtab.go functab). */
static uint64_t ftab_entsize(const struct opal_gopclntab *r)
{
	return r->format == OPAL_GOPCLNTAB_GO116 ? 2ull * r->ptr_size : 8;
}

/* _func's fixed part: entry (uintptr before 1.18, uint32 since), eight
 * uint32 fields (nameoff .. cuOffset), startLine (1.20+), then funcID,
 * flag, pad and nfuncdata bytes. */
static uint64_t func_fixed_size(const struct opal_gopclntab *r)
{
	switch (r->format) {
	case OPAL_GOPCLNTAB_GO116:
		return r->ptr_size + 36;
	case OPAL_GOPCLNTAB_GO118:
		return 40;
	default:
		return 44;
	}
}

/* Entry address of function `i` (i <= nfunc: the last is the end). */
static uint64_t ftab_entry(const struct opal_gopclntab *r, uint64_t i)
{
	const uint8_t *p = r->tab + r->pcln.off + i * ftab_entsize(r);
	if (r->format == OPAL_GOPCLNTAB_GO116)
		return gopcln_word(p, r->ptr_size);
	return r->text_start + gopcln_u32(p);
}

static uint64_t ftab_funcoff(const struct opal_gopclntab *r, uint64_t i)
{
	const uint8_t *p = r->tab + r->pcln.off + i * ftab_entsize(r);
	if (r->format == OPAL_GOPCLNTAB_GO116)
		return gopcln_word(p + r->ptr_size, r->ptr_size);
	return gopcln_u32(p + 4);
}

/* Decodes the _func of function `i` (< nfunc), checking that it lies in
 * the table with its pcdata and funcdata arrays and that its entry is
 * the function table's. */
static int func_at(const struct opal_gopclntab *r, uint64_t i, struct gofunc *f)
{
	uint64_t off = ftab_funcoff(r, i), fixed = func_fixed_size(r);
	if (off >= r->pcln.size || r->pcln.size - off < fixed)
		return -EINVAL;
	const uint8_t *p = r->tab + r->pcln.off + off;
	uint64_t avail = r->pcln.size - off - fixed;
	uint32_t e;
	if (r->format == OPAL_GOPCLNTAB_GO116) {
		f->entry = gopcln_word(p, r->ptr_size);
		e = r->ptr_size;
	} else {
		f->entry = r->text_start + gopcln_u32(p);
		e = 4;
	}
	if (f->entry != ftab_entry(r, i))
		return -EINVAL;
	f->nameoff = gopcln_u32(p + e);
	f->pcfile = gopcln_u32(p + e + 16);
	f->pcln = gopcln_u32(p + e + 20);
	f->npcdata = gopcln_u32(p + e + 24);
	f->cuoff = gopcln_u32(p + e + 28);
	f->start_line = r->format == OPAL_GOPCLNTAB_GO120 ? gopcln_u32(p + e + 32) : 0;
	f->nfuncdata = p[fixed - 1];
	if ((uint64_t)f->npcdata * 4 > avail)
		return -EINVAL;
	f->pcdata = p + fixed;
	avail -= (uint64_t)f->npcdata * 4;
	uint64_t fd_size;
	const uint8_t *fd = f->pcdata + (uint64_t)f->npcdata * 4;
	if (r->format == OPAL_GOPCLNTAB_GO116) {
		/* 1.16/1.17 funcdata(): the pointer array starts aligned to
		 * the pointer size (by address; the file offset agrees). */
		uint64_t va = r->tab_vaddr + (uint64_t)(fd - r->tab);
		if (r->ptr_size == 8 && (va & 4)) {
			if (avail < 4)
				return -EINVAL;
			fd += 4;
			avail -= 4;
		}
		fd_size = (uint64_t)f->nfuncdata * r->ptr_size;
	} else {
		fd_size = (uint64_t)f->nfuncdata * 4;
	}
	if (fd_size > avail)
		return -EINVAL;
	f->funcdata = fd;
	return 0;
}

/* Reads an unsigned varint (7 bits a byte, low first) from [*p, end). */
static int read_varint(const uint8_t **p, const uint8_t *end, uint32_t *out)
{
	uint32_t v = 0;
	for (unsigned n = 0; n < VARINT_MAX_BYTES; n++) {
		if (*p >= end)
			return -EINVAL;
		uint8_t b = *(*p)++;
		v |= (uint32_t)(b & 0x7f) << (7 * n);
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -EINVAL;
}

/* Value of the pc-value table at pctab offset `off` for `target` in f
 * (runtime pcvalue/step): pairs of a zig-zag value delta (the value
 * starts at -1) and a pc delta in quanta; a zero value delta after the
 * first pair ends the table. Returns 1 with *val, 0 when the table has
 * no value there (off 0, or target past its end), or -EINVAL. Each pair
 * takes at least two bytes, so the walk is bounded by the table size. */
static int pcvalue(const struct opal_gopclntab *r, const struct gofunc *f, uint32_t off,
		   uint64_t target, int32_t *val)
{
	if (off == 0)
		return 0;
	if (off >= r->pctab.size)
		return -EINVAL;
	const uint8_t *p = r->tab + r->pctab.off + off;
	const uint8_t *end = r->tab + r->pctab.off + r->pctab.size;
	uint64_t pc = f->entry;
	uint32_t v = (uint32_t)-1;
	for (;;) {
		uint32_t uv, pcdelta;
		bool first = pc == f->entry;
		if (read_varint(&p, end, &uv) < 0)
			return -EINVAL;
		if (uv == 0 && !first)
			return 0;
		v += (uv & 1) ? ~(uv >> 1) : uv >> 1;
		if (read_varint(&p, end, &pcdelta) < 0)
			return -EINVAL;
		pc += (uint64_t)pcdelta * r->quantum;
		if (target < pc) {
			*val = (int32_t)v;
			return 1;
		}
	}
}

/* NUL-terminated string at `off` in sub-table `t`, or NULL. */
static const char *table_string(const struct opal_gopclntab *r, const struct gopcln_range *t,
				uint64_t off)
{
	if (off >= t->size)
		return NULL;
	const uint8_t *s = r->tab + t->off + off;
	return memchr(s, 0, t->size - off) ? (const char *)s : NULL;
}

/* File and line of `pc` in f (runtime funcline1/funcfile): the file
 * number indexes the function's CU in cutab, whose entry is an offset in
 * filetab (~0: no file). Missing values give NULL / 0. */
static int file_line(const struct opal_gopclntab *r, const struct gofunc *f, uint64_t pc,
		     const char **file, uint32_t *line)
{
	int32_t fileno, ln;
	int rc = pcvalue(r, f, f->pcln, pc, &ln);
	if (rc < 0)
		return rc;
	*line = rc == 1 && ln > 0 ? (uint32_t)ln : 0;
	*file = NULL;
	rc = pcvalue(r, f, f->pcfile, pc, &fileno);
	if (rc < 0)
		return rc;
	if (rc == 0 || fileno < 0)
		return 0;
	uint64_t idx = (uint64_t)f->cuoff + (uint32_t)fileno;
	if (idx >= r->cutab.size / 4)
		return -EINVAL;
	uint32_t foff = gopcln_u32(r->tab + r->cutab.off + idx * 4);
	if (foff == UINT32_MAX)
		return 0;
	*file = table_string(r, &r->filetab, foff);
	return *file ? 0 : -EINVAL;
}

/* Virtual address of f's inline tree, or 0 when it has none or it cannot
 * be reached (1.18+ without the moduledata's go:func.*). */
static uint64_t inline_tree(const struct opal_gopclntab *r, const struct gofunc *f)
{
	if (f->npcdata <= PCDATA_INLTREEINDEX || f->nfuncdata <= FUNCDATA_INLTREE)
		return 0;
	if (r->format == OPAL_GOPCLNTAB_GO116)
		return gopcln_word(f->funcdata + FUNCDATA_INLTREE * r->ptr_size, r->ptr_size);
	uint32_t off = gopcln_u32(f->funcdata + FUNCDATA_INLTREE * 4);
	if (off == UINT32_MAX || !r->have_gofunc)
		return 0;
	return r->gofunc + off;
}

/* Index of the function holding vaddr, or -ENOENT. The table is sorted
 * by entry (a corrupted one only makes the answer wrong, and func_at
 * checks what it picked). */
static int64_t find_func(const struct opal_gopclntab *r, uint64_t vaddr)
{
	if (vaddr < ftab_entry(r, 0) || vaddr >= ftab_entry(r, r->nfunc))
		return -ENOENT;
	uint64_t lo = 0, hi = r->nfunc;   /* entry(lo) <= vaddr < entry(hi) */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ftab_entry(r, mid) <= vaddr)
			lo = mid;
		else
			hi = mid;
	}
	return (int64_t)lo;
}

int opal_gopclntab_lookup(const struct opal_gopclntab *r, uint64_t vaddr,
			  opal_gopclntab_frame_fn fn, void *arg)
{
	struct opal_gopclntab_frame frames[OPAL_GOPCLNTAB_MAX_FRAMES];
	struct gofunc f;
	int64_t idx = find_func(r, vaddr);
	if (idx < 0)
		return (int)idx;
	int rc = func_at(r, (uint64_t)idx, &f);
	if (rc < 0)
		return rc;

	/* The inline unwinder of runtime/symtabinl.go (1.21; gentraceback
	 * in 1.16-1.20 does the same): the PC's InlTreeIndex names the
	 * innermost inlined call; its parentPc is an instruction whose
	 * position is the call site, whose own index gives the next
	 * caller, until an index < 0 leaves the physical function. */
	uint64_t tree = inline_tree(r, &f);
	uint64_t entsize = r->format == OPAL_GOPCLNTAB_GO120 ? 16 : 20;
	uint64_t pc = vaddr;
	unsigned n = 0;
	while (tree) {
		int32_t ix;
		uint32_t pcdata_off = gopcln_u32(f.pcdata + PCDATA_INLTREEINDEX * 4);
		rc = pcvalue(r, &f, pcdata_off, pc, &ix);
		if (rc < 0)
			return rc;
		if (rc == 0 || ix < 0)
			break;
		if (n == OPAL_GOPCLNTAB_MAX_FRAMES - 1)
			return -EINVAL;
		/* inlinedCall: 1.16-1.19 {int16 parent, funcID, pad, int32
		 * file, line, func_, parentPc}; 1.20+ {funcID, pad[3], int32
		 * nameOff, parentPc, startLine}. */
		const uint8_t *e = gopcln_map(r, tree + (uint64_t)ix * entsize, entsize);
		if (!e)
			return -EINVAL;
		uint32_t nameoff, parent_pc, start = 0;
		if (r->format == OPAL_GOPCLNTAB_GO120) {
			nameoff = gopcln_u32(e + 4);
			parent_pc = gopcln_u32(e + 8);
			start = gopcln_u32(e + 12);
		} else {
			nameoff = gopcln_u32(e + 12);
			parent_pc = gopcln_u32(e + 16);
		}
		struct opal_gopclntab_frame *fr = &frames[n++];
		fr->function = table_string(r, &r->funcname, nameoff);
		if (!fr->function || (int32_t)parent_pc < 0)
			return -EINVAL;
		rc = file_line(r, &f, pc, &fr->file, &fr->line);
		if (rc < 0)
			return rc;
		fr->start_line = (int32_t)start > 0 ? start : 0;
		fr->entry = f.entry;
		fr->is_inline = true;
		pc = f.entry + parent_pc;
	}
	struct opal_gopclntab_frame *fr = &frames[n++];
	fr->function = table_string(r, &r->funcname, f.nameoff);
	if (!fr->function)
		return -EINVAL;
	rc = file_line(r, &f, pc, &fr->file, &fr->line);
	if (rc < 0)
		return rc;
	fr->start_line = (int32_t)f.start_line > 0 ? f.start_line : 0;
	fr->entry = f.entry;
	fr->is_inline = false;

	for (unsigned i = 0; i < n; i++) {
		rc = fn(arg, &frames[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int opal_gopclntab_foreach_func(const struct opal_gopclntab *r, opal_gopclntab_func_fn fn,
				void *arg)
{
	for (uint64_t i = 0; i < r->nfunc; i++) {
		struct gofunc f;
		int rc = func_at(r, i, &f);
		if (rc < 0)
			return rc;
		const char *name = table_string(r, &r->funcname, f.nameoff);
		if (!name)
			return -EINVAL;
		rc = fn(arg, name, f.entry, ftab_entry(r, i + 1));
		if (rc)
			return rc;
	}
	return 0;
}

/* PC quantum of Go's ports (runtime/internal/sys PCQuantum): 1 on x86,
 * 2 on s390x, 4 on the fixed-width RISC ports. */
static uint32_t machine_quantum(uint16_t machine)
{
	switch (machine) {
	case EM_X86_64:
	case EM_386:
		return 1;
	case EM_S390:
		return 2;
	default:
		return 4;
	}
}

/* The first functions of a scanned candidate are sorted and decode. */
static int check_first_funcs(const struct opal_gopclntab *r)
{
	uint64_t k = r->nfunc < STRICT_FUNCS ? r->nfunc : STRICT_FUNCS;
	for (uint64_t i = 0; i < k; i++) {
		struct gofunc f;
		if (ftab_entry(r, i) > ftab_entry(r, i + 1) || func_at(r, i, &f) < 0 ||
		    !table_string(r, &r->funcname, f.nameoff))
			return -EINVAL;
	}
	return 0;
}

int gopcln_parse_header(struct opal_gopclntab *r, const uint8_t *tab, uint64_t size,
			uint64_t vaddr, bool strict)
{
	if (size < 8)
		return -EINVAL;
	switch (gopcln_u32(tab)) {
	case GOPCLN_MAGIC_116:
		r->format = OPAL_GOPCLNTAB_GO116;
		break;
	case GOPCLN_MAGIC_118:
		r->format = OPAL_GOPCLNTAB_GO118;
		break;
	case GOPCLN_MAGIC_120:
		r->format = OPAL_GOPCLNTAB_GO120;
		break;
	case GOPCLN_MAGIC_12:
		return -EPROTONOSUPPORT;
	default:
		return -EINVAL;
	}
	/* pcHeader: magic, pad1, pad2 (0), minLC, ptrSize, then words:
	 * nfunc, nfiles, [textStart: 1.18+], funcnameOffset, cuOffset,
	 * filetabOffset, pctabOffset, pclnOffset (offsets from the header). */
	r->quantum = tab[6];
	if (tab[4] || tab[5] || tab[7] != r->ptr_size ||
	    (r->quantum != 1 && r->quantum != 2 && r->quantum != 4))
		return -EINVAL;
	if (strict && r->quantum != machine_quantum(r->machine))
		return -EINVAL;
	unsigned nwords = r->format == OPAL_GOPCLNTAB_GO116 ? 7 : 8;
	uint64_t hdr = 8 + (uint64_t)nwords * r->ptr_size;
	if (size < hdr)
		return -EINVAL;
	uint64_t w[8];
	for (unsigned i = 0; i < nwords; i++)
		w[i] = gopcln_word(tab + 8 + (uint64_t)i * r->ptr_size, r->ptr_size);
	r->nfunc = w[0];
	const uint64_t *o = &w[2];
	r->text_start = 0;
	if (r->format != OPAL_GOPCLNTAB_GO116) {
		r->text_start = w[2];
		o = &w[3];
	}
	/* The linker writes the sub-tables in this order. */
	if (o[0] < hdr || o[1] < o[0] || o[2] < o[1] || o[3] < o[2] || o[4] < o[3] || size < o[4])
		return -EINVAL;
	r->funcname = (struct gopcln_range){ o[0], o[1] - o[0] };
	r->cutab = (struct gopcln_range){ o[1], o[2] - o[1] };
	r->filetab = (struct gopcln_range){ o[2], o[3] - o[2] };
	r->pctab = (struct gopcln_range){ o[3], o[4] - o[3] };
	r->pcln = (struct gopcln_range){ o[4], size - o[4] };
	r->tab = tab;
	r->tab_size = size;
	r->tab_vaddr = vaddr;
	/* The function table (nfunc entries and the end entry) opens pcln. */
	uint64_t es = ftab_entsize(r);
	if (r->nfunc == 0 || r->nfunc >= r->pcln.size / es)
		return -EINVAL;
	if (ftab_entry(r, 0) > ftab_entry(r, r->nfunc))
		return -EINVAL;
	return strict ? check_first_funcs(r) : 0;
}

int opal_gopclntab_open(Elf *elf, struct opal_gopclntab **out)
{
	*out = NULL;
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		return -EINVAL;
	size_t size;
	const char *img = elf_rawfile(elf, &size);
	GElf_Ehdr eh;
	if (!img || !gelf_getehdr(elf, &eh))
		return -EINVAL;
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return -ENOTSUP;
	struct opal_gopclntab *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->img = (const uint8_t *)img;
	r->img_size = size;
	r->machine = eh.e_machine;
	r->ptr_size = eh.e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;

	size_t phnum;
	if (elf_getphdrnum(elf, &phnum) != 0)
		phnum = 0;
	for (size_t i = 0; i < phnum && r->nsegs < GOPCLN_MAX_LOADS; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || ph.p_offset >= size)
			continue;
		uint64_t filesz = ph.p_filesz < size - ph.p_offset ? ph.p_filesz : size - ph.p_offset;
		if (filesz == 0)
			continue;
		r->segs[r->nsegs++] = (struct gopcln_seg){ ph.p_vaddr, ph.p_offset, filesz, ph.p_flags };
	}
	int rc = gopcln_locate(r, elf);
	if (rc < 0) {
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void opal_gopclntab_free(struct opal_gopclntab *r)
{
	free(r);
}

void opal_gopclntab_get_info(const struct opal_gopclntab *r, struct opal_gopclntab_info *info)
{
	*info = (struct opal_gopclntab_info){
		.format = r->format,
		.found = r->found,
		.ptr_size = r->ptr_size,
		.quantum = r->quantum,
		.nfunc = r->nfunc,
		.table_vaddr = r->tab_vaddr,
		.text_start = r->text_start,
		.inline_trees = r->format == OPAL_GOPCLNTAB_GO116 || r->have_gofunc,
	};
}
