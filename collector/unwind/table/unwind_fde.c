/* FDE range enumeration over a raw .eh_frame / .debug_frame section. */
#include "unwind/table/unwind_fde.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "unwind/table/unwind_prog.h"

#define FDE_FIRST_CAP 64   /* CIEs and FDE ranges first allocated */

/* What an FDE needs from its CIE. */
struct cie_info {
	uint64_t offset;              /* section offset of the CIE */
	struct opal_cfi_prog prog;    /* its initial instructions */
	uint8_t enc;                  /* DW_EH_PE_* of initial_location */
	bool usable;                  /* augmentation understood */
	bool sized_aug;               /* 'z': FDEs carry a sized augmentation */
};

struct cie_list {
	struct cie_info *v;    /* sorted by offset (section order) */
	size_t n, cap;
};

static int read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0; *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
		if (shift > 63)
			return -1;
	}
	return -1;
}

static int read_sleb(const uint8_t **p, const uint8_t *end, int64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		if (*p >= end || shift > 63)
			return -1;
		b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	*out = (int64_t)v;
	return 0;
}

static uint64_t read_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Reads one DW_EH_PE-encoded value at *p (advancing it). `field_vaddr` is
 * the ELF virtual address of *p, for DW_EH_PE_pcrel; `apply` is false for
 * address_range, which uses only the value format. Returns 0, or -1 for a
 * truncated field or an encoding opal does not decode (indirect,
 * textrel/datarel/funcrel/aligned: never used by x86-64 toolchains for FDEs). */
static int read_encoded(uint8_t enc, bool apply, const uint8_t **p, const uint8_t *end,
			uint64_t field_vaddr, uint64_t *out)
{
	uint64_t v;
	size_t avail = (size_t)(end - *p);

	if (enc == DW_EH_PE_omit || (enc & DW_EH_PE_indirect))
		return -1;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		if (avail < 8)
			return -1;
		v = read_le(*p, 8);
		*p += 8;
		break;
	case DW_EH_PE_udata4:
		if (avail < 4)
			return -1;
		v = read_le(*p, 4);
		*p += 4;
		break;
	case DW_EH_PE_sdata4:
		if (avail < 4)
			return -1;
		v = (uint64_t)(int64_t)(int32_t)(uint32_t)read_le(*p, 4);
		*p += 4;
		break;
	case DW_EH_PE_udata2:
		if (avail < 2)
			return -1;
		v = read_le(*p, 2);
		*p += 2;
		break;
	case DW_EH_PE_sdata2:
		if (avail < 2)
			return -1;
		v = (uint64_t)(int64_t)(int16_t)(uint16_t)read_le(*p, 2);
		*p += 2;
		break;
	case DW_EH_PE_uleb128:
		if (read_uleb(p, end, &v) < 0)
			return -1;
		break;
	case DW_EH_PE_sleb128: {
		int64_t s;
		if (read_sleb(p, end, &s) < 0)
			return -1;
		v = (uint64_t)s;
		break;
	}
	default:
		return -1;
	}
	if (apply) {
		switch (enc & 0x70) {
		case DW_EH_PE_absptr:
			break;
		case DW_EH_PE_pcrel:
			v += field_vaddr;
			break;
		default:
			return -1;
		}
	}
	*out = v;
	return 0;
}

/* Finds the FDE pointer encoding in a CIE's augmentation (LSB: 'z' first,
 * then one augmentation-data item per letter). */
static bool cie_fde_encoding(const Dwarf_CIE *cie, uint8_t *enc)
{
	const char *aug = cie->augmentation;

	*enc = DW_EH_PE_absptr;
	if (!aug || aug[0] == '\0')
		return true;
	if (aug[0] != 'z')
		return false;   /* old "eh" style: layout unknown */
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end = p ? p + cie->augmentation_data_size : NULL;
	if (!p)
		return aug[1] == '\0';
	/* The augmentation string lives in the section: bound the walk by the
	 * data it describes (every letter but S/B/G consumes a byte). */
	for (size_t i = 1; aug[i] != '\0' && i < 64; i++) {
		switch (aug[i]) {
		case 'R':
			if (p >= end)
				return false;
			*enc = *p++;
			break;
		case 'L':
			if (p >= end)
				return false;
			p++;
			break;
		case 'P': {
			uint64_t ignored;
			if (p >= end)
				return false;
			uint8_t penc = *p++;
			/* personality pointer: skip its value (no application) */
			if (read_encoded((uint8_t)(penc & 0x7f), false, &p, end, 0, &ignored) < 0)
				return false;
			break;
		}
		case 'S':   /* signal frame: no data */
		case 'B':   /* AArch64 BTI / G MTE: no data */
		case 'G':
			break;
		default:
			/* 'z' gives the data size, but the position of R after an
			 * unknown letter is unknown */
			return false;
		}
	}
	return true;
}

static const struct cie_info *find_cie(const struct cie_list *l, uint64_t off)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid].offset == off)
			return &l->v[mid];
		if (l->v[mid].offset < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Checks the instructions of an FDE (after its augmentation data, from
 * `p` to `end`) and its CIE's, and sets r->usable and r->cost. */
static void check_fde_program(const struct cie_info *ci, const uint8_t *p, const uint8_t *end,
			      struct opal_fde_range *r)
{
	struct opal_cfi_prog prog;
	uint64_t aug_len = 0;

	/* libdw ignores an FDE whose augmentation runs past its end; it
	 * stays in the list (for the overlap check) but is never walked */
	if (ci->sized_aug && (read_uleb(&p, end, &aug_len) < 0 || aug_len > (uint64_t)(end - p))) {
		r->usable = false;
		return;
	}
	p += aug_len;
	opal_cfi_prog_check(p, end, ci->enc, &prog);
	r->usable = ci->prog.ok && prog.ok;
	r->cost = opal_cfi_lookup_cost(&ci->prog, &prog);
}

/* Calls dwarf_next_cfi for every entry in offset order, the way libdw's
 * own linear FDE search does: an entry it cannot parse is skipped when the
 * parse advanced, and ends the walk otherwise. Pass 0 records CIEs, pass 1
 * decodes FDEs. */
static int scan_pass(int pass, const unsigned char *e_ident, Elf_Data *data, bool eh_frame,
		     uint64_t sh_addr, size_t max_fdes, struct cie_list *cies,
		     struct opal_fde_list *out, struct opal_fde_scan_stats *st)
{
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	size_t n_fdes = 0;

	/* the progress check bounds the loop by the section size */
	while (off < data->d_size) {
		next = off;
		int rc = dwarf_next_cfi(e_ident, data, eh_frame, off, &next, &e);
		if (rc > 0)
			break;
		if (next <= off || next == (Dwarf_Off)-1) {
			if (pass == 1)
				st->errors++;
			break;
		}
		if (rc < 0) {
			if (pass == 1)
				st->errors++;
		} else if (e.CIE_id == LIBDW_CIE_ID) {
			if (pass == 0) {
				if (cies->n >= max_fdes)
					return -E2BIG;
				if (opal_array_reserve((void **)&cies->v, &cies->cap, cies->n + 1,
						       sizeof(*cies->v), FDE_FIRST_CAP))
					return -ENOMEM;
				struct cie_info *ci = &cies->v[cies->n++];
				ci->offset = off;
				ci->usable = cie_fde_encoding(&e.cie, &ci->enc);
				ci->sized_aug = e.cie.augmentation && e.cie.augmentation[0] == 'z';
				opal_cfi_prog_check(e.cie.initial_instructions,
						    e.cie.initial_instructions_end, ci->enc, &ci->prog);
			}
		} else if (pass == 1) {
			if (++n_fdes > max_fdes)
				return -E2BIG;
			/* libdw would still use an FDE opal cannot decode (or one
			 * whose CIE lies off the chain) for addresses the builder
			 * then could not bound: reject the section */
			const struct cie_info *ci = find_cie(cies, e.fde.CIE_pointer);
			const uint8_t *p = e.fde.start, *end = e.fde.end;
			uint64_t field = sh_addr + (uint64_t)(p - (const uint8_t *)data->d_buf);
			uint64_t lo, len;
			if (!ci || !ci->usable ||
			    read_encoded(ci->enc, true, &p, end, field, &lo) < 0 ||
			    read_encoded((uint8_t)(ci->enc & 0x0f), false, &p, end, 0, &len) < 0 ||
			    lo + len < lo)
				return -ENOEXEC;
			if (len == 0) {
				st->skipped++;   /* covers no address */
			} else {
				if (opal_array_reserve((void **)&out->v, &out->cap, out->n + 1,
						       sizeof(*out->v), FDE_FIRST_CAP))
					return -ENOMEM;
				struct opal_fde_range *r = &out->v[out->n++];
				*r = (struct opal_fde_range){ .lo = lo, .hi = lo + len };
				check_fde_program(ci, p, end, r);
			}
		}
		off = next;
	}
	return 0;
}

int opal_fde_scan(const unsigned char *e_ident, Elf_Data *data, bool eh_frame,
		  uint64_t sh_addr, size_t max_fdes, struct opal_fde_list *out,
		  struct opal_fde_scan_stats *st)
{
	struct cie_list cies = {0};
	int rc;

	if (!data || !data->d_buf || data->d_size == 0)
		return 0;
	rc = scan_pass(0, e_ident, data, eh_frame, sh_addr, max_fdes, &cies, out, st);
	if (rc == 0)
		rc = scan_pass(1, e_ident, data, eh_frame, sh_addr, max_fdes, &cies, out, st);
	free(cies.v);
	return rc;
}

void opal_fde_list_free(struct opal_fde_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}
