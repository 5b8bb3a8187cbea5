/* Internals shared by gopclntab.c (decoding) and gopclntab_find.c
 * (locating the table and the moduledata). Not part of the API. */
#ifndef OPAL_GOPCLNTAB_IMPL_H
#define OPAL_GOPCLNTAB_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "symbolize/gopclntab.h"

#define GOPCLN_MAGIC_12  0xfffffffbu   /* Go 1.2-1.15: refused */
#define GOPCLN_MAGIC_116 0xfffffffau
#define GOPCLN_MAGIC_118 0xfffffff0u
#define GOPCLN_MAGIC_120 0xfffffff1u

/* PT_LOAD segments kept (Go binaries have 3-5); later ones are ignored. */
#define GOPCLN_MAX_LOADS 32

struct gopcln_seg {
	uint64_t vaddr;
	uint64_t offset;
	uint64_t filesz;   /* clamped to the file's bytes */
	uint32_t flags;    /* PF_X, PF_W, PF_R */
};

/* One sub-table of the pclntab: [off, off + size) from the header. */
struct gopcln_range {
	uint64_t off;
	uint64_t size;
};

struct opal_gopclntab {
	const uint8_t *img;   /* the whole file (elf_rawfile) */
	size_t img_size;
	uint16_t machine;
	struct gopcln_seg segs[GOPCLN_MAX_LOADS];
	unsigned nsegs;

	enum opal_gopclntab_format format;
	enum opal_gopclntab_found found;
	uint32_t ptr_size;
	uint32_t quantum;
	const uint8_t *tab;   /* header's first byte, inside img */
	uint64_t tab_size;    /* bytes from the header to the section/segment end */
	uint64_t tab_vaddr;
	uint64_t nfunc;
	uint64_t text_start;  /* 1.18+: base of entry offsets */
	struct gopcln_range funcname, cutab, filetab, pctab, pcln;

	bool have_gofunc;     /* 1.18+: go:func.* known (from the moduledata) */
	uint64_t gofunc;
};

/* Little-endian loads from bytes already bounds-checked by the caller. */
static inline uint32_t gopcln_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t gopcln_u64(const uint8_t *p)
{
	return (uint64_t)gopcln_u32(p) | (uint64_t)gopcln_u32(p + 4) << 32;
}

static inline uint64_t gopcln_word(const uint8_t *p, uint32_t ptr_size)
{
	return ptr_size == 8 ? gopcln_u64(p) : gopcln_u32(p);
}

/* `len` bytes at ELF virtual address `vaddr` if they lie in the file
 * bytes of one PT_LOAD segment, else NULL. */
const uint8_t *gopcln_map(const struct opal_gopclntab *r, uint64_t vaddr, uint64_t len);

/* The segment holding vaddr in its file bytes, or NULL. */
const struct gopcln_seg *gopcln_seg_of(const struct opal_gopclntab *r, uint64_t vaddr);

/* Parses and checks the header at `tab` (`size` bytes to the end of its
 * section or segment, virtual address `vaddr`) into r's format, sizes
 * and sub-table ranges; `strict` adds the checks that a scanned candidate
 * needs (minLC for the machine, the first functions sorted and matching).
 * Returns 0, -EPROTONOSUPPORT (Go 1.2-1.15), or -EINVAL. */
int gopcln_parse_header(struct opal_gopclntab *r, const uint8_t *tab, uint64_t size,
			uint64_t vaddr, bool strict);

/* Locates the table of r's file (r->img, segments loaded) and, for 1.18+,
 * the moduledata's go:func.* and text. Returns 0, -ENOENT,
 * -EPROTONOSUPPORT or -EINVAL. */
int gopcln_locate(struct opal_gopclntab *r, Elf *elf);

#endif
