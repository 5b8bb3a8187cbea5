/* Locating Go's pclntab in an ELF file: by section name, through the
 * runtime's moduledata, or by the header's magic; and, for 1.18+, reading
 * go:func.* (the base of funcdata offsets, where inline trees live) and
 * the text address from the moduledata.
 *
 * moduledata (Go 1.19 src/runtime/symtab.go; the same prefix in 1.16,
 * and in 1.20-1.25 with covctrs/ecovctrs inserted), as words:
 *   0 pcHeader, 1-3 funcnametab, 4-6 cutab, 7-9 filetab, 10-12 pctab,
 *   13-15 pclntable, 16-18 ftab (slices: ptr, len, cap), 19 findfunctab,
 *   20 minpc, 21 maxpc, 22 text, 23 etext, 24-31 noptrdata..enoptrbss,
 *   1.16/1.17: 32 end, 33 gcdata, 34 gcbss, 35 types, 36 etypes;
 *   1.18/1.19: ... 37 rodata, 38 gofunc;
 *   1.20+: 32 covctrs, 33 ecovctrs, 34 end ... 39 rodata, 40 gofunc.
 * The linker writes link-time addresses into the file also in PIE
 * binaries (Go's linker and GNU ld on x86-64 both do, besides the
 * R_X86_64_RELATIVE relocations), so no relocation is applied. */
#include <errno.h>
#include <gelf.h>
#include <string.h>
#include "symbolize/gopclntab_impl.h"

#define MD_TEXT          22
#define MD_GOFUNC_118    38
#define MD_GOFUNC_120    40
#define MD_WORDS_MAX     41

/* Sections examined at most when looking for the table by name; program
 * headers and notes per PT_NOTE examined when looking for Go's note. */
#define MAX_SECTIONS     65536
#define MAX_PHDRS        4096
#define MAX_NOTES        64
#define GO_NOTE_BUILD_ID 4

static bool is_magic(uint32_t m)
{
	return m == GOPCLN_MAGIC_116 || m == GOPCLN_MAGIC_118 || m == GOPCLN_MAGIC_120;
}

/* Parses the header at vaddr `hv`, which must lie in a segment's file
 * bytes; the table may run to that segment's end. */
static int header_at(struct opal_gopclntab *r, uint64_t hv, bool strict)
{
	const struct gopcln_seg *s = gopcln_seg_of(r, hv);
	if (!s)
		return -EINVAL;
	uint64_t in = hv - s->vaddr;
	return gopcln_parse_header(r, r->img + s->offset + in, s->filesz - in, hv, strict);
}

/* Does the moduledata at `md` (md_words() words available) describe the
 * table in r? Its slices must start at the header's sub-tables, and ftab
 * must hold nfunc + 1 entries. */
static bool md_matches(const struct opal_gopclntab *r, const uint8_t *md)
{
	uint32_t ps = r->ptr_size;
	uint64_t hv = r->tab_vaddr;
#define MDW(i) gopcln_word(md + (uint64_t)(i) * ps, ps)
	return MDW(0) == hv && MDW(1) == hv + r->funcname.off && MDW(4) == hv + r->cutab.off &&
	       MDW(7) == hv + r->filetab.off && MDW(10) == hv + r->pctab.off &&
	       MDW(13) == hv + r->pcln.off && MDW(16) == hv + r->pcln.off &&
	       MDW(17) == r->nfunc + 1;
#undef MDW
}

/* Takes what the moduledata gives: text (when the header's textStart is
 * 0) and, for 1.18+, go:func.* when it lies in the file. */
static void md_use(struct opal_gopclntab *r, const uint8_t *md)
{
	uint32_t ps = r->ptr_size;
	if (r->format == OPAL_GOPCLNTAB_GO116)
		return;
	if (r->text_start == 0)
		r->text_start = gopcln_word(md + MD_TEXT * ps, ps);
	unsigned gi = r->format == OPAL_GOPCLNTAB_GO120 ? MD_GOFUNC_120 : MD_GOFUNC_118;
	uint64_t gofunc = gopcln_word(md + (uint64_t)gi * ps, ps);
	if (gopcln_seg_of(r, gofunc)) {
		r->gofunc = gofunc;
		r->have_gofunc = true;
	}
}

/* Scans the writable PT_LOADs' file bytes, word by aligned word, for the
 * moduledata. With `known` the table is already parsed and only its
 * address is looked for; without, each word that points at a magic is
 * tried as a header (strictly checked) before the slices are compared.
 * Returns 0 (moduledata used), -ENOENT. */
static int find_moduledata(struct opal_gopclntab *r, bool known)
{
	uint32_t ps = r->ptr_size;
	for (unsigned si = 0; si < r->nsegs; si++) {
		const struct gopcln_seg s = r->segs[si];
		if (!(s.flags & PF_W))
			continue;
		const uint8_t *base = r->img + s.offset;
		uint64_t o = (ps - s.vaddr % ps) % ps;
		for (; o < s.filesz && s.filesz - o >= (uint64_t)MD_WORDS_MAX * ps; o += ps) {
			uint64_t hv = gopcln_word(base + o, ps);
			if (known) {
				if (hv != r->tab_vaddr || !md_matches(r, base + o))
					continue;
				md_use(r, base + o);
				return 0;
			}
			const uint8_t *m = gopcln_map(r, hv, 4);
			if (!m || !is_magic(gopcln_u32(m)))
				continue;
			struct opal_gopclntab cand = *r;
			if (header_at(&cand, hv, true) < 0 || !md_matches(&cand, base + o))
				continue;
			*r = cand;
			r->found = OPAL_GOPCLNTAB_BY_MODULEDATA;
			md_use(r, base + o);
			return 0;
		}
	}
	return -ENOENT;
}

/* A section named as Go's linker (.gopclntab) or, in PIE, its relro
 * variant names it. Returns 0, -ENOENT, or the header's error. */
static int by_section(struct opal_gopclntab *r, Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOENT;
	Elf_Scn *scn = NULL;
	for (unsigned n = 0; n < MAX_SECTIONS && (scn = elf_nextscn(elf, scn)); n++) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || (strcmp(name, ".gopclntab") != 0 &&
			      strcmp(name, ".data.rel.ro.gopclntab") != 0))
			continue;
		if (sh.sh_offset >= r->img_size)
			return -EINVAL;
		uint64_t size = sh.sh_size < r->img_size - sh.sh_offset ? sh.sh_size
									 : r->img_size - sh.sh_offset;
		r->found = OPAL_GOPCLNTAB_BY_SECTION;
		return gopcln_parse_header(r, r->img + sh.sh_offset, size, sh.sh_addr, false);
	}
	return -ENOENT;
}

/* Scans every PT_LOAD's file bytes (4-aligned by address) for a header
 * that passes the strict check. A Go 1.2-1.15 magic with a plausible
 * start is remembered to explain a miss. */
static int by_magic(struct opal_gopclntab *r)
{
	int miss = -ENOENT;
	for (unsigned si = 0; si < r->nsegs; si++) {
		const struct gopcln_seg s = r->segs[si];
		const uint8_t *base = r->img + s.offset;
		for (uint64_t o = (4 - s.vaddr % 4) % 4; o < s.filesz && s.filesz - o >= 8; o += 4) {
			uint32_t m = gopcln_u32(base + o);
			if (m == GOPCLN_MAGIC_12 && !base[o + 4] && !base[o + 5] &&
			    base[o + 7] == r->ptr_size)
				miss = -EPROTONOSUPPORT;
			if (!is_magic(m))
				continue;
			struct opal_gopclntab cand = *r;
			if (gopcln_parse_header(&cand, base + o, s.filesz - o, s.vaddr + o, true) < 0)
				continue;
			*r = cand;
			r->found = OPAL_GOPCLNTAB_BY_MAGIC;
			return 0;
		}
	}
	return miss;
}

/* Does a PT_NOTE hold Go's build ID note (owner "Go\0\0", type 4, written by
 * Go's linker, Go 1.19 cmd/link/internal/ld/elf.go)? Notes read within
 * the segment's file bytes, at most MAX_NOTES of them. */
static bool has_go_note(const struct opal_gopclntab *r, Elf *elf)
{
	size_t phnum;
	if (elf_getphdrnum(elf, &phnum) != 0)
		return false;
	for (size_t i = 0; i < phnum && i < MAX_PHDRS; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
		    ph.p_offset >= r->img_size)
			continue;
		uint64_t end = ph.p_filesz < r->img_size - ph.p_offset ? ph.p_filesz
								      : r->img_size - ph.p_offset;
		const uint8_t *n = r->img + ph.p_offset;
		for (uint64_t o = 0, k = 0; k < MAX_NOTES && end - o >= 12; k++) {
			uint32_t namesz = gopcln_u32(n + o), descsz = gopcln_u32(n + o + 4);
			uint32_t type = gopcln_u32(n + o + 8);
			uint64_t name_end = o + 12 + (((uint64_t)namesz + 3) & ~3ull);
			if (name_end > end)
				break;
			if (type == GO_NOTE_BUILD_ID && namesz == 4 && memcmp(n + o + 12, "Go\0\0", 4) == 0)
				return true;
			o = name_end + (((uint64_t)descsz + 3) & ~3ull);
			if (o > end)
				break;
		}
	}
	return false;
}

/* Scanning a file's bytes for the moduledata or the magic is for Go
 * binaries whose section headers were stripped: a file with sections and
 * without a .gopclntab is not Go unless it carries Go's note (without
 * this, every library the symbolizer opens would be scanned). */
static bool worth_scanning(const struct opal_gopclntab *r, Elf *elf)
{
	size_t shnum;
	if (elf_getshdrnum(elf, &shnum) != 0 || shnum <= 1)
		return true;
	return has_go_note(r, elf);
}

int gopcln_locate(struct opal_gopclntab *r, Elf *elf)
{
	bool have_md = false;
	int rc = by_section(r, elf);
	if (rc == -ENOENT && !worth_scanning(r, elf))
		return -ENOENT;
	if (rc == -ENOENT) {
		rc = find_moduledata(r, false);
		have_md = rc == 0;
	}
	if (rc == -ENOENT)
		rc = by_magic(r);
	if (rc < 0)
		return rc;
	if (!have_md && r->format != OPAL_GOPCLNTAB_GO116)
		find_moduledata(r, true);
	/* 1.18+ entries are offsets from textStart. */
	if (r->format != OPAL_GOPCLNTAB_GO116 && r->text_start == 0)
		return -EINVAL;
	return 0;
}
