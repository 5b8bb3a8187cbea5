/* Go binaries through the symbolizer (symbolizer/symbolize/sym_go.h in
 * opal_symbolize_native): the fixture gofix of tests/fixtures/go, built
 * by Debian's Go 1.19, stripped (-s -w: no DWARF, no .symtab) and not.
 * Every 7th PC of `go tool objdump` gets the function (the physical one)
 * and the innermost file and line `go tool addr2line` gives (gofix.expect,
 * written at fixture build time); the stripped binary's answers equal the unstripped one's, where
 * opal reads DWARF first; the known chain's inlined calls come back as
 * inline frames with their call-site lines. docs/go.md. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbolizer/symbolize/symbolize.h"

static char dir[PATH_MAX];

static int setup(void **state)
{
	const char *base = getenv("OPAL_FIXTURES");
	char probe[PATH_MAX + 32];

	snprintf(dir, sizeof(dir), "%s/go", base ? base : "build/fixtures");
	snprintf(probe, sizeof(probe), "%s/gofix.expect", dir);
	if (access(probe, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures` (golang-go)\n", probe);
		return -1;
	}
	return 0;
}

static struct opal_symbolizer *with(const char *name, opal_file_id *id)
{
	char p[PATH_MAX + 64];
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 4);

	assert_non_null(s);
	memset(id, name[0], sizeof(*id));
	id->b[0] = (uint8_t)strlen(name);
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(opal_symbolizer_add_file(s, id, fd, NULL, 0, p), 0);
	return s;
}

/* `function` at `file:line` is what Go's addr2line says of the PC. */
static void check(struct opal_symbolizer *s, const opal_file_id *id, uint64_t pc,
		  const char *function, const char *file, unsigned line, const char *which)
{
	struct opal_sym_result r;

	assert_int_equal(opal_symbolize_native(s, id, pc, false, &r), 0);
	if (r.n == 0)
		fail_msg("%s 0x%llx: unresolved, Go says %s", which, (unsigned long long)pc, function);
	const struct opal_sym_frame *f = &r.frames[0], *outer = &r.frames[r.n - 1];
	if (strcmp(outer->function, function) || !f->file || strcmp(f->file, file) ||
	    f->line != line)
		fail_msg("%s 0x%llx: %s %s:%u, Go says %s %s:%u", which, (unsigned long long)pc,
			 outer->function, f->file ? f->file : "?", f->line, function, file, line);
	opal_sym_result_free(&r);
}

static void test_matches_go_tools(void **state)
{
	char p[PATH_MAX + 64], line[8192];
	opal_file_id ids, idu;
	struct opal_symbolizer *stripped = with("gofix_stripped", &ids);
	struct opal_symbolizer *full = with("gofix", &idu);
	enum opal_debug_quality q;
	size_t n = 0, checked = 0;

	assert_int_equal(opal_symbolizer_file_quality(stripped, &ids, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	snprintf(p, sizeof(p), "%s/gofix.expect", dir);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char function[4096], where[4096];
		unsigned long long pc;
		if (n++ % 7 || sscanf(line, "0x%llx\t%4095s\t%4095s", &pc, function, where) != 3)
			continue;
		char *colon = strrchr(where, ':');
		if (!colon)
			continue;
		*colon = '\0';
		unsigned ln = (unsigned)strtoul(colon + 1, NULL, 10);
		if (ln == 0)
			continue;   /* no line there for Go either */
		check(stripped, &ids, pc, function, where, ln, "stripped");
		check(full, &idu, pc, function, where, ln, "unstripped");
		checked++;
	}
	fclose(f);
	printf("gofix: %zu PCs, stripped and unstripped, as go tool addr2line\n", checked);
	assert_true(checked > 10000);
	assert_int_equal(opal_symbolizer_file_quality(full, &idu, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	opal_symbolizer_free(stripped);
	opal_symbolizer_free(full);
}

/* Line of the "LINE:<marker>" comment in the fixture's source. */
static unsigned marker_line(const char *marker)
{
	char p[PATH_MAX + 64], tag[64], line[1024];
	unsigned n = 0;

	snprintf(p, sizeof(p), "%s/src/gofix.go", dir);
	snprintf(tag, sizeof(tag), "// LINE:%s", marker);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, tag)) {
			fclose(f);
			return n;
		}
	}
	fail_msg("no %s in %s", tag, p);
	return 0;
}

/* The LINE: chain of tests/fixtures/go/gofix.go: main.scale inlined into
 * main.add inlined into main.(*T).method, each with its call-site line. */
static void test_inline_chain(void **state)
{
	char p[PATH_MAX + 64], line[8192], at[64];
	opal_file_id id;
	struct opal_symbolizer *s = with("gofix_stripped", &id);
	bool found = false;

	snprintf(p, sizeof(p), "%s/gofix.expect", dir);
	snprintf(at, sizeof(at), "gofix.go:%u", marker_line("scale"));
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long pc;
		char function[4096];
		struct opal_sym_result r;
		if (sscanf(line, "0x%llx\t%4095s", &pc, function) != 2 || !strstr(line, at))
			continue;
		assert_int_equal(opal_symbolize_native(s, &id, pc, false, &r), 0);
		if (r.n == 3) {
			assert_string_equal(r.frames[0].function, "main.scale");
			assert_true(r.frames[0].inlined);
			assert_string_equal(r.frames[1].function, "main.add");
			assert_true(r.frames[1].inlined);
			assert_int_equal(r.frames[1].line, marker_line("add"));
			assert_string_equal(r.frames[2].function, "main.(*T).method");
			assert_false(r.frames[2].inlined);
			assert_int_equal(r.frames[2].line, marker_line("method"));
			found = true;
		}
		opal_sym_result_free(&r);
	}
	fclose(f);
	assert_true(found);
	opal_symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_go_tools),
		cmocka_unit_test(test_inline_chain),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
