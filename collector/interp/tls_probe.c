/* A file's thread-local variable (tls_probe.h). */
#include "interp/tls_probe.h"

#include <errno.h>
#include <gelf.h>
#include <string.h>

#define MAX_SECTIONS 65535u
#define MAX_STRTAB   (64u << 20)

/* The .dynsym index of defined STT_TLS symbol `name`, or 0. */
static size_t find_symbol(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, const char *name,
			  GElf_Sym *out, int *err)
{
	GElf_Shdr strsh;
	Elf_Scn *strscn;
	Elf_Data *d;
	uint64_t n;

	*err = -ENOEXEC;
	if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size % sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	if (n > OPAL_TLS_MAX_SYMBOLS) {
		*err = -E2BIG;
		return 0;
	}
	if (!(strscn = elf_getscn(elf, sh->sh_link)) || !gelf_getshdr(strscn, &strsh) ||
	    strsh.sh_type != SHT_STRTAB)
		return 0;
	if (strsh.sh_size > MAX_STRTAB) {
		*err = -E2BIG;
		return 0;
	}
	if (!(d = elf_getdata(scn, NULL)) || d->d_size < n * sizeof(Elf64_Sym))
		return 0;
	*err = -ENOENT;
	for (uint64_t i = 1; i < n; i++) {
		GElf_Sym s;
		const char *sname;
		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(s.st_info) != STT_TLS || s.st_name == 0 ||
		    !(sname = elf_strptr(elf, sh->sh_link, s.st_name)) || strcmp(sname, name) != 0)
			continue;
		*out = s;
		*err = 0;
		return (size_t)i;
	}
	return 0;
}

/* The first GOT slot of each TLS relocation kind against symbol `sym` in
 * the SHT_RELA sections that use .dynsym (section `dynsym`). */
static int scan_relocs(Elf *elf, size_t shnum, size_t dynsym, size_t sym, struct opal_tls_var *v)
{
	Elf_Scn *scn = NULL;
	uint64_t total = 0;

	for (size_t i = 0; i < shnum && (scn = elf_nextscn(elf, scn)); i++) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_link != dynsym)
			continue;
		if (sh.sh_entsize != sizeof(Elf64_Rela) || sh.sh_size % sh.sh_entsize)
			return -ENOEXEC;
		uint64_t n = sh.sh_size / sh.sh_entsize;
		if ((total += n) > OPAL_TLS_MAX_RELOCS)
			return -E2BIG;
		if (!(d = elf_getdata(scn, NULL)) || d->d_size < n * sizeof(Elf64_Rela))
			return -ENOEXEC;
		for (uint64_t k = 0; k < n; k++) {
			GElf_Rela r;
			if (!gelf_getrela(d, (int)k, &r) || GELF_R_SYM(r.r_info) != sym)
				continue;
			uint64_t *slot = NULL;
			switch (GELF_R_TYPE(r.r_info)) {
			case R_X86_64_TLSDESC: slot = &v->tlsdesc_got; break;
			case R_X86_64_DTPMOD64: slot = &v->dtpmod_got; break;
			case R_X86_64_DTPOFF64: slot = &v->dtpoff_got; break;
			case R_X86_64_TPOFF64: slot = &v->tpoff_got; break;
			default: break;
			}
			if (slot && !*slot)
				*slot = r.r_offset;
		}
	}
	return 0;
}

static void read_segments(Elf *elf, struct opal_tls_var *v)
{
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum) != 0)
		return;
	for (size_t i = 0; i < phnum && i < MAX_SECTIONS; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_INTERP)
			v->has_interp = true;
		if (ph.p_type == PT_TLS && !v->has_tls_segment) {
			v->has_tls_segment = true;
			v->tls_vaddr = ph.p_vaddr;
			v->tls_memsz = ph.p_memsz;
			v->tls_align = ph.p_align ? ph.p_align : 1;
		}
	}
}

int opal_tls_probe(int fd, const char *name, struct opal_tls_var *out)
{
	GElf_Ehdr eh;
	GElf_Sym sym;
	Elf_Scn *scn = NULL;
	size_t shnum, idx = 0;
	int err = -ENOENT;
	Elf *elf;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE || !(elf = elf_begin(fd, ELF_C_READ, NULL)))
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64 || elf_getshdrnum(elf, &shnum) != 0 || shnum > MAX_SECTIONS) {
		elf_end(elf);
		return -ENOEXEC;
	}
	for (size_t i = 0; i < shnum && (scn = elf_nextscn(elf, scn)); i++) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		if ((idx = find_symbol(elf, scn, &sh, name, &sym, &err)))
			err = scan_relocs(elf, shnum, elf_ndxscn(scn), idx, out);
		break;
	}
	if (!err) {
		out->value = sym.st_value;
		out->size = sym.st_size;
		read_segments(elf, out);
		if (!out->has_tls_segment)
			err = -ENOEXEC;   /* a TLS symbol needs a TLS segment */
	}
	elf_end(elf);
	return err;
}

uint64_t opal_tls_exe_offset(const struct opal_tls_var *v)
{
	uint64_t align = v->tls_align, first = (0 - v->tls_vaddr) & (align - 1);

	/* roundup(memsz - firstbyte, align) + firstbyte */
	return ((v->tls_memsz - first + align - 1) / align) * align + first;
}
