/* Tests of the decompression bound (symbolizer/debuginfo/debuginfo_bound.h)
 * on the bombs of tests/fixtures/bombs (4 MiB of zeros compressed each
 * way), scanned under a 1 MiB budget and under the default one. */
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
#include <cmocka.h>

#include "symbolizer/debuginfo/debuginfo_bound.h"
#include "symbolizer/debuginfo/debuginfo_minidebug.h"
#include "symbolizer/symbolize/sym_dwfl.h"

#define SMALL_BUDGET (1u << 20)
#define BOMB_BYTES   (4u << 20)

static char dir[PATH_MAX];

static int setup_fixtures(void **state)
{
	(void)state;
	const char *base = getenv("OPAL_FIXTURES");
	snprintf(dir, sizeof(dir), "%s/bombs", base ? base : "build/fixtures");
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/b_spin", dir);
	if (access(p, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures`\n", p);
		return -1;
	}
	return 0;
}

static int reset_budget(void **state)
{
	(void)state;
	opal_decomp_set_budget(0);
	return 0;
}

static int open_bomb(const char *name)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void expect_scan(const char *name, int ret, enum opal_metric_decomp reason)
{
	struct opal_decomp_scan s;
	int fd = open_bomb(name);
	int r = opal_decomp_scan_fd(fd, &s);
	close(fd);
	if (r != ret)
		fail_msg("%s: scan returned %d, not %d (%s)", name, r, ret, s.why);
	assert_int_equal(s.refused, ret == -EFBIG);
	if (ret == -EFBIG) {
		assert_int_equal(s.reason, reason);
		assert_true(strlen(s.why) > 0);
	}
}

/* Under a 1 MiB budget every 4 MiB bomb is refused from its header or
 * index alone, the lying xz index by the bounded decode. */
static void test_refused_over_budget(void **state)
{
	(void)state;
	opal_decomp_set_budget(SMALL_BUDGET);
	expect_scan("b_zlib", -EFBIG, OPAL_DECOMP_OVER_BUDGET);
	expect_scan("b_zstd", -EFBIG, OPAL_DECOMP_OVER_BUDGET);
	expect_scan("b_zdebug", -EFBIG, OPAL_DECOMP_OVER_BUDGET);
	expect_scan("b_xz", -EFBIG, OPAL_DECOMP_OVER_BUDGET);
	expect_scan("b_xz_liar", -EFBIG, OPAL_DECOMP_EXPANDS);
	expect_scan("b_spin", 0, 0);
}

/* Within the default budget the same files pass with their declared sizes. */
static void test_accepted_within_budget(void **state)
{
	(void)state;
	static const char *const names[] = { "b_zlib", "b_zstd", "b_zdebug", "b_xz" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct opal_decomp_scan s;
		int fd = open_bomb(names[i]);
		assert_int_equal(opal_decomp_scan_fd(fd, &s), 0);
		close(fd);
		assert_false(s.refused);
		assert_int_equal(s.declared, BOMB_BYTES);
		assert_int_equal(s.n_zstd, strcmp(names[i], "b_zstd") == 0);
	}
	/* the xz liar lies even within the budget */
	expect_scan("b_xz_liar", -EFBIG, OPAL_DECOMP_EXPANDS);
}

/* opal_decomp_open gives libdw the zstd section decompressed: a plain
 * section of 4 MiB of zeros; a Chdr that lies about the frame's size
 * is refused. */
static void test_zstd_image(void **state)
{
	(void)state;
	struct opal_decomp_scan s;
	int fd = open_bomb("b_zstd");
	int img = opal_decomp_open(fd, &s);
	close(fd);
	assert_true(img >= 0);
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(img, ELF_C_READ, NULL);
	assert_non_null(elf);
	size_t shstrndx;
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	Elf_Scn *scn = NULL;
	bool found = false;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		assert_non_null(gelf_getshdr(scn, &sh));
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, ".debug_info") != 0)
			continue;
		found = true;
		assert_false(sh.sh_flags & SHF_COMPRESSED);
		Elf_Data *d = elf_getdata(scn, NULL);
		assert_non_null(d);
		assert_int_equal(d->d_size, BOMB_BYTES);
		const unsigned char *b = d->d_buf;
		for (size_t i = 0; i < d->d_size; i += 4096)
			assert_int_equal(b[i], 0);
	}
	assert_true(found);
	elf_end(elf);
	close(img);

	fd = open_bomb("b_zstd_liar");
	assert_int_equal(opal_decomp_open(fd, &s), -EFBIG);
	close(fd);
	assert_true(s.refused);
	assert_int_equal(s.reason, OPAL_DECOMP_MALFORMED);
}

/* A refused file gives a session that never opened it, with the reason. */
static void test_dwfl_refused(void **state)
{
	(void)state;
	opal_decomp_set_budget(SMALL_BUDGET);
	struct opal_dwfl_file *f;
	const char *why;
	int fd = open_bomb("b_xz");
	assert_int_equal(opal_dwfl_open(fd, "b_xz", &f), 0);
	close(fd);
	assert_true(opal_dwfl_refused(f));
	assert_int_equal(opal_dwfl_quality(f, &why), OPAL_DEBUG_NONE);
	assert_non_null(strstr(why, "refused before decompression"));
	assert_non_null(strstr(why, ".gnu_debugdata"));
	opal_dwfl_close(f);
}

/* Bytes that are not xz have no index and do not decode. */
static void test_minidebug_bound(void **state)
{
	(void)state;
	static const unsigned char not_xz[64] = "not xz at all";
	uint64_t size;
	void *buf;
	size_t len;
	assert_int_equal(opal_minidebug_declared(not_xz, sizeof(not_xz), &size), -EBADMSG);
	assert_int_equal(opal_minidebug_decompress(not_xz, sizeof(not_xz), 1024, &buf, &len),
			 -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_refused_over_budget, reset_budget),
		cmocka_unit_test_teardown(test_accepted_within_budget, reset_budget),
		cmocka_unit_test_teardown(test_zstd_image, reset_budget),
		cmocka_unit_test_teardown(test_dwfl_refused, reset_budget),
		cmocka_unit_test(test_minidebug_bound),
	};
	return cmocka_run_group_tests(tests, setup_fixtures, NULL);
}
