/* Tests of the HTTP API's JSON request parsers (symbolizer/http/http_json.h). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "symbolizer/http/http_json.h"

#define HASH "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int parse_di(const char *text, bool with_size, struct opal_di_request *r, char *why)
{
	return opal_json_parse_di_request(text, strlen(text), with_size, r, why, 256);
}

static void test_di_request(void **state)
{
	(void)state;
	struct opal_di_request r;
	char why[256];
	assert_int_equal(parse_di("{\"build_id\":\"abcd\",\"hash\":\"" HASH "\"}", false, &r, why),
			 0);
	assert_string_equal(r.id, "abcd");
	assert_int_equal(r.id_type, OPAL_DI_ID_GNU);
	assert_int_equal(r.type, OPAL_DI_DEBUGINFO);
	assert_false(r.force);
	assert_int_equal(parse_di("{\"build_id\":\"0123456789abcdef0123456789abcdef\","
				  "\"build_id_type\":\"hash\",\"type\":\"executable\",\"hash\":\""
				  HASH "\",\"force\":true,\"size\":123,\"extra\":[1]}", true, &r, why),
			 0);
	assert_int_equal(r.id_type, OPAL_DI_ID_HTLHASH);
	assert_int_equal(r.type, OPAL_DI_EXECUTABLE);
	assert_true(r.force);
	assert_int_equal(r.size, 123);

	static const char *const bad[] = {
		"",
		"[]",
		"{\"build_id\":\"ABCD\",\"hash\":\"" HASH "\"}",          /* upper case */
		"{\"build_id\":\"abc\",\"hash\":\"" HASH "\"}",           /* odd length */
		"{\"build_id\":\"../etc\",\"hash\":\"" HASH "\"}",        /* not hex */
		"{\"build_id\":\"abcd\",\"hash\":\"abcd\"}",               /* short hash */
		"{\"build_id\":\"abcd\"}",                                 /* no hash */
		"{\"build_id\":\"abcd\",\"hash\":\"" HASH "\",\"type\":\"core\"}",
		"{\"build_id\":\"abcd\",\"hash\":\"" HASH "\",\"build_id_type\":\"go\"}",
		"{\"build_id\":\"abcd\",\"hash\":\"" HASH "\",\"force\":1}",
		"{\"build_id\":12,\"hash\":\"" HASH "\"}",
		"{\"build_id\":\"abcd\",\"build_id\":\"abcd\",\"hash\":\"" HASH "\"}",  /* duplicate */
		"{\"build_id\":\"ab\",\"build_id_type\":\"htlhash\",\"hash\":\"" HASH "\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse_di(bad[i], false, &r, why) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_true(why[0] != '\0');
	}
	/* initiate needs a size. */
	assert_int_equal(parse_di("{\"build_id\":\"abcd\",\"hash\":\"" HASH "\"}", true, &r, why),
			 -EINVAL);
	assert_int_equal(parse_di("{\"build_id\":\"abcd\",\"hash\":\"" HASH "\",\"size\":-1}", true,
				  &r, why), -EINVAL);
}

static void test_depth(void **state)
{
	(void)state;
	assert_true(opal_json_depth_ok("{\"a\":[[1]]}", 11, 3));
	assert_false(opal_json_depth_ok("{\"a\":[[1]]}", 11, 2));
	/* Brackets inside strings do not count, escaped quotes stay inside. */
	const char *s = "{\"a\":\"[[[[\\\"[[[[\"}";
	assert_true(opal_json_depth_ok(s, strlen(s), 1));
	char deep[4096];
	memset(deep, '[', sizeof(deep));
	assert_false(opal_json_depth_ok(deep, sizeof(deep), OPAL_JSON_MAX_DEPTH));
	struct opal_di_request r;
	char why[256];
	assert_int_equal(opal_json_parse_di_request(deep, sizeof(deep), false, &r, why,
						    sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "nested"));
}

static void test_mark_finished(void **state)
{
	(void)state;
	char id[OPAL_DI_ID_HEX_MAX + 1], uid[OPAL_DI_UPLOAD_ID_LEN + 1], why[256];
	enum opal_di_type t;
	const char *ok = "{\"build_id\":\"abcd\",\"upload_id\":\"0123456789abcdef0123456789abcdef\"}";
	assert_int_equal(opal_json_parse_mark_finished(ok, strlen(ok), id, sizeof(id), &t, uid,
						       sizeof(uid), why, sizeof(why)), 0);
	assert_string_equal(id, "abcd");
	assert_int_equal(t, OPAL_DI_DEBUGINFO);
	const char *bad = "{\"build_id\":\"abcd\",\"upload_id\":\"../../x\"}";
	assert_int_equal(opal_json_parse_mark_finished(bad, strlen(bad), id, sizeof(id), &t, uid,
						       sizeof(uid), why, sizeof(why)), -EINVAL);
}

static void test_symbolize(void **state)
{
	(void)state;
	struct opal_sym_request r;
	char why[256];
	const char *ok = "{\"requests\":[{\"build_id\":\"abcd\",\"addresses\":[\"0x401136\",\"10\","
			 "\"0XFFFFFFFFFFFFFFFF\"]},{\"file_id\":\"0123456789abcdef0123456789abcdef\","
			 "\"addresses\":[]}]}";
	assert_int_equal(opal_json_parse_symbolize(ok, strlen(ok), 10, &r, why, sizeof(why)), 0);
	assert_int_equal(r.n, 2);
	assert_false(r.entries[0].by_file_id);
	assert_int_equal(r.entries[0].n_addrs, 3);
	assert_int_equal(r.entries[0].addrs[0], 0x401136);
	assert_int_equal(r.entries[0].addrs[1], 0x10);
	assert_true(r.entries[0].addrs[2] == UINT64_MAX);
	assert_true(r.entries[1].by_file_id);
	assert_int_equal(r.entries[1].n_addrs, 0);
	assert_int_equal(r.total_addrs, 3);
	opal_json_sym_request_free(&r);

	assert_int_equal(opal_json_parse_symbolize(ok, strlen(ok), 2, &r, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "3 addresses in one request; at most 2"));
	static const char entries[] = "{\"requests\":[{\"build_id\":\"ab\",\"addresses\":[]},"
				      "{\"build_id\":\"cd\",\"addresses\":[]},"
				      "{\"build_id\":\"ef\",\"addresses\":[]}]}";
	assert_int_equal(opal_json_parse_symbolize(entries, strlen(entries), 2, &r, why,
						   sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "3 request entries in one request; at most 2"));
	static const char *const bad[] = {
		"{}",
		"{\"requests\":{}}",
		"{\"requests\":[1]}",
		"{\"requests\":[{\"addresses\":[]}]}",
		"{\"requests\":[{\"build_id\":\"ab\",\"file_id\":\"ab\",\"addresses\":[]}]}",
		"{\"requests\":[{\"build_id\":\"ab\",\"addresses\":[\"0x\"]}]}",
		"{\"requests\":[{\"build_id\":\"ab\",\"addresses\":[\"0x10000000000000000\"]}]}",
		"{\"requests\":[{\"build_id\":\"ab\",\"addresses\":[\"0xg\"]}]}",
		"{\"requests\":[{\"build_id\":\"ab\",\"addresses\":[16]}]}",
		"{\"requests\":[{\"build_id\":\"AB\",\"addresses\":[]}]}",
		"{\"requests\":[{\"file_id\":\"abcd\",\"addresses\":[]}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (opal_json_parse_symbolize(bad[i], strlen(bad[i]), 10, &r, why, sizeof(why)) !=
		    -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_null(r.entries);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_di_request),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_mark_finished),
		cmocka_unit_test(test_symbolize),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
