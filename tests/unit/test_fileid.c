/* Unit tests of shared/fileid.c: the htlhash file ID (OpenTelemetry
 * Profiles specification, "Mappings": SHA-256 over the first and last 4096
 * bytes and the big-endian u64 length, first 16 bytes) checked against
 * that formula written with head, tail, printf, xxd and sha256sum (run at
 * test time) and against values computed once with it; hex helpers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/fileid.h"

/* Deterministic content: byte i of every test file. Must stay equal to the
 * generator the hard-coded digests below were computed with. */
static uint8_t pattern_byte(size_t i)
{
	return (uint8_t)(((i * 131u) + 7u) ^ (i >> 9));
}

/* Writes `size` pattern bytes to a fresh temp file; returns its fd (open
 * for reading) and the path in `path` (64 bytes). */
static int make_pattern_file(size_t size, char path[64])
{
	snprintf(path, 64, "/tmp/opal-test-fileid-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	uint8_t buf[4096];
	size_t done = 0;
	while (done < size) {
		size_t n = size - done < sizeof(buf) ? size - done : sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern_byte(done + i);
		assert_int_equal(write(fd, buf, n), (ssize_t)n);
		done += n;
	}
	return fd;
}

/* The reference formula of fileid.md, run through the shell. */
static void shell_htlhash(const char *path, char out[33])
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "(head -c 4096 '%s'; tail -c 4096 '%s'; printf '%%016x' $(stat -c %%s '%s') | xxd -r -p)"
		 " | sha256sum | cut -c1-32",
		 path, path, path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[128] = "";
	assert_non_null(fgets(line, sizeof(line), p));
	assert_int_equal(pclose(p), 0);
	line[strcspn(line, "\n")] = '\0';
	assert_int_equal(strlen(line), 32);
	memcpy(out, line, 33);
}

static void check_size(size_t size, const char *expected_hex)
{
	char path[64];
	int fd = make_pattern_file(size, path);

	/* The file position must not matter nor move (pread). */
	off_t pos = lseek(fd, 17, SEEK_SET);
	assert_int_equal(pos, 17);

	opal_file_id id;
	memset(&id, 0xee, sizeof(id));
	assert_int_equal(opal_file_id_from_fd(fd, &id), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 17);

	char got[33];
	opal_file_id_to_hex(&id, got);

	char shell[33];
	shell_htlhash(path, shell);
	assert_string_equal(got, shell);
	if (expected_hex)
		assert_string_equal(got, expected_hex);

	close(fd);
	unlink(path);
}

/* Hard-coded digests: computed once with the fileid.md shell formula on
 * pattern_byte() content (and cross-checked with Python hashlib). */
static void test_size_0(void **state)
{
	(void)state;
	check_size(0, "af5570f5a1810b7af78caf4bc70a660f");
}

static void test_size_100(void **state)
{
	(void)state;
	check_size(100, "9728eeab69e53201466e9c419f416910");
}

/* 5000 bytes: the head and tail ranges overlap. */
static void test_size_5000_overlap(void **state)
{
	(void)state;
	check_size(5000, "73f0b1c1f7a19e739c2101d9ceaeb8bb");
}

static void test_size_9000(void **state)
{
	(void)state;
	check_size(9000, "bf348006f81932874e64ccecab1be5e2");
}

static void test_size_1mib(void **state)
{
	(void)state;
	check_size(1u << 20, "7fc3cac4a7e5edc2ce2d4f4c5d524bcf");
}

/* Exactly 4096 and 8192 bytes sit on the boundaries of the formula. */
static void test_boundary_sizes(void **state)
{
	(void)state;
	check_size(4096, NULL);
	check_size(4097, NULL);
	check_size(8192, NULL);
	check_size(8193, NULL);
}

/* Two files differing only in the middle (outside both 4 KiB ranges) share
 * the ID; differing in the last byte they do not. */
static void test_middle_not_hashed(void **state)
{
	(void)state;
	char p1[64], p2[64];
	int a = make_pattern_file(20000, p1);
	int b = make_pattern_file(20000, p2);
	uint8_t x = 0x5a;
	assert_int_equal(pwrite(b, &x, 1, 10000), 1);

	opal_file_id ia, ib;
	assert_int_equal(opal_file_id_from_fd(a, &ia), 0);
	assert_int_equal(opal_file_id_from_fd(b, &ib), 0);
	assert_true(opal_file_id_eq(&ia, &ib));

	assert_int_equal(pwrite(b, &x, 1, 19999), 1);
	assert_int_equal(opal_file_id_from_fd(b, &ib), 0);
	assert_false(opal_file_id_eq(&ia, &ib));

	close(a);
	close(b);
	unlink(p1);
	unlink(p2);
}

static void test_bad_fd(void **state)
{
	(void)state;
	opal_file_id id;
	assert_int_equal(opal_file_id_from_fd(-1, &id), -EBADF);
	int fd = open("/tmp", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_true(opal_file_id_from_fd(fd, &id) < 0);
	close(fd);
}

static void test_file_id_hex(void **state)
{
	(void)state;
	opal_file_id id, back;
	for (int i = 0; i < OPAL_FILE_ID_LEN; i++)
		id.b[i] = (uint8_t)(i * 17 + 0x0a);
	char hex[33];
	memset(hex, 'x', sizeof(hex));
	opal_file_id_to_hex(&id, hex);
	assert_string_equal(hex, "0a1b2c3d4e5f708192a3b4c5d6e7f809");

	assert_int_equal(opal_file_id_from_hex(hex, &back), 0);
	assert_true(opal_file_id_eq(&id, &back));

	assert_int_equal(opal_file_id_from_hex("0A1B2C3D4E5F708192A3B4C5D6E7F809", &back), 0);
	assert_true(opal_file_id_eq(&id, &back));

	assert_int_equal(opal_file_id_from_hex("0a1b2c3d4e5f708192a3b4c5d6e7f80", &back), -EINVAL);
	assert_int_equal(opal_file_id_from_hex("0a1b2c3d4e5f708192a3b4c5d6e7f8090", &back), -EINVAL);
	assert_int_equal(opal_file_id_from_hex("0a1b2c3d4e5f708192a3b4c5d6e7f80g", &back), -EINVAL);
	assert_int_equal(opal_file_id_from_hex("", &back), -EINVAL);
}

static void test_hex_encode(void **state)
{
	(void)state;
	const uint8_t bytes[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xff };
	char out[2 * sizeof(bytes) + 1];
	memset(out, 'x', sizeof(out));
	opal_hex_encode(bytes, sizeof(bytes), out);
	assert_string_equal(out, "00017f80abff");

	char one[1] = { 'x' };
	opal_hex_encode(bytes, 0, one);
	assert_int_equal(one[0], '\0');
}

/* Every byte value: the 22 hex digits map to their values, all else to -1. */
static void test_hex_digit(void **state)
{
	(void)state;
	static const char digits[] = "0123456789abcdef";
	for (int c = 0; c < 256; c++) {
		const char *lo = c ? strchr(digits, c) : NULL;
		const char *up = c >= 'A' && c <= 'F' ? strchr(digits, c - 'A' + 'a') : NULL;
		int want = lo ? (int)(lo - digits) : up ? (int)(up - digits) : -1;
		assert_int_equal(opal_hex_digit((char)c), want);
	}
}

static void test_hex_decode(void **state)
{
	(void)state;
	uint8_t out[8];
	memset(out, 0, sizeof(out));
	assert_int_equal(opal_hex_decode("00017f80abff", out, sizeof(out)), 6);
	const uint8_t want[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xff };
	assert_memory_equal(out, want, sizeof(want));

	assert_int_equal(opal_hex_decode("DEADbeef", out, sizeof(out)), 4);
	const uint8_t want2[] = { 0xde, 0xad, 0xbe, 0xef };
	assert_memory_equal(out, want2, sizeof(want2));

	/* Exactly `cap` bytes fits; one more does not. */
	assert_int_equal(opal_hex_decode("0102030405060708", out, 8), 8);
	assert_int_equal(opal_hex_decode("010203040506070809", out, 8), -EINVAL);
	assert_int_equal(opal_hex_decode("abc", out, sizeof(out)), -EINVAL);
	assert_int_equal(opal_hex_decode("zz", out, sizeof(out)), -EINVAL);
	assert_int_equal(opal_hex_decode("0x12", out, sizeof(out)), -EINVAL);
	assert_int_equal(opal_hex_decode("12 4", out, sizeof(out)), -EINVAL);
}

static void test_is_lower_hex(void **state)
{
	(void)state;
	assert_true(opal_is_lower_hex("0123456789abcdef", 16));
	assert_true(opal_is_lower_hex("a", 1));
	assert_false(opal_is_lower_hex("0123456789abcdef", 15));
	assert_false(opal_is_lower_hex("", 10));
	assert_false(opal_is_lower_hex("ABCDEF", 10));
	assert_false(opal_is_lower_hex("abcg", 10));
	assert_false(opal_is_lower_hex("ab/", 10));
	assert_false(opal_is_lower_hex("ab cd", 10));
	/* Path-safety use: no traversal through a "hex" name. */
	assert_false(opal_is_lower_hex("../..", 10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_0),
		cmocka_unit_test(test_size_100),
		cmocka_unit_test(test_size_5000_overlap),
		cmocka_unit_test(test_size_9000),
		cmocka_unit_test(test_size_1mib),
		cmocka_unit_test(test_boundary_sizes),
		cmocka_unit_test(test_middle_not_hashed),
		cmocka_unit_test(test_bad_fd),
		cmocka_unit_test(test_file_id_hex),
		cmocka_unit_test(test_hex_encode),
		cmocka_unit_test(test_hex_digit),
		cmocka_unit_test(test_hex_decode),
		cmocka_unit_test(test_is_lower_hex),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
