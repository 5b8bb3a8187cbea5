/* --only-keep-debug copy with libelf (debuginfo_keep.h). The output is laid out
 * by hand (ELF_F_LAYOUT): header, program headers, then the kept sections
 * in index order at their alignment, then the section header table. The
 * input is probed first (debuginfo_probe.h), so every section read is inside
 * the file. */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "base/why.h"
#include "debuginfo/debuginfo_keep.h"
#include "debuginfo/debuginfo_probe.h"

struct sec_map {
	uint64_t old_off, new_off, size;
	bool has_bytes;     /* bytes present in the input file */
	bool kept;          /* bytes copied to the output */
};

static bool keep_bytes(const GElf_Shdr *sh)
{
	if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL)
		return false;
	return !(sh->sh_flags & SHF_ALLOC) || sh->sh_type == SHT_NOTE;
}

/* New file offset and size of program header `ph`: its bytes are kept
 * when every section with bytes inside it is kept and sits at the same
 * distance from the segment start as before. */
static void map_phdr(GElf_Phdr *ph, const struct sec_map *m, size_t n)
{
	uint64_t a = ph->p_offset, b = ph->p_offset + ph->p_filesz;
	bool ok = ph->p_filesz > 0, found = false;
	uint64_t new_start = 0;
	for (size_t i = 1; i < n && ok; i++) {
		if (!m[i].has_bytes || m[i].size == 0)
			continue;
		uint64_t s = m[i].old_off, e = m[i].old_off + m[i].size;
		if (e <= a || s >= b)
			continue;
		if (!m[i].kept || s < a) {
			ok = false;
			break;
		}
		uint64_t start = m[i].new_off - (s - a);
		if (found && start != new_start)
			ok = false;
		new_start = start;
		found = true;
	}
	if (ok && found) {
		ph->p_offset = new_start;
	} else {
		ph->p_offset = 0;
		ph->p_filesz = 0;
	}
}

/* Section alignments above this are refused: the copy places sections by
 * their alignment, and a crafted 2^40 would make libelf write that much
 * padding. Real files use 1 to 64 for what is kept. */
#define KEEP_MAX_ALIGN 4096
/* The copy is at most the input's size plus this much padding. */
#define KEEP_MAX_GROWTH (16u << 20)

static int copy(Elf *in, Elf *out, bool alloc, uint64_t in_size, char *why, size_t why_len)
{
	GElf_Ehdr eh;
	size_t phnum, shnum;
	if (!gelf_getehdr(in, &eh) || elf_getphdrnum(in, &phnum) != 0 ||
	    elf_getshdrnum(in, &shnum) != 0)
		return opal_why(why, why_len, -EBADMSG, "malformed ELF: %s", elf_errmsg(-1));
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN && !(eh.e_type == ET_REL && !alloc))
		return opal_why(why, why_len, -ENOEXEC,
				"ELF type %u is not an executable or library",
				(unsigned)eh.e_type);
	int cls = gelf_getclass(in);
	if (!gelf_newehdr(out, cls) || (phnum && !gelf_newphdr(out, phnum)))
		return opal_why(why, why_len, -ENOMEM, "libelf: %s", elf_errmsg(-1));

	struct sec_map *m = calloc(shnum ? shnum : 1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	uint64_t off = cls == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	uint64_t phsize = cls == ELFCLASS64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	uint64_t phoff = phnum ? off : 0;
	off += phnum * phsize;

	int r = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(in, scn)) != NULL) {
		size_t idx = elf_ndxscn(scn);
		GElf_Shdr sh;
		if (idx >= shnum || !gelf_getshdr(scn, &sh)) {
			r = opal_why(why, why_len, -EBADMSG, "malformed ELF: section %zu", idx);
			goto out;
		}
		Elf_Scn *os = elf_newscn(out);
		if (!os || elf_ndxscn(os) != idx) {
			r = opal_why(why, why_len, -ENOMEM, "libelf: %s", elf_errmsg(-1));
			goto out;
		}
		m[idx].old_off = sh.sh_offset;
		m[idx].size = sh.sh_size;
		m[idx].has_bytes = sh.sh_type != SHT_NOBITS;
		if (keep_bytes(&sh) && sh.sh_size > 0) {
			Elf_Data *d = elf_rawdata(scn, NULL);
			if (!d || d->d_size != sh.sh_size) {
				r = opal_why(why, why_len, -EBADMSG,
					     "unreadable section %zu: %s", idx,
					     elf_errmsg(-1));
				goto out;
			}
			Elf_Data *od = elf_newdata(os);
			if (!od) {
				r = opal_why(why, why_len, -ENOMEM, "libelf: %s", elf_errmsg(-1));
				goto out;
			}
			od->d_buf = d->d_buf;   /* owned by `in`, alive until elf_update */
			od->d_size = d->d_size;
			od->d_type = ELF_T_BYTE;
			od->d_off = 0;
			od->d_align = 1;
			od->d_version = EV_CURRENT;
			uint64_t align = sh.sh_addralign > 1 ? sh.sh_addralign : 1;
			if (align & (align - 1))
				align = 1;
			if (align > KEEP_MAX_ALIGN) {
				r = opal_why(why, why_len, -EBADMSG,
					     "section %zu: alignment %llu over %u",
					     idx, (unsigned long long)align, KEEP_MAX_ALIGN);
				goto out;
			}
			off = (off + align - 1) & ~(align - 1);
			if (off + sh.sh_size > in_size + KEEP_MAX_GROWTH) {
				r = opal_why(why, why_len, -EFBIG,
					     "the debug copy would be larger than "
					     "the file (section %zu)", idx);
				goto out;
			}
			sh.sh_offset = off;
			m[idx].new_off = off;
			m[idx].kept = true;
			off += sh.sh_size;
		} else {
			if (sh.sh_type != SHT_NULL)
				sh.sh_type = SHT_NOBITS;
			sh.sh_offset = off;
			m[idx].new_off = off;
		}
		if (!gelf_update_shdr(os, &sh)) {
			r = opal_why(why, why_len, -EBADMSG, "libelf: %s", elf_errmsg(-1));
			goto out;
		}
	}
	/* Section 0 carries the counts of extended section numbering. */
	GElf_Shdr sh0;
	Elf_Scn *in0 = elf_getscn(in, 0), *out0 = elf_getscn(out, 0);
	if (in0 && out0 && gelf_getshdr(in0, &sh0))
		gelf_update_shdr(out0, &sh0);

	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(in, (int)i, &ph)) {
			r = opal_why(why, why_len, -EBADMSG, "malformed program header %zu", i);
			goto out;
		}
		if (ph.p_type == PT_PHDR)
			ph.p_offset = phoff;
		else
			map_phdr(&ph, m, shnum);
		gelf_update_phdr(out, (int)i, &ph);
	}

	GElf_Ehdr oh = eh;
	oh.e_phoff = phoff;
	oh.e_shoff = (off + 7) & ~(uint64_t)7;
	if (!gelf_update_ehdr(out, &oh)) {
		r = opal_why(why, why_len, -EBADMSG, "libelf: %s", elf_errmsg(-1));
		goto out;
	}
	elf_flagelf(out, ELF_C_SET, ELF_F_LAYOUT);
	if (elf_update(out, ELF_C_WRITE) < 0)
		r = opal_why(why, why_len, -EIO, "writing the debug file: %s", elf_errmsg(-1));
out:
	free(m);
	return r;
}

int opal_keep_debug_write(int in_fd, int out_fd, char *why, size_t why_len)
{
	struct opal_elf_probe p;
	int r = opal_elf_probe_fd(in_fd, &p, why, why_len);
	if (r < 0)
		return r;
	elf_version(EV_CURRENT);
	Elf *in = elf_begin(in_fd, ELF_C_READ, NULL);
	if (!in)
		return opal_why(why, why_len, -EBADMSG, "libelf: %s", elf_errmsg(-1));
	Elf *out = elf_begin(out_fd, ELF_C_WRITE, NULL);
	if (!out) {
		elf_end(in);
		return opal_why(why, why_len, -EIO, "libelf: %s", elf_errmsg(-1));
	}
	struct stat st;
	r = fstat(in_fd, &st) < 0 ? -errno
				   : copy(in, out, p.has_alloc, (uint64_t)st.st_size, why, why_len);
	elf_end(out);
	elf_end(in);
	return r;
}
