/* CPython interpreter detection from an ELF file, with libelf. */
#include "interp/python_probe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <gelf.h>
#include <libelf.h>

#include "interp/python_layout.h"

#define MAX_STRTAB (64u << 20)     /* symbol-name table bytes read at most */
#define MAX_CANDIDATES 16          /* distinct version strings kept */

static int fail(char *why, size_t why_len, int rc, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int open_elf(int fd, Elf **out, char *why, size_t why_len)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return fail(why, why_len, -ENOEXEC, "libelf: %s", elf_errmsg(-1));
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return fail(why, why_len, -ENOEXEC, "not readable as ELF: %s", elf_errmsg(-1));
	GElf_Ehdr eh;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		elf_end(elf);
		return fail(why, why_len, -ENOEXEC, "not an ELF file");
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64) {
		elf_end(elf);
		return fail(why, why_len, -ENOEXEC, "not 64-bit little-endian x86-64 ELF");
	}
	*out = elf;
	return 0;
}

static int read_vaddr(Elf *elf, uint64_t vaddr, void *buf, size_t len)
{
	size_t shnum;
	if (elf_getshdrnum(elf, &shnum) != 0 || shnum > OPAL_PY_PROBE_MAX_SECTIONS)
		return -ENOEXEC;
	Elf_Scn *scn = NULL;
	for (size_t i = 0; i < shnum && (scn = elf_nextscn(elf, scn)); i++) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) ||
		    sh.sh_type == SHT_NOBITS || vaddr < sh.sh_addr ||
		    vaddr - sh.sh_addr >= sh.sh_size || len > sh.sh_size - (vaddr - sh.sh_addr))
			continue;
		uint64_t off = sh.sh_offset + (vaddr - sh.sh_addr);
		if (off < sh.sh_offset || off > INT64_MAX)
			return -ENOEXEC;
		Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)off, len, ELF_T_BYTE);
		if (!d || !d->d_buf || d->d_size != len)
			return -ENOENT;   /* beyond the end of the file */
		memcpy(buf, d->d_buf, len);
		return 0;
	}
	return -ENOENT;
}

int opal_py_read_vaddr(int fd, uint64_t vaddr, void *buf, size_t len)
{
	Elf *elf;
	int rc = open_elf(fd, &elf, NULL, 0);
	if (rc < 0)
		return rc;
	rc = read_vaddr(elf, vaddr, buf, len);
	elf_end(elf);
	return rc;
}

struct wanted {
	const char *name;
	int type;                      /* STT_OBJECT or STT_FUNC */
	struct opal_py_symbol *sym;
};

static int read_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct wanted *w,
			size_t nw, char *why, size_t why_len)
{
	if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size % sh->sh_entsize)
		return fail(why, why_len, -ENOEXEC, "malformed symbol table");
	uint64_t n = sh->sh_size / sh->sh_entsize;
	if (n > OPAL_PY_PROBE_MAX_SYMBOLS)
		return fail(why, why_len, -E2BIG, "%llu symbols (at most %u are read)",
			    (unsigned long long)n, OPAL_PY_PROBE_MAX_SYMBOLS);
	Elf_Scn *strscn = elf_getscn(elf, sh->sh_link);
	GElf_Shdr strsh;
	if (!strscn || !gelf_getshdr(strscn, &strsh) || strsh.sh_type != SHT_STRTAB)
		return fail(why, why_len, -ENOEXEC, "symbol table without string table");
	if (strsh.sh_size > MAX_STRTAB)
		return fail(why, why_len, -E2BIG, "symbol names of %llu bytes",
			    (unsigned long long)strsh.sh_size);
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || d->d_size < n * sizeof(Elf64_Sym))
		return fail(why, why_len, -ENOEXEC, "symbol table beyond the file");
	for (uint64_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_name == 0)
			continue;
		int type = GELF_ST_TYPE(s.st_info);
		if (type != STT_OBJECT && type != STT_FUNC)
			continue;
		const char *name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (!name)
			continue;
		for (size_t k = 0; k < nw; k++) {
			if (!w[k].sym->found && w[k].type == type && strcmp(name, w[k].name) == 0) {
				w[k].sym->found = true;
				w[k].sym->vaddr = s.st_value;
				w[k].sym->size = s.st_size;
			}
		}
	}
	return 0;
}

/* .dynsym first, then .symtab for what is still missing (and the .cold
 * part, a local symbol). */
static int find_symbols(Elf *elf, struct opal_py_probe *p, char *why, size_t why_len)
{
	struct wanted w[] = {
		{ "_PyRuntime", STT_OBJECT, &p->runtime },
		{ "_PyEval_EvalFrameDefault", STT_FUNC, &p->eval },
		{ "_PyEval_EvalFrameDefault.cold", STT_FUNC, &p->eval_cold },
		{ "PyCode_Type", STT_OBJECT, &p->code_type },
		{ "Py_Version", STT_OBJECT, &p->py_version },
	};
	size_t shnum;
	if (elf_getshdrnum(elf, &shnum) != 0)
		return fail(why, why_len, -ENOEXEC, "no section headers");
	if (shnum > OPAL_PY_PROBE_MAX_SECTIONS)
		return fail(why, why_len, -E2BIG, "%zu sections", shnum);
	for (int pass = 0; pass < 2; pass++) {
		GElf_Word type = pass == 0 ? SHT_DYNSYM : SHT_SYMTAB;
		Elf_Scn *scn = NULL;
		for (size_t i = 0; i < shnum && (scn = elf_nextscn(elf, scn)); i++) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type != type)
				continue;
			if (type == SHT_SYMTAB)
				p->has_symtab = true;
			int rc = read_symbols(elf, scn, &sh, w, sizeof(w) / sizeof(w[0]), why,
					      why_len);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

struct version {
	unsigned major, minor, micro, level, serial;
};

static bool is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}

/* A number of 1 or 2 digits at b[*i]. */
static bool number(const uint8_t *b, size_t n, size_t *i, unsigned *v)
{
	size_t start = *i;
	*v = 0;
	while (*i < n && is_digit(b[*i]) && *i - start < 2)
		*v = *v * 10 + (unsigned)(b[(*i)++] - '0');
	return *i > start && (*i >= n || !is_digit(b[*i]));
}

/* "3.X.Y[a|b|rcN][+]" NUL-terminated at b[i] (whose previous byte is not
 * a digit or dot: the token is not part of a longer number). */
static bool parse_version(const uint8_t *b, size_t n, size_t i, struct version *v)
{
	if (i + 5 > n || b[i] != '3' || b[i + 1] != '.')
		return false;
	if (i > 0 && (is_digit(b[i - 1]) || b[i - 1] == '.'))
		return false;
	i += 2;
	v->major = 3;
	if (!number(b, n, &i, &v->minor) || i >= n || b[i++] != '.' || !number(b, n, &i, &v->micro))
		return false;
	v->level = 0xf;
	v->serial = 0;
	if (i < n && (b[i] == 'a' || b[i] == 'b' || b[i] == 'r')) {
		if (b[i] == 'r') {
			if (i + 1 >= n || b[i + 1] != 'c')
				return false;
			v->level = 0xc;
			i += 2;
		} else {
			v->level = b[i] == 'a' ? 0xa : 0xb;
			i++;
		}
		if (!number(b, n, &i, &v->serial) || v->serial > 15)
			return false;
	}
	if (i < n && b[i] == '+')
		i++;
	return i < n && b[i] == '\0' && v->micro <= 255;
}

struct candidates {
	size_t n;
	bool overflow;
	struct version v[MAX_CANDIDATES];
};

static void add_candidate(struct candidates *c, const struct version *v)
{
	for (size_t i = 0; i < c->n; i++)
		if (memcmp(&c->v[i], v, sizeof(*v)) == 0)
			return;
	if (c->n == MAX_CANDIDATES) {
		c->overflow = true;
		return;
	}
	c->v[c->n++] = *v;
}

static int scan_rodata(Elf *elf, struct candidates *c, char *why, size_t why_len)
{
	size_t shnum;
	if (elf_getshdrnum(elf, &shnum) != 0 || shnum > OPAL_PY_PROBE_MAX_SECTIONS)
		return fail(why, why_len, -ENOEXEC, "bad section count");
	uint64_t total = 0;
	Elf_Scn *scn = NULL;
	for (size_t i = 0; i < shnum && (scn = elf_nextscn(elf, scn)); i++) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    (sh.sh_flags & (SHF_ALLOC | SHF_WRITE | SHF_EXECINSTR)) != SHF_ALLOC ||
		    sh.sh_size == 0)
			continue;
		total += sh.sh_size;
		if (total > OPAL_PY_PROBE_MAX_RODATA)
			return fail(why, why_len, -E2BIG, "more than %u bytes of read-only data",
				    OPAL_PY_PROBE_MAX_RODATA);
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf)
			return fail(why, why_len, -ENOEXEC, "read-only section beyond the file");
		const uint8_t *b = d->d_buf;
		for (size_t k = 0; k + 5 <= d->d_size; k++) {
			struct version v;
			if (b[k] == '3' && parse_version(b, d->d_size, k, &v))
				add_candidate(c, &v);
		}
	}
	return 0;
}

static void set_version(struct opal_py_probe *p, const struct version *v,
			enum opal_py_version_source src)
{
	p->major = (uint8_t)v->major;
	p->minor = (uint8_t)v->minor;
	p->micro = (uint8_t)v->micro;
	p->level = (uint8_t)v->level;
	p->serial = (uint8_t)v->serial;
	p->version_hex = (uint32_t)v->major << 24 | (uint32_t)v->minor << 16 |
			 (uint32_t)v->micro << 8 | (uint32_t)v->level << 4 | v->serial;
	p->version_source = src;
}

static int version_from_symbol(Elf *elf, struct opal_py_probe *p, char *why, size_t why_len)
{
	uint8_t b[8];
	if (p->py_version.size != 8)
		return fail(why, why_len, -ENODATA, "Py_Version is %llu bytes, not 8",
			    (unsigned long long)p->py_version.size);
	if (read_vaddr(elf, p->py_version.vaddr, b, sizeof(b)) < 0)
		return fail(why, why_len, -ENODATA, "Py_Version's value is not in the file");
	uint64_t hex = 0;
	for (int i = 7; i >= 0; i--)
		hex = hex << 8 | b[i];
	struct version v = {
		.major = (unsigned)(hex >> 24 & 0xff), .minor = (unsigned)(hex >> 16 & 0xff),
		.micro = (unsigned)(hex >> 8 & 0xff), .level = (unsigned)(hex >> 4 & 0xf),
		.serial = (unsigned)(hex & 0xf),
	};
	if (hex >> 32 || v.major != 3 || v.minor < 11 ||
	    (v.level != 0xa && v.level != 0xb && v.level != 0xc && v.level != 0xf))
		return fail(why, why_len, -ENODATA, "Py_Version 0x%llx is not a CPython 3.11+ version",
			    (unsigned long long)hex);
	set_version(p, &v, OPAL_PY_VERSION_SYMBOL);
	return 0;
}

/* Without Py_Version the interpreter is 3.10 or older: of the version
 * strings found, those of one minor version. */
static int version_from_strings(Elf *elf, struct opal_py_probe *p, char *why, size_t why_len)
{
	struct candidates c = { 0 };
	int rc = scan_rodata(elf, &c, why, why_len);
	if (rc < 0)
		return rc;
	if (c.overflow)
		return fail(why, why_len, -ENODATA, "more than %d distinct version strings",
			    MAX_CANDIDATES);
	/* Keep the strings of 3.7-3.10 (_PyRuntime exists from 3.7); when
	 * they name several minors, those whose table _PyRuntimeState size
	 * matches the symbol. */
	struct version keep[MAX_CANDIDATES];
	size_t nk = 0;
	for (int by_size = 0; by_size < 2; by_size++) {
		nk = 0;
		for (size_t i = 0; i < c.n; i++) {
			if (c.v[i].minor < 7 || c.v[i].minor > 10)
				continue;
			struct opal_py_offsets o;
			if (by_size && opal_py_offsets_for_build(3, c.v[i].minor, p->runtime.size,
								 &o) < 0)
				continue;
			keep[nk++] = c.v[i];
		}
		bool one_minor = nk > 0;
		for (size_t i = 1; i < nk; i++)
			one_minor = one_minor && keep[i].minor == keep[0].minor;
		if (one_minor)
			break;
		if (nk == 0 && !by_size)
			return fail(why, why_len, -ENODATA,
				    "no Py_Version and no 3.7-3.10 version string");
		if (by_size)
			return fail(why, why_len, -ENODATA, "version strings of several minor "
				    "versions, not one of them matching _PyRuntime's size");
	}
	for (size_t i = 1; i < nk; i++)
		if (memcmp(&keep[i], &keep[0], sizeof(keep[0])) != 0)
			return fail(why, why_len, -ENODATA,
				    "version strings 3.%u.%u and 3.%u.%u disagree", keep[0].minor,
				    keep[0].micro, keep[i].minor, keep[i].micro);
	set_version(p, &keep[0], OPAL_PY_VERSION_STRING);
	return 0;
}

int opal_py_probe_elf(int fd, struct opal_py_probe *out, char *why, size_t why_len)
{
	memset(out, 0, sizeof(*out));
	if (why && why_len)
		why[0] = '\0';
	Elf *elf;
	int rc = open_elf(fd, &elf, why, why_len);
	if (rc < 0)
		return rc;
	rc = find_symbols(elf, out, why, why_len);
	if (rc == 0 && (!out->runtime.found || !out->eval.found))
		rc = fail(why, why_len, -ENOENT, "no _PyRuntime and _PyEval_EvalFrameDefault defined");
	if (rc == 0)
		rc = out->py_version.found ? version_from_symbol(elf, out, why, why_len) :
					     version_from_strings(elf, out, why, why_len);
	elf_end(elf);
	return rc;
}
