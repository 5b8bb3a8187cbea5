/* Tests of the Go pclntab reader (symbolizer/symbolize/gopclntab.h) on the
 * fixtures of tests/fixtures/go (built into $OPAL_FIXTURES/go, default
 * build/fixtures/go: run `make fixtures` first; its build.sh says what
 * each file is). Expected answers come from Go's own tools (the *.expect
 * files: go tool addr2line, or debug/gosym for PIE), inline chains from
 * the DWARF of the unstripped binary read here with libdw, and marked
 * lines from the "LINE:" comments of gofix.go. */
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
#include <sys/stat.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <cmocka.h>

#include "symbolizer/symbolize/gopclntab.h"

static char fixdir[PATH_MAX];

static int setup_fixtures(void **state)
{
	const char *base = getenv("OPAL_FIXTURES");
	snprintf(fixdir, sizeof(fixdir), "%s/go", base ? base : "build/fixtures");
	char probe[PATH_MAX + 32];
	snprintf(probe, sizeof(probe), "%s/gofix.expect", fixdir);
	if (access(probe, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures` (or set OPAL_FIXTURES)\n",
			probe);
		return -1;
	}
	elf_version(EV_CURRENT);
	return 0;
}

/* ---- files ------------------------------------------------------------- */

struct image {
	char *bytes;
	size_t size;
	Elf *elf;
};

static void read_fixture(const char *name, struct image *im)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", fixdir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s", p);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	im->size = (size_t)st.st_size;
	im->bytes = malloc(im->size ? im->size : 1);
	assert_non_null(im->bytes);
	assert_int_equal(pread(fd, im->bytes, im->size, 0), (ssize_t)im->size);
	close(fd);
	im->elf = NULL;
}

/* An Elf on the first `size` bytes of `bytes` (a truncated copy). */
static Elf *elf_on(char *bytes, size_t size)
{
	Elf *e = elf_memory(bytes, size);
	assert_non_null(e);
	return e;
}

static struct opal_gopclntab *open_fixture(const char *name, struct image *im)
{
	read_fixture(name, im);
	im->elf = elf_on(im->bytes, im->size);
	struct opal_gopclntab *r = NULL;
	int rc = opal_gopclntab_open(im->elf, &r);
	if (rc != 0)
		fail_msg("opal_gopclntab_open(%s): %d", name, rc);
	return r;
}

static void close_fixture(struct opal_gopclntab *r, struct image *im)
{
	opal_gopclntab_free(r);
	elf_end(im->elf);
	free(im->bytes);
}

/* ---- frames ------------------------------------------------------------ */

struct chain {
	unsigned n;
	struct opal_gopclntab_frame f[OPAL_GOPCLNTAB_MAX_FRAMES];
};

static int collect(void *arg, const struct opal_gopclntab_frame *f)
{
	struct chain *c = arg;
	assert_true(c->n < OPAL_GOPCLNTAB_MAX_FRAMES);
	c->f[c->n++] = *f;
	return 0;
}

static int lookup(const struct opal_gopclntab *r, uint64_t pc, struct chain *c)
{
	c->n = 0;
	int rc = opal_gopclntab_lookup(r, pc, collect, c);
	if (rc == 0) {
		assert_true(c->n >= 1);
		assert_false(c->f[c->n - 1].is_inline);
		for (unsigned i = 0; i + 1 < c->n; i++)
			assert_true(c->f[i].is_inline);
	} else {
		assert_int_equal(c->n, 0);
	}
	return rc;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* ---- expected answers ---------------------------------------------------- */

struct answer {
	uint64_t pc;
	char *function;
	char *fileline;   /* "file:line" as Go's tools print it */
};

struct answers {
	size_t n;
	struct answer *a;
};

static void load_answers(const char *name, struct answers *out)
{
	char p[PATH_MAX + 64], line[4096];
	snprintf(p, sizeof(p), "%s/%s", fixdir, name);
	FILE *f = fopen(p, "r");
	if (!f)
		fail_msg("cannot open %s", p);
	size_t cap = 0;
	out->n = 0;
	out->a = NULL;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t2)
			fail_msg("%s: bad line '%s'", name, line);
		*t1 = *t2 = 0;
		if (out->n == cap) {
			cap = cap ? 2 * cap : 4096;
			out->a = realloc(out->a, cap * sizeof(*out->a));
			assert_non_null(out->a);
		}
		struct answer *a = &out->a[out->n++];
		a->pc = strtoull(line, NULL, 16);
		a->function = strdup(t1 + 1);
		a->fileline = strdup(t2 + 1);
	}
	fclose(f);
	if (out->n == 0)
		fail_msg("%s is empty", name);
}

static void free_answers(struct answers *as)
{
	for (size_t i = 0; i < as->n; i++) {
		free(as->a[i].function);
		free(as->a[i].fileline);
	}
	free(as->a);
}

/* Go's addr2line names the physical function and gives the innermost
 * position: the last frame's function and the first frame's file:line. */
static void sweep(const char *binary, const char *expect)
{
	struct image im;
	struct answers as;
	struct opal_gopclntab *r = open_fixture(binary, &im);
	load_answers(expect, &as);
	size_t bad = 0;
	for (size_t i = 0; i < as.n; i++) {
		struct chain c;
		char fl[4096];
		int rc = lookup(r, as.a[i].pc, &c);
		if (rc == 0)
			snprintf(fl, sizeof(fl), "%s:%u", c.f[0].file ? c.f[0].file : "?", c.f[0].line);
		if (rc == 0 && strcmp(c.f[c.n - 1].function, as.a[i].function) == 0 &&
		    strcmp(fl, as.a[i].fileline) == 0)
			continue;
		if (bad++ < 10)
			print_message("%s 0x%llx: got %d %s %s, want %s %s\n", binary,
				      (unsigned long long)as.a[i].pc, rc,
				      rc == 0 ? c.f[c.n - 1].function : "-", rc == 0 ? fl : "-",
				      as.a[i].function, as.a[i].fileline);
	}
	if (bad)
		fail_msg("%s: %zu of %zu PCs differ from %s", binary, bad, as.n, expect);
	free_answers(&as);
	close_fixture(r, &im);
}

static void test_sweep_unstripped(void **state)
{
	sweep("gofix", "gofix.expect");
}

static void test_sweep_stripped(void **state)
{
	sweep("gofix_stripped", "gofix.expect");
	sweep("gofix_noshdr", "gofix.expect");
	sweep("gofix_nomd", "gofix.expect");
}

static void test_sweep_pie(void **state)
{
	sweep("gofix_pie", "gofix_pie.expect");
	sweep("gofix_extpie", "gofix_extpie.expect");
}

static void test_sweep_other_arches(void **state)
{
	sweep("gofix_arm64", "gofix_arm64.expect");
	sweep("gofix_386", "gofix_386.expect");
}

static void test_sweep_reencoded(void **state)
{
	static const char *const bins[] = { "gofix_go116", "gofix_go116_noshdr", "gofix_go118",
					    "gofix_go118_noshdr", "gofix_go120",
					    "gofix_go120_noshdr" };
	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]); i++)
		sweep(bins[i], "gofix.expect");
}

/* ---- how each file is read ------------------------------------------------ */

static void check_info(const char *name, enum opal_gopclntab_format format,
		       enum opal_gopclntab_found found, uint32_t ptr_size, uint32_t quantum,
		       bool inline_trees)
{
	struct image im;
	struct opal_gopclntab *r = open_fixture(name, &im);
	struct opal_gopclntab_info in;
	opal_gopclntab_get_info(r, &in);
	if (in.format != format || in.found != found || in.ptr_size != ptr_size ||
	    in.quantum != quantum || in.inline_trees != inline_trees || in.nfunc < 4)
		fail_msg("%s: format %d found %d ptr %u quantum %u inline %d nfunc %llu", name,
			 in.format, in.found, in.ptr_size, in.quantum, in.inline_trees,
			 (unsigned long long)in.nfunc);
	if (format != OPAL_GOPCLNTAB_GO116)
		assert_true(in.text_start != 0 && in.text_start <= in.table_vaddr);
	close_fixture(r, &im);
}

static void test_info(void **state)
{
	const enum opal_gopclntab_found S = OPAL_GOPCLNTAB_BY_SECTION,
					M = OPAL_GOPCLNTAB_BY_MODULEDATA,
					G = OPAL_GOPCLNTAB_BY_MAGIC;
	const enum opal_gopclntab_format F16 = OPAL_GOPCLNTAB_GO116, F18 = OPAL_GOPCLNTAB_GO118,
					 F20 = OPAL_GOPCLNTAB_GO120;
	check_info("gofix", F18, S, 8, 1, true);
	check_info("gofix_stripped", F18, S, 8, 1, true);
	check_info("gofix_noshdr", F18, M, 8, 1, true);
	check_info("gofix_nomd", F18, G, 8, 1, false);
	check_info("gofix_renamed", F18, M, 8, 1, true);
	check_info("gofix_pie", F18, S, 8, 1, true);
	check_info("gofix_extpie", F18, M, 8, 1, true);
	check_info("gofix_arm64", F18, S, 8, 4, true);
	check_info("gofix_386", F18, S, 4, 1, true);
	check_info("gofix_go116", F16, S, 8, 1, true);
	check_info("gofix_go116_noshdr", F16, M, 8, 1, true);
	check_info("gofix_go118", F18, S, 8, 1, true);
	check_info("gofix_go118_noshdr", F18, M, 8, 1, true);
	check_info("gofix_go120", F20, S, 8, 1, true);
	check_info("gofix_go120_noshdr", F20, M, 8, 1, true);
}

/* A file with section headers, no .gopclntab and no Go note is not
 * scanned, although its bytes hold the table and the moduledata. */
static void test_not_go_not_scanned(void **state)
{
	struct image im;
	read_fixture("gofix_nonote", &im);
	im.elf = elf_on(im.bytes, im.size);
	struct opal_gopclntab *r = NULL;
	assert_int_equal(opal_gopclntab_open(im.elf, &r), -ENOENT);
	assert_null(r);
	elf_end(im.elf);
	free(im.bytes);
}

/* ---- same frames from every copy of gofix ---------------------------------- */

/* Go 1.20 startLine values the re-encoder wrote, by function name. */
struct startlines {
	size_t n;
	char **name;
	uint32_t *line;
};

static void load_startlines(struct startlines *sl)
{
	char p[PATH_MAX + 64], buf[4096];
	snprintf(p, sizeof(p), "%s/gofix_go120.startlines", fixdir);
	FILE *f = fopen(p, "r");
	if (!f)
		fail_msg("cannot open %s", p);
	size_t cap = 0;
	sl->n = 0;
	sl->name = NULL;
	sl->line = NULL;
	while (fgets(buf, sizeof(buf), f)) {
		char *tab = strchr(buf, '\t');
		assert_non_null(tab);
		*tab = 0;
		if (sl->n == cap) {
			cap = cap ? 2 * cap : 1024;
			sl->name = realloc(sl->name, cap * sizeof(*sl->name));
			sl->line = realloc(sl->line, cap * sizeof(*sl->line));
			assert_true(sl->name && sl->line);
		}
		sl->name[sl->n] = strdup(buf);
		sl->line[sl->n++] = (uint32_t)strtoul(tab + 1, NULL, 10);
	}
	fclose(f);
	assert_true(sl->n > 100);
}

/* The file is sorted by name (bytewise, as strcmp orders). */
static uint32_t startline_of(const struct startlines *sl, const char *name)
{
	size_t lo = 0, hi = sl->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(sl->name[mid], name);
		if (c == 0)
			return sl->line[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static void free_startlines(struct startlines *sl)
{
	for (size_t i = 0; i < sl->n; i++)
		free(sl->name[i]);
	free(sl->name);
	free(sl->line);
}

/* Every PC of gofix.expect gives the same chain (functions, files, lines,
 * entries, inline flags) in `copy` as in gofix; a 1.20 copy also gives
 * the start lines it was written with. */
static void same_chains(const char *copy, const struct answers *as, const struct startlines *sl)
{
	struct image ia, ib;
	struct opal_gopclntab *a = open_fixture("gofix", &ia), *b = open_fixture(copy, &ib);
	struct opal_gopclntab_info info;
	opal_gopclntab_get_info(b, &info);
	size_t bad = 0, inlined = 0;
	for (size_t i = 0; i < as->n; i++) {
		struct chain ca, cb;
		assert_int_equal(lookup(a, as->a[i].pc, &ca), 0);
		assert_int_equal(lookup(b, as->a[i].pc, &cb), 0);
		bool same = ca.n == cb.n;
		for (unsigned k = 0; same && k < ca.n; k++) {
			const struct opal_gopclntab_frame *x = &ca.f[k], *y = &cb.f[k];
			uint32_t want_start = info.format == OPAL_GOPCLNTAB_GO120
						      ? startline_of(sl, x->function)
						      : 0;
			same = strcmp(x->function, y->function) == 0 && same_str(x->file, y->file) &&
			       x->line == y->line && x->entry == y->entry &&
			       x->is_inline == y->is_inline && y->start_line == want_start;
		}
		inlined += ca.n > 1;
		if (!same && bad++ < 10)
			print_message("%s 0x%llx: %u frames (innermost %s:%u start %u), gofix %u (%s:%u)\n",
				      copy, (unsigned long long)as->a[i].pc, cb.n, cb.f[0].function,
				      cb.f[0].line, cb.f[0].start_line, ca.n, ca.f[0].function,
				      ca.f[0].line);
	}
	if (bad)
		fail_msg("%s: %zu of %zu PCs give other frames than gofix", copy, bad, as->n);
	assert_true(inlined > 1000);   /* the runtime inlines a lot: this is no idle check */
	close_fixture(a, &ia);
	close_fixture(b, &ib);
}

static void test_same_chains(void **state)
{
	struct answers as;
	struct startlines sl;
	load_answers("gofix.expect", &as);
	load_startlines(&sl);
	static const char *const copies[] = { "gofix_stripped", "gofix_noshdr", "gofix_go116",
					      "gofix_go116_noshdr", "gofix_go118",
					      "gofix_go118_noshdr", "gofix_go120",
					      "gofix_go120_noshdr" };
	for (size_t i = 0; i < sizeof(copies) / sizeof(copies[0]); i++)
		same_chains(copies[i], &as, &sl);
	free_startlines(&sl);
	free_answers(&as);
}

/* ---- the known call chain of gofix.go -------------------------------------- */

static uint32_t marker_line(const char *marker)
{
	char p[PATH_MAX + 64], tag[128], line[1024];
	snprintf(p, sizeof(p), "%s/src/gofix.go", fixdir);
	snprintf(tag, sizeof(tag), "LINE:%s", marker);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	uint32_t n = 0, found = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, tag) && !found)
			found = n;
	}
	fclose(f);
	if (!found)
		fail_msg("no %s in %s", tag, p);
	return found;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

struct want_frame {
	const char *function;
	uint32_t line;
	bool is_inline;
};

/* Some PC of `binary` gives exactly the chain `want` (files gofix.go). */
static void find_chain(const char *binary, const char *expect, const struct want_frame *want,
		       unsigned n)
{
	struct image im;
	struct answers as;
	struct opal_gopclntab *r = open_fixture(binary, &im);
	load_answers(expect, &as);
	size_t hits = 0;
	for (size_t i = 0; i < as.n; i++) {
		struct chain c;
		if (lookup(r, as.a[i].pc, &c) != 0 || c.n != n)
			continue;
		bool ok = true;
		for (unsigned k = 0; ok && k < n; k++)
			ok = strcmp(c.f[k].function, want[k].function) == 0 &&
			     c.f[k].line == want[k].line && c.f[k].is_inline == want[k].is_inline &&
			     ends_with(c.f[k].file, "/src/gofix.go");
		hits += ok;
	}
	if (!hits)
		fail_msg("%s: no PC gives the chain %s:%u ... %s:%u", binary, want[0].function,
			 want[0].line, want[n - 1].function, want[n - 1].line);
	free_answers(&as);
	close_fixture(r, &im);
}

static void test_known_chain(void **state)
{
	const struct want_frame inlined[] = {
		{ "main.scale", marker_line("scale"), true },
		{ "main.add", marker_line("add"), true },
		{ "main.(*T).method", marker_line("method"), false },
	};
	const struct want_frame spin[] = { { "main.spin", marker_line("spin"), false } };
	const struct want_frame closure[] = {
		{ "main.main.func1", marker_line("closure"), false },
	};
	static const char *const bins[][2] = {
		{ "gofix", "gofix.expect" },
		{ "gofix_stripped", "gofix.expect" },
		{ "gofix_noshdr", "gofix.expect" },
		{ "gofix_go116", "gofix.expect" },
		{ "gofix_go120", "gofix.expect" },
		{ "gofix_pie", "gofix_pie.expect" },
		{ "gofix_extpie", "gofix_extpie.expect" },
		{ "gofix_arm64", "gofix_arm64.expect" },
		{ "gofix_386", "gofix_386.expect" },
	};
	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]); i++) {
		/* arm64 fuses scale's a*b+1 into one MADD, which Go attributes
		 * to add's line: the chain there starts at add */
		if (strcmp(bins[i][0], "gofix_arm64") == 0)
			find_chain(bins[i][0], bins[i][1], inlined + 1, 2);
		else
			find_chain(bins[i][0], bins[i][1], inlined, 3);
		find_chain(bins[i][0], bins[i][1], spin, 1);
		find_chain(bins[i][0], bins[i][1], closure, 1);
	}
}

/* ---- enumeration ------------------------------------------------------------ */

struct walk {
	const struct opal_gopclntab *r;
	uint64_t n, last_end;
	bool method, closure, spin, scale;
};

static int on_func(void *arg, const char *name, uint64_t start, uint64_t end)
{
	struct walk *w = arg;
	struct chain c;
	assert_true(start < end);
	assert_true(start >= w->last_end);
	w->last_end = end;
	assert_int_equal(lookup(w->r, start, &c), 0);
	assert_string_equal(c.f[c.n - 1].function, name);
	assert_true(c.f[c.n - 1].entry == start);
	w->method |= strcmp(name, "main.(*T).method") == 0;
	w->closure |= strcmp(name, "main.main.func1") == 0;
	w->spin |= strcmp(name, "main.spin") == 0;
	w->scale |= strcmp(name, "main.scale") == 0 || strcmp(name, "main.add") == 0;
	w->n++;
	return 0;
}

static int stop_at_third(void *arg, const char *name, uint64_t start, uint64_t end)
{
	return ++*(int *)arg == 3 ? 42 : 0;
}

static void test_foreach(void **state)
{
	static const char *const bins[] = { "gofix_stripped", "gofix_go116", "gofix_go120",
					    "gofix_386" };
	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]); i++) {
		struct image im;
		struct opal_gopclntab *r = open_fixture(bins[i], &im);
		struct opal_gopclntab_info info;
		struct walk w = { .r = r };
		opal_gopclntab_get_info(r, &info);
		assert_int_equal(opal_gopclntab_foreach_func(r, on_func, &w), 0);
		assert_int_equal(w.n, info.nfunc);
		/* scale and add exist only inlined: the compiler did inline */
		assert_true(w.method && w.closure && w.spin && !w.scale);
		int calls = 0;
		assert_int_equal(opal_gopclntab_foreach_func(r, stop_at_third, &calls), 42);
		assert_int_equal(calls, 3);
		close_fixture(r, &im);
	}
}

static int stop_lookup(void *arg, const struct opal_gopclntab_frame *f)
{
	++*(int *)arg;
	return 7;
}

static void test_outside_and_stop(void **state)
{
	struct image im;
	struct opal_gopclntab *r = open_fixture("gofix", &im);
	struct answers as;
	struct chain c;
	load_answers("gofix.expect", &as);
	assert_int_equal(lookup(r, 0, &c), -ENOENT);
	assert_int_equal(lookup(r, as.a[0].pc - 1, &c), -ENOENT);
	assert_int_equal(lookup(r, UINT64_MAX, &c), -ENOENT);
	int calls = 0;
	for (size_t i = 0; i < as.n; i++)
		if (strcmp(as.a[i].function, "main.(*T).method") == 0 &&
		    lookup(r, as.a[i].pc, &c) == 0 && c.n == 3) {
			assert_int_equal(opal_gopclntab_lookup(r, as.a[i].pc, stop_lookup, &calls), 7);
			break;
		}
	assert_int_equal(calls, 1);
	free_answers(&as);
	close_fixture(r, &im);
}

/* ---- DWARF ------------------------------------------------------------------ */

struct dwarf_frame {
	const char *function;
	const char *file;
	int line;
};

/* The innermost subprogram, inlined subroutine or lexical block under
 * `parent` whose ranges hold pc, into *out; false when none does. */
static bool innermost_scope(Dwarf_Die *parent, uint64_t pc, Dwarf_Die *out)
{
	Dwarf_Die child;
	if (dwarf_child(parent, &child) != 0)
		return false;
	do {
		int tag = dwarf_tag(&child);
		if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
		     tag == DW_TAG_lexical_block) &&
		    dwarf_haspc(&child, pc) == 1) {
			*out = child;
			Dwarf_Die deeper;
			if (innermost_scope(&child, pc, &deeper))
				*out = deeper;
			return true;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

/* The inline chain libdw gives for pc in `cu` (innermost first): the
 * innermost scope holding pc and its parents (dwarf_getscopes_die; not
 * dwarf_getscopes, which gives up on Go's inlined instances whose
 * abstract origin lies in another unit), names through abstract
 * origins, the innermost line from the line table, outer ones from the
 * inner scope's DW_AT_call_file/call_line. Returns the frame count, 0
 * when none. */
static unsigned dwarf_chain(Dwarf_Die *cu, uint64_t pc, struct dwarf_frame *out, unsigned max)
{
	Dwarf_Die inner, *scopes = NULL;
	int ns = innermost_scope(cu, pc, &inner) ? dwarf_getscopes_die(&inner, &scopes) : 0;
	unsigned n = 0;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	dwarf_getsrcfiles(cu, &files, &nfiles);
	Dwarf_Line *ln = dwarf_getsrc_die(cu, pc);
	const char *file = ln ? dwarf_linesrc(ln, NULL, NULL) : NULL;
	int line = 0;
	if (ln)
		dwarf_lineno(ln, &line);
	for (int i = 0; i < ns && n < max; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		Dwarf_Attribute at;
		out[n].function = dwarf_formstring(dwarf_attr_integrate(&scopes[i], DW_AT_name, &at));
		out[n].file = file;
		out[n].line = line;
		n++;
		if (tag == DW_TAG_subprogram)
			break;
		Dwarf_Word cf = 0, cl = 0;
		dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &at), &cf);
		dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &at), &cl);
		file = files && cf < nfiles ? dwarf_filesrc(files, cf, NULL, NULL) : NULL;
		line = (int)cl;
	}
	free(scopes);
	return n;
}

/* DWARF's name as the linker writes it into the pclntab (Go 1.19
 * cmd/link/internal/ld/pcln.go nameParts): the text from the first '['
 * to the last ']' becomes "[...]" ("type..eq.[5]T" -> "type..eq.[...]T",
 * and so generic instantiations). */
static void print_name(const char *dw, char *out, size_t len)
{
	if (!dw)
		dw = "";
	const char *open = strchr(dw, '['), *close = strrchr(dw, ']');
	if (!open || !close || close < open)
		snprintf(out, len, "%s", dw);
	else
		snprintf(out, len, "%.*s[...]%s", (int)(open - dw), dw, close + 1);
}

/* libdw joins Go's relative file names to the CU's comp_dir ".". */
static const char *dwarf_file(const char *f)
{
	return f && strncmp(f, "./", 2) == 0 ? f + 2 : f;
}

static bool frame_equal(const struct opal_gopclntab_frame *p, const struct dwarf_frame *d)
{
	char name[1024];
	print_name(d->function, name, sizeof(name));
	return strcmp(p->function, name) == 0 && same_str(p->file, dwarf_file(d->file)) &&
	       (int)p->line == d->line;
}

/* An autogenerated pointer wrapper whose DWARF lacks the inline scope:
 * pclntab has [T.M at P, (*T).M at <autogenerated>], DWARF [(*T).M at P]. */
static bool is_wrapper(const struct chain *c, const struct dwarf_frame *d, unsigned nd)
{
	char name[1024];
	if (c->n != 2 || nd != 1 || !same_str(c->f[1].file, "<autogenerated>"))
		return false;
	print_name(d[0].function, name, sizeof(name));
	return strcmp(c->f[1].function, name) == 0 && same_str(c->f[0].file, dwarf_file(d[0].file)) &&
	       (int)c->f[0].line == d[0].line;
}

/* A padding instruction: only the innermost line differs, and DWARF's is
 * the one pclntab gives the instruction before (`prev`), in the same file. */
static bool is_padding(const struct chain *c, const struct chain *prev,
		       const struct dwarf_frame *d, unsigned nd)
{
	char name[1024];
	if (c->n != nd)
		return false;
	print_name(d[0].function, name, sizeof(name));
	if (strcmp(c->f[0].function, name) != 0 || !same_str(c->f[0].file, dwarf_file(d[0].file)))
		return false;
	for (unsigned k = 1; k < nd; k++)
		if (!frame_equal(&c->f[k], &d[k]))
			return false;
	return (int)prev->f[0].line == d[0].line && same_str(prev->f[0].file, c->f[0].file);
}

/* For gofix's main.* PCs and every 16th other PC: pclntab's chain equals
 * DWARF's wherever DWARF has one, but for two differences of Go's own
 * (docs/go.md), each checked for what it is and counted: an
 * autogenerated pointer wrapper ("(*T).M" calling an inlined "T.M")
 * whose DWARF has no inline scope, only the wrapper at the callee's
 * position; and a padding instruction the assembler added after the
 * positions were set, which pclntab gives the next instruction's line
 * and DWARF's line table the previous row's. */
static void test_dwarf_inline(void **state)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/gofix", fixdir);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
	if (!dw)
		fail_msg("%s has no DWARF: %s", p, dwarf_errmsg(-1));
	Dwarf_Die cus[1024];
	size_t ncu = 0;
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (ncu < 1024 && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		if (dwarf_offdie(dw, off + hsize, &cus[ncu]))
			ncu++;
		off = next;
	}
	assert_true(ncu > 10);

	struct image im;
	struct answers as;
	struct opal_gopclntab *r = open_fixture("gofix", &im);
	load_answers("gofix.expect", &as);
	size_t compared = 0, inline_compared = 0, no_dwarf = 0, wrappers = 0, padding = 0, bad = 0;
	for (size_t i = 0; i < as.n; i++) {
		bool main_pc = strncmp(as.a[i].function, "main.", 5) == 0;
		if (!main_pc && i % 16)
			continue;
		Dwarf_Die *cu = NULL;
		for (size_t k = 0; k < ncu && !cu; k++)
			if (dwarf_haspc(&cus[k], as.a[i].pc) == 1)
				cu = &cus[k];
		struct dwarf_frame d[OPAL_GOPCLNTAB_MAX_FRAMES];
		unsigned nd = cu ? dwarf_chain(cu, as.a[i].pc, d, OPAL_GOPCLNTAB_MAX_FRAMES) : 0;
		if (nd == 0 || !d[nd - 1].function) {
			assert_false(main_pc);
			no_dwarf++;
			continue;
		}
		struct chain c, prev;
		assert_int_equal(lookup(r, as.a[i].pc, &c), 0);
		bool same = c.n == nd;
		for (unsigned k = 0; same && k < nd; k++)
			same = frame_equal(&c.f[k], &d[k]);
		compared++;
		inline_compared += nd > 1;
		if (same)
			continue;
		if (is_wrapper(&c, d, nd)) {
			wrappers++;
			continue;
		}
		if (i > 0 && lookup(r, as.a[i - 1].pc, &prev) == 0 && is_padding(&c, &prev, d, nd)) {
			padding++;
			continue;
		}
		if (bad++ < 10)
			print_message("0x%llx: pclntab %u frames %s %s:%u, DWARF %u frames %s %s:%d\n",
				      (unsigned long long)as.a[i].pc, c.n, c.f[0].function,
				      c.f[0].file ? c.f[0].file : "?", c.f[0].line, nd, d[0].function,
				      d[0].file ? d[0].file : "?", d[0].line);
	}
	print_message("DWARF: %zu PCs compared (%zu inlined), %zu without DWARF scope, %zu "
		      "wrappers without inline scope, %zu padding lines\n",
		      compared, inline_compared, no_dwarf, wrappers, padding);
	if (bad)
		fail_msg("%zu of %zu PCs: pclntab and DWARF chains differ", bad, compared);
	assert_true(compared > 5000 && inline_compared > 500);
	assert_true(wrappers + padding < compared / 100);
	free_answers(&as);
	close_fixture(r, &im);
	dwarf_end(dw);
	close(fd);
}

/* ---- refusals ---------------------------------------------------------------- */

static int open_copy(const struct image *src, size_t size, void (*patch)(char *, size_t))
{
	char *b = malloc(size ? size : 1);
	assert_non_null(b);
	memcpy(b, src->bytes, size);
	if (patch)
		patch(b, size);
	Elf *e = elf_on(b, size);
	struct opal_gopclntab *r = (struct opal_gopclntab *)1;
	int rc = opal_gopclntab_open(e, &r);
	if (rc == 0)
		opal_gopclntab_free(r);
	else
		assert_null(r);
	elf_end(e);
	free(b);
	return rc;
}

/* The seeds' only magic is their header's (they hold no text). */
static void set_old_magic(char *b, size_t size)
{
	static const unsigned char magics[][4] = { { 0xf0, 0xff, 0xff, 0xff },
						   { 0xf1, 0xff, 0xff, 0xff },
						   { 0xfa, 0xff, 0xff, 0xff } };
	for (size_t i = 0; i + 8 <= size; i += 4)
		for (unsigned m = 0; m < 3; m++)
			if (memcmp(b + i, magics[m], 4) == 0 && b[i + 4] == 0 && b[i + 5] == 0 &&
			    b[i + 7] == 8)
				b[i] = (char)0xfb;
}

static void set_big_endian(char *b, size_t size)
{
	b[EI_DATA] = ELFDATA2MSB;
}

static void test_refused(void **state)
{
	static const char *const seeds[] = { "seed_go116", "seed_go118", "seed_go120",
					     "gofix_go118_noshdr" };
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct image im;
		read_fixture(seeds[i], &im);
		assert_int_equal(open_copy(&im, im.size, NULL), 0);
		assert_int_equal(open_copy(&im, im.size, set_old_magic), -EPROTONOSUPPORT);
		assert_int_equal(open_copy(&im, im.size, set_big_endian), -ENOTSUP);
		free(im.bytes);
	}
	/* a C program: no Go table */
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = 0;
	int fd = open(self, O_RDONLY | O_CLOEXEC);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	struct opal_gopclntab *r;
	assert_int_equal(opal_gopclntab_open(e, &r), -ENOENT);
	elf_end(e);
	close(fd);
	assert_int_equal(opal_gopclntab_open(NULL, &r), -EINVAL);
}

/* ---- truncated and corrupted tables ------------------------------------------- */

/* Opens `b`/`size` and, when that works, looks up every PC of `pcs` and
 * walks the functions: any answer is fine, a crash is not. */
static void try_all(char *b, size_t size, const uint64_t *pcs, size_t npcs, size_t *opened)
{
	Elf *e = elf_memory(b, size);
	if (!e)
		return;   /* libelf refuses it (e.g. shorter than an ELF header) */
	struct opal_gopclntab *r;
	int rc = opal_gopclntab_open(e, &r);
	assert_true(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -EPROTONOSUPPORT);
	if (rc == 0) {
		struct chain c;
		for (size_t i = 0; i < npcs; i++) {
			rc = lookup(r, pcs[i], &c);
			assert_true(rc == 0 || rc == -ENOENT || rc == -EINVAL);
		}
		int calls = 0;
		rc = opal_gopclntab_foreach_func(r, stop_at_third, &calls);
		assert_true(rc == 0 || rc == 42 || rc == -EINVAL);
		opal_gopclntab_free(r);
		++*opened;
	}
	elf_end(e);
}

/* The PCs of `as` in main.* functions. */
static uint64_t *main_pcs(const struct answers *as, size_t *n)
{
	uint64_t *pcs = malloc(as->n * sizeof(*pcs));
	assert_non_null(pcs);
	*n = 0;
	for (size_t i = 0; i < as->n; i++)
		if (strncmp(as->a[i].function, "main.", 5) == 0)
			pcs[(*n)++] = as->a[i].pc;
	assert_true(*n > 50);
	return pcs;
}

static void test_truncated(void **state)
{
	struct answers as;
	size_t npcs;
	load_answers("gofix.expect", &as);
	uint64_t *pcs = main_pcs(&as, &npcs);
	static const char *const files[] = { "seed_go116", "seed_go118", "seed_go120",
					     "gofix_noshdr", "gofix_go116_noshdr" };
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		struct image im;
		read_fixture(files[f], &im);
		size_t step = im.size < 65536 ? 7 : 4093, opened = 0;
		for (size_t cut = 0; cut < im.size; cut += step) {
			char *b = malloc(cut ? cut : 1);
			assert_non_null(b);
			memcpy(b, im.bytes, cut);
			try_all(b, cut, pcs, npcs, &opened);
			free(b);
		}
		/* cuts past the table still find it: this is no idle loop */
		assert_true(opened > 0);
		free(im.bytes);
	}
	free(pcs);
	free_answers(&as);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_corrupted(void **state)
{
	struct answers as;
	size_t npcs;
	load_answers("gofix.expect", &as);
	uint64_t *pcs = main_pcs(&as, &npcs);
	static const char *const files[] = { "seed_go116", "seed_go118", "seed_go120" };
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		struct image im;
		read_fixture(files[f], &im);
		char *b = malloc(im.size);
		assert_non_null(b);
		size_t opened = 0;
		for (unsigned round = 0; round < 3000; round++) {
			memcpy(b, im.bytes, im.size);
			unsigned flips = 1 + (unsigned)(rng() % 8);
			for (unsigned k = 0; k < flips; k++) {
				/* past the ELF and program headers, into the data */
				size_t at = 0x1000 + (size_t)(rng() % (im.size - 0x1000));
				b[at] ^= (char)(1u << (rng() % 8));
			}
			try_all(b, im.size, pcs, npcs, &opened);
		}
		assert_true(opened > 100);
		free(b);
		free(im.bytes);
	}
	free(pcs);
	free_answers(&as);
}

static void test_cyclic_inline(void **state)
{
	struct image im;
	struct answers as;
	struct opal_gopclntab *r = open_fixture("seed_go118_cyclic", &im);
	load_answers("gofix.expect", &as);
	size_t einval = 0;
	for (size_t i = 0; i < as.n; i++) {
		struct chain c;
		if (strcmp(as.a[i].function, "main.(*T).method") == 0)
			einval += lookup(r, as.a[i].pc, &c) == -EINVAL;
	}
	assert_true(einval > 0);
	free_answers(&as);
	close_fixture(r, &im);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_info),
		cmocka_unit_test(test_not_go_not_scanned),
		cmocka_unit_test(test_sweep_unstripped),
		cmocka_unit_test(test_sweep_stripped),
		cmocka_unit_test(test_sweep_pie),
		cmocka_unit_test(test_sweep_other_arches),
		cmocka_unit_test(test_sweep_reencoded),
		cmocka_unit_test(test_same_chains),
		cmocka_unit_test(test_known_chain),
		cmocka_unit_test(test_foreach),
		cmocka_unit_test(test_outside_and_stop),
		cmocka_unit_test(test_dwarf_inline),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_corrupted),
		cmocka_unit_test(test_cyclic_inline),
	};
	return cmocka_run_group_tests(tests, setup_fixtures, NULL);
}
