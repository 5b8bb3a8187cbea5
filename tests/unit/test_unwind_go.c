/* Unit tests of the Go unwind rules from .gopclntab
 * (collector/unwind/table/unwind_go.c through opal_unwind_table_build).
 * Expected values come from Go's own tools, never from the reader: the
 * .debug_frame Go's linker writes into the unstripped build (CFA and
 * return address at every PC), `go tool objdump` (the prologue's save of
 * BP) and `go tool addr2line` (which function a PC is in).
 * Fixtures: $OPAL_FIXTURES/go (tests/fixtures/go/build.sh): gofix with
 * DWARF, gofix_cfionly (its .gopclntab renamed: .debug_frame only),
 * gofix_stripped (-s -w), and gofix's table re-encoded in the Go 1.16,
 * 1.18 and 1.20 layouts at the same addresses. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/unwind/table/unwind_table.h"
#include "unwind_format.h"

static char fixture_dir[4096];

static const char *fixture(const char *name)
{
	static char path[4352];
	snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
	return path;
}

static int build_path(const char *path, struct opal_unwind_table *t)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s (run make fixtures; OPAL_FIXTURES=%s)", path, fixture_dir);
	int rc = opal_unwind_table_build(fd, NULL, t);
	close(fd);
	return rc;
}

static void build_ok(const char *name, struct opal_unwind_table *t)
{
	int rc = build_path(fixture(name), t);
	if (rc != 0)
		fail_msg("building the table of %s: %s", name, strerror(-rc));
}

/* Every instruction of gofix with its function (gofix.expect). */
struct pc_fn {
	uint64_t pc;
	char fn[96];
};

static struct pc_fn *pcs;
static size_t n_pcs;

static void load_pcs(void)
{
	FILE *f = fopen(fixture("gofix.expect"), "r");
	char line[1024];
	size_t cap = 0;

	if (!f)
		fail_msg("cannot open %s", fixture("gofix.expect"));
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t'), *tab2 = tab ? strchr(tab + 1, '\t') : NULL;
		if (!tab2)
			continue;
		if (n_pcs == cap) {
			cap = cap ? 2 * cap : 65536;
			pcs = realloc(pcs, cap * sizeof(*pcs));
			assert_non_null(pcs);
		}
		*tab2 = 0;
		pcs[n_pcs].pc = strtoull(line, NULL, 16);
		snprintf(pcs[n_pcs].fn, sizeof(pcs[n_pcs].fn), "%s", tab + 1);
		n_pcs++;
	}
	fclose(f);
	assert_true(n_pcs > 100000);
}

static const struct opal_unwind_body *at(const struct opal_unwind_table *t, uint64_t pc)
{
	return opal_unwind_table_lookup(t, pc, NULL, NULL);
}

static const char *fmt(const struct opal_unwind_body *b, char *buf, size_t len)
{
	return test_unwind_body_format(b, buf, len);
}

/* Sorted rules, a GAP last, bodies in range. */
static void check_invariants(const struct opal_unwind_table *t)
{
	assert_true(t->n_rules > 0 && t->n_bodies > 0);
	for (uint32_t i = 0; i < t->n_rules; i++) {
		assert_true(t->rules[i].body < t->n_bodies);
		if (i > 0)
			assert_true(t->rules[i].addr > t->rules[i - 1].addr);
	}
	assert_int_equal(OPAL_UNWIND_KIND(t->bodies[t->rules[t->n_rules - 1].body].cfa),
			 OPAL_CFA_GAP);
}

static bool is_fn(const struct pc_fn *p, const char *const *names)
{
	for (; *names; names++)
		if (strcmp(p->fn, *names) == 0)
			return true;
	return false;
}

/* Functions the runtime flags: TOPFRAME on rt0_go, mstart, goexit (Go
 * 1.19 src/runtime/asm_amd64.s) and sigtramp (sys_linux_amd64.s); SPWRITE, set by the assembler on every
 * function that writes SP other than by adding to it, on these of gofix:
 * the ones that switch stacks (Go 1.19 asm_amd64.s, sys_linux_amd64.s,
 * time_linux_amd64.s; addr2line names gogo without its package). */
static const char *const topframe[] = { "runtime.goexit", "runtime.mstart", "runtime.rt0_go",
					"runtime.sigtramp", NULL };
static const char *const spwrite[] = {
	"gogo", "runtime.asmcgocall", "runtime.call1073741824", "runtime.callCgoMmap",
	"runtime.callCgoMunmap", "runtime.callCgoSigaction", "runtime.clone", "runtime.mcall",
	"runtime.morestack", "runtime.nanotime1", "runtime.sigfwd", "runtime.systemstack",
	"time.now", NULL,
};

static bool is_switch(const struct opal_unwind_body *b)
{
	return b->cfa == OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RBP) && b->cfa_off == 16 &&
	       b->aux == OPAL_CFA_AUX_STACK_SWITCH && b->ra == OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0) &&
	       b->ra_off == -8 && b->rbp == OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0) && b->rbp_off == -16;
}

/* The stripped build's CFA and return address equal those of the
 * .debug_frame Go's linker wrote into the unstripped one, at every
 * instruction but those of SPWRITE functions (GAP, the frame-pointer
 * guess, without a frame pointer; from their frame pointer, on any
 * stack, in the body of those with one) and TOPFRAME ones (the walk ends
 * there). */
static void test_stripped_matches_debug_frame(void **state)
{
	(void)state;
	struct opal_unwind_table dbg, go;
	char a[192], b[192];
	size_t gaps = 0, tops = 0, switches = 0, bad = 0;

	build_ok("gofix_cfionly", &dbg);   /* .gopclntab renamed */
	build_ok("gofix_stripped", &go);
	assert_int_equal(dbg.stats.go_funcs, 0);
	assert_true(dbg.stats.fdes_debug > 1000);
	assert_true(go.stats.go_funcs > 1000);
	assert_int_equal(go.stats.go_table_errors, 0);
	assert_int_equal(go.stats.fdes_eh + go.stats.fdes_debug, 0);
	check_invariants(&go);
	for (size_t i = 0; i < n_pcs; i++) {
		const struct opal_unwind_body *d = at(&dbg, pcs[i].pc), *g = at(&go, pcs[i].pc);
		if (OPAL_UNWIND_KIND(g->cfa) == OPAL_CFA_GAP || is_switch(g)) {
			if (!is_fn(&pcs[i], spwrite) && bad++ < 10)
				print_message("%#" PRIx64 " %s: %s\n", pcs[i].pc, pcs[i].fn,
					      fmt(g, a, sizeof(a)));
			if (is_switch(g))
				switches++;
			else
				gaps++;
			continue;
		}
		if (OPAL_UNWIND_KIND(g->ra) == OPAL_REG_UNDEFINED) {
			if (!is_fn(&pcs[i], topframe) && bad++ < 10)
				print_message("%#" PRIx64 " %s: top\n", pcs[i].pc, pcs[i].fn);
			tops++;
		} else if (g->ra != d->ra || g->ra_off != d->ra_off) {
			if (bad++ < 10)
				print_message("%#" PRIx64 " %s: ra %s / %s\n", pcs[i].pc, pcs[i].fn,
					      fmt(g, a, sizeof(a)), fmt(d, b, sizeof(b)));
		}
		if (g->cfa != d->cfa || g->cfa_off != d->cfa_off) {
			if (bad++ < 10)
				print_message("%#" PRIx64 " %s: %s / %s\n", pcs[i].pc, pcs[i].fn,
					      fmt(g, a, sizeof(a)), fmt(d, b, sizeof(b)));
		}
	}
	/* every instruction of the TOPFRAME functions ends the walk, and each
	 * SPWRITE one has gaps or frame-pointer rules (its ABI wrapper of the
	 * same name does not) */
	for (const char *const *name = spwrite; *name; name++) {
		size_t n = 0;
		for (size_t i = 0; i < n_pcs; i++) {
			const struct opal_unwind_body *g = at(&go, pcs[i].pc);
			n += strcmp(pcs[i].fn, *name) == 0 &&
			     (OPAL_UNWIND_KIND(g->cfa) == OPAL_CFA_GAP || is_switch(g));
		}
		if (n == 0 && bad++ < 10)
			print_message("%s: no gap or frame-pointer rule\n", *name);
	}
	for (size_t i = 0; i < n_pcs; i++) {
		const struct opal_unwind_body *g = at(&go, pcs[i].pc);
		if (is_fn(&pcs[i], topframe) && OPAL_UNWIND_KIND(g->ra) != OPAL_REG_UNDEFINED &&
		    bad++ < 10)
			print_message("%#" PRIx64 " %s: %s\n", pcs[i].pc, pcs[i].fn, fmt(g, a, sizeof(a)));
	}
	print_message("%zu instructions; in SPWRITE functions %zu gaps, %zu from RBP; %zu in "
		      "TOPFRAME ones\n", n_pcs, gaps, switches, tops);
	assert_int_equal(bad, 0);
	assert_true(gaps > 0 && tops > 0 && switches > 0);
	opal_unwind_table_free(&dbg);
	opal_unwind_table_free(&go);
}

/* time.now (Go 1.19 src/runtime/time_linux_amd64.s) calls the vDSO on
 * the system stack: its prologue by pcsp, its body from its frame
 * pointer (SUBQ $0x18, SP; MOVQ BP, 0x10(SP); LEAQ 0x10(SP), BP at its
 * entry), its epilogue (MOVQ 0x10(SP), BP; ADDQ $0x18, SP; RET, the
 * first RET of gofix.objdump's listing) by pcsp again. */
static void test_stack_switch(void **state)
{
	(void)state;
	struct opal_unwind_table go;
	char buf[192], line[1024];
	uint64_t now = 0, ret = 0;

	build_ok("gofix_stripped", &go);
	for (size_t i = 0; i < n_pcs && !now; i++)
		if (strcmp(pcs[i].fn, "time.now") == 0)
			now = pcs[i].pc;
	assert_true(now != 0);
	FILE *f = fopen(fixture("gofix.objdump"), "r");
	assert_non_null(f);
	bool in = false;
	while (!ret && fgets(line, sizeof(line), f)) {
		uint64_t pc;
		if (strncmp(line, "TEXT ", 5) == 0)
			in = strncmp(line, "TEXT time.now(SB)", 17) == 0;
		else if (in && strstr(line, "\tRET") && sscanf(line, " %*s 0x%" SCNx64, &pc) == 1)
			ret = pc;
	}
	fclose(f);
	assert_true(ret > now + 0x20);
	assert_string_equal(fmt(at(&go, now), buf, sizeof(buf)), "cfa=rsp+8 ra=c-8 rbp=same rbx=same");
	assert_string_equal(fmt(at(&go, now + 4), buf, sizeof(buf)),
			    "cfa=rsp+32 ra=c-8 rbp=same rbx=same");
	assert_string_equal(fmt(at(&go, now + 9), buf, sizeof(buf)),
			    "cfa=rsp+32 ra=c-8 rbp=c-16 rbx=same");
	assert_true(is_switch(at(&go, now + 0xe)));
	assert_true(is_switch(at(&go, ret - 10)));
	assert_string_equal(fmt(at(&go, ret - 9), buf, sizeof(buf)),
			    "cfa=rsp+32 ra=c-8 rbp=c-16 rbx=same");
	assert_string_equal(fmt(at(&go, ret - 4), buf, sizeof(buf)),
			    "cfa=rsp+32 ra=c-8 rbp=c-16 rbx=same");
	assert_string_equal(fmt(at(&go, ret), buf, sizeof(buf)), "cfa=rsp+8 ra=c-8 rbp=same rbx=same");
	opal_unwind_table_free(&go);
}

/* The caller's RBP is read at CFA - 16 exactly after the prologue's
 * `MOVQ BP, off(SP)` that `go tool objdump` shows right after the
 * instruction that makes the frame (or from the `MOVQ SP, BP` after a
 * first `PUSHQ BP`), while the frame is up; unchanged
 * everywhere else (frameless functions, before the save, after the
 * epilogue's ADDQ). */
static void test_rbp_after_prologue(void **state)
{
	(void)state;
	struct opal_unwind_table go;
	FILE *f = fopen(fixture("gofix.objdump"), "r");
	char line[1024], a[192];
	bool saved = false, first = false;
	size_t n = 0, n_saved = 0, bad = 0;

	assert_non_null(f);
	build_ok("gofix_stripped", &go);
	while (fgets(line, sizeof(line), f)) {
		uint64_t pc;
		char op[256];
		if (strncmp(line, "TEXT ", 5) == 0) {
			saved = false;
			first = true;   /* the next frame-making instruction decides */
			continue;
		}
		if (sscanf(line, " %*s 0x%" SCNx64 " %*s %255[^\n]", &pc, op) != 2)
			continue;
		const struct opal_unwind_body *g = at(&go, pc);
		if (OPAL_UNWIND_KIND(g->cfa) != OPAL_CFA_REG)
			continue;   /* SPWRITE functions */
		/* Go 1.21+'s prologue, also hand-written in Go 1.19's
		 * runtime.asyncPreempt: PUSHQ BP; MOVQ SP, BP */
		if (first && g->cfa_off == 16 && strncmp(op, "MOVQ SP, BP", 11) == 0)
			saved = true;
		bool want = saved && g->cfa_off > 8;
		bool got = OPAL_UNWIND_KIND(g->rbp) == OPAL_REG_AT_CFA && g->rbp_off == -16;
		if (!got && !(OPAL_UNWIND_KIND(g->rbp) == OPAL_REG_SAME))
			bad++;
		if (got != want && bad++ < 10)
			print_message("%#" PRIx64 " %s: %s\n", pc, op, fmt(g, a, sizeof(a)));
		n++;
		n_saved += got;
		if (first && g->cfa_off > 8 && strncmp(op, "MOVQ BP, ", 9) == 0 &&
		    strstr(op, "(SP)"))
			saved = true;
		if (first && g->cfa_off > 8)
			first = false;
	}
	fclose(f);
	print_message("%zu instructions, %zu with RBP saved\n", n, n_saved);
	assert_int_equal(bad, 0);
	assert_true(n > 100000 && n_saved > n / 2);

	/* main.spin: SUBQ $0x28, SP; MOVQ BP, 0x20(SP); LEAQ 0x20(SP), BP at
	 * its entry 0x482600 (gofix.go's layout with Go 1.19) */
	char buf[192];
	uint64_t spin = 0;
	for (size_t i = 0; i < n_pcs && !spin; i++)
		if (strcmp(pcs[i].fn, "main.spin") == 0)
			spin = pcs[i].pc;
	assert_true(spin != 0);
	assert_string_equal(fmt(at(&go, spin), buf, sizeof(buf)), "cfa=rsp+8 ra=c-8 rbp=same rbx=same");
	assert_string_equal(fmt(at(&go, spin + 6), buf, sizeof(buf)),
			    "cfa=rsp+8 ra=c-8 rbp=same rbx=same");
	assert_string_equal(fmt(at(&go, spin + 0xa), buf, sizeof(buf)),
			    "cfa=rsp+48 ra=c-8 rbp=same rbx=same");
	assert_string_equal(fmt(at(&go, spin + 0xf), buf, sizeof(buf)),
			    "cfa=rsp+48 ra=c-8 rbp=c-16 rbx=same");
	opal_unwind_table_free(&go);
}

/* gofix's table in the Go 1.16, 1.18 and 1.20 layouts, and gofix itself
 * (its table preferred to its .debug_frame), give the stripped build's
 * rules at every instruction (same text, same addresses); without section
 * headers the collector finds no table (frame pointers then). */
static void test_formats(void **state)
{
	(void)state;
	static const char *const names[] = { "gofix_go116", "gofix_go118", "gofix_go120", "gofix" };
	struct opal_unwind_table ref, t;
	char a[192], b[192];

	build_ok("gofix_stripped", &ref);
	for (size_t k = 0; k < 4; k++) {
		build_ok(names[k], &t);
		assert_int_equal(t.stats.go_funcs, ref.stats.go_funcs);
		size_t bad = 0;
		for (size_t i = 0; i < n_pcs; i++) {
			fmt(at(&ref, pcs[i].pc), a, sizeof(a));
			fmt(at(&t, pcs[i].pc), b, sizeof(b));
			if (strcmp(a, b) != 0 && bad++ < 5)
				print_message("%s %#" PRIx64 ": %s / %s\n", names[k], pcs[i].pc, b, a);
		}
		assert_int_equal(bad, 0);
		opal_unwind_table_free(&t);
	}
	assert_int_equal(build_path(fixture("gofix_go116_noshdr"), &t), -ENODATA);
	opal_unwind_table_free(&ref);
}

static uint8_t *read_file(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	assert_true(fd >= 0 && fstat(fd, &st) == 0);
	uint8_t *buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*size = (size_t)st.st_size;
	return buf;
}

/* File offset of gofix_stripped's .gopclntab (readelf -SW). */
static uint64_t pclntab_offset(void)
{
	char cmd[4500], line[512];
	uint64_t off = 0;
	snprintf(cmd, sizeof(cmd), "readelf -SW '%s'", fixture("gofix_stripped"));
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *s = strstr(line, " .gopclntab ");
		if (s && sscanf(s, " .gopclntab %*s %*x %" SCNx64, &off) == 1)
			break;
	}
	pclose(p);
	assert_true(off > 0);
	return off;
}

/* The section header (Elf64_Shdr) of the non-empty section at file
 * offset `sec_off` in `img` (.gosymtab, empty, starts there too). */
static uint8_t *section_header(uint8_t *img, uint64_t sec_off)
{
	uint64_t shoff, shnum;
	memcpy(&shoff, img + 0x28, 8);
	shnum = (uint64_t)img[0x3c] | (uint64_t)img[0x3d] << 8;
	for (uint64_t i = 0; i < shnum; i++) {
		uint8_t *sh = img + shoff + i * 64;
		uint64_t off, size;
		memcpy(&off, sh + 24, 8);
		memcpy(&size, sh + 32, 8);
		if (off == sec_off && size > 0)
			return sh;
	}
	fail_msg("no section at %#" PRIx64, sec_off);
	return NULL;
}

static void build_mangled(const uint8_t *img, size_t size, size_t *ok, size_t *refused)
{
	struct opal_unwind_table t;
	int rc = opal_unwind_table_build_mem(img, size, NULL, &t);
	if (rc == 0) {
		check_invariants(&t);
		(*ok)++;
	} else {
		if (rc != -ENODATA && rc != -E2BIG)
			fail_msg("unexpected %s", strerror(-rc));
		(*refused)++;
	}
	opal_unwind_table_free(&t);
}

/* Another magic, an absurd function count, the table cut short at every
 * 997th byte, and 3000 random flips of 1-8 bits: no table (-ENODATA: the
 * file has no other CFI) or a well-formed one, never a crash (the fuzzer,
 * tests/fuzz/fuzz_unwind_table.c, goes further). */
static void test_truncated_and_corrupted(void **state)
{
	(void)state;
	size_t size, ok = 0, refused = 0;
	uint8_t *img = read_file(fixture("gofix_stripped"), &size);
	uint64_t off = pclntab_offset();
	uint8_t *copy = malloc(size);
	assert_non_null(copy);
	struct opal_unwind_table t;
	uint64_t tab_size;
	memcpy(&tab_size, section_header(img, off) + 32, 8);

	memcpy(copy, img, size);
	copy[off] = 0xfb;   /* Go 1.2-1.15 */
	assert_int_equal(opal_unwind_table_build_mem(copy, size, NULL, &t), -ENODATA);
	memcpy(copy, img, size);
	copy[off + 15] = 0x40;   /* nfunc 2^62 */
	assert_int_equal(opal_unwind_table_build_mem(copy, size, NULL, &t), -ENODATA);
	memcpy(copy, img, size);
	copy[off + 7] = 4;   /* pointer size 4 */
	assert_int_equal(opal_unwind_table_build_mem(copy, size, NULL, &t), -ENODATA);

	/* cut: the section's size in its header */
	assert_true(tab_size > 100000);
	for (uint64_t cut = 0; cut < tab_size; cut += 997) {
		memcpy(copy, img, size);
		memcpy(section_header(copy, off) + 32, &cut, 8);
		build_mangled(copy, size, &ok, &refused);
	}
	assert_true(refused > 0);

	uint32_t seed = 4242;
	for (int iter = 0; iter < 3000; iter++) {
		memcpy(copy, img, size);
		seed = seed * 1103515245u + 12345u;
		int bits = 1 + (int)((seed >> 16) & 7);
		for (int k = 0; k < bits; k++) {
			seed = seed * 1103515245u + 12345u;
			/* half the flips in the header's first 4 KiB */
			uint64_t o = (seed >> 3) % ((seed & 1) ? 4096 : tab_size);
			copy[off + o] ^= (uint8_t)(1u << ((seed >> 28) & 7));
		}
		build_mangled(copy, size, &ok, &refused);
	}
	print_message("%zu tables built, %zu refused\n", ok, refused);
	assert_true(ok > 0);
	free(copy);
	free(img);
}

int main(void)
{
	const char *env = getenv("OPAL_FIXTURES");
	snprintf(fixture_dir, sizeof(fixture_dir), "%s/go", env ? env : "build/fixtures");
	load_pcs();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stripped_matches_debug_frame),
		cmocka_unit_test(test_stack_switch),
		cmocka_unit_test(test_rbp_after_prologue),
		cmocka_unit_test(test_formats),
		cmocka_unit_test(test_truncated_and_corrupted),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(pcs);
	return rc;
}
