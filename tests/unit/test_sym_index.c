/* Tests of the address index (symbolizer/symbolize/sym_index.h) and the symbol table
 * index (symbolizer/symbolize/sym_symtab.h): opal_dwfl_lookup, which goes through
 * them, must give exactly the answers of opal_dwfl_lookup_scopes, which
 * asks libdw's scope walk and libdwfl's symbol search per address, for
 * every address of the fixtures' code (tests/fixtures/symbolize and
 * tests/fixtures/sym_index: `make fixtures`), and for a sample of libc's
 * addresses when libc6-dbg is installed; also under a pool budget small
 * enough to evict and to refuse units. The symbol index is also held
 * against dwfl_module_addrinfo on every code address directly. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <elfutils/libdwfl.h>

#include "symbolizer/base/sym_result.h"
#include "symbolizer/symbolize/sym_dwfl.h"
#include "symbolizer/symbolize/sym_index.h"
#include "symbolizer/symbolize/sym_symtab.h"

static char fixroot[PATH_MAX];

static int setup(void **state)
{
	const char *base = getenv("OPAL_FIXTURES");
	snprintf(fixroot, sizeof(fixroot), "%s", base ? base : "build/fixtures");
	char probe[PATH_MAX + 64];
	snprintf(probe, sizeof(probe), "%s/sym_index/multi_dwz", fixroot);
	if (access(probe, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures` (or set OPAL_FIXTURES)\n",
			probe);
		return -1;
	}
	elf_version(EV_CURRENT);
	return 0;
}

static void teardown_budget(void)
{
	opal_sym_index_set_budget(0);
}

struct span {
	uint64_t lo, hi;
};

/* Address ranges of the executable sections of ELF `path` (SHF_ALLOC and
 * SHF_EXECINSTR, with contents or not: a debug file's NOBITS .text still
 * tells where the code is). Returns the count (at most max). */
static size_t code_spans(const char *path, struct span *out, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	size_t n = 0;
	Elf_Scn *scn = NULL;
	while (n < max && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		assert_non_null(gelf_getshdr(scn, &sh));
		if ((sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR) &&
		    sh.sh_size > 0)
			out[n++] = (struct span){ sh.sh_addr, sh.sh_addr + sh.sh_size };
	}
	elf_end(elf);
	close(fd);
	return n;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static void describe(char *buf, size_t len, const struct opal_sym_result *r)
{
	size_t w = (size_t)snprintf(buf, len, "%zu frames", r->n);
	for (size_t i = 0; i < r->n && w < len; i++)
		w += (size_t)snprintf(buf + w, len - w, " | %s %s:%u%s",
				      r->frames[i].function ? r->frames[i].function : "(null)",
				      r->frames[i].file ? r->frames[i].file : "(null)",
				      r->frames[i].line, r->frames[i].inlined ? " inl" : "");
}

/* Fails unless both lookups of `addr` agree exactly. */
static void check_address(struct opal_dwfl_file *f, const char *name, uint64_t addr)
{
	struct opal_sym_result a, b;
	assert_int_equal(opal_dwfl_lookup(f, addr, &a), 0);
	assert_int_equal(opal_dwfl_lookup_scopes(f, addr, &b), 0);
	bool same = a.n == b.n;
	for (size_t i = 0; same && i < a.n; i++)
		same = same_str(a.frames[i].function, b.frames[i].function) &&
		       same_str(a.frames[i].file, b.frames[i].file) &&
		       a.frames[i].line == b.frames[i].line &&
		       a.frames[i].inlined == b.frames[i].inlined;
	if (!same) {
		char da[2048], db[2048];
		describe(da, sizeof(da), &a);
		describe(db, sizeof(db), &b);
		fail_msg("%s 0x%lx: index gives %s; libdw walk gives %s", name, (unsigned long)addr,
			 da, db);
	}
	opal_sym_result_free(&a);
	opal_sym_result_free(&b);
}

static struct opal_dwfl_file *open_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct opal_dwfl_file *f;
	assert_int_equal(opal_dwfl_open(fd, path, &f), 0);
	close(fd);
	return f;
}

/* Every address of the code of fixture `set`/`name` (a few bytes past
 * each section's end too). Returns how many resolved to DWARF frames
 * with a line, so callers can tell the DWARF was used at all. */
static size_t check_fixture(const char *set, const char *name)
{
	char path[PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/%s/%s", fixroot, set, name);
	struct span spans[32];
	size_t ns = code_spans(path, spans, 32);
	assert_true(ns > 0);
	struct opal_dwfl_file *f = open_path(path);
	size_t with_lines = 0;
	for (size_t s = 0; s < ns; s++)
		for (uint64_t a = spans[s].lo; a < spans[s].hi + 4; a++) {
			check_address(f, name, a);
			struct opal_sym_result r;
			assert_int_equal(opal_dwfl_lookup(f, a, &r), 0);
			with_lines += r.n > 0 && r.frames[0].line > 0;
			opal_sym_result_free(&r);
		}
	opal_dwfl_close(f);
	return with_lines;
}

static void test_symbolize_fixtures(void **state)
{
	static const char *const with_dwarf[] = {
		"inline_pie", "inline_nopie", "inline_clang", "cxx", "libfix.so",
		"libfix_high.so", "gap", "asm_lines",
	};
	static const char *const without_dwarf[] = {
		"inline_symtab", "inline_nosym", "libfix_dynsym.so", "gap_symtab",
	};
	for (size_t i = 0; i < sizeof(with_dwarf) / sizeof(with_dwarf[0]); i++)
		assert_true(check_fixture("symbolize", with_dwarf[i]) > 0);
	for (size_t i = 0; i < sizeof(without_dwarf) / sizeof(without_dwarf[0]); i++)
		assert_int_equal(check_fixture("symbolize", without_dwarf[i]), 0);
}

static void test_index_fixtures(void **state)
{
	static const char *const names[] = {
		"multi", "multi_dwz", "multi_sections", "cxx_scopes_gcc", "cxx_scopes_gcc4z",
		"cxx_scopes_clang",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_true(check_fixture("sym_index", names[i]) > 0);
}

/* The units really are indexed (not all refused to the per-address path),
 * and inline chains come out of the index. */
static void test_index_used(void **state)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/symbolize/inline_pie", fixroot);
	struct opal_sym_index_stats before, after;
	opal_sym_index_stats(&before);
	assert_true(check_fixture("symbolize", "inline_pie") > 0);
	opal_sym_index_stats(&after);
	assert_true(after.units_built > before.units_built);
	assert_int_equal(after.units_refused, before.units_refused);
	/* Closing the sessions gave every byte back. */
	assert_int_equal(after.bytes, before.bytes);
}

/* opal_dwfl_memory counts the DWARF sections from the start and the line
 * tables libdw parses for the index as units get indexed. */
static void test_session_memory(void **state)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/sym_index/multi", fixroot);
	struct opal_dwfl_file *f = open_path(path);
	size_t before = opal_dwfl_memory(f);
	assert_true(before > 0);
	struct span spans[32];
	size_t ns = code_spans(path, spans, 32);
	for (size_t s = 0; s < ns; s++)
		for (uint64_t a = spans[s].lo; a < spans[s].hi; a++) {
			struct opal_sym_result r;
			assert_int_equal(opal_dwfl_lookup(f, a, &r), 0);
			opal_sym_result_free(&r);
		}
	assert_true(opal_dwfl_memory(f) > before);
	opal_dwfl_close(f);
}

/* Scopes nested deeper than the walk's bound: the unit is refused and its
 * addresses still get libdw's answers. */
static void test_deep_unit_refused(void **state)
{
	struct opal_sym_index_stats before, after;
	opal_sym_index_stats(&before);
	assert_true(check_fixture("sym_index", "deep") > 0);
	opal_sym_index_stats(&after);
	assert_true(after.units_refused > before.units_refused);
}

/* A budget one byte short of what a fixture's units need together:
 * units are evicted and rebuilt, answers stay exact. */
static void test_small_budget_evicts(void **state)
{
	static const char *const names[] = { "multi", "multi_dwz", "multi_sections" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), "%s/sym_index/%s", fixroot, names[i]);
		struct span spans[32];
		size_t ns = code_spans(path, spans, 32);
		/* What indexing every unit takes. */
		struct opal_dwfl_file *f = open_path(path);
		struct opal_sym_index_stats st;
		opal_sym_index_stats(&st);
		uint64_t base = st.bytes, need = 0;
		for (size_t s = 0; s < ns; s++)
			for (uint64_t a = spans[s].lo; a < spans[s].hi; a++) {
				struct opal_sym_result r;
				assert_int_equal(opal_dwfl_lookup(f, a, &r), 0);
				opal_sym_result_free(&r);
				opal_sym_index_stats(&st);
				if (st.bytes - base > need)
					need = st.bytes - base;
			}
		opal_dwfl_close(f);
		assert_true(need > 0);

		opal_sym_index_set_budget(base + need - 1);
		struct opal_sym_index_stats before, after;
		opal_sym_index_stats(&before);
		assert_true(check_fixture("sym_index", names[i]) > 0);
		opal_sym_index_stats(&after);
		teardown_budget();
		assert_true(after.units_evicted > before.units_evicted);
		assert_true(after.peak_bytes >= base + need - 1);
	}
}

/* A budget smaller than any unit's index: every unit is refused. */
static void test_tiny_budget_refuses(void **state)
{
	opal_sym_index_set_budget(64);
	struct opal_sym_index_stats before, after;
	opal_sym_index_stats(&before);
	assert_true(check_fixture("symbolize", "inline_pie") > 0);
	opal_sym_index_stats(&after);
	teardown_budget();
	assert_true(after.units_refused > before.units_refused);
	assert_int_equal(after.units_built, before.units_built);
}

/* Flipped bytes in .debug_info: both paths must survive, and agree. */
static void test_corrupt_dwarf(void **state)
{
	char src[PATH_MAX + 64], dst[] = "/tmp/opal-test-index-XXXXXX";
	snprintf(src, sizeof(src), "%s/sym_index/cxx_scopes_gcc", fixroot);
	FILE *in = fopen(src, "rb");
	assert_non_null(in);
	static unsigned char buf[1 << 20];
	size_t len = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	assert_true(len > 0 && len < sizeof(buf));

	/* Where .debug_info lies in the file. */
	int fd = open(src, O_RDONLY | O_CLOEXEC);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	uint64_t off = 0, size = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, ".debug_info") == 0) {
			off = sh.sh_offset;
			size = sh.sh_size;
		}
	}
	elf_end(elf);
	close(fd);
	assert_true(size > 64);

	struct span spans[32];
	size_t ns = code_spans(src, spans, 32);
	srand(7);
	for (int round = 0; round < 8; round++) {
		int out = mkstemp(dst);
		assert_true(out >= 0);
		unsigned char *copy = malloc(len);
		assert_non_null(copy);
		memcpy(copy, buf, len);
		for (int k = 0; k < 4 + round * 4; k++)
			copy[off + 11 + (size_t)rand() % (size - 11)] ^= (unsigned char)(1 + rand() % 255);
		assert_int_equal(write(out, copy, len), (ssize_t)len);
		free(copy);
		struct opal_dwfl_file *f;
		assert_int_equal(opal_dwfl_open(out, dst, &f), 0);
		close(out);
		for (size_t s = 0; s < ns; s++)
			for (uint64_t a = spans[s].lo; a < spans[s].hi; a++)
				check_address(f, "corrupted cxx_scopes_gcc", a);
		opal_dwfl_close(f);
		unlink(dst);
		strcpy(dst, "/tmp/opal-test-index-XXXXXX");
	}
}

/* The path of libc's libc6-dbg debug file, false when not installed. */
static bool libc_debug_file(char *path, size_t len)
{
	FILE *p = popen("readelf -n /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null | "
			"sed -n 's/.*Build ID: *//p'", "r");
	char id[128] = "";
	if (!p)
		return false;
	bool got = fgets(id, sizeof(id), p) != NULL;
	pclose(p);
	id[strcspn(id, "\n")] = '\0';
	if (!got || strlen(id) < 4)
		return false;
	snprintf(path, len, "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	return access(path, R_OK) == 0;
}

/* libc through its libc6-dbg debug file (opened as the ELF itself: same
 * addresses, DWARF and full .symtab): 3,000 addresses spread over .text. */
static void test_libc_sample(void **state)
{
	char path[PATH_MAX];
	if (!libc_debug_file(path, sizeof(path)))
		fail_msg("libc's debug file /usr/lib/debug/.build-id/xx/....debug is missing: "
			 "scripts/install-deps.sh installs libc6-dbg");
	struct span spans[32];
	size_t ns = code_spans(path, spans, 32);
	assert_true(ns > 0);
	struct opal_dwfl_file *f = open_path(path);
	uint64_t total = 0;
	for (size_t s = 0; s < ns; s++)
		total += spans[s].hi - spans[s].lo;
	for (uint64_t k = 0; k < 3000; k++) {
		uint64_t want = k * (total / 3000) + (k * 7919) % 97, a = 0;
		for (size_t s = 0; s < ns; s++) {
			uint64_t l = spans[s].hi - spans[s].lo;
			if (want < l) {
				a = spans[s].lo + want;
				break;
			}
			want -= l;
		}
		check_address(f, "libc", a);
	}
	opal_dwfl_close(f);
}

static char *no_debuginfo_path;
static const Dwfl_Callbacks plain_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &no_debuginfo_path,
};

/* opal_symtab_lookup against dwfl_module_addrinfo on every code address
 * of `path` (every `step`-th byte): the same symbol and offset. */
static void check_symtab(const char *path, uint64_t step)
{
	Dwfl *dwfl = dwfl_begin(&plain_callbacks);
	assert_non_null(dwfl);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	Dwfl_Module *mod = dwfl_report_elf(dwfl, path, path, fd, 0, true);
	assert_non_null(mod);
	dwfl_report_end(dwfl, NULL, NULL);
	struct opal_symtab *t;
	assert_int_equal(opal_symtab_new(mod, &t), 0);
	struct span spans[32];
	size_t ns = code_spans(path, spans, 32), named = 0;
	for (size_t s = 0; s < ns; s++)
		for (uint64_t a = spans[s].lo; a < spans[s].hi + 4; a += step) {
			GElf_Sym want, got;
			GElf_Off want_off, got_off;
			GElf_Word shndx;
			Elf *elf;
			Dwarf_Addr bias;
			bool ask;
			const char *w = dwfl_module_addrinfo(mod, a, &want_off, &want, &shndx, &elf,
							     &bias);
			const char *g = opal_symtab_lookup(t, a, &got, &got_off, &ask);
			assert_false(ask);
			if (!w != !g || (w && (strcmp(w, g) != 0 || want_off != got_off ||
					       want.st_info != got.st_info ||
					       want.st_size != got.st_size)))
				fail_msg("%s 0x%lx: libdwfl names %s+%lu, the index %s+%lu", path,
					 (unsigned long)a, w ? w : "nothing", (unsigned long)want_off,
					 g ? g : "nothing", (unsigned long)got_off);
			named += g != NULL;
		}
	assert_true(named > 0);
	opal_symtab_free(t);
	dwfl_end(dwfl);
}

static void test_symtab_matches_libdwfl(void **state)
{
	static const char *const names[] = {
		"inline_pie", "inline_symtab", "cxx", "libfix.so", "libfix_dynsym.so",
		"libfix_high.so", "gap", "gap_symtab", "asm_lines",
	};
	char path[PATH_MAX + 64];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/symbolize/%s", fixroot, names[i]);
		check_symtab(path, 1);
	}
	snprintf(path, sizeof(path), "%s/sym_index/multi_dwz", fixroot);
	check_symtab(path, 1);
	/* libc's 10,000 symbols, aliases and assembly: every 1021st byte
	 * (libdwfl takes ~300 us per address there). */
	if (libc_debug_file(path, sizeof(path)))
		check_symtab(path, 1021);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symbolize_fixtures),
		cmocka_unit_test(test_index_fixtures),
		cmocka_unit_test(test_index_used),
		cmocka_unit_test(test_session_memory),
		cmocka_unit_test(test_deep_unit_refused),
		cmocka_unit_test(test_small_budget_evicts),
		cmocka_unit_test(test_tiny_budget_refuses),
		cmocka_unit_test(test_corrupt_dwarf),
		cmocka_unit_test(test_libc_sample),
		cmocka_unit_test(test_symtab_matches_libdwfl),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
