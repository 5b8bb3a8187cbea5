/* Tests of symbolizer/base/gzip.c: what it writes is gzip (RFC 1952) that
 * zlib reads back byte for byte, for empty, compressible and random input;
 * input past the stated bound is refused before anything is allocated. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "symbolizer/base/gzip.h"

/* gunzips `z` with zlib into a new buffer of at most `cap` bytes */
static size_t gunzip(const uint8_t *z, size_t zlen, uint8_t *out, size_t cap)
{
	z_stream zs = { 0 };
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (Bytef *)z;
	zs.avail_in = (uInt)zlen;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
	assert_int_equal(zs.avail_in, 0);
	size_t n = zs.total_out;
	inflateEnd(&zs);
	return n;
}

static void round_trip(const uint8_t *in, size_t len)
{
	uint8_t *z = NULL;
	size_t zlen = 0;
	assert_int_equal(opal_gzip(in, len, &z, &zlen), 0);
	assert_non_null(z);
	assert_true(zlen >= 18);   /* header and trailer */
	assert_int_equal(z[0], 0x1f);
	assert_int_equal(z[1], 0x8b);
	uint8_t *back = malloc(len + 1);
	assert_non_null(back);
	assert_int_equal(gunzip(z, zlen, back, len + 1), len);
	assert_memory_equal(back, in, len);
	free(back);
	free(z);
}

static void test_empty(void **state)
{
	(void)state;
	round_trip((const uint8_t *)"", 0);
}

static void test_compressible(void **state)
{
	(void)state;
	size_t len = 1 << 20;
	uint8_t *in = malloc(len);
	assert_non_null(in);
	for (size_t i = 0; i < len; i++)
		in[i] = "location function mapping "[i % 26];
	uint8_t *z = NULL;
	size_t zlen = 0;
	assert_int_equal(opal_gzip(in, len, &z, &zlen), 0);
	assert_true(zlen < len / 50);
	free(z);
	round_trip(in, len);
	free(in);
}

static void test_random(void **state)
{
	(void)state;
	size_t len = 300000;
	uint8_t *in = malloc(len);
	assert_non_null(in);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		in[i] = (uint8_t)x;
	}
	round_trip(in, len);
	free(in);
}

static void test_too_big(void **state)
{
	(void)state;
	uint8_t *z = (uint8_t *)1;
	size_t zlen = 7;
	/* the input is never read: the length is refused first */
	assert_int_equal(opal_gzip((const uint8_t *)"", (size_t)UINT_MAX / 2 + 1, &z, &zlen), -E2BIG);
	assert_null(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_compressible),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_too_big),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
