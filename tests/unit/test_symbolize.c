/* Tests of native and kernel symbolization (symbolizer/symbolize/symbolize.h) on the
 * fixtures of tests/fixtures/symbolize (built into
 * $OPAL_FIXTURES/symbolize, default build/fixtures/symbolize: run
 * `make fixtures` first). Expected lines come from the "LINE:" marker
 * comments of the fixture sources; addresses from the fixtures' own
 * .symtab, read here with libelf rather than with the code under test. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "elf_symbol.h"
#include "symbolizer/base/sym_result.h"
#include "symbolizer/symbolize/demangle.h"
#include "symbolizer/symbolize/sym_dwfl.h"
#include "symbolizer/symbolize/sym_sqlite.h"
#include "symbolizer/symbolize/symbolize.h"
#include "tmp_db.h"

static char fixdir[PATH_MAX];

static int setup_fixtures(void **state)
{
	const char *base = getenv("OPAL_FIXTURES");
	snprintf(fixdir, sizeof(fixdir), "%s/symbolize", base ? base : "build/fixtures");
	char probe[PATH_MAX + 32];
	snprintf(probe, sizeof(probe), "%s/inline_pie", fixdir);
	if (access(probe, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures` (or set OPAL_FIXTURES)\n",
			probe);
		return -1;
	}
	return 0;
}

static void fixture_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", fixdir, name);
}

static int open_fixture(const char *name)
{
	char p[PATH_MAX + 64];
	fixture_path(p, sizeof(p), name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* Value of symbol `sym` in the .symtab of fixture `name`. */
static uint64_t sym_addr(const char *name, const char *sym)
{
	int fd = open_fixture(name);
	uint64_t value = test_elf_symbol(fd, name, sym, NULL);
	close(fd);
	return value;
}

/* Line number of the "LINE:<marker>" comment in fixture source `src`. */
static uint32_t marker_line(const char *src, const char *marker)
{
	char p[PATH_MAX + 64], tag[128], line[1024];
	fixture_path(p, sizeof(p), src);
	snprintf(tag, sizeof(tag), "LINE:%s", marker);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	uint32_t n = 0, found = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		const char *hit = strstr(line, tag);
		char after = hit ? hit[strlen(tag)] : 'x';
		if (hit && (after == ' ' || after == '\n' || after == '\0')) {
			found = n;
			break;
		}
	}
	fclose(f);
	if (!found)
		fail_msg("marker %s not in %s", marker, src);
	return found;
}

static opal_file_id make_id(uint8_t tag)
{
	opal_file_id id;
	for (int i = 0; i < OPAL_FILE_ID_LEN; i++)
		id.b[i] = (uint8_t)(tag * 31 + i);
	return id;
}

static struct opal_symbolizer *new_with(struct opal_cache *c, size_t max_open, const char *name,
					opal_file_id id)
{
	struct opal_symbolizer *s = opal_symbolizer_new(c, max_open);
	assert_non_null(s);
	char p[PATH_MAX + 64];
	fixture_path(p, sizeof(p), name);
	assert_int_equal(opal_symbolizer_add_file(s, &id, open_fixture(name), NULL, 0, p), 0);
	return s;
}

static void assert_frame(const struct opal_sym_frame *f, const char *function, const char *src,
			 uint32_t line, bool inlined)
{
	assert_non_null(f->function);
	assert_string_equal(f->function, function);
	if (src) {
		assert_non_null(f->file);
		size_t fl = strlen(f->file), sl = strlen(src);
		assert_true(fl >= sl + 1);
		assert_string_equal(f->file + fl - sl, src);
		assert_int_equal(f->file[fl - sl - 1], '/');
	} else {
		assert_null(f->file);
	}
	assert_int_equal(f->line, line);
	assert_int_equal(f->inlined, inlined);
}

static void check_inline_chain(const char *fixture)
{
	opal_file_id id = make_id(1);
	struct opal_symbolizer *s = new_with(NULL, 4, fixture, id);
	struct opal_sym_result r;

	assert_int_equal(opal_symbolize_native(s, &id, sym_addr(fixture, "opal_mark_leaf"), false,
					       &r), 0);
	assert_int_equal(r.n, 3);
	assert_frame(&r.frames[0], "leaf", "inline.c", marker_line("inline.c", "leaf_body"), true);
	assert_frame(&r.frames[1], "mid", "inline.c", marker_line("inline.c", "mid_call_leaf"),
		     true);
	assert_frame(&r.frames[2], "outer", "inline.c", marker_line("inline.c", "outer_call_mid"),
		     false);
	assert_null(r.module);
	opal_sym_result_free(&r);

	assert_int_equal(opal_symbolize_native(s, &id, sym_addr(fixture, "opal_mark_plain"),
					       false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "plain", "inline.c", marker_line("inline.c", "plain_body"),
		     false);
	opal_sym_result_free(&r);

	enum opal_debug_quality q;
	assert_int_equal(opal_symbolizer_file_quality(s, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	opal_symbolizer_free(s);
}

static void test_inline_gcc_pie(void **state)
{
	check_inline_chain("inline_pie");
}

static void test_inline_gcc_nopie(void **state)
{
	check_inline_chain("inline_nopie");
}

/* clang emits no .debug_aranges: the CU must be found by its ranges. */
static void test_inline_clang(void **state)
{
	check_inline_chain("inline_clang");
}

static void test_return_address(void **state)
{
	opal_file_id id = make_id(2);
	struct opal_symbolizer *s = new_with(NULL, 4, "inline_pie", id);
	uint64_t mark = sym_addr("inline_pie", "opal_mark_plain");
	struct opal_sym_result a, b;

	/* The marker is a 1-byte nop: mark + 1 as a return address is
	 * looked up at mark. */
	assert_int_equal(opal_symbolize_native(s, &id, mark, false, &a), 0);
	assert_int_equal(opal_symbolize_native(s, &id, mark + 1, true, &b), 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(b.n, 1);
	assert_string_equal(a.frames[0].function, b.frames[0].function);
	assert_int_equal(a.frames[0].line, b.frames[0].line);
	opal_sym_result_free(&a);
	opal_sym_result_free(&b);
	opal_symbolizer_free(s);
}

static void test_cxx(void **state)
{
	opal_file_id id = make_id(3);
	struct opal_symbolizer *s = new_with(NULL, 4, "cxx", id);
	struct opal_sym_result r;

	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("cxx", "opal_mark_cxx_get"), false,
					       &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "ns::Box<int>::get() const", "cxx.cc",
		     marker_line("cxx.cc", "cxx_get"), false);
	opal_sym_result_free(&r);

	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("cxx", "opal_mark_cxx_twice"),
					       false, &r), 0);
	assert_int_equal(r.n, 2);
	/* No linkage name for an internal-linkage template: qualified from
	 * its enclosing namespace. */
	assert_frame(&r.frames[0], "ns::twice<int>", "cxx.cc", marker_line("cxx.cc", "cxx_twice"),
		     true);
	assert_frame(&r.frames[1], "ns::run(int)", "cxx.cc", marker_line("cxx.cc", "cxx_run_calls"),
		     false);
	opal_sym_result_free(&r);

	/* _start (crt1.o, no DWARF) follows main's CU in the address space:
	 * it gets its symbol but no line borrowed from that CU. */
	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("cxx", "_start") + 4, false, &r),
			 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "_start", NULL, 0, false);
	opal_sym_result_free(&r);
	opal_symbolizer_free(s);
}

/* -ffunction-sections -Wl,--gc-sections: the tombstoned DWARF of the
 * discarded opal_gc_unused claims [0, its size), which holds _start and
 * opal_gc_used; neither the index nor the per-address path may name them
 * after it. */
static void check_gc_fixture(const char *name, bool lines)
{
	opal_file_id id = make_id(31);
	struct opal_symbolizer *s = new_with(NULL, 4, name, id);
	struct opal_sym_result r;
	uint64_t start = sym_addr(name, "_start") + 4, used = sym_addr(name, "opal_mark_gc_used");

	assert_int_equal(opal_symbolize_native(s, &id, start, false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "_start", NULL, 0, false);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolize_native(s, &id, used, false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "opal_gc_used");
	if (lines)
		assert_frame(&r.frames[0], "opal_gc_used", "gc.c", marker_line("gc.c", "gc_used_body"),
			     false);
	opal_sym_result_free(&r);
	opal_symbolizer_free(s);

	struct opal_dwfl_file *f;
	int fd = open_fixture(name);
	assert_int_equal(opal_dwfl_open(fd, name, &f), 0);
	close(fd);
	assert_int_equal(opal_dwfl_lookup_scopes(f, start, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "_start");
	opal_sym_result_free(&r);
	assert_int_equal(opal_dwfl_lookup_scopes(f, used, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "opal_gc_used");
	opal_sym_result_free(&r);
	opal_dwfl_close(f);
}

static void test_gc_sections(void **state)
{
	check_gc_fixture("gc_gnu", true);
	check_gc_fixture("gc_gnu4", true);
	check_gc_fixture("gc_lld", true);
}

/* The function a chain ends in is named as c++filt names the ELF symbol
 * holding the address, parameters and clone suffix included, also where
 * DWARF has no linkage name or names a clone's origin: every C++ function
 * symbol of cxx_names is checked at its first byte and its middle. */
static void test_cxx_names(void **state)
{
	opal_file_id id = make_id(32);
	struct opal_symbolizer *s = new_with(NULL, 4, "cxx_names", id);
	char p[PATH_MAX + 64], cmd[PATH_MAX + 128], line[1024], want[1024];
	fixture_path(p, sizeof(p), "cxx_names");
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", p);
	FILE *nm = popen(cmd, "r");
	assert_non_null(nm);
	int checked = 0, clones = 0;
	while (fgets(line, sizeof(line), nm)) {
		unsigned long long value, size;
		char type, name[512];
		if (sscanf(line, "%llx %llx %c %511s", &value, &size, &type, name) != 4 ||
		    (type != 't' && type != 'T') || strncmp(name, "_Z", 2) != 0)
			continue;
		snprintf(cmd, sizeof(cmd), "c++filt '%s'", name);
		FILE *f = popen(cmd, "r");
		assert_non_null(f);
		assert_non_null(fgets(want, sizeof(want), f));
		assert_int_equal(pclose(f), 0);
		want[strcspn(want, "\n")] = '\0';
		clones += strstr(want, "[clone ") != NULL;
		uint64_t at[2] = { value, value + size / 2 };
		for (int k = 0; k < 2; k++) {
			struct opal_sym_result r;
			assert_int_equal(opal_symbolize_native(s, &id, at[k], false, &r), 0);
			if (r.n == 0 || !r.frames[r.n - 1].function ||
			    strcmp(r.frames[r.n - 1].function, want) != 0)
				fail_msg("%s+%#llx: \"%s\", c++filt says \"%s\"", name,
					 (unsigned long long)(at[k] - value),
					 r.n ? r.frames[r.n - 1].function : "(nothing)", want);
			assert_false(r.frames[r.n - 1].inlined);
			opal_sym_result_free(&r);
		}
		checked++;
	}
	assert_int_equal(pclose(nm), 0);
	assert_true(checked >= 6);
	assert_true(clones >= 3);

	/* The lambda inlined into use_inlined has neither symbol nor linkage
	 * name: its DWARF name, the closure type unnamed. */
	int fd = open_fixture("cxx_names");
	uint64_t size, fn = test_elf_symbol(fd, "cxx_names", "_ZN12_GLOBAL__N_111use_inlinedEi",
					    &size);
	close(fd);
	bool seen = false;
	for (uint64_t a = fn; a < fn + size && !seen; a++) {
		struct opal_sym_result r;
		assert_int_equal(opal_symbolize_native(s, &id, a, false, &r), 0);
		if (r.n == 2) {
			assert_string_equal(r.frames[0].function, "{unnamed type}::operator()");
			assert_true(r.frames[0].inlined);
			assert_string_equal(r.frames[1].function,
					    "(anonymous namespace)::use_inlined(int)");
			seen = true;
		}
		opal_sym_result_free(&r);
	}
	assert_true(seen);
	opal_symbolizer_free(s);
}

static void test_symtab_only(void **state)
{
	opal_file_id id = make_id(4);
	struct opal_symbolizer *s = new_with(NULL, 4, "inline_symtab", id);
	struct opal_sym_result r;
	enum opal_debug_quality q;

	/* objcopy keeps the layout: the unstripped file's addresses apply. */
	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("inline_pie", "opal_mark_leaf"),
					       false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "outer", NULL, 0, false);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolizer_file_quality(s, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_SYMTAB);
	opal_symbolizer_free(s);
}

static void test_dynsym_only(void **state)
{
	opal_file_id id = make_id(5);
	struct opal_symbolizer *s = new_with(NULL, 4, "libfix_dynsym.so", id);
	struct opal_sym_result r;
	enum opal_debug_quality q;

	assert_int_equal(opal_symbolize_native(s, &id,
					       sym_addr("libfix.so", "opal_mark_lib_exported"),
					       false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "opal_lib_exported", NULL, 0, false);
	opal_sym_result_free(&r);

	/* The static function has no .dynsym entry: it must stay unresolved
	 * rather than be named after the exported neighbour. */
	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("libfix.so", "opal_mark_lib_static"),
					       false, &r), 0);
	assert_int_equal(r.n, 0);
	assert_null(r.frames);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolizer_file_quality(s, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DYNSYM);
	opal_symbolizer_free(s);
}

/* The shared library with DWARF resolves both, at ELF addresses. */
static void test_shared_lib_dwarf(void **state)
{
	opal_file_id id = make_id(6);
	struct opal_symbolizer *s = new_with(NULL, 4, "libfix.so", id);
	struct opal_sym_result r;

	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("libfix.so", "opal_mark_lib_static"),
					       false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "lib_static", "lib.c", marker_line("lib.c", "lib_static"),
		     false);
	opal_sym_result_free(&r);
	opal_symbolizer_free(s);
}

/* Our chain at `addr` against eu-addr2line -i -f -C -A (elfutils) as an
 * independent oracle: same frame count, files and lines; function names
 * equal, or ours qualified where eu-addr2line prints the bare DW_AT_name. */
static void compare_with_eu_addr2line(const char *fixture, uint64_t addr)
{
	char path[PATH_MAX + 64], cmd[PATH_MAX + 160], line[1024];
	fixture_path(path, sizeof(path), fixture);
	snprintf(cmd, sizeof(cmd), "eu-addr2line -i -f -C -A -e '%s' 0x%lx", path,
		 (unsigned long)addr);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char eu_fn[OPAL_SYM_MAX_FRAMES][1024], eu_src[OPAL_SYM_MAX_FRAMES][1024];
	size_t n = 0;
	while (n < OPAL_SYM_MAX_FRAMES && fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		char *inl = strstr(line, " inlined at ");
		if (inl)
			*inl = '\0';
		snprintf(eu_fn[n], sizeof(eu_fn[n]), "%s", line);
		if (!fgets(line, sizeof(line), p))
			break;
		line[strcspn(line, "\n")] = '\0';
		snprintf(eu_src[n], sizeof(eu_src[n]), "%s", line);
		n++;
	}
	if (pclose(p) != 0)
		fail_msg("eu-addr2line failed (is elfutils installed?)");

	opal_file_id id = make_id(99);
	struct opal_symbolizer *s = new_with(NULL, 1, fixture, id);
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_native(s, &id, addr, false, &r), 0);
	if (r.n != n)
		fail_msg("%s 0x%lx: %zu frames, eu-addr2line %zu", fixture, (unsigned long)addr, r.n,
			 n);
	for (size_t i = 0; i < n; i++) {
		const char *ours = r.frames[i].function;
		size_t ol = strlen(ours), el = strlen(eu_fn[i]);
		bool same = strcmp(ours, eu_fn[i]) == 0 ||
			    (ol > el + 2 && strcmp(ours + ol - el, eu_fn[i]) == 0 &&
			     strncmp(ours + ol - el - 2, "::", 2) == 0);
		if (!same)
			fail_msg("%s 0x%lx frame %zu: %s vs eu-addr2line %s", fixture,
				 (unsigned long)addr, i, ours, eu_fn[i]);
		/* "file:line:column" */
		char want[PATH_MAX + 32];
		snprintf(want, sizeof(want), "%s:%u:", r.frames[i].file, r.frames[i].line);
		if (strncmp(eu_src[i], want, strlen(want)) != 0)
			fail_msg("%s 0x%lx frame %zu: %s vs eu-addr2line %s", fixture,
				 (unsigned long)addr, i, want, eu_src[i]);
	}
	opal_sym_result_free(&r);
	opal_symbolizer_free(s);
}

static void test_matches_eu_addr2line(void **state)
{
	static const struct {
		const char *fixture, *symbol;
	} marks[] = {
		{ "inline_pie", "opal_mark_leaf" },   { "inline_pie", "opal_mark_plain" },
		{ "inline_nopie", "opal_mark_leaf" }, { "inline_nopie", "opal_mark_plain" },
		{ "cxx", "opal_mark_cxx_get" },       { "cxx", "opal_mark_cxx_twice" },
		{ "libfix.so", "opal_mark_lib_exported" },
		{ "libfix.so", "opal_mark_lib_static" },
		{ "libfix_high.so", "opal_mark_lib_static" },
		{ "gap", "tiny_c" },
	};
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		uint64_t a = sym_addr(marks[i].fixture, marks[i].symbol);
		/* the marker and the next few bytes of its function */
		for (uint64_t off = 0; off < 4; off++)
			compare_with_eu_addr2line(marks[i].fixture, a + off);
	}
}

/* An ET_DYN linked at 0x40000000: its ELF addresses, not offsets from
 * the first segment, are what gets looked up. */
static void test_shared_lib_high_base(void **state)
{
	opal_file_id id = make_id(12);
	struct opal_symbolizer *s = new_with(NULL, 4, "libfix_high.so", id);
	struct opal_sym_result r;
	uint64_t a = sym_addr("libfix_high.so", "opal_mark_lib_exported");

	assert_true(a >= 0x40000000);
	assert_int_equal(opal_symbolize_native(s, &id, a, false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "opal_lib_exported", "lib.c",
		     marker_line("lib.c", "lib_exported"), false);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolize_native(s, &id, a - 0x40000000, false, &r), 0);
	assert_int_equal(r.n, 0);
	opal_symbolizer_free(s);
}

/* DWARF in a separate file named by .gnu_debuglink, next to the file's
 * path, found by libdwfl's standard debuginfo search. */
static void test_split_debuglink(void **state)
{
	opal_file_id id = make_id(13);
	struct opal_symbolizer *s = new_with(NULL, 4, "inline_split", id);
	struct opal_sym_result r;
	enum opal_debug_quality q;

	/* The symbolizer opens no file next to a binary itself: the collector
	 * passes .gnu_debuglink candidates as descriptors. */
	assert_int_equal(opal_symbolizer_add_debuglink(s, &id, open_fixture("inline_split.debug"),
							"inline_split.debug"), 0);
	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("inline_pie", "opal_mark_leaf"),
					       false, &r), 0);
	assert_int_equal(r.n, 3);
	assert_frame(&r.frames[0], "leaf", "inline.c", marker_line("inline.c", "leaf_body"), true);
	assert_frame(&r.frames[2], "outer", "inline.c", marker_line("inline.c", "outer_call_mid"),
		     false);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolizer_file_quality(s, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	opal_symbolizer_free(s);
}

/* The assembler's DWARF: line tables and bare function DIEs. */
static void test_asm_lines_only(void **state)
{
	opal_file_id id = make_id(14);
	struct opal_symbolizer *s = new_with(NULL, 4, "asm_lines", id);
	struct opal_sym_result r;
	enum opal_debug_quality q;

	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("asm_lines", "opal_asm_func"),
					       false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "opal_asm_func", "asm.S", marker_line("asm.S", "asm_nop"),
		     false);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolizer_file_quality(s, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_LINES);
	opal_symbolizer_free(s);
}

static void check_gap(const char *fixture)
{
	opal_file_id id = make_id(7);
	struct opal_symbolizer *s = new_with(NULL, 4, fixture, id);
	uint64_t tiny = sym_addr("gap", "opal_tiny"), after = sym_addr("gap", "opal_after");
	struct opal_sym_result r;

	assert_int_equal(after - tiny, 4097);
	assert_int_equal(opal_symbolize_native(s, &id, tiny, false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "opal_tiny");
	opal_sym_result_free(&r);

	const uint64_t offs[] = { 1, 2, 100, 2048, 4096 };
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		assert_int_equal(opal_symbolize_native(s, &id, tiny + offs[i], false, &r), 0);
		if (r.n != 0)
			fail_msg("%s: tiny+%lu named %s", fixture, (unsigned long)offs[i],
				 r.frames[0].function);
		opal_sym_result_free(&r);
	}
	assert_int_equal(opal_symbolize_native(s, &id, after, false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "opal_after");
	opal_sym_result_free(&r);
	/* A symbol without a size (assembly) names its own address and the
	 * bytes after it up to the next symbol, as in eu-addr2line. */
	uint64_t sizeless = sym_addr("gap", "opal_sizeless");
	for (uint64_t off = 0; off <= 100; off += 50) {
		assert_int_equal(opal_symbolize_native(s, &id, sizeless + off, false, &r), 0);
		assert_int_equal(r.n, 1);
		assert_string_equal(r.frames[0].function, "opal_sizeless");
		opal_sym_result_free(&r);
	}
	/* Return address just past the tiny function: still inside it. */
	assert_int_equal(opal_symbolize_native(s, &id, tiny + 1, true, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "opal_tiny");
	opal_sym_result_free(&r);

	struct opal_symbolizer_stats st;
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.unresolved, 5);
	opal_symbolizer_free(s);
}

static void test_gap_dwarf(void **state)
{
	check_gap("gap");
	opal_file_id id = make_id(8);
	struct opal_symbolizer *s = new_with(NULL, 4, "gap", id);
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("gap", "tiny_c"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_frame(&r.frames[0], "tiny_c", "gap.c", marker_line("gap.c", "tiny_c"), false);
	opal_sym_result_free(&r);
	opal_symbolizer_free(s);
}

static void test_gap_symtab(void **state)
{
	check_gap("gap_symtab");
}

static void test_no_symbols(void **state)
{
	opal_file_id id = make_id(9);
	struct opal_symbolizer *s = new_with(NULL, 4, "inline_nosym", id);
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_native(s, &id, sym_addr("inline_pie", "opal_mark_leaf"),
					       false, &r), 0);
	assert_int_equal(r.n, 0);
	opal_symbolizer_free(s);
}

static void test_not_elf_and_unknown(void **state)
{
	opal_file_id id = make_id(10), other = make_id(11);
	struct opal_symbolizer *s = new_with(NULL, 4, "inline.c", id);
	struct opal_sym_result r;
	enum opal_debug_quality q;

	assert_int_equal(opal_symbolize_native(s, &id, 0x1000, false, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(opal_symbolizer_file_quality(s, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_NONE);

	assert_int_equal(opal_symbolize_native(s, &other, 0x1000, false, &r), -ENOENT);
	assert_false(opal_symbolizer_has_file(s, &other));
	assert_true(opal_symbolizer_has_file(s, &id));

	/* Not a regular file: refused (and the descriptor taken over). */
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(opal_symbolizer_add_file(s, &other, p[0], NULL, 0, NULL), -EINVAL);
	assert_int_equal(fcntl(p[0], F_GETFD), -1);
	close(p[1]);
	opal_symbolizer_free(s);
}

/* More files than sessions: sessions are evicted and reopened, answers
 * stay right. */
static void test_session_lru(void **state)
{
	static const char *const names[] = { "inline_pie", "inline_nopie", "inline_clang" };
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 1);
	assert_non_null(s);
	opal_file_id ids[3];
	for (int i = 0; i < 3; i++) {
		ids[i] = make_id((uint8_t)(20 + i));
		assert_int_equal(opal_symbolizer_add_file(s, &ids[i], open_fixture(names[i]), NULL,
							  0, names[i]), 0);
	}
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 3; i++) {
			struct opal_sym_result r;
			/* a different address each round: no cache hit */
			const char *mark = round ? "opal_mark_plain" : "opal_mark_leaf";
			assert_int_equal(opal_symbolize_native(s, &ids[i], sym_addr(names[i], mark),
							       false, &r), 0);
			assert_int_equal(r.n, round ? 1 : 3);
			opal_sym_result_free(&r);
		}
	struct opal_symbolizer_stats st;
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.files_open, 1);
	assert_int_equal(st.files_evicted, 5);
	assert_int_equal(st.misses, 6);
	opal_symbolizer_free(s);
}

/* Registering more than OPAL_SYM_MAX_FILES (4096) files forgets the least
 * recently used one and closes its descriptor. */
static void test_file_registry_bound(void **state)
{
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 4200) {
		rl.rlim_cur = rl.rlim_max < 4200 ? rl.rlim_max : 4200;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < 4200)
			fail_msg("RLIMIT_NOFILE hard limit %llu is below the 4200 descriptors this "
				 "test opens: raise it (ulimit -Hn, or run as root)",
				 (unsigned long long)rl.rlim_max);
	}
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 1);
	assert_non_null(s);
	int base = open_fixture("inline_pie"), first_fd = -1;
	opal_file_id first = make_id(0);
	first.b[15] = 0xee;
	for (int i = 0; i < 4097; i++) {
		opal_file_id id = first;
		id.b[0] = (uint8_t)i;
		id.b[1] = (uint8_t)(i >> 8);
		int fd = dup(base);
		assert_true(fd >= 0);
		if (i == 0)
			first_fd = fd;
		assert_int_equal(opal_symbolizer_add_file(s, &id, fd, NULL, 0, NULL), 0);
		if (i == 0) {   /* used once: the oldest by use afterwards */
			struct opal_sym_result r;
			assert_int_equal(opal_symbolize_native(s, &id, 0x10, false, &r), 0);
		}
	}
	first.b[0] = first.b[1] = 0;
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_native(s, &first, 0x20, false, &r), -ENOENT);
	assert_int_equal(fcntl(first_fd, F_GETFD), -1);
	opal_file_id last = first;
	last.b[0] = 4096 & 0xff;
	last.b[1] = 4096 >> 8;
	assert_int_equal(opal_symbolize_native(s, &last, 0x20, false, &r), 0);
	close(base);
	opal_symbolizer_free(s);
}

static void test_mem_hits(void **state)
{
	opal_file_id id = make_id(30);
	struct opal_symbolizer *s = new_with(NULL, 4, "inline_pie", id);
	uint64_t a = sym_addr("inline_pie", "opal_mark_leaf");
	struct opal_sym_result r;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(opal_symbolize_native(s, &id, a, false, &r), 0);
		assert_int_equal(r.n, 3);
		opal_sym_result_free(&r);
	}
	struct opal_symbolizer_stats st;
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.mem_hits, 2);
	opal_symbolizer_free(s);
}

/* Restart: a new symbolizer over the reopened cache answers without the
 * descriptor; an address never looked up asks for the file again. */
static void test_cache_restart(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	opal_file_id id = make_id(40);
	uint64_t leaf = sym_addr("inline_pie", "opal_mark_leaf");
	uint64_t plain = sym_addr("inline_pie", "opal_mark_plain");
	struct opal_sym_result r;

	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	struct opal_symbolizer *s = new_with(c, 4, "inline_pie", id);
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
	assert_int_equal(r.n, 3);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolize_native(s, &id, 0x10, false, &r), 0);
	assert_int_equal(r.n, 0);   /* unresolved answers are cached too */
	opal_symbolizer_free(s);
	opal_cache_close(c);

	c = opal_cache_open(db);
	assert_non_null(c);
	enum opal_debug_quality q;
	assert_int_equal(opal_cache_get_file_quality(c, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	s = opal_symbolizer_new(c, 4);
	assert_non_null(s);
	assert_true(opal_symbolizer_has_file(s, &id));
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
	assert_int_equal(r.n, 3);
	assert_frame(&r.frames[0], "leaf", "inline.c", marker_line("inline.c", "leaf_body"), true);
	assert_frame(&r.frames[2], "outer", "inline.c", marker_line("inline.c", "outer_call_mid"),
		     false);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolize_native(s, &id, 0x10, false, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(opal_symbolize_native(s, &id, plain, false, &r), -ENOENT);
	struct opal_symbolizer_stats st;
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.cache_hits, 2);
	assert_int_equal(st.misses, 0);

	/* Invalidation drops both caches: the cached address is gone too. */
	assert_int_equal(opal_symbolizer_invalidate_file(s, &id), 0);
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), -ENOENT);
	opal_symbolizer_free(s);
	opal_cache_close(c);
	rm_db(db);
}

/* Better debug data for a file (same file ID) replaces frames cached from
 * the .symtab-only copy. */
static void test_quality_upgrade(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	opal_file_id id = make_id(41);
	uint64_t leaf = sym_addr("inline_pie", "opal_mark_leaf");
	struct opal_sym_result r;
	enum opal_debug_quality q;

	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	struct opal_symbolizer *s = new_with(c, 4, "inline_symtab", id);
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
	assert_int_equal(r.n, 1);
	opal_sym_result_free(&r);
	assert_int_equal(opal_cache_get_file_quality(c, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_SYMTAB);

	assert_int_equal(opal_symbolizer_add_file(s, &id, open_fixture("inline_pie"), NULL, 0,
						  "inline_pie"), 0);
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
	assert_int_equal(r.n, 3);
	opal_sym_result_free(&r);
	assert_int_equal(opal_cache_get_file_quality(c, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);

	/* A poorer copy later does not throw the better frames away. */
	assert_int_equal(opal_symbolizer_add_file(s, &id, open_fixture("inline_symtab"), NULL, 0,
						  "inline_symtab"), 0);
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
	assert_int_equal(r.n, 3);
	opal_sym_result_free(&r);
	assert_int_equal(opal_cache_get_file_quality(c, &id, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	opal_symbolizer_free(s);
	opal_cache_close(c);
	rm_db(db);
}

static void test_demangle(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "_ZNK2ns3BoxIiE3getEv", "ns::Box<int>::get() const" },
		{ "_ZN2ns3runEi", "ns::run(int)" },
		{ "_Z3foov.cold", "foo() [clone .cold]" },
		{ "_ZL5cpropii.constprop.0.isra.0", "cprop(int, int) [clone .constprop.0] [clone .isra.0]" },
		/* as c++filt: std::string spelled out */
		{ "_Z1fSs", "f(std::basic_string<char, std::char_traits<char>, std::allocator<char> >)" },
		{ "_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write" },      /* Rust legacy */
		{ "_RNvCskwGfYPst2Cb_3foo16example_function", "foo::example_function" }, /* Rust v0 */
		{ "main", "main" },
		{ "my__func", "my__func" },   /* never through Ada/D heuristics */
		{ "_Zgarbage", "_Zgarbage" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = opal_demangle(cases[i].in);
		assert_non_null(d);
		assert_string_equal(d, cases[i].out);
		free(d);
	}
	assert_null(opal_demangle(NULL));
	char *big = malloc(10000);
	memset(big, 'a', 9999);
	big[0] = '_';
	big[1] = 'Z';
	big[9999] = '\0';
	char *d = opal_demangle(big);
	assert_non_null(d);
	assert_int_equal(strlen(d), 4096);
	free(d);
	free(big);
}

static int memfd_with(const char *text)
{
	int fd = memfd_create("kallsyms", MFD_CLOEXEC);
	assert_true(fd >= 0);
	size_t len = strlen(text);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	return fd;   /* position at the end: the loader must seek back */
}

static const char kallsyms_text[] =
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T startup_64\n"
	"ffffffff81000100 t helper\n"
	"ffffffff81000180 T _RNvCskwGfYPst2Cb_3foo16example_function\n"
	"ffffffff81000200 T last_func\n"
	"ffffffff81000300 T _etext\n"
	"ffffffff81000400 D some_data\n"
	"ffffffffc0001000 t mod_a_f1\t[mod_a]\n"
	"ffffffffc0001100 t mod_a_f2\t[mod_a]\n"
	"ffffffffc0002000 t mod_b_f1\t[mod_b]\n"
	"ffffffffc0002080 W mod_b_f2\t[mod_b]\n"
	"ffffffffc0003000 d mod_b_data\t[mod_b]\n"
	"garbage line\n"
	"ffffffffc0004000 t unterminated\t[mod_c";

static void expect_ksym(struct opal_symbolizer *s, uint64_t addr, bool ret, const char *fn,
			const char *module)
{
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_kernel(s, addr, ret, &r), 0);
	if (!fn) {
		if (r.n != 0)
			fail_msg("%#lx named %s", (unsigned long)addr, r.frames[0].function);
		assert_null(r.module);
		return;
	}
	if (r.n != 1)
		fail_msg("%#lx unresolved, expected %s", (unsigned long)addr, fn);
	assert_string_equal(r.frames[0].function, fn);
	assert_null(r.frames[0].file);
	assert_int_equal(r.frames[0].line, 0);
	assert_non_null(r.module);
	assert_string_equal(r.module, module);
	opal_sym_result_free(&r);
}

static void test_kallsyms(void **state)
{
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 1);
	assert_non_null(s);
	expect_ksym(s, 0xffffffff81000000ull, false, NULL, NULL);   /* none loaded yet */

	assert_int_equal(opal_symbolizer_set_kallsyms(s, memfd_with(kallsyms_text)), 8);
	expect_ksym(s, 0xffffffff80ffffffull, false, NULL, NULL);
	expect_ksym(s, 0xffffffff81000000ull, false, "startup_64", "");   /* not _stext */
	expect_ksym(s, 0xffffffff810000ffull, false, "startup_64", "");
	expect_ksym(s, 0xffffffff81000100ull, false, "helper", "");
	expect_ksym(s, 0xffffffff81000100ull, true, "startup_64", "");    /* looked up at -1 */
	expect_ksym(s, 0xffffffff81000190ull, false, "foo::example_function", "");
	expect_ksym(s, 0xffffffff810002ffull, false, "last_func", "");
	expect_ksym(s, 0xffffffff81000300ull, false, NULL, NULL);         /* _etext */
	expect_ksym(s, 0xffffffff81000350ull, false, NULL, NULL);
	expect_ksym(s, 0xffffffff81000400ull, false, NULL, NULL);         /* data */
	expect_ksym(s, 0xffffffffc0001000ull, false, "mod_a_f1", "mod_a");
	expect_ksym(s, 0xffffffffc00010ffull, false, "mod_a_f1", "mod_a");
	expect_ksym(s, 0xffffffffc0001100ull, false, "mod_a_f2", "mod_a");
	/* past mod_a's last symbol: its end is unknown */
	expect_ksym(s, 0xffffffffc0001101ull, false, NULL, NULL);
	expect_ksym(s, 0xffffffffc0001f00ull, false, NULL, NULL);
	expect_ksym(s, 0xffffffffc0002010ull, false, "mod_b_f1", "mod_b");
	expect_ksym(s, 0xffffffffc0002fffull, false, "mod_b_f2", "mod_b"); /* mod_b_data ends it */
	expect_ksym(s, 0xffffffffc0003000ull, false, NULL, NULL);
	expect_ksym(s, 0xffffffffc0004000ull, false, NULL, NULL);          /* malformed line */

	/* kptr_restrict: every address zero. The old table stays. */
	assert_int_equal(opal_symbolizer_set_kallsyms(
				 s, memfd_with("0000000000000000 T _stext\n0000000000000000 t a\n")),
			 -EPERM);
	assert_int_equal(opal_symbolizer_set_kallsyms(s, memfd_with("")), -ENODATA);
	/* a pipe kept open by its writer would block the reader: refused */
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(opal_symbolizer_set_kallsyms(s, p[0]), -EINVAL);   /* p[0] closed */
	close(p[1]);
	expect_ksym(s, 0xffffffff81000100ull, false, "helper", "");

	/* Replacement. */
	assert_int_equal(opal_symbolizer_set_kallsyms(
				 s, memfd_with("ffffffff82000000 T other\nffffffff82000010 T z\n")), 2);
	expect_ksym(s, 0xffffffff81000100ull, false, NULL, NULL);
	expect_ksym(s, 0xffffffff82000004ull, false, "other", "");
	opal_symbolizer_free(s);
}

/* The live table. When the kernel shows this process its addresses
 * (CAP_SYSLOG, as the collector has): a function's own address and a
 * byte inside it resolve to it. When it shows zeros (an unprivileged
 * process), the table is refused with -EPERM rather than loaded as
 * zeros. Which case holds is read from the file here, not from the code
 * under test. */
static void test_kallsyms_live(void **state)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	if (!f)
		fail_msg("/proc/kallsyms: %s (procfs not mounted?)", strerror(errno));
	char line[600], name[512], type;
	unsigned long long addr, want = 0;
	bool shown = false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %511s", &addr, &type, name) == 3) {
			shown |= addr != 0;
			if (strcmp(name, "vfs_read") == 0)
				want = addr;
		}
	fclose(f);
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 1);
	assert_non_null(s);
	int n = opal_symbolizer_set_kallsyms(s, fd);
	if (!shown) {
		assert_int_equal(n, -EPERM);
		expect_ksym(s, 0xffffffff81000000ull, false, NULL, NULL);
		opal_symbolizer_free(s);
		return;
	}
	assert_true(n > 1000);
	assert_true(want != 0);
	expect_ksym(s, want, false, "vfs_read", "");
	expect_ksym(s, want + 1, true, "vfs_read", "");
	opal_symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inline_gcc_pie),
		cmocka_unit_test(test_inline_gcc_nopie),
		cmocka_unit_test(test_inline_clang),
		cmocka_unit_test(test_return_address),
		cmocka_unit_test(test_cxx),
		cmocka_unit_test(test_gc_sections),
		cmocka_unit_test(test_cxx_names),
		cmocka_unit_test(test_symtab_only),
		cmocka_unit_test(test_dynsym_only),
		cmocka_unit_test(test_shared_lib_dwarf),
		cmocka_unit_test(test_matches_eu_addr2line),
		cmocka_unit_test(test_shared_lib_high_base),
		cmocka_unit_test(test_split_debuglink),
		cmocka_unit_test(test_asm_lines_only),
		cmocka_unit_test(test_gap_dwarf),
		cmocka_unit_test(test_gap_symtab),
		cmocka_unit_test(test_no_symbols),
		cmocka_unit_test(test_not_elf_and_unknown),
		cmocka_unit_test(test_session_lru),
		cmocka_unit_test(test_file_registry_bound),
		cmocka_unit_test(test_mem_hits),
		cmocka_unit_test(test_cache_restart),
		cmocka_unit_test(test_quality_upgrade),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_kallsyms),
		cmocka_unit_test(test_kallsyms_live),
	};
	return cmocka_run_group_tests(tests, setup_fixtures, NULL);
}
