/* ELF debug-data probe (debuginfo_probe.h). libelf reads with ELF_C_READ
 * (pread on demand, no mmap), so a file truncated under us cannot fault;
 * the header tables and every section are also checked against the file
 * size before their bytes are asked for. */
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#include <elfutils/libdwelf.h>

#include "base/why.h"
#include "debuginfo/debuginfo_probe.h"
#include "debuginfo/debuginfo_minidebug.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

/* True when the symbol table section holds at least one defined function. */
static bool table_has_function(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
	if (sh->sh_entsize == 0)
		return false;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d)
		return false;
	size_t n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			return false;
		if (GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_shndx != SHN_UNDEF)
			return true;
	}
	(void)elf;
	return false;
}

/* Compression type of an SHF_COMPRESSED section; 0 when unreadable. */
static uint32_t compression_type(Elf_Scn *scn, unsigned char data_order)
{
	GElf_Chdr ch;
	if (gelf_getchdr(scn, &ch))
		return ch.ch_type;
	/* libelf refuses headers of types it does not know (zstd in 0.188):
	 * read ch_type, the first 32-bit word of both Chdr layouts. */
	Elf_Data *d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 4)
		return 0;
	const uint8_t *b = d->d_buf;
	if (data_order == ELFDATA2MSB)
		return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
	return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
}

static void read_altlink(Elf_Scn *scn, struct opal_elf_probe *p)
{
	Elf_Data *d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 2)
		return;
	const char *b = d->d_buf;
	size_t nlen = strnlen(b, d->d_size);
	if (nlen == 0 || nlen >= d->d_size || nlen >= sizeof(p->altlink))
		return;
	size_t idlen = d->d_size - nlen - 1;
	if (idlen == 0 || idlen > OPAL_BUILD_ID_MAX)
		return;
	memcpy(p->altlink, b, nlen + 1);
	memcpy(p->altlink_build_id, b + nlen + 1, idlen);
	p->altlink_build_id_len = idlen;
	p->has_altlink = true;
}

/* Whether the MiniDebugInfo payload is an ELF with a function .symtab. */
static bool debugdata_has_symtab(Elf *elf)
{
	void *buf;
	size_t len;
	if (opal_minidebug_extract(elf, &buf, &len) < 0)
		return false;
	bool found = false;
	Elf *inner = elf_memory(buf, len);
	Elf_Scn *scn = NULL;
	while (inner && !found && (scn = elf_nextscn(inner, scn)) != NULL) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB &&
		    sh.sh_offset <= len && sh.sh_size <= len - sh.sh_offset)
			found = table_has_function(inner, scn, &sh);
	}
	elf_end(inner);
	free(buf);
	return found;
}

static int probe_sections(Elf *elf, uint64_t size, unsigned char order, struct opal_elf_probe *p,
			  char *why, size_t why_len)
{
	size_t shstrndx, shnum;
	if (elf_getshdrnum(elf, &shnum) != 0 || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return opal_why(why, why_len, -EBADMSG,
				"malformed ELF: unreadable section headers");
	if (shnum > OPAL_ELF_PROBE_MAX_SECTIONS)
		return opal_why(why, why_len, -EBADMSG, "malformed ELF: too many sections");
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			return opal_why(why, why_len, -EBADMSG,
					"malformed ELF: bad section header");
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			name = "";
		if (sh.sh_type != SHT_NOBITS && sh.sh_size > 0 &&
		    (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset))
			return opal_why(why, why_len, -EBADMSG, "truncated ELF: section %s "
					"extends past the end of the file", name);
		if (sh.sh_flags & SHF_ALLOC)
			p->has_alloc = true;
		if (sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
			continue;
		bool is_debug = strncmp(name, ".debug_", 7) == 0 || strncmp(name, ".zdebug_", 8) == 0;
		uint32_t ct = is_debug && (sh.sh_flags & SHF_COMPRESSED) ?
			      compression_type(scn, order) : ELFCOMPRESS_ZLIB;
		/* zstd is read through opal's own decompression (debuginfo_bound.h) */
		if (ct != ELFCOMPRESS_ZLIB && ct != ELFCOMPRESS_ZSTD)
			p->debug_unreadable = true;
		if (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info"))
			p->has_debug_info = true;
		else if (!strcmp(name, ".debug_line") || !strcmp(name, ".zdebug_line"))
			p->has_debug_line = true;
		else if (!strcmp(name, ".gnu_debugdata"))
			p->has_debugdata = true;
		else if (!strcmp(name, ".gopclntab") || !strcmp(name, ".data.rel.ro.gopclntab"))
			p->has_gopclntab = true;
		else if (!strcmp(name, ".gnu_debugaltlink"))
			read_altlink(scn, p);
		if (sh.sh_type == SHT_SYMTAB && !p->has_symtab)
			p->has_symtab = table_has_function(elf, scn, &sh);
		else if (sh.sh_type == SHT_DYNSYM && !p->has_dynsym)
			p->has_dynsym = table_has_function(elf, scn, &sh);
		else if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_ALLOC) &&
			 (sh.sh_flags & SHF_EXECINSTR))
			p->has_text = true;
	}
	return 0;
}

int opal_elf_probe_fd(int fd, struct opal_elf_probe *p, char *why, size_t why_len)
{
	struct stat st;
	unsigned char ident[EI_NIDENT];

	memset(p, 0, sizeof(*p));
	if (why && why_len)
		why[0] = '\0';
	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return opal_why(why, why_len, -ENOEXEC, "not a regular file");
	ssize_t got = pread(fd, ident, sizeof(ident), 0);
	if (got < 0)
		return -errno;
	if (got < SELFMAG || memcmp(ident, ELFMAG, SELFMAG) != 0)
		return opal_why(why, why_len, -ENOEXEC, "not an ELF file");
	if (got < EI_NIDENT)
		return opal_why(why, why_len, -EBADMSG, "truncated ELF: no complete header");
	uint64_t size = (uint64_t)st.st_size;

	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return opal_why(why, why_len, -EBADMSG, "malformed ELF: %s", elf_errmsg(-1));
	}
	int r = 0;
	GElf_Ehdr eh;
	size_t phnum = 0;
	if (!gelf_getehdr(elf, &eh)) {
		r = opal_why(why, why_len, -EBADMSG, "truncated ELF: %s", elf_errmsg(-1));
		goto out;
	}
	p->e_type = eh.e_type;
	p->e_machine = eh.e_machine;
	phnum = eh.e_phnum;
	if (phnum > OPAL_ELF_PROBE_MAX_PHDRS ||
	    (phnum && (eh.e_phoff > size || (uint64_t)phnum * eh.e_phentsize > size - eh.e_phoff))) {
		r = opal_why(why, why_len, -EBADMSG, "truncated ELF: program headers past the end");
		goto out;
	}
	/* From the header itself: libelf reports 0 sections when the table
	 * lies beyond the end of the file, which is exactly what to catch.
	 * (With extended numbering e_shnum is 0 and section 0 must exist.) */
	uint64_t shnum = eh.e_shnum ? eh.e_shnum : 1;
	if (eh.e_shoff != 0 &&
	    (eh.e_shoff > size || shnum * eh.e_shentsize > size - eh.e_shoff)) {
		r = opal_why(why, why_len, -EBADMSG, "truncated ELF: section headers past the end");
		goto out;
	}
	if ((r = probe_sections(elf, size, ident[EI_DATA], p, why, why_len)) < 0)
		goto out;

	const void *bid;
	ssize_t n = dwelf_elf_gnu_build_id(elf, &bid);
	if (n > 0 && (size_t)n <= OPAL_BUILD_ID_MAX) {
		memcpy(p->build_id, bid, (size_t)n);
		p->build_id_len = (size_t)n;
	}
	GElf_Word crc;
	const char *link = dwelf_elf_gnu_debuglink(elf, &crc);
	if (link && strnlen(link, sizeof(p->debuglink)) < sizeof(p->debuglink)) {
		strcpy(p->debuglink, link);
		p->debuglink_crc = crc;
		p->has_debuglink = true;
	}
	if (p->has_debugdata && !p->has_symtab)
		p->debugdata_symtab = debugdata_has_symtab(elf);
out:
	elf_end(elf);
	return r;
}

enum opal_debug_quality opal_elf_probe_quality(const struct opal_elf_probe *p, const char **what)
{
	const char *w;
	enum opal_debug_quality q;
	if (p->has_debug_info && p->has_debug_line && !p->debug_unreadable) {
		q = OPAL_DEBUG_DWARF_LINES;
		w = "dwarf";
	} else if (p->has_symtab) {
		q = OPAL_DEBUG_SYMTAB;
		w = p->debug_unreadable ? ".symtab (dwarf compressed with an unknown type)"
					: ".symtab without dwarf";
	} else if (p->has_gopclntab) {
		/* names, files, lines and inline trees (symbolize/sym_go.h);
		 * ranked as a symbol table so that a stripped Go executable is
		 * a usable upload, never mistaken for separate DWARF */
		q = OPAL_DEBUG_SYMTAB;
		w = "Go .gopclntab without dwarf";
	} else if (p->debugdata_symtab) {
		q = OPAL_DEBUG_SYMTAB;
		w = "MiniDebugInfo .symtab";
	} else if (p->has_dynsym) {
		q = OPAL_DEBUG_DYNSYM;
		w = p->debug_unreadable ? ".dynsym only (dwarf compressed with an unknown type)"
					: ".dynsym only";
	} else {
		q = OPAL_DEBUG_NONE;
		w = p->debug_unreadable ? "dwarf compressed with an unknown type only"
					: "no symbols";
	}
	if (what)
		*what = w;
	return q;
}

int opal_file_crc32(int fd, uint32_t *crc)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	if ((uint64_t)st.st_size > OPAL_CRC_MAX_BYTES)
		return -EFBIG;
	enum { CHUNK = 1 << 20 };
	unsigned char *buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	uLong c = crc32(0L, Z_NULL, 0);
	off_t off = 0;
	int r = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, CHUNK, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		c = crc32(c, buf, (uInt)n);
		off += n;
		if ((uint64_t)off > OPAL_CRC_MAX_BYTES) {
			r = -EFBIG;
			break;
		}
	}
	free(buf);
	if (r == 0)
		*crc = (uint32_t)c;
	return r;
}
