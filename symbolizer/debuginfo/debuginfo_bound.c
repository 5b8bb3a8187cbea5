/* Bounded decompression of ELF debug data (debuginfo_bound.h). Headers
 * are read with pread at the section offsets the section table gives
 * (libelf's ELF_C_READ reads only the tables), so a scan costs a few
 * small reads per compressed section; only .gnu_debugdata is decoded. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zstd.h>

#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_minidebug.h"
#include "shared/log.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

#define MAX_SECTIONS 65535u        /* as debuginfo_probe.h refuses more */
#define ZDEBUG_HEADER 12           /* "ZLIB" + 8-byte big-endian size */
#define COPY_CHUNK (1u << 20)

static _Atomic uint64_t budget = OPAL_DECOMP_DEFAULT_BUDGET;

void opal_decomp_set_budget(uint64_t bytes)
{
	atomic_store(&budget, bytes ? bytes : OPAL_DECOMP_DEFAULT_BUDGET);
}

uint64_t opal_decomp_budget(void)
{
	return atomic_load(&budget);
}

/* The bytes a scan reads: a descriptor, or the ELF inside .gnu_debugdata. */
struct src {
	int fd;                 /* -1 for memory */
	const uint8_t *mem;
	uint64_t size;
};

static int src_read(const struct src *in, uint64_t off, void *buf, size_t n)
{
	if (off > in->size || n > in->size - off)
		return -EBADMSG;
	if (in->fd < 0) {
		memcpy(buf, in->mem + off, n);
		return 0;
	}
	size_t done = 0;
	while (done < n) {
		ssize_t got = pread(in->fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EBADMSG;
		done += (size_t)got;
	}
	return 0;
}

static uint64_t get_uint(const uint8_t *b, size_t n, bool msb)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)b[msb ? i : n - 1 - i] << (8 * (n - 1 - i));
	return v;
}

static void put_uint(uint8_t *b, size_t n, bool msb, uint64_t v)
{
	for (size_t i = 0; i < n; i++)
		b[msb ? n - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

/* A compressed section as its header declares it. */
struct zsec {
	uint32_t type;           /* ELFCOMPRESS_*, or 0 for zlib-gnu */
	uint64_t size;           /* declared decompressed bytes */
	uint64_t align;          /* ch_addralign */
	size_t header;           /* bytes of the header before the data */
};

/* Reads the Chdr of an SHF_COMPRESSED section at `off` (gABI: ch_type,
 * [ch_reserved,] ch_size, ch_addralign in the file's class and order). */
static int read_chdr(const struct src *in, uint64_t off, bool is64, bool msb, struct zsec *z)
{
	uint8_t b[24];
	size_t n = is64 ? 24 : 12, w = is64 ? 8 : 4;
	int r = src_read(in, off, b, n);
	if (r < 0)
		return r;
	z->type = (uint32_t)get_uint(b, 4, msb);
	z->size = get_uint(b + (is64 ? 8 : 4), w, msb);
	z->align = get_uint(b + (is64 ? 16 : 8), w, msb);
	z->header = n;
	return 0;
}

static int refuse(struct opal_decomp_scan *s, enum opal_metric_decomp reason, const char *fmt,
		  ...) __attribute__((format(printf, 3, 4)));

static int refuse(struct opal_decomp_scan *s, enum opal_metric_decomp reason, const char *fmt,
		  ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
	s->refused = true;
	s->reason = reason;
	return -EFBIG;
}

/* Adds `bytes` declared by section `name` to the file's sum. */
static int declare(struct opal_decomp_scan *s, const char *name, uint64_t bytes)
{
	uint64_t b = opal_decomp_budget();
	if (bytes > b || s->declared > b - bytes)
		return refuse(s, OPAL_DECOMP_OVER_BUDGET,
			      "section %s declares %" PRIu64 " decompressed bytes: the file's "
			      "compressed sections exceed the budget of %" PRIu64 " bytes",
			      name, bytes, b);
	s->declared += bytes;
	return 0;
}

static int scan_elf(Elf *elf, const struct src *in, bool outer, struct opal_decomp_scan *s);

/* .gnu_debugdata: its index's size, then a bounded decode of that size,
 * then the compressed sections of the ELF inside it. */
static int scan_debugdata(const struct src *in, const GElf_Shdr *sh, struct opal_decomp_scan *s)
{
	static const char name[] = ".gnu_debugdata";
	if (sh->sh_size > OPAL_MINIDEBUG_MAX_IN)
		return refuse(s, OPAL_DECOMP_OVER_BUDGET, "section %s holds %" PRIu64 " bytes, "
			      "more than %u", name, (uint64_t)sh->sh_size, OPAL_MINIDEBUG_MAX_IN);
	uint8_t *xz = malloc(sh->sh_size ? sh->sh_size : 1);
	if (!xz)
		return -ENOMEM;
	uint64_t size;
	void *out = NULL;
	size_t len = 0;
	int r = src_read(in, sh->sh_offset, xz, sh->sh_size);
	if (r == -EBADMSG || (r == 0 && opal_minidebug_declared(xz, sh->sh_size, &size) < 0))
		r = refuse(s, OPAL_DECOMP_MALFORMED, "section %s: no readable xz index", name);
	else if (r == 0)
		r = declare(s, name, size);
	if (r == 0) {
		r = opal_minidebug_decompress(xz, sh->sh_size, (size_t)size, &out, &len);
		if (r == -EFBIG)
			r = refuse(s, OPAL_DECOMP_EXPANDS, "section %s decodes to more than the "
				   "%" PRIu64 " bytes its index declares", name, size);
		else if (r == -EBADMSG || (r == 0 && len != size))
			r = refuse(s, OPAL_DECOMP_MALFORMED, "section %s: damaged xz data", name);
	}
	free(xz);
	if (r < 0)
		return r;
	Elf *inner = elf_memory(out, len);
	if (inner && elf_kind(inner) == ELF_K_ELF) {
		struct src mem = { .fd = -1, .mem = out, .size = len };
		r = scan_elf(inner, &mem, false, s);
	}
	elf_end(inner);
	free(out);
	return r;
}

static int scan_section(Elf *elf, const struct src *in, bool outer, bool is64, bool msb,
			size_t shstrndx, Elf_Scn *scn, struct opal_decomp_scan *s)
{
	GElf_Shdr sh;
	if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
		return 0;
	const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
	if (!name)
		name = "?";
	/* Bytes past the end are libelf's error to report, not a decompression. */
	if (sh.sh_offset > in->size || sh.sh_size > in->size - sh.sh_offset)
		return 0;
	struct zsec z;
	int r;
	if (sh.sh_flags & SHF_COMPRESSED) {
		if ((r = read_chdr(in, sh.sh_offset, is64, msb, &z)) < 0)
			return r == -EBADMSG ? refuse(s, OPAL_DECOMP_MALFORMED, "section %s: "
						      "truncated compression header", name) : r;
		if (z.type != ELFCOMPRESS_ZLIB && z.type != ELFCOMPRESS_ZSTD)
			return 0;   /* no library decompresses it */
		if (z.type == ELFCOMPRESS_ZSTD && outer)
			s->n_zstd++;
		return declare(s, name, z.size);
	}
	if (strncmp(name, ".zdebug", 7) == 0 && sh.sh_size >= ZDEBUG_HEADER) {
		uint8_t b[ZDEBUG_HEADER];
		if ((r = src_read(in, sh.sh_offset, b, sizeof(b))) < 0)
			return r;
		if (memcmp(b, "ZLIB", 4) == 0)
			return declare(s, name, get_uint(b + 4, 8, true));
		return 0;
	}
	if (outer && strcmp(name, ".gnu_debugdata") == 0)
		return scan_debugdata(in, &sh, s);
	return 0;
}

static int scan_elf(Elf *elf, const struct src *in, bool outer, struct opal_decomp_scan *s)
{
	size_t shstrndx, shnum;
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh) || elf_getshdrnum(elf, &shnum) != 0 ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;   /* no section table: nothing any library decompresses */
	if (shnum > MAX_SECTIONS)
		return refuse(s, OPAL_DECOMP_MALFORMED, "%zu sections", shnum);
	bool is64 = eh.e_ident[EI_CLASS] == ELFCLASS64, msb = eh.e_ident[EI_DATA] == ELFDATA2MSB;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		int r = scan_section(elf, in, outer, is64, msb, shstrndx, scn, s);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Counts and logs a refusal once it is final. */
static void report(const struct opal_decomp_scan *s)
{
	static const char *const names[OPAL_DECOMP_N_REASONS] = {
		"over budget", "expands past its declared size", "malformed", "remembered",
	};
	opal_metrics_decomp_refused(s->reason);
	opal_warn("debuginfo: refused before decompression (%s): %s", names[s->reason], s->why);
}

int opal_decomp_scan_fd(int fd, struct opal_decomp_scan *s)
{
	memset(s, 0, sizeof(*s));
	struct stat st;
	unsigned char ident[SELFMAG];
	if (fstat(fd, &st) != 0)
		return -errno;
	if (pread(fd, ident, sizeof(ident), 0) != (ssize_t)sizeof(ident) ||
	    memcmp(ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOEXEC;
	struct src in = { .fd = fd, .size = (uint64_t)st.st_size };
	int r = elf_kind(elf) == ELF_K_ELF ? scan_elf(elf, &in, true, s) : -ENOEXEC;
	elf_end(elf);
	if (s->refused)
		report(s);
	return r;
}

/* Copies the whole file `fd` into the memfd `out`. */
static int copy_file(int fd, int out, uint64_t size)
{
	uint8_t *buf = malloc(COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	int r = 0;
	for (uint64_t off = 0; off < size && r == 0;) {
		size_t n = size - off < COPY_CHUNK ? (size_t)(size - off) : COPY_CHUNK;
		ssize_t got = pread(fd, buf, n, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			r = got < 0 ? -errno : -EBADMSG;
			break;
		}
		if (pwrite(out, buf, (size_t)got, (off_t)off) != got)
			r = -EIO;
		off += (uint64_t)got;
	}
	free(buf);
	return r;
}

/* Decompresses zstd section `sh` of the file `in` (its Chdr `z`) and
 * appends it to `out` at *end, aligned; returns its new offset in *at. */
static int inflate_zstd(const struct src *in, const GElf_Shdr *sh, const struct zsec *z, int out,
			uint64_t *end, uint64_t *at, const char *name, struct opal_decomp_scan *s)
{
	size_t n = sh->sh_size - z->header;
	void *src = malloc(n ? n : 1), *dst = malloc(z->size ? z->size : 1);
	int r = src && dst ? src_read(in, sh->sh_offset + z->header, src, n) : -ENOMEM;
	if (r == 0) {
		/* One frame (as binutils and lld write) filling the section and
		 * naming the size the Chdr declared: the output buffer is
		 * exactly that, so a frame that lies fails in ZSTD_decompress. */
		unsigned long long want = ZSTD_getFrameContentSize(src, n);
		bool one = ZSTD_findFrameCompressedSize(src, n) == n;
		size_t got = one && want == z->size ? ZSTD_decompress(dst, z->size, src, n) : 0;
		if (!one || want != z->size || ZSTD_isError(got) || got != z->size)
			r = refuse(s, OPAL_DECOMP_MALFORMED, "section %s: zstd data does not "
				   "decompress to the %" PRIu64 " bytes its header declares",
				   name, z->size);
	}
	uint64_t align = z->align > 1 && z->align <= 4096 ? z->align : 8;
	*at = (*end + align - 1) / align * align;
	if (r == 0 && z->size && pwrite(out, dst, z->size, (off_t)*at) != (ssize_t)z->size)
		r = -EIO;
	*end = *at + z->size;
	free(src);
	free(dst);
	return r;
}

/* Rewrites the section header `i` of the image `out` for its decompressed
 * copy at `at`: offset, size, alignment, SHF_COMPRESSED cleared. */
static int patch_shdr(int out, const GElf_Ehdr *eh, size_t i, const GElf_Shdr *sh, uint64_t at,
		      const struct zsec *z)
{
	bool is64 = eh->e_ident[EI_CLASS] == ELFCLASS64, msb = eh->e_ident[EI_DATA] == ELFDATA2MSB;
	size_t w = is64 ? 8 : 4;
	uint8_t b[64];
	size_t n = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	off_t off = (off_t)(eh->e_shoff + (uint64_t)i * eh->e_shentsize);
	if (eh->e_shentsize < n || pread(out, b, n, off) != (ssize_t)n)
		return -EBADMSG;
	/* sh_flags, sh_offset, sh_size, sh_addralign (gABI Elf32/64_Shdr) */
	put_uint(b + 8, w, msb, sh->sh_flags & ~(uint64_t)SHF_COMPRESSED);
	put_uint(b + (is64 ? 24 : 16), w, msb, at);
	put_uint(b + (is64 ? 32 : 20), w, msb, z->size);
	put_uint(b + (is64 ? 48 : 32), w, msb, z->align > 1 && z->align <= 4096 ? z->align : 1);
	return pwrite(out, b, n, off) == (ssize_t)n ? 0 : -EIO;
}

/* The memfd image of opal_decomp_open. */
static int zstd_image(int fd, uint64_t size, struct opal_decomp_scan *s)
{
	int out = memfd_create("opal-debug", MFD_CLOEXEC);
	if (out < 0)
		return -errno;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Ehdr eh;
	size_t shstrndx;
	int r = copy_file(fd, out, size);
	if (r == 0 && (!elf || !gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) != 0))
		r = -EBADMSG;
	struct src in = { .fd = fd, .size = size };
	uint64_t end = size;
	bool is64 = r == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64;
	bool msb = r == 0 && eh.e_ident[EI_DATA] == ELFDATA2MSB;
	Elf_Scn *scn = NULL;
	while (r == 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		struct zsec z;
		uint64_t at;
		/* The sections the scan declared, and only those: inside the
		 * file, each within the budget (the scan summed them). */
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_COMPRESSED) ||
		    sh.sh_type == SHT_NOBITS || sh.sh_offset > size ||
		    sh.sh_size > size - sh.sh_offset ||
		    read_chdr(&in, sh.sh_offset, is64, msb, &z) < 0 ||
		    z.type != ELFCOMPRESS_ZSTD || sh.sh_size < z.header)
			continue;
		if (z.size > opal_decomp_budget()) {
			r = refuse(s, OPAL_DECOMP_OVER_BUDGET, "section declares %" PRIu64
				   " decompressed bytes, over the budget", z.size);
			break;
		}
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		r = inflate_zstd(&in, &sh, &z, out, &end, &at, name ? name : "?", s);
		if (r == 0)
			r = patch_shdr(out, &eh, elf_ndxscn(scn), &sh, at, &z);
	}
	elf_end(elf);
	if (r < 0) {
		close(out);
		return r;
	}
	return out;
}

int opal_decomp_open(int fd, struct opal_decomp_scan *s)
{
	int r = opal_decomp_scan_fd(fd, s);
	if (r == -ENOEXEC || (r == 0 && s->n_zstd == 0)) {
		int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		return d < 0 ? -errno : d;
	}
	if (r < 0)
		return r;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	r = zstd_image(fd, (uint64_t)st.st_size, s);
	if (s->refused)
		report(s);
	return r;
}
