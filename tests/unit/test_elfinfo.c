/* Unit tests of collector/proc/elfinfo.c. Expected values come from binutils run at
 * test time (readelf -lW, readelf -n, readelf -p, nm) and zlib's crc32,
 * never from elfinfo itself.
 * Fixtures: $OPAL_FIXTURES/layout (tests/fixtures/layout/build.sh) and
 * $OPAL_FIXTURES/debuglink (tests/fixtures/debuglink/build.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/proc/elfinfo.h"

#define PAGE 4096u
#define PIE_BASE 0x7f0000000000ull   /* simulated load address of ET_DYN files */

static char fixture_dir[4096], debuglink_dir[4096];

static const char *fixture(const char *name)
{
	static char path[4352];
	snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
	return path;
}

static int open_fixture(const char *name)
{
	int fd = open(fixture(name), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open fixture %s (run tests/fixtures/build.sh; OPAL_FIXTURES=%s)",
			 fixture(name), fixture_dir);
	return fd;
}

/* One PT_LOAD as printed by `readelf -lW`. */
struct ref_load {
	uint64_t offset, vaddr, filesz, memsz;
	uint32_t flags;
};

struct ref_elf {
	int e_type;
	size_t n;
	struct ref_load loads[64];
};

/* Flags of a `readelf -lW` LOAD line: the words between MemSiz and Align
 * ("R E", "RW", "R"). */
static uint32_t parse_flags(const char *line)
{
	char copy[512];
	snprintf(copy, sizeof(copy), "%s", line);
	char *words[16];
	int n = 0;
	for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && n < 16;
	     w = strtok_r(NULL, " \t\n", &save))
		words[n++] = w;
	assert_true(n >= 8);   /* LOAD, 5 numbers, flags, align */
	uint32_t f = 0;
	for (int i = 6; i < n - 1; i++) {
		for (const char *c = words[i]; *c; c++) {
			if (*c == 'R')
				f |= PF_R;
			else if (*c == 'W')
				f |= PF_W;
			else if (*c == 'E')
				f |= PF_X;
			else
				fail_msg("unexpected flag word '%s' in: %s", words[i], line);
		}
	}
	return f;
}

/* Program headers and ELF type of `name` from readelf's text output. */
static void readelf_loads(const char *name, struct ref_elf *ref)
{
	char cmd[4608];
	snprintf(cmd, sizeof(cmd), "readelf -hlW '%s'", fixture(name));
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	memset(ref, 0, sizeof(*ref));
	ref->e_type = -1;
	char line[512];
	while (fgets(line, sizeof(line), p)) {
		char *t = line + strspn(line, " ");
		if (strncmp(t, "Type:", 5) == 0) {
			if (strstr(t, "EXEC"))
				ref->e_type = ET_EXEC;
			else if (strstr(t, "DYN"))
				ref->e_type = ET_DYN;
		}
		if (strncmp(t, "LOAD ", 5) != 0)
			continue;
		assert_true(ref->n < 64);
		struct ref_load *l = &ref->loads[ref->n++];
		assert_int_equal(sscanf(t, "LOAD %" SCNx64 " %" SCNx64 " %*x %" SCNx64 " %" SCNx64,
					&l->offset, &l->vaddr, &l->filesz, &l->memsz),
				 4);
		l->flags = parse_flags(t);
	}
	assert_int_equal(pclose(p), 0);
	assert_true(ref->n > 0);
	assert_true(ref->e_type == ET_EXEC || ref->e_type == ET_DYN);
}

/* st_value of a defined text symbol, from nm. */
static uint64_t nm_symbol(const char *name, const char *sym)
{
	char cmd[4608];
	snprintf(cmd, sizeof(cmd), "nm '%s'", fixture(name));
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[512];
	uint64_t value = 0;
	int found = 0;
	while (fgets(line, sizeof(line), p)) {
		uint64_t v;
		char type, sname[256];
		if (sscanf(line, "%" SCNx64 " %c %255s", &v, &type, sname) == 3 &&
		    (type == 'T' || type == 't') && strcmp(sname, sym) == 0) {
			value = v;
			found++;
		}
	}
	assert_int_equal(pclose(p), 0);
	assert_int_equal(found, 1);
	return value;
}

/* The executable PT_LOAD holding `vaddr`, by readelf's numbers. */
static const struct ref_load *ref_text_load(const struct ref_elf *ref, uint64_t vaddr)
{
	for (size_t i = 0; i < ref->n; i++) {
		const struct ref_load *l = &ref->loads[i];
		if ((l->flags & PF_X) && vaddr >= l->vaddr && vaddr < l->vaddr + l->filesz)
			return l;
	}
	fail_msg("no executable PT_LOAD holds 0x%" PRIx64, vaddr);
	return NULL;
}

static void load_info(const char *name, struct opal_elf_info *info)
{
	int fd = open_fixture(name);
	assert_int_equal(lseek(fd, 123, SEEK_SET), 123);
	memset(info, 0xa5, sizeof(*info));
	assert_int_equal(opal_elf_info_from_fd(fd, info), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 123);
	close(fd);
}

/* The PT_LOADs elfinfo reports equal readelf's, in order. */
static void check_loads_match(const struct opal_elf_info *info, const struct ref_elf *ref)
{
	assert_int_equal(info->e_type, ref->e_type);
	assert_int_equal(info->n_loads, ref->n);
	for (size_t i = 0; i < ref->n; i++) {
		assert_int_equal(info->loads[i].vaddr, ref->loads[i].vaddr);
		assert_int_equal(info->loads[i].offset, ref->loads[i].offset);
		assert_int_equal(info->loads[i].filesz, ref->loads[i].filesz);
		assert_int_equal(info->loads[i].memsz, ref->loads[i].memsz);
		assert_int_equal(info->loads[i].flags & (PF_R | PF_W | PF_X), ref->loads[i].flags);
	}
}

/* Simulates the kernel's mapping of the text segment of `name`, puts
 * opal_layout_work at its runtime address and checks that offset -> vaddr
 * and the load bias both give back nm's st_value. Returns p_vaddr -
 * p_offset of the text segment so callers can assert the layout. */
static int64_t check_layout(const char *name)
{
	struct ref_elf ref;
	readelf_loads(name, &ref);
	uint64_t st_value = nm_symbol(name, "opal_layout_work");
	const struct ref_load *text = ref_text_load(&ref, st_value);
	/* Independent file offset of the symbol, from readelf's numbers. */
	uint64_t sym_off = st_value - text->vaddr + text->offset;

	struct opal_elf_info info;
	load_info(name, &info);
	check_loads_match(&info, &ref);

	uint64_t base = ref.e_type == ET_EXEC ? 0 : PIE_BASE;
	uint64_t start = base + (text->vaddr & ~(uint64_t)(PAGE - 1));
	uint64_t limit = base + ((text->vaddr + text->memsz + PAGE - 1) & ~(uint64_t)(PAGE - 1));
	uint64_t file_offset = text->offset & ~(uint64_t)(PAGE - 1);
	uint64_t runtime = base + st_value;
	/* What a profiler computes from a sampled address and its mapping. */
	uint64_t off = runtime - start + file_offset;
	assert_int_equal(off, sym_off);

	uint64_t vaddr = 0;
	assert_int_equal(opal_elf_offset_to_vaddr(&info, off, &vaddr), 0);
	assert_int_equal(vaddr, st_value);

	uint64_t bias = 0;
	/* The text segment is mapped executable. */
	assert_int_equal(opal_elf_load_bias(&info, start, limit, file_offset, true, &bias), 0);
	assert_int_equal(runtime - bias, st_value);
	assert_int_equal(bias, base);

	return (int64_t)(text->vaddr - text->offset);
}

static void test_layout_lld(void **state)
{
	(void)state;
	/* lld packs segments into the file and shifts p_vaddr: the test must
	 * exercise a translation that is not the identity. */
	assert_int_not_equal(check_layout("prog-lld"), 0);
}

static void test_layout_nopie(void **state)
{
	(void)state;
	assert_int_not_equal(check_layout("prog-nopie"), 0);   /* ET_EXEC at 0x400000 */
}

static void test_layout_separate_code(void **state)
{
	(void)state;
	check_layout("prog-sepcode");
}

static void test_layout_shared_lib(void **state)
{
	(void)state;
	check_layout("liblayout.so");
}

static void test_layout_shared_lib_lld(void **state)
{
	(void)state;
	assert_int_not_equal(check_layout("liblayout-lld.so"), 0);
}

/* A second text segment after a writable one whose p_memsz > p_filesz
 * (a large .bss): that segment's [p_offset, p_offset + p_memsz) holds the
 * text's file offsets too, but only p_filesz bytes of it are in the file. */
static void test_layout_bss_before_text(void **state)
{
	(void)state;
	check_layout("prog-bss-text2");
}

/* The real thing: dlopen library `name`, find the mapping of its
 * function in /proc/self/maps (parsed here with sscanf, independently of
 * procmaps.c) and translate the runtime address back to st_value. */
static void check_real_mapping(const char *name)
{
	uint64_t st_value = nm_symbol(name, "opal_layout_work");
	void *h = dlopen(fixture(name), RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", fixture(name), dlerror());
	void *fn = dlsym(h, "opal_layout_work");
	assert_non_null(fn);
	uint64_t runtime = (uint64_t)(uintptr_t)fn;

	FILE *m = fopen("/proc/self/maps", "r");
	assert_non_null(m);
	char line[8192];
	uint64_t start = 0, limit = 0, file_offset = 0;
	char perms[8] = "";
	int found = 0;
	while (fgets(line, sizeof(line), m)) {
		uint64_t s, l, o;
		char pr[8];
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64, &s, &l, pr, &o) != 4)
			continue;
		if (runtime >= s && runtime < l) {
			start = s;
			limit = l;
			file_offset = o;
			memcpy(perms, pr, sizeof(perms));
			found = 1;
		}
	}
	fclose(m);
	assert_true(found);
	assert_int_equal(perms[2], 'x');

	struct opal_elf_info info;
	load_info(name, &info);
	uint64_t vaddr = 0;
	assert_int_equal(opal_elf_offset_to_vaddr(&info, runtime - start + file_offset, &vaddr), 0);
	assert_int_equal(vaddr, st_value);
	uint64_t bias = 0;
	assert_int_equal(opal_elf_load_bias(&info, start, limit, file_offset, true, &bias), 0);
	assert_int_equal(runtime - bias, st_value);
	dlclose(h);
}

static void test_layout_real_mapping(void **state)
{
	(void)state;
	check_real_mapping("liblayout-lld.so");
}

static void test_layout_real_mapping_bss(void **state)
{
	(void)state;
	check_real_mapping("libbss-text2.so");
}

static void test_offset_outside_loads(void **state)
{
	(void)state;
	struct ref_elf ref;
	readelf_loads("prog-nopie", &ref);
	struct opal_elf_info info;
	load_info("prog-nopie", &info);
	uint64_t end = 0;
	for (size_t i = 0; i < ref.n; i++) {
		uint64_t e = ref.loads[i].offset + (ref.loads[i].filesz > ref.loads[i].memsz ?
						    ref.loads[i].filesz : ref.loads[i].memsz);
		if (e > end)
			end = e;
	}
	uint64_t vaddr = 0;
	assert_int_equal(opal_elf_offset_to_vaddr(&info, end + 0x100000, &vaddr), -ENOENT);
	uint64_t bias = 0;
	assert_int_equal(opal_elf_load_bias(&info, 0x7f0000000000ull, 0x7f0000001000ull,
					    end + 0x100000, true, &bias),
			 -ENOENT);
}

static char *shell_line(const char *cmd)
{
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	static char line[512];
	line[0] = '\0';
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	assert_int_equal(pclose(p), 0);
	line[strcspn(line, "\n")] = '\0';
	return line;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

static void test_build_id_sha1(void **state)
{
	(void)state;
	char cmd[4608];
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | sed -n 's/^ *Build ID: *//p'",
		 fixture("buildid-sha1"));
	char want[256];
	snprintf(want, sizeof(want), "%s", shell_line(cmd));
	assert_int_equal(strlen(want), 40);

	/* Also what build.sh stored next to the fixture. */
	snprintf(cmd, sizeof(cmd), "cat '%s'", fixture("buildid-sha1.note"));
	assert_string_equal(shell_line(cmd), want);

	struct opal_elf_info info;
	load_info("buildid-sha1", &info);
	assert_int_equal(info.build_id_len, 20);
	char got[2 * OPAL_BUILD_ID_MAX + 1];
	hex(info.build_id, info.build_id_len, got);
	assert_string_equal(got, want);
}

static void test_build_id_none(void **state)
{
	(void)state;
	struct ref_elf ref;
	readelf_loads("buildid-none", &ref);
	struct opal_elf_info info;
	load_info("buildid-none", &info);
	assert_int_equal(info.build_id_len, 0);
	check_loads_match(&info, &ref);
}

/* Writes `len` bytes to a temp file; returns an fd open for reading. */
static int temp_with(const void *data, size_t len)
{
	char path[] = "/tmp/opal-test-elf-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	if (len)
		assert_int_equal(write(fd, data, len), (ssize_t)len);
	return fd;
}

static int info_of_bytes(const void *data, size_t len, struct opal_elf_info *info)
{
	int fd = temp_with(data, len);
	int rc = opal_elf_info_from_fd(fd, info);
	close(fd);
	return rc;
}

static void test_not_elf(void **state)
{
	(void)state;
	struct opal_elf_info info;
	const char text[] = "#!/bin/sh\necho this is not an ELF file\n";
	assert_int_equal(info_of_bytes(text, sizeof(text) - 1, &info), -ENOEXEC);
	assert_int_equal(info_of_bytes("", 0, &info), -ENOEXEC);
	char ar[] = "!<arch>\n";
	assert_int_equal(info_of_bytes(ar, sizeof(ar) - 1, &info), -ENOEXEC);
}

static void test_truncated_elf(void **state)
{
	(void)state;
	int fd = open_fixture("prog-nopie");
	uint8_t head[4096];
	assert_int_equal(pread(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	close(fd);

	struct opal_elf_info info;
	/* Inside the ELF header. */
	assert_int_equal(info_of_bytes(head, 4, &info), -ENOEXEC);
	assert_int_equal(info_of_bytes(head, 16, &info), -ENOEXEC);
	assert_int_equal(info_of_bytes(head, sizeof(Elf64_Ehdr) - 1, &info), -ENOEXEC);
	/* Header complete, program headers cut off. */
	assert_int_equal(info_of_bytes(head, sizeof(Elf64_Ehdr), &info), -ENOEXEC);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)head;
	assert_true(eh->e_phoff + 2 * sizeof(Elf64_Phdr) < sizeof(head));
	assert_int_equal(info_of_bytes(head, eh->e_phoff + sizeof(Elf64_Phdr) + 10, &info),
			 -ENOEXEC);
}

/* A minimal ELF64 file with `n` PT_LOADs (and optionally one PT_NOTE with a
 * GNU build-ID note of `id_len` bytes), built in memory. */
static size_t craft_elf(uint8_t *buf, size_t cap, unsigned n, size_t id_len)
{
	unsigned nph = n + (id_len ? 1 : 0);
	size_t note_off = sizeof(Elf64_Ehdr) + nph * sizeof(Elf64_Phdr);
	size_t desc_pad = (id_len + 3) & ~(size_t)3;
	size_t note_len = id_len ? sizeof(Elf64_Nhdr) + 4 + desc_pad : 0;
	size_t total = note_off + note_len;
	assert_true(total <= cap);
	memset(buf, 0, total);

	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(Elf64_Ehdr);
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = (uint16_t)nph;

	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + sizeof(Elf64_Ehdr));
	for (unsigned i = 0; i < n; i++) {
		ph[i].p_type = PT_LOAD;
		ph[i].p_flags = PF_R | (i % 2 ? PF_X : 0);
		ph[i].p_offset = 0;
		ph[i].p_vaddr = ph[i].p_paddr = (uint64_t)i * 0x10000;
		ph[i].p_filesz = ph[i].p_memsz = total;
		ph[i].p_align = PAGE;
	}
	if (id_len) {
		Elf64_Phdr *np = &ph[n];
		np->p_type = PT_NOTE;
		np->p_flags = PF_R;
		np->p_offset = np->p_vaddr = np->p_paddr = note_off;
		np->p_filesz = np->p_memsz = note_len;
		np->p_align = 4;
		Elf64_Nhdr *nh = (Elf64_Nhdr *)(buf + note_off);
		nh->n_namesz = 4;
		nh->n_descsz = (uint32_t)id_len;
		nh->n_type = NT_GNU_BUILD_ID;
		memcpy(buf + note_off + sizeof(*nh), "GNU", 4);
		for (size_t i = 0; i < id_len; i++)
			buf[note_off + sizeof(*nh) + 4 + i] = (uint8_t)(0xc0 + i);
	}
	return total;
}

static void test_load_count_bound(void **state)
{
	(void)state;
	static uint8_t buf[16384];
	struct opal_elf_info info;

	size_t len = craft_elf(buf, sizeof(buf), OPAL_ELF_MAX_LOADS, 8);
	assert_int_equal(info_of_bytes(buf, len, &info), 0);
	assert_int_equal(info.n_loads, OPAL_ELF_MAX_LOADS);
	assert_int_equal(info.loads[3].vaddr, 0x30000);
	assert_int_equal(info.loads[3].flags & PF_X, PF_X);
	assert_int_equal(info.build_id_len, 8);
	const uint8_t want[8] = { 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7 };
	assert_memory_equal(info.build_id, want, 8);

	len = craft_elf(buf, sizeof(buf), OPAL_ELF_MAX_LOADS + 1, 8);
	assert_int_equal(info_of_bytes(buf, len, &info), -E2BIG);
}

/* A build-ID note longer than OPAL_BUILD_ID_MAX is rejected: either the
 * file is refused or it is reported as having no build ID. */
static void test_oversized_build_id(void **state)
{
	(void)state;
	static uint8_t buf[16384];
	struct opal_elf_info info;
	size_t len = craft_elf(buf, sizeof(buf), 2, OPAL_BUILD_ID_MAX + 1);
	int rc = info_of_bytes(buf, len, &info);
	assert_true(rc < 0 || info.build_id_len == 0);

	len = craft_elf(buf, sizeof(buf), 2, OPAL_BUILD_ID_MAX);
	assert_int_equal(info_of_bytes(buf, len, &info), 0);
	assert_int_equal(info.build_id_len, OPAL_BUILD_ID_MAX);
}

/* A note whose size runs past its segment and the file is malformed input:
 * no crash, no build ID read from beyond the file. */
static void test_note_past_eof(void **state)
{
	(void)state;
	static uint8_t buf[16384];
	struct opal_elf_info info;
	size_t len = craft_elf(buf, sizeof(buf), 2, 20);
	Elf64_Nhdr *nh = (Elf64_Nhdr *)(buf + sizeof(Elf64_Ehdr) + 3 * sizeof(Elf64_Phdr));
	assert_int_equal(nh->n_type, NT_GNU_BUILD_ID);
	nh->n_descsz = 0x10000000;
	int rc = info_of_bytes(buf, len, &info);
	assert_true(rc < 0 || info.build_id_len == 0);
}

/* zlib's CRC-32 of the whole file at `path`, as `objcopy --add-gnu-debuglink`
 * records it. */
static uint32_t file_crc32(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s (run tests/fixtures/build.sh)", path);
	uLong crc = crc32(0, Z_NULL, 0);
	unsigned char b[65536];
	ssize_t n;
	while ((n = read(fd, b, sizeof(b))) > 0)
		crc = crc32(crc, b, (uInt)n);
	assert_int_equal(n, 0);
	close(fd);
	return (uint32_t)crc;
}

/* The stripped fixture's .gnu_debuglink: the name readelf prints, the CRC
 * of the debug file it was made from; the debug file itself has none. */
static void test_debuglink_fixture(void **state)
{
	(void)state;
	char path[4352], cmd[4608], want[256];
	snprintf(path, sizeof(path), "%s/dl_next", debuglink_dir);
	snprintf(cmd, sizeof(cmd),
		 "readelf -p .gnu_debuglink '%s' | sed -n 's/^ *\\[ *0\\] *//p'", path);
	snprintf(want, sizeof(want), "%s", shell_line(cmd));
	assert_string_equal(want, "dl_next.debug");

	struct opal_elf_info info;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open fixture %s (run tests/fixtures/build.sh)", path);
	memset(&info, 0xa5, sizeof(info));
	assert_int_equal(opal_elf_info_from_fd(fd, &info), 0);
	close(fd);
	assert_true(info.has_debuglink);
	assert_string_equal(info.debuglink, want);
	snprintf(path, sizeof(path), "%s/dl_next.debug", debuglink_dir);
	assert_int_equal(info.debuglink_crc, file_crc32(path));

	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(opal_elf_info_from_fd(fd, &info), 0);
	close(fd);
	assert_false(info.has_debuglink);
	assert_string_equal(info.debuglink, "");
}

static void put(uint8_t *p, uint64_t v, unsigned size, bool msb)
{
	for (unsigned i = 0; i < size; i++)
		p[msb ? size - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

/* A minimal ELF64 file without program headers and with three sections
 * (null, .shstrtab of `str_size` bytes, .gnu_debuglink holding `data`,
 * `dlen` bytes, of type `type`), in big-endian byte order when `msb`. */
static size_t craft_debuglink_str(uint8_t *buf, size_t cap, const void *data, size_t dlen,
				  uint32_t type, bool msb, size_t str_size)
{
	static const char names[] = "\0.shstrtab\0.gnu_debuglink";   /* offsets 1 and 11 */
	size_t str_off = 64, data_off = (str_off + str_size + 7) & ~(size_t)7;
	size_t sh_off = (data_off + dlen + 7) & ~(size_t)7;
	size_t total = sh_off + 3 * 64;
	assert_true(total <= cap && sizeof(names) <= str_size);
	memset(buf, 0, total);
	memcpy(buf, ELFMAG, SELFMAG);
	buf[EI_CLASS] = ELFCLASS64;
	buf[EI_DATA] = msb ? ELFDATA2MSB : ELFDATA2LSB;
	buf[EI_VERSION] = EV_CURRENT;
	put(buf + 16, ET_DYN, 2, msb);
	put(buf + 18, msb ? EM_PPC64 : EM_X86_64, 2, msb);
	put(buf + 20, EV_CURRENT, 4, msb);
	put(buf + 40, sh_off, 8, msb);     /* e_shoff */
	put(buf + 52, 64, 2, msb);         /* e_ehsize */
	put(buf + 54, 56, 2, msb);         /* e_phentsize */
	put(buf + 58, 64, 2, msb);         /* e_shentsize */
	put(buf + 60, 3, 2, msb);          /* e_shnum */
	put(buf + 62, 1, 2, msb);          /* e_shstrndx */
	memcpy(buf + str_off, names, sizeof(names));
	memcpy(buf + data_off, data, dlen);
	uint8_t *sh = buf + sh_off + 64;   /* [1] .shstrtab */
	put(sh + 0, 1, 4, msb);
	put(sh + 4, SHT_STRTAB, 4, msb);
	put(sh + 24, str_off, 8, msb);
	put(sh + 32, str_size, 8, msb);
	put(sh + 48, 1, 8, msb);
	sh += 64;                          /* [2] .gnu_debuglink */
	put(sh + 0, 11, 4, msb);
	put(sh + 4, type, 4, msb);
	put(sh + 24, data_off, 8, msb);
	put(sh + 32, dlen, 8, msb);
	put(sh + 48, 4, 8, msb);
	return total;
}

static size_t craft_debuglink(uint8_t *buf, size_t cap, const void *data, size_t dlen,
			      uint32_t type, bool msb)
{
	return craft_debuglink_str(buf, cap, data, dlen, type, msb, 32);
}

/* Section contents: `name_len` bytes of 'a'..'z', NUL, zero padding to 4,
 * then `crc` in the given byte order. Returns the length. */
static size_t link_data(uint8_t *d, size_t name_len, uint32_t crc, bool msb)
{
	for (size_t i = 0; i < name_len; i++)
		d[i] = (uint8_t)('a' + i % 26);
	size_t crc_off = (name_len + 4) & ~(size_t)3;
	memset(d + name_len, 0, crc_off - name_len);
	put(d + crc_off, crc, 4, msb);
	return crc_off + 4;
}

static void test_debuglink_crafted(void **state)
{
	(void)state;
	static uint8_t buf[4096];
	uint8_t d[600];
	struct opal_elf_info info;

	/* Both byte orders; the longest name kept (255 bytes). */
	for (int msb = 0; msb <= 1; msb++) {
		size_t dl = link_data(d, 255, 0x12345678u, msb);
		size_t len = craft_debuglink(buf, sizeof(buf), d, dl, SHT_PROGBITS, msb);
		assert_int_equal(info_of_bytes(buf, len, &info), 0);
		assert_true(info.has_debuglink);
		assert_int_equal(strlen(info.debuglink), 255);
		assert_memory_equal(info.debuglink, d, 255);
		assert_int_equal(info.debuglink_crc, 0x12345678u);
		assert_int_equal(info.n_loads, 0);
	}
	size_t dl = link_data(d, 5, 0xdeadbeefu, false);
	assert_int_equal(info_of_bytes(buf, craft_debuglink(buf, sizeof(buf), d, dl, SHT_PROGBITS,
							    false), &info), 0);
	assert_string_equal(info.debuglink, "abcde");
	assert_int_equal(info.debuglink_crc, 0xdeadbeefu);

	/* Malformed sections are ignored, the file is not refused. */
	dl = link_data(d, 256, 1, false);   /* name too long */
	assert_int_equal(info_of_bytes(buf, craft_debuglink(buf, sizeof(buf), d, dl, SHT_PROGBITS,
							    false), &info), 0);
	assert_false(info.has_debuglink);
	dl = link_data(d, 5, 1, false);     /* SHT_NOBITS: no contents in the file */
	assert_int_equal(info_of_bytes(buf, craft_debuglink(buf, sizeof(buf), d, dl, SHT_NOBITS,
							    false), &info), 0);
	assert_false(info.has_debuglink);
	memset(d, 'x', 12);                 /* no NUL */
	assert_int_equal(info_of_bytes(buf, craft_debuglink(buf, sizeof(buf), d, 12, SHT_PROGBITS,
							    false), &info), 0);
	assert_false(info.has_debuglink);
	memcpy(d, "abc\0\1\2\3", 7);       /* CRC cut short */
	assert_int_equal(info_of_bytes(buf, craft_debuglink(buf, sizeof(buf), d, 7, SHT_PROGBITS,
							    false), &info), 0);
	assert_false(info.has_debuglink);
	memset(d, 0, 8);                    /* empty name */
	assert_int_equal(info_of_bytes(buf, craft_debuglink(buf, sizeof(buf), d, 8, SHT_PROGBITS,
							    false), &info), 0);
	assert_false(info.has_debuglink);

	/* A section-name table over the 1 MiB bound is not read; one of
	 * exactly 1 MiB is. */
	static uint8_t huge[(1u << 20) + 4096];
	dl = link_data(d, 5, 1, false);
	size_t big = craft_debuglink_str(huge, sizeof(huge), d, dl, SHT_PROGBITS, false,
					 (1u << 20) + 1);
	assert_int_equal(info_of_bytes(huge, big, &info), 0);
	assert_false(info.has_debuglink);
	big = craft_debuglink_str(huge, sizeof(huge), d, dl, SHT_PROGBITS, false, 1u << 20);
	assert_int_equal(info_of_bytes(huge, big, &info), 0);
	assert_true(info.has_debuglink);

	/* A section running past the end of the file. */
	dl = link_data(d, 5, 1, false);
	size_t len = craft_debuglink(buf, sizeof(buf), d, dl, SHT_PROGBITS, false);
	put(buf + len - 64 + 24, 1u << 20, 8, false);   /* sh_offset of .gnu_debuglink */
	int rc = info_of_bytes(buf, len, &info);
	assert_true(rc < 0 || !info.has_debuglink);
}

static int setup(void **state)
{
	(void)state;
	const char *env = getenv("OPAL_FIXTURES");
	snprintf(fixture_dir, sizeof(fixture_dir), "%s/layout", env && *env ? env : "build/fixtures");
	snprintf(debuglink_dir, sizeof(debuglink_dir), "%s/debuglink",
		 env && *env ? env : "build/fixtures");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_lld),
		cmocka_unit_test(test_layout_nopie),
		cmocka_unit_test(test_layout_separate_code),
		cmocka_unit_test(test_layout_shared_lib),
		cmocka_unit_test(test_layout_shared_lib_lld),
		cmocka_unit_test(test_layout_bss_before_text),
		cmocka_unit_test(test_layout_real_mapping),
		cmocka_unit_test(test_layout_real_mapping_bss),
		cmocka_unit_test(test_offset_outside_loads),
		cmocka_unit_test(test_build_id_sha1),
		cmocka_unit_test(test_build_id_none),
		cmocka_unit_test(test_not_elf),
		cmocka_unit_test(test_truncated_elf),
		cmocka_unit_test(test_load_count_bound),
		cmocka_unit_test(test_oversized_build_id),
		cmocka_unit_test(test_note_past_eof),
		cmocka_unit_test(test_debuglink_fixture),
		cmocka_unit_test(test_debuglink_crafted),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
