/* PT_LOAD table, GNU build ID and .gnu_debuglink of an ELF file, via libelf. */
#include "proc/elfinfo.h"

#include <errno.h>
#include <string.h>
#include <gelf.h>
#include <libelf.h>

#define MAX_NOTE_BYTES (1u << 20)   /* a PT_NOTE larger than this is ignored */

static void read_build_id(Elf *elf, size_t phnum, struct opal_elf_info *out)
{
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (ph.p_filesz == 0 || ph.p_filesz > MAX_NOTE_BYTES)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						   ELF_T_NHDR);
		if (!d)
			continue;
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;
		while (off < d->d_size &&
		       (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp((char *)d->d_buf + name_off, "GNU", 4) == 0 &&
			    nh.n_descsz > 0 && nh.n_descsz <= OPAL_BUILD_ID_MAX) {
				memcpy(out->build_id, (char *)d->d_buf + desc_off, nh.n_descsz);
				out->build_id_len = nh.n_descsz;
				return;
			}
		}
	}
}

/* The name, padding to 4 bytes and CRC-32 of a .gnu_debuglink section. */
#define MAX_DEBUGLINK_BYTES (OPAL_ELF_DEBUGLINK_MAX + 8)
#define MAX_SHSTRTAB_BYTES  (1u << 20)   /* larger section-name tables: no debuglink read */

static void read_debuglink(Elf *elf, const GElf_Ehdr *eh, struct opal_elf_info *out)
{
	size_t shnum, shstrndx;
	GElf_Shdr strsh;

	if (elf_getshdrnum(elf, &shnum) != 0 || shnum > OPAL_ELF_MAX_SECTIONS ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	/* elf_strptr reads the whole section-name table: bound it first. */
	Elf_Scn *strscn = elf_getscn(elf, shstrndx);
	if (!strscn || !gelf_getshdr(strscn, &strsh) || strsh.sh_size > MAX_SHSTRTAB_BYTES)
		return;
	Elf_Scn *scn = NULL;
	for (size_t i = 0; i < shnum && (scn = elf_nextscn(elf, scn)); i++) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".gnu_debuglink") != 0)
			continue;
		if (sh.sh_size < 8 || sh.sh_size > MAX_DEBUGLINK_BYTES)
			return;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size != sh.sh_size)
			return;
		const uint8_t *b = d->d_buf;
		size_t len = strnlen((const char *)b, d->d_size);
		size_t crc_off = (len + 4) & ~(size_t)3;   /* past the NUL, 4-aligned */
		if (len == 0 || len >= OPAL_ELF_DEBUGLINK_MAX || crc_off + 4 > d->d_size)
			return;
		uint32_t crc = eh->e_ident[EI_DATA] == ELFDATA2MSB ?
			(uint32_t)b[crc_off] << 24 | (uint32_t)b[crc_off + 1] << 16 |
				(uint32_t)b[crc_off + 2] << 8 | b[crc_off + 3] :
			(uint32_t)b[crc_off + 3] << 24 | (uint32_t)b[crc_off + 2] << 16 |
				(uint32_t)b[crc_off + 1] << 8 | b[crc_off];
		memcpy(out->debuglink, b, len);
		out->debuglink[len] = '\0';
		out->debuglink_crc = crc;
		out->has_debuglink = true;
		return;
	}
}

int opal_elf_info_from_fd(int fd, struct opal_elf_info *out)
{
	GElf_Ehdr eh;
	size_t phnum;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	/* ELF_C_READ (pread), not mmap: a file truncated under us must give
	 * an error, not SIGBUS in a root daemon. */
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &phnum) != 0) {
		err = -ENOEXEC;
		goto out;
	}
	out->e_type = eh.e_type;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph)) {
			err = -ENOEXEC;
			goto out;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (out->n_loads == OPAL_ELF_MAX_LOADS) {
			err = -E2BIG;
			goto out;
		}
		out->loads[out->n_loads++] = (struct opal_load_segment){
			.vaddr = ph.p_vaddr, .offset = ph.p_offset, .filesz = ph.p_filesz,
			.memsz = ph.p_memsz, .flags = ph.p_flags,
		};
	}
	read_build_id(elf, phnum, out);
	read_debuglink(elf, &eh, out);
out:
	elf_end(elf);
	return err;
}

int opal_elf_offset_to_vaddr(const struct opal_elf_info *info, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < info->n_loads; i++) {
		const struct opal_load_segment *s = &info->loads[i];
		if (off >= s->offset && off - s->offset < s->filesz) {
			*vaddr = off - s->offset + s->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

int opal_elf_load_bias(const struct opal_elf_info *info, uint64_t start, uint64_t limit,
		       uint64_t file_offset, bool executable, uint64_t *bias)
{
	const struct opal_load_segment *best = NULL;
	uint64_t best_overlap = 0;
	bool best_match = false;
	uint64_t map_lo = file_offset, map_hi = file_offset + (limit - start);

	for (size_t i = 0; i < info->n_loads; i++) {
		const struct opal_load_segment *s = &info->loads[i];
		/* mmap rounds p_offset down to a page: compare page-aligned ranges.
		 * Only p_filesz bytes come from the file: the rest of p_memsz
		 * (.bss) is anonymous memory, and its file offsets belong to the
		 * next segments. */
		uint64_t lo = s->offset & ~(uint64_t)0xfff, hi = s->offset + s->filesz;
		uint64_t a = lo > map_lo ? lo : map_lo, b = hi < map_hi ? hi : map_hi;
		if (a >= b)
			continue;
		bool match = !!(s->flags & PF_X) == executable;
		uint64_t overlap = b - a;
		if (!best || (match && !best_match) ||
		    (match == best_match && overlap > best_overlap)) {
			best = s;
			best_overlap = overlap;
			best_match = match;
		}
	}
	if (!best)
		return -ENOENT;
	/* runtime = start + (off - file_offset); vaddr = off - p_offset + p_vaddr */
	*bias = start - file_offset + best->offset - best->vaddr;
	return 0;
}
