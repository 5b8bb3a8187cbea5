/* Go functions' stack-delta rules from .gopclntab (unwind_go.h). */
#include "unwind/table/unwind_go.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC_116 0xfffffffau   /* Go 1.16, 1.17 */
#define MAGIC_118 0xfffffff0u   /* Go 1.18, 1.19 */
#define MAGIC_120 0xfffffff1u   /* Go 1.20 and later */

#define FUNCFLAG_TOPFRAME 1     /* runtime/symtab.go funcFlag_TOPFRAME */
#define FUNCFLAG_SPWRITE  2     /* funcFlag_SPWRITE */

#define VARINT_MAX_BYTES 5
#define MAX_FUNCS (1u << 21)    /* as OPAL_UNWIND_MAX_RULES: more could not fit */
#define MAX_FRAME (1 << 30)     /* stack offsets beyond this are garbage */

struct pcln {
	const uint8_t *tab;
	size_t size;
	uint32_t magic;
	uint64_t nfunc, text_start;
	uint64_t pctab, pctab_end;   /* [pctab, pctab_end) in tab */
	uint64_t ftab, ftab_end;     /* the pclntable: ftab, then the _funcs */
	uint32_t ent, func_fixed;    /* ftab entry and _func fixed-part sizes */
};

static uint32_t u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64(const uint8_t *p)
{
	return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
}

/* The pcHeader (runtime/symtab.go): magic, two pad bytes, minLC,
 * ptrSize, nfunc, nfiles, [textStart (1.18+)], then the offsets of
 * funcname, cu, file, pc and pcln tables, in that order. */
static int parse_header(const uint8_t *tab, size_t size, struct pcln *t)
{
	memset(t, 0, sizeof(*t));
	if (size < 72)
		return -ENOEXEC;
	t->tab = tab;
	t->size = size;
	t->magic = u32(tab);
	if ((t->magic != MAGIC_116 && t->magic != MAGIC_118 && t->magic != MAGIC_120) ||
	    tab[4] != 0 || tab[5] != 0 || tab[6] != 1 || tab[7] != 8)
		return -ENOEXEC;
	t->nfunc = u64(tab + 8);
	unsigned o = 24;   /* first offset field */
	if (t->magic != MAGIC_116) {
		t->text_start = u64(tab + 24);
		o = 32;
	}
	uint64_t pctab = u64(tab + o + 24), pcln = u64(tab + o + 32);
	if (t->nfunc == 0 || t->nfunc > MAX_FUNCS || pctab >= size || pcln >= size || pctab > pcln)
		return -ENOEXEC;
	t->pctab = pctab;
	t->pctab_end = pcln;   /* the pcln table follows the pc tables */
	t->ftab = pcln;
	t->ftab_end = size;
	t->ent = t->magic == MAGIC_116 ? 16 : 8;
	t->func_fixed = t->magic == MAGIC_116 ? 44 : t->magic == MAGIC_118 ? 40 : 44;
	if ((t->nfunc + 1) * t->ent > size - pcln)
		return -ENOEXEC;
	return 0;
}

/* Entry address and _func offset (in the pclntable) of function `i`. */
static void ftab_at(const struct pcln *t, uint64_t i, uint64_t *entry, uint64_t *funcoff)
{
	const uint8_t *p = t->tab + t->ftab + i * t->ent;
	if (t->magic == MAGIC_116) {
		*entry = u64(p);
		*funcoff = u64(p + 8);
	} else {
		*entry = t->text_start + u32(p);
		*funcoff = u32(p + 4);
	}
}

struct gofn {
	uint64_t entry, end;
	uint32_t pcsp;
	uint8_t flag;
};

/* The _func of function `i`: its entry must be the function table's and
 * the next entry above it (the table is sorted). */
static int func_at(const struct pcln *t, uint64_t i, struct gofn *f)
{
	uint64_t entry, off, next, unused;
	ftab_at(t, i, &entry, &off);
	ftab_at(t, i + 1, &next, &unused);
	if (next <= entry || off >= t->ftab_end - t->ftab || t->ftab_end - t->ftab - off < t->func_fixed)
		return -ENOEXEC;
	const uint8_t *p = t->tab + t->ftab + off;
	uint64_t fentry = t->magic == MAGIC_116 ? u64(p) : t->text_start + u32(p);
	unsigned e = t->magic == MAGIC_116 ? 8 : 4;
	if (fentry != entry)
		return -ENOEXEC;
	f->entry = entry;
	f->end = next;
	f->pcsp = u32(p + e + 12);
	f->flag = p[t->func_fixed - 3];   /* funcID, flag, pad, nfuncdata */
	return 0;
}

static int read_varint(const uint8_t **p, const uint8_t *end, uint32_t *out)
{
	uint32_t v = 0;
	for (unsigned n = 0; n < VARINT_MAX_BYTES; n++) {
		if (*p >= end)
			return -ENOEXEC;
		uint8_t b = *(*p)++;
		v |= (uint32_t)(b & 0x7f) << (7 * n);
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -ENOEXEC;
}

/* One row of a pcsp table: the stack offset `sp` holds over [lo, hi). */
struct row {
	uint64_t lo, hi;
	int32_t sp;
};

#define MAX_ROWS_PER_FUNC 4096   /* the runtime's longest has a few dozen */

/* Decodes f's pcsp table (runtime pcvalue/step: pairs of a zig-zag value
 * delta, the value starting at -1, and a pc delta; a zero value delta
 * after the first pair ends it) into rows covering [entry, end). Each
 * pair takes two bytes or more, so the walk ends at the table's end. */
static int pcsp_rows(const struct pcln *t, const struct gofn *f, struct row *rows, size_t *n)
{
	if (f->pcsp == 0 || f->pcsp >= t->pctab_end - t->pctab)
		return -ENOEXEC;
	const uint8_t *p = t->tab + t->pctab + f->pcsp, *end = t->tab + t->pctab_end;
	uint64_t pc = f->entry;
	uint32_t v = (uint32_t)-1;
	*n = 0;
	for (bool first = true; pc < f->end; first = false) {
		uint32_t uv, pcdelta;
		if (read_varint(&p, end, &uv) < 0)
			return -ENOEXEC;
		if (uv == 0 && !first)
			break;
		v += (uv & 1) ? ~(uv >> 1) : uv >> 1;
		if (read_varint(&p, end, &pcdelta) < 0)
			return -ENOEXEC;
		if (pcdelta == 0)
			continue;
		int32_t sp = (int32_t)v;
		if (sp < 0 || sp > MAX_FRAME || *n == MAX_ROWS_PER_FUNC)
			return -ENOEXEC;
		uint64_t hi = pc + pcdelta < f->end ? pc + pcdelta : f->end;
		rows[(*n)++] = (struct row){ pc, hi, sp };
		pc = hi;
	}
	return *n ? 0 : -ENOEXEC;
}

/* What the prologue does with RBP: `saved` is where the caller's RBP
 * has been stored at CFA - 16, `fp` where RBP has become this frame's
 * frame pointer (CFA - 16 too); UINT64_MAX: not done. */
struct prologue {
	uint64_t saved, fp;
	int32_t sp;        /* the frame's stack offset (its first framed row) */
};

/* Length of `op sp-8(SP), BP` (REX.W op /r, ModRM with BP and a SIB of
 * SP: no, an 8- or a 32-bit displacement) at `c` (8 bytes), else 0. */
static unsigned bp_sp_insn(const uint8_t *c, uint8_t op, int32_t d)
{
	if (c[0] != 0x48 || c[1] != op || c[3] != 0x24)
		return 0;
	if (c[2] == 0x2c && d == 0)
		return 4;
	if (c[2] == 0x6c && d < 128 && c[4] == (uint8_t)d)
		return 5;
	if (c[2] == 0xac && (int32_t)u32(c + 4) == d)
		return 8;
	return 0;
}

/* Go 1.16-1.20 start the first framed row with `MOVQ BP, sp-8(SP);
 * LEAQ sp-8(SP), BP`; Go 1.21+ enter it (sp 8) after `PUSHQ BP` with
 * `MOVQ SP, BP`. Checked on the instruction bytes; frameless functions
 * have neither and keep the caller's RBP. */
static void read_prologue(const struct opal_unwind_go_file *file, const struct row *rows,
			  size_t n, struct prologue *p)
{
	*p = (struct prologue){ UINT64_MAX, UINT64_MAX, 0 };
	for (size_t i = 0; i < n; i++) {
		if (rows[i].sp == 0)
			continue;
		uint8_t c[8];
		uint64_t at = rows[i].lo;
		unsigned len;
		p->sp = rows[i].sp;
		if (rows[i].sp == 8 && at > 0 && file->read_text(file->ctx, at - 1, c, 4) == 0 &&
		    c[0] == 0x55 && c[1] == 0x48 && c[2] == 0x89 && c[3] == 0xe5) {
			p->saved = at;
			p->fp = at + 3;
			return;
		}
		if (file->read_text(file->ctx, at, c, 8) < 0 ||
		    !(len = bp_sp_insn(c, 0x89, rows[i].sp - 8)))
			return;
		p->saved = at + len;
		if (file->read_text(file->ctx, p->saved, c, 8) == 0 &&
		    (len = bp_sp_insn(c, 0x8d, rows[i].sp - 8)))
			p->fp = p->saved + len;
		return;
	}
}

/* Bytes before `end` taken by Go 1.16-1.20's epilogue `MOVQ sp-8(SP),
 * BP; ADDQ $sp, SP` (imm8 or imm32), 0 when it is not there. */
static uint64_t epilogue_len(const struct opal_unwind_go_file *file, uint64_t lo, uint64_t end,
			     int32_t sp)
{
	uint8_t c[8];
	for (unsigned add = 4; add <= 7; add += 3) {
		if (end - lo < add + 4 || file->read_text(file->ctx, end - add, c, add) < 0 ||
		    c[0] != 0x48 || c[2] != 0xc4 ||
		    !(add == 4 ? c[1] == 0x83 && c[3] == (uint8_t)sp
			       : c[1] == 0x81 && (int32_t)u32(c + 3) == sp))
			continue;
		for (unsigned mov = 4; mov <= 8; mov++)
			if (end - lo >= add + mov &&
			    file->read_text(file->ctx, end - add - mov, c, 8) == 0 &&
			    bp_sp_insn(c, 0x8b, sp - 8) == mov)
				return add + mov;
	}
	return 0;
}

enum span_kind {
	SPAN_SP,        /* CFA from the pcsp offset, RBP unchanged */
	SPAN_SP_RBP,    /* ... and the caller's RBP saved at CFA - 16 */
	SPAN_SWITCH,    /* CFA = RBP + 16 on another stack (SPWRITE bodies) */
};

static int add_span(struct opal_unwind_builder *b, uint64_t lo, uint64_t hi, int32_t sp,
		    enum span_kind kind, bool top)
{
	if (lo >= hi)
		return 0;
	struct opal_unwind_body body = {
		.cfa = OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP),
		.cfa_off = sp + 8,
		.ra = OPAL_UNWIND_PACK(top ? OPAL_REG_UNDEFINED : OPAL_REG_AT_CFA, 0),
		.ra_off = top ? 0 : -8,
		.rbp = OPAL_UNWIND_PACK(kind == SPAN_SP ? OPAL_REG_SAME : OPAL_REG_AT_CFA, 0),
		.rbp_off = kind == SPAN_SP ? 0 : -16,
		.rbx = OPAL_UNWIND_PACK(OPAL_REG_SAME, 0),
	};
	if (kind == SPAN_SWITCH) {
		body.cfa = OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RBP);
		body.cfa_off = 16;
		body.aux = OPAL_CFA_AUX_STACK_SWITCH;
	}
	int64_t idx = opal_unwind_builder_body(b, &body);
	if (idx < 0)
		return (int)idx;
	return opal_unwind_builder_add(b, lo, hi, (uint32_t)idx);
}

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The rules of one function: per pcsp row, split where the RBP save
 * completes. A function that writes SP (SPWRITE: it switches to the
 * system stack and back, as time.now does around the vDSO) has a pcsp
 * table only for its prologue and epilogue; where its frame pointer is
 * set up, its frame is found from RBP instead, on whichever stack; one
 * without a frame pointer (systemstack, mcall, gogo) is left out (GAP).
 * Returns 0, 1 when left out, or the builder's error. */
static int func_rules(const struct opal_unwind_go_file *file, const struct gofn *f,
		      const struct row *rows, size_t n, bool spwrite,
		      struct opal_unwind_builder *b)
{
	struct prologue p;
	read_prologue(file, rows, n, &p);
	if (spwrite && p.fp == UINT64_MAX)
		return 1;
	bool top = f->flag & FUNCFLAG_TOPFRAME;
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		bool saved = r->sp > 0 && p.saved != UINT64_MAX;
		uint64_t split = clamp(p.saved, r->lo, r->hi);
		uint64_t sw_lo = r->hi, sw_hi = r->hi;   /* the SWITCH part: none */
		if (spwrite && saved && p.fp != UINT64_MAX) {
			sw_lo = clamp(p.fp, r->lo, r->hi);
			sw_hi = r->hi - epilogue_len(file, sw_lo, r->hi, p.sp);
		}
		int rc = add_span(b, r->lo, split, r->sp, SPAN_SP, top);
		if (rc == 0)
			rc = add_span(b, split, sw_lo, r->sp, saved ? SPAN_SP_RBP : SPAN_SP, top);
		if (rc == 0)
			rc = add_span(b, sw_lo, sw_hi, r->sp, SPAN_SWITCH, top);
		if (rc == 0)
			rc = add_span(b, sw_hi, r->hi, r->sp, saved ? SPAN_SP_RBP : SPAN_SP, top);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int opal_unwind_go_rules(const uint8_t *tab, size_t size, const struct opal_unwind_go_file *file,
			 struct opal_unwind_builder *b, struct opal_unwind_go_stats *st)
{
	struct pcln t;
	struct gofn f;

	memset(st, 0, sizeof(*st));
	int rc = parse_header(tab, size, &t);
	struct row *rows = rc == 0 ? malloc(MAX_ROWS_PER_FUNC * sizeof(*rows)) : NULL;
	if (rc == 0 && !rows)
		return -ENOMEM;
	/* check the whole function table before adding anything */
	for (uint64_t i = 0; rc == 0 && i < t.nfunc; i++)
		rc = func_at(&t, i, &f);
	for (uint64_t i = 0; rc == 0 && i < t.nfunc; i++) {
		size_t n;
		func_at(&t, i, &f);
		/* rt0_go is both: it ends the walk */
		bool spwrite = (f.flag & (FUNCFLAG_SPWRITE | FUNCFLAG_TOPFRAME)) == FUNCFLAG_SPWRITE;
		if (!file->usable(file->ctx, f.entry, f.end) || pcsp_rows(&t, &f, rows, &n) < 0 ||
		    (rc = func_rules(file, &f, rows, n, spwrite, b)) == 1) {
			st->skipped++;
			rc = 0;
			continue;
		}
		st->funcs++;
	}
	free(rows);
	return rc;
}
