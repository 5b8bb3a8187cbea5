/* Tests of the SQLite result cache (symbolizer/symbolize/sym_sqlite.h), the frame blob
 * codec (symbolizer/symbolize/sym_codec.h) and the in-memory LRU cache
 * (symbolizer/symbolize/sym_memcache.h). */
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
#include <sqlite3.h>

#include "symbolizer/base/metrics.h"
#include "symbolizer/base/sym_result.h"
#include "symbolizer/symbolize/sym_codec.h"
#include "symbolizer/symbolize/sym_memcache.h"
#include "symbolizer/symbolize/sym_sqlite.h"
#include "tmp_db.h"

static opal_file_id make_id(uint8_t tag)
{
	opal_file_id id;
	for (int i = 0; i < OPAL_FILE_ID_LEN; i++)
		id.b[i] = (uint8_t)(tag ^ (i * 7));
	return id;
}

/* A three-frame inline chain with every optional field exercised. */
static void sample_result(struct opal_sym_result *r)
{
	static struct opal_sym_frame frames[3] = {
		{ "leaf", "/src/a.c", 9, true },
		{ NULL, "/src/a.c", 15, true },
		{ "ns::outer(int)", NULL, 0, false },
	};
	r->n = 3;
	r->frames = frames;
	r->module = NULL;
}

static void assert_same(const struct opal_sym_result *a, const struct opal_sym_result *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct opal_sym_frame *x = &a->frames[i], *y = &b->frames[i];
		if (x->function)
			assert_string_equal(x->function, y->function);
		else
			assert_null(y->function);
		if (x->file)
			assert_string_equal(x->file, y->file);
		else
			assert_null(y->file);
		assert_int_equal(x->line, y->line);
		assert_int_equal(x->inlined, y->inlined);
	}
	if (a->module)
		assert_string_equal(a->module, b->module);
	else
		assert_null(b->module);
}

static void test_codec_round_trip(void **state)
{
	struct opal_sym_result in, out;
	uint8_t *buf;
	size_t len;

	sample_result(&in);
	assert_int_equal(opal_sym_encode(&in, &buf, &len), 0);
	assert_int_equal(opal_sym_decode(buf, len, &out), 0);
	assert_same(&in, &out);
	opal_sym_result_free(&out);
	free(buf);

	/* kernel-style: module set; and the empty (unresolved) result */
	struct opal_sym_frame k = { "vfs_read", NULL, 0, false };
	in = (struct opal_sym_result){ .n = 1, .frames = &k, .module = "" };
	assert_int_equal(opal_sym_encode(&in, &buf, &len), 0);
	assert_int_equal(opal_sym_decode(buf, len, &out), 0);
	assert_same(&in, &out);
	opal_sym_result_free(&out);
	free(buf);

	in = (struct opal_sym_result){ 0 };
	assert_int_equal(opal_sym_encode(&in, &buf, &len), 0);
	assert_int_equal(len, 3);
	assert_int_equal(opal_sym_decode(buf, len, &out), 0);
	assert_int_equal(out.n, 0);
	assert_null(out.frames);
	free(buf);
}

static void test_codec_rejects(void **state)
{
	struct opal_sym_result in, out;
	uint8_t *buf;
	size_t len;

	sample_result(&in);
	assert_int_equal(opal_sym_encode(&in, &buf, &len), 0);
	for (size_t cut = 0; cut < len; cut++)   /* every truncation */
		assert_int_equal(opal_sym_decode(buf, cut, &out), -EBADMSG);
	uint8_t *longer = malloc(len + 1);
	memcpy(longer, buf, len);
	longer[len] = 0;
	assert_int_equal(opal_sym_decode(longer, len + 1, &out), -EBADMSG);   /* trailing */
	free(longer);
	buf[0] = 2;
	assert_int_equal(opal_sym_decode(buf, len, &out), -EBADMSG);         /* version */
	free(buf);

	const uint8_t too_many[] = { 1, 0, 65 };
	assert_int_equal(opal_sym_decode(too_many, sizeof(too_many), &out), -EBADMSG);
	const uint8_t long_str[] = { 1, 0, 1, 2, 0, 0x81, 0x20 };   /* 4097-byte name */
	assert_int_equal(opal_sym_decode(long_str, sizeof(long_str), &out), -EBADMSG);
	const uint8_t nul_str[] = { 1, 0, 1, 2, 0, 2, 'a', 0 };
	assert_int_equal(opal_sym_decode(nul_str, sizeof(nul_str), &out), -EBADMSG);
	const uint8_t bad_utf8[] = { 1, 0, 1, 2, 0, 2, 'a', 0xff };
	assert_int_equal(opal_sym_decode(bad_utf8, sizeof(bad_utf8), &out), -EBADMSG);
	const uint8_t bad_flags[] = { 1, 0, 1, 8, 0 };
	assert_int_equal(opal_sym_decode(bad_flags, sizeof(bad_flags), &out), -EBADMSG);
	const uint8_t big_line[] = { 1, 0, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10 };   /* 2^32 */
	assert_int_equal(opal_sym_decode(big_line, sizeof(big_line), &out), -EBADMSG);
	const uint8_t endless_varint[] = { 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xff, 0xff };
	assert_int_equal(opal_sym_decode(endless_varint, sizeof(endless_varint), &out), -EBADMSG);
}

/* Names over the bound are cut on a UTF-8 boundary. */
static void test_codec_long_names(void **state)
{
	char *name = malloc(5000);
	memset(name, 'x', 4095);
	memcpy(name + 4095, "\xc3\xa9", 2);   /* 'é' straddles the 4096 limit */
	memset(name + 4097, 'y', 100);
	name[4197] = '\0';
	struct opal_sym_frame f = { name, NULL, 1, false };
	struct opal_sym_result in = { .n = 1, .frames = &f }, out;
	uint8_t *buf;
	size_t len;
	assert_int_equal(opal_sym_encode(&in, &buf, &len), 0);
	assert_int_equal(opal_sym_decode(buf, len, &out), 0);
	assert_int_equal(strlen(out.frames[0].function), 4095);
	opal_sym_result_free(&out);
	free(buf);
	char *d = opal_sym_strdup(name);
	assert_int_equal(strlen(d), 4095);
	free(d);
	free(name);

	/* bytes that are not UTF-8 become '?'; valid characters stay */
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "caf\xc3\xa9", "caf\xc3\xa9" },
		{ "a\xff" "b", "a?b" },
		{ "\xc3", "?" },                     /* truncated sequence */
		{ "\xc0\xaf", "??" },                /* overlong '/' */
		{ "\xed\xa0\x80", "???" },           /* surrogate */
		{ "\xf4\x90\x80\x80", "????" },      /* above U+10FFFF */
		{ "\xf0\x9f\x98\x80!", "\xf0\x9f\x98\x80!" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		d = opal_sym_strdup(cases[i].in);
		assert_string_equal(d, cases[i].out);
		free(d);
	}
}

static void test_cache_frames(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	opal_file_id a = make_id(1), b = make_id(2);
	struct opal_sym_result in, out;
	sample_result(&in);

	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), -ENOENT);
	assert_int_equal(opal_cache_put_frames(c, &a, 0x1000, &in), 0);
	/* addresses above INT64_MAX survive SQLite's signed integers */
	assert_int_equal(opal_cache_put_frames(c, &a, 0xffffffffffff0000ull, &in), 0);
	struct opal_sym_result empty = { 0 };
	assert_int_equal(opal_cache_put_frames(c, &b, 0x1000, &empty), 0);

	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), 0);
	assert_same(&in, &out);
	opal_sym_result_free(&out);
	assert_int_equal(opal_cache_get_frames(c, &a, 0xffffffffffff0000ull, &out), 0);
	assert_same(&in, &out);
	opal_sym_result_free(&out);
	assert_int_equal(opal_cache_get_frames(c, &a, 0x1001, &out), -ENOENT);
	assert_int_equal(opal_cache_get_frames(c, &b, 0x1000, &out), 0);
	assert_int_equal(out.n, 0);

	/* replace */
	struct opal_sym_frame f = { "other", NULL, 0, false };
	struct opal_sym_result in2 = { .n = 1, .frames = &f };
	assert_int_equal(opal_cache_put_frames(c, &a, 0x1000, &in2), 0);
	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), 0);
	assert_same(&in2, &out);
	opal_sym_result_free(&out);

	/* invalidate drops only that file */
	assert_int_equal(opal_cache_invalidate_file(c, &a), 0);
	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), -ENOENT);
	assert_int_equal(opal_cache_get_frames(c, &a, 0xffffffffffff0000ull, &out), -ENOENT);
	assert_int_equal(opal_cache_get_frames(c, &b, 0x1000, &out), 0);
	opal_cache_close(c);
	rm_db(db);
}

/* Frames cached by another schema version are dropped at open (version 1
 * named sizeless symbols only at their own address, version 2 C++
 * functions by their DWARF names, version 3 kept them in a rowid table). */
static void check_old_version_dropped(const char *pragma)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	opal_file_id a = make_id(5);
	struct opal_sym_result in, out;
	sample_result(&in);
	assert_int_equal(opal_cache_put_frames(c, &a, 0x1000, &in), 0);
	opal_cache_close(c);
	sqlite3 *raw;
	assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_exec(raw, pragma, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(raw);
	assert_non_null(c = opal_cache_open(db));
	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), -ENOENT);
	assert_int_equal(opal_cache_put_frames(c, &a, 0x1000, &in), 0);
	opal_cache_close(c);
	/* the current version keeps them */
	assert_non_null(c = opal_cache_open(db));
	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), 0);
	opal_sym_result_free(&out);
	opal_cache_close(c);
	rm_db(db);
}

/* A refusal is found again by file ID, or by build ID when given, under
 * a budget up to the one it was refused under, after a reopen. */
static void test_cache_refused(void **state)
{
	(void)state;
	char db[PATH_MAX], why[64];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	opal_file_id a = make_id(1), b = make_id(2);
	static const uint8_t bid[4] = { 0xde, 0xad, 0xbe, 0xef };
	assert_int_equal(opal_cache_get_refused(c, &a, NULL, 0, 512u << 20, why, sizeof(why)),
			 -ENOENT);
	assert_int_equal(opal_cache_put_refused(c, &a, bid, sizeof(bid), 512u << 20, "too big"),
			 0);
	opal_cache_close(c);
	c = opal_cache_open(db);
	assert_non_null(c);
	assert_int_equal(opal_cache_get_refused(c, &a, NULL, 0, 512u << 20, why, sizeof(why)), 0);
	assert_string_equal(why, "too big");
	assert_int_equal(opal_cache_get_refused(c, &a, NULL, 0, 256u << 20, why, sizeof(why)), 0);
	/* a raised budget judges the file again */
	assert_int_equal(opal_cache_get_refused(c, &a, NULL, 0, 1u << 30, why, sizeof(why)),
			 -ENOENT);
	assert_int_equal(opal_cache_get_refused(c, &b, NULL, 0, 512u << 20, why, sizeof(why)),
			 -ENOENT);
	assert_int_equal(opal_cache_get_refused(c, &b, bid, sizeof(bid), 512u << 20, why,
						sizeof(why)), 0);
	opal_cache_close(c);
	rm_db(db);
}

static void test_cache_old_version_dropped(void **state)
{
	(void)state;
	check_old_version_dropped("PRAGMA user_version = 1");
	check_old_version_dropped("PRAGMA user_version = 2");
	check_old_version_dropped("PRAGMA user_version = 3");
}

static int count_frames(const char *db)
{
	sqlite3 *raw;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(raw, "SELECT count(*) FROM frames", -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	/* one B-tree: the table has no rowid */
	assert_int_not_equal(sqlite3_prepare_v2(raw, "SELECT rowid FROM frames", -1, &st, NULL),
			     SQLITE_OK);
	sqlite3_close(raw);
	return n;
}

/* Over its bound on frame rows, the table drops an eighth of the bound,
 * first in key order (the files whose IDs sort first, at random since
 * file IDs are hashes); a later write finds the rest. */
static void test_cache_frames_bound(void **state)
{
	(void)state;
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	opal_cache_set_max_frames(c, 64);
	opal_metrics_reset();
	opal_file_id lo, hi;
	memset(lo.b, 0x11, sizeof(lo.b));
	memset(hi.b, 0x99, sizeof(hi.b));
	struct opal_sym_result in, out;
	sample_result(&in);
	for (uint64_t a = 0; a < 40; a++)
		assert_int_equal(opal_cache_put_frames(c, &hi, 0x1000 + a, &in), 0);
	struct opal_cache_frames_row rows[24];
	for (unsigned i = 0; i < 24; i++)
		rows[i] = (struct opal_cache_frames_row){ lo, 0x1000 + i, in };
	assert_int_equal(opal_cache_put_frames_batch(c, rows, 24), 0);
	assert_int_equal(count_frames(db), 64);   /* at the bound, not over */
	assert_int_equal(opal_cache_put_frames(c, &hi, 0x2000, &in), 0);
	/* 65 rows: 64 / 8 + 1 = 9 dropped, all of the lower file ID */
	assert_int_equal(count_frames(db), 56);
	for (uint64_t a = 0; a < 9; a++)
		assert_int_equal(opal_cache_get_frames(c, &lo, 0x1000 + a, &out), -ENOENT);
	assert_int_equal(opal_cache_get_frames(c, &lo, 0x1000 + 9, &out), 0);
	opal_sym_result_free(&out);
	assert_int_equal(opal_cache_get_frames(c, &hi, 0x2000, &out), 0);
	opal_sym_result_free(&out);
	char *text;
	size_t len;
	assert_int_equal(opal_metrics_render(NULL, NULL, &text, &len), 0);
	assert_non_null(strstr(text, "opal_cache_rows_evicted_total{table=\"frames\"} 9\n"));
	free(text);
	opal_cache_close(c);
	rm_db(db);
}

static void test_cache_files_and_restart(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	opal_file_id a = make_id(3), b = make_id(4);
	const uint8_t bid[20] = { 0xde, 0xad, 0xbe, 0xef };
	enum opal_debug_quality q;
	struct opal_sym_result in, out;
	sample_result(&in);

	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	assert_int_equal(opal_cache_get_file_quality(c, &a, &q), -ENOENT);
	assert_int_equal(opal_cache_put_file(c, &a, bid, sizeof(bid), "/usr/bin/x",
					     OPAL_DEBUG_SYMTAB, ".symtab"), 0);
	assert_int_equal(opal_cache_put_file(c, &b, NULL, 0, NULL, OPAL_DEBUG_NONE, NULL), 0);
	assert_int_equal(opal_cache_put_file(c, &a, bid, sizeof(bid), "/usr/bin/x",
					     OPAL_DEBUG_DWARF_INLINE, "dwarf"), 0);
	assert_int_equal(opal_cache_put_file(c, &a, bid, OPAL_BUILD_ID_MAX + 1, NULL,
					     OPAL_DEBUG_NONE, NULL), -EINVAL);

	/* a batch in one transaction */
	assert_int_equal(opal_cache_begin(c), 0);
	assert_int_equal(opal_cache_begin(c), -EBUSY);
	for (uint64_t addr = 0; addr < 2000; addr++)
		assert_int_equal(opal_cache_put_frames(c, &a, 0x400000 + addr, &in), 0);
	assert_int_equal(opal_cache_commit(c), 0);
	assert_int_equal(opal_cache_commit(c), -EINVAL);
	opal_cache_close(c);

	c = opal_cache_open(db);
	assert_non_null(c);
	assert_int_equal(opal_cache_get_file_quality(c, &a, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	assert_int_equal(opal_cache_get_file_quality(c, &b, &q), 0);
	assert_int_equal(q, OPAL_DEBUG_NONE);
	for (uint64_t addr = 0; addr < 2000; addr += 199) {
		assert_int_equal(opal_cache_get_frames(c, &a, 0x400000 + addr, &out), 0);
		assert_same(&in, &out);
		opal_sym_result_free(&out);
	}
	/* an uncommitted batch is written by close */
	assert_int_equal(opal_cache_begin(c), 0);
	assert_int_equal(opal_cache_put_frames(c, &b, 0x42, &in), 0);
	opal_cache_close(c);
	c = opal_cache_open(db);
	assert_non_null(c);
	assert_int_equal(opal_cache_get_frames(c, &b, 0x42, &out), 0);
	opal_sym_result_free(&out);
	opal_cache_close(c);
	rm_db(db);
}

/* A file that is not SQLite is moved aside and a new cache started. */
static void test_cache_corrupt(void **state)
{
	char db[PATH_MAX], aside[PATH_MAX + 16];
	tmp_db(db, sizeof(db));
	int fd = open(db, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	char junk[8192];
	memset(junk, 'Z', sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);

	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	snprintf(aside, sizeof(aside), "%s.corrupt", db);
	assert_int_equal(access(aside, F_OK), 0);
	opal_file_id a = make_id(5);
	struct opal_sym_result in, out;
	sample_result(&in);
	assert_int_equal(opal_cache_put_frames(c, &a, 1, &in), 0);
	assert_int_equal(opal_cache_get_frames(c, &a, 1, &out), 0);
	opal_sym_result_free(&out);
	opal_cache_close(c);
	rm_db(db);

	/* an unusable location fails cleanly */
	errno = 0;
	assert_null(opal_cache_open("/nonexistent-dir/opal/state.db"));
	assert_true(errno != 0);
}

static void test_memcache(void **state)
{
	struct opal_sym_memcache *mc = opal_sym_memcache_new(3, 0);
	assert_non_null(mc);
	opal_file_id a = make_id(6), b = make_id(7);
	struct opal_sym_result in, out;
	sample_result(&in);

	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &out), 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 1, &in, NULL), 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 2, &in, NULL), 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &b, 1, &in, NULL), 0);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &out), 1);   /* a/1 now most recent */
	assert_same(&in, &out);
	opal_sym_result_free(&out);
	assert_int_equal(opal_sym_memcache_put_view(mc, &b, 2, &in, NULL), 0);   /* evicts a/2 */
	assert_int_equal(opal_sym_memcache_count(mc), 3);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 2, &out), 0);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &out), 1);
	opal_sym_result_free(&out);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 1, &in, NULL), 0);   /* replace, no growth */
	assert_int_equal(opal_sym_memcache_count(mc), 3);

	opal_sym_memcache_drop_file(mc, &b);
	assert_int_equal(opal_sym_memcache_count(mc), 1);
	assert_int_equal(opal_sym_memcache_get(mc, &b, 1, &out), 0);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &out), 1);
	opal_sym_result_free(&out);
	opal_sym_memcache_free(mc);

	/* the byte bound: each entry (three frames, their strings, links and
	 * key) is larger than a third of 500 bytes */
	mc = opal_sym_memcache_new(0, 500);
	assert_non_null(mc);
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(opal_sym_memcache_put_view(mc, &a, i, &in, NULL), 0);
	assert_true(opal_sym_memcache_count(mc) < 3);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 99, &out), 1);
	opal_sym_result_free(&out);
	opal_sym_memcache_free(mc);

	/* many entries: the table grows and every key stays reachable */
	mc = opal_sym_memcache_new(0, 0);
	struct opal_sym_result empty = { 0 };
	for (uint64_t i = 0; i < 50000; i++)
		assert_int_equal(opal_sym_memcache_put_view(mc, &b, i * 16, &empty, NULL), 0);
	for (uint64_t i = 0; i < 50000; i += 7)
		assert_int_equal(opal_sym_memcache_get(mc, &b, i * 16, &out), 1);
	assert_int_equal(opal_sym_memcache_get(mc, &b, 8, &out), 0);
	opal_sym_memcache_free(mc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_round_trip),
		cmocka_unit_test(test_cache_refused),
		cmocka_unit_test(test_codec_rejects),
		cmocka_unit_test(test_codec_long_names),
		cmocka_unit_test(test_cache_frames),
		cmocka_unit_test(test_cache_old_version_dropped),
		cmocka_unit_test(test_cache_frames_bound),
		cmocka_unit_test(test_cache_files_and_restart),
		cmocka_unit_test(test_cache_corrupt),
		cmocka_unit_test(test_memcache),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
