/* Tests of the upload store (symbolizer/debuginfo/debuginfo_store.h): the upload
 * flow's decisions and states, validation of bad uploads, quality
 * ranking, expiry and the negative cache, on the fixtures of
 * tests/fixtures/debuginfo. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "debuginfo_helpers.h"
#include "symbolizer/debuginfo/debuginfo_srctar.h"

struct env {
	char dir[PATH_MAX];
	struct opal_debuginfo_store *st;
	char full_id[OPAL_DI_ID_HEX_MAX + 1];
	int stored_calls;
	enum opal_debug_quality stored_q;
	char stored_id[OPAL_DI_ID_HEX_MAX + 1];
};

static void on_stored(void *arg, const char *id, enum opal_di_id_type t, enum opal_di_type type,
		      enum opal_debug_quality q)
{
	struct env *e = arg;
	(void)t;
	(void)type;
	e->stored_calls++;
	e->stored_q = q;
	snprintf(e->stored_id, sizeof(e->stored_id), "%s", id);
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	di_mktemp(e->dir, sizeof(e->dir));
	e->st = di_store(e->dir, 1 << 20, 0);
	opal_debuginfo_store_set_hooks(e->st, on_stored, NULL, e);
	di_build_id("di_full", e->full_id);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	opal_debuginfo_store_close(e->st);
	di_rmtree(e->dir);
	free(e);
	return 0;
}

static struct opal_di_request request(const char *id, const char *fixture)
{
	struct opal_di_request rq = { .id_type = OPAL_DI_ID_GNU, .type = OPAL_DI_DEBUGINFO };
	snprintf(rq.id, sizeof(rq.id), "%s", id);
	int fd = di_open(fixture);
	di_sha256(fd, rq.hash, &rq.size);
	close(fd);
	return rq;
}

/* The whole flow for a good file: wanted, initiated, stored, marked. */
static void test_upload_flow(void **state)
{
	struct env *e = *state;
	struct opal_di_request rq = request(e->full_id, "di_full.debug");
	struct opal_di_answer a;
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 200);
	assert_true(a.yes);

	a = di_upload(e->st, "di_full.debug", e->full_id, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
	assert_true(a.replaced);
	assert_int_equal(a.quality, OPAL_DEBUG_DWARF_INLINE);
	assert_int_equal(e->stored_calls, 1);
	assert_string_equal(e->stored_id, e->full_id);

	enum opal_debug_quality q;
	int fd = opal_debuginfo_store_open_file(e->st, e->full_id, OPAL_DI_DEBUGINFO, &q, NULL, 0);
	assert_true(fd >= 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	close(fd);

	/* The same bytes again, or anything once the best quality is stored. */
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &a), 0);
	assert_false(a.yes);
	assert_non_null(strstr(a.reason, "already stored"));
	rq = request(e->full_id, "di_zlib.debug");
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &a), 0);
	assert_false(a.yes);
	assert_non_null(strstr(a.reason, "better data exists"));
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 412);
	rq.force = true;
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &a), 0);
	assert_true(a.yes);
}

/* state.db lost (moved aside as corrupt, deleted): the stored files on
 * disk are validated and indexed again at the next open; a file that is
 * not what its name says is left out. */
static void test_index_recovered(void **state)
{
	struct env *e = *state;
	struct opal_di_answer a = di_upload(e->st, "di_full.debug", e->full_id, OPAL_DI_ID_GNU,
					    OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
	opal_debuginfo_store_close(e->st);
	char p[PATH_MAX + 64];
	const char *sfx[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/state.db%s", e->dir, sfx[i]);
		unlink(p);
	}
	/* a stray file named like a build ID whose content does not match */
	snprintf(p, sizeof(p), "%s/debuginfo/files/debuginfo/%s", e->dir, "abcdef0123");
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs("not an ELF file", f);
	fclose(f);

	e->st = di_store(e->dir, 1 << 20, 0);
	enum opal_debug_quality q;
	int fd = opal_debuginfo_store_open_file(e->st, e->full_id, OPAL_DI_DEBUGINFO, &q, NULL, 0);
	assert_true(fd >= 0);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
	close(fd);
	assert_int_equal(opal_debuginfo_store_open_file(e->st, "abcdef0123", OPAL_DI_DEBUGINFO, &q,
							NULL, 0), -ENOENT);
	/* and the same bytes are not wanted again */
	struct opal_di_request rq = request(e->full_id, "di_full.debug");
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &a), 0);
	assert_false(a.yes);
}

static void test_mark_finished(void **state)
{
	struct env *e = *state;
	struct opal_di_request rq = request(e->full_id, "di_full.debug");
	struct opal_di_answer a, m;
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 200);
	char uid[OPAL_DI_UPLOAD_ID_LEN + 1];
	strcpy(uid, a.upload_id);
	assert_int_equal(opal_debuginfo_mark_finished(e->st, e->full_id, OPAL_DI_DEBUGINFO, uid, &m),
			 0);
	assert_int_equal(m.status, 409);   /* body not received yet */
	assert_int_equal(opal_debuginfo_mark_finished(e->st, e->full_id, OPAL_DI_EXECUTABLE, uid,
						      &m), 0);
	assert_int_equal(m.status, 400);   /* another type */
	assert_int_equal(opal_debuginfo_mark_finished(e->st, e->full_id, OPAL_DI_DEBUGINFO,
						      "0123456789abcdef0123456789abcdef", &m), 0);
	assert_int_equal(m.status, 404);

	struct opal_di_upload *u;
	assert_int_equal(opal_debuginfo_upload_begin(e->st, uid, &u), 0);
	int fd = di_open("di_full.debug");
	char buf[65536];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	close(fd);
	assert_int_equal(opal_debuginfo_upload_write(u, buf, (size_t)n), 0);
	assert_int_equal(opal_debuginfo_upload_finish(u, &a), 0);
	assert_int_equal(a.status, 200);
	assert_int_equal(opal_debuginfo_mark_finished(e->st, e->full_id, OPAL_DI_DEBUGINFO, uid, &m),
			 0);
	assert_int_equal(m.status, 200);
	/* Received once: a second PUT of the same upload is refused. */
	assert_int_equal(opal_debuginfo_upload_begin(e->st, uid, &u), -EALREADY);
}

/* A bad body gets 400 with its reason; the same bytes are then refused
 * with 409 at once; the store keeps what it had. */
static void check_bad(struct env *e, int fd, const char *id, const char *want)
{
	struct opal_di_answer a = di_upload_fd(e->st, fd, id, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO,
					       false);
	assert_int_equal(a.status, 400);
	if (!strstr(a.reason, want))
		fail_msg("reason '%s' lacks '%s'", a.reason, want);
	struct opal_di_request rq = { .id_type = OPAL_DI_ID_GNU, .type = OPAL_DI_DEBUGINFO };
	snprintf(rq.id, sizeof(rq.id), "%s", id);
	di_sha256(fd, rq.hash, &rq.size);
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &a), 0);
	assert_false(a.yes);
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 409);
	assert_int_equal(opal_debuginfo_store_open_file(e->st, id, OPAL_DI_DEBUGINFO, NULL, NULL, 0),
			 -ENOENT);
}

static void test_bad_uploads(void **state)
{
	struct env *e = *state;
	int fd = di_open("not_elf");
	check_bad(e, fd, e->full_id, "not an ELF file");
	close(fd);

	/* di_dwarf4.debug is another program: its build ID does not match. */
	fd = di_open("di_dwarf4.debug");
	check_bad(e, fd, e->full_id, "build ID mismatch");
	close(fd);

	/* The first 3000 bytes of di_full.debug: headers promise more. */
	char tmp[PATH_MAX + 16];
	snprintf(tmp, sizeof(tmp), "%s/truncated", e->dir);
	int src = di_open("di_full.debug");
	int dst = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char buf[3000];
	assert_int_equal(pread(src, buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(write(dst, buf, sizeof(buf)), sizeof(buf));
	close(src);
	check_bad(e, dst, e->full_id, "truncated ELF");
	close(dst);
	assert_int_equal(e->stored_calls, 0);
}

/* Wrong size or hash may be a broken transfer: 400, and the upload stays
 * open for another PUT. */
static void test_size_and_hash(void **state)
{
	struct env *e = *state;
	struct opal_di_request rq = request(e->full_id, "di_full.debug");
	struct opal_di_answer a;
	struct opal_di_upload *u;
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	char uid[OPAL_DI_UPLOAD_ID_LEN + 1];
	strcpy(uid, a.upload_id);

	assert_int_equal(opal_debuginfo_upload_begin(e->st, uid, &u), 0);
	assert_int_equal(opal_debuginfo_upload_write(u, "abc", 3), 0);
	assert_int_equal(opal_debuginfo_upload_finish(u, &a), 0);
	assert_int_equal(a.status, 400);
	assert_non_null(strstr(a.reason, "announced"));

	/* Announced size but other bytes: hash mismatch. */
	assert_int_equal(opal_debuginfo_upload_begin(e->st, uid, &u), 0);
	char *zeros = calloc(1, rq.size);
	assert_int_equal(opal_debuginfo_upload_write(u, zeros, rq.size), 0);
	assert_int_equal(opal_debuginfo_upload_write(u, "x", 1), -EFBIG);
	assert_int_equal(opal_debuginfo_upload_finish(u, &a), 0);
	free(zeros);
	assert_int_equal(a.status, 400);
	assert_non_null(strstr(a.reason, "SHA-256 mismatch"));

	/* Still open: the right bytes now succeed. */
	assert_int_equal(opal_debuginfo_upload_begin(e->st, uid, &u), 0);
	int fd = di_open("di_full.debug");
	char *buf = malloc(rq.size);
	assert_int_equal(pread(fd, buf, rq.size, 0), (ssize_t)rq.size);
	close(fd);
	assert_int_equal(opal_debuginfo_upload_write(u, buf, rq.size), 0);
	free(buf);
	assert_int_equal(opal_debuginfo_upload_finish(u, &a), 0);
	assert_int_equal(a.status, 200);
}

static void test_limits_and_concurrency(void **state)
{
	struct env *e = *state;
	struct opal_di_request rq = request(e->full_id, "di_full.debug");
	struct opal_di_answer a, b;
	rq.size = (2u << 20);   /* over this store's 1 MiB limit */
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 413);

	rq = request(e->full_id, "di_full.debug");
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 200);
	/* A second initiate of the same ID while the first runs. */
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &b), 0);
	assert_int_equal(b.status, 412);
	assert_non_null(strstr(b.reason, "in progress"));
	assert_int_equal(opal_debuginfo_should_initiate(e->st, &rq, &b), 0);
	assert_false(b.yes);
	/* Two PUTs of one upload at once: the second is refused. */
	struct opal_di_upload *u1, *u2;
	assert_int_equal(opal_debuginfo_upload_begin(e->st, a.upload_id, &u1), 0);
	assert_int_equal(opal_debuginfo_upload_begin(e->st, a.upload_id, &u2), -EBUSY);
	opal_debuginfo_upload_abort(u1);
	assert_int_equal(opal_debuginfo_upload_begin(e->st, a.upload_id, &u2), 0);
	opal_debuginfo_upload_abort(u2);
	assert_int_equal(opal_debuginfo_upload_begin(e->st, "not-an-upload-id", &u2), -ENOENT);
}

static void test_expiry(void **state)
{
	struct env *e = *state;
	opal_debuginfo_store_close(e->st);
	e->st = di_store(e->dir, 0, 1);
	struct opal_di_request rq = request(e->full_id, "di_full.debug");
	struct opal_di_answer a, b;
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 200);
	sleep(2);
	assert_int_equal(opal_debuginfo_store_expire(e->st), 1);
	struct opal_di_upload *u;
	assert_int_equal(opal_debuginfo_upload_begin(e->st, a.upload_id, &u), -ENOENT);
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &b), 0);
	assert_int_equal(b.status, 200);
}

/* Better data replaces worse (and says so to the hook); worse data is
 * accepted as valid but does not replace better data. */
static void test_quality_ranking(void **state)
{
	struct env *e = *state;
	struct opal_di_answer a;
	a = di_upload(e->st, "di_symtab", e->full_id, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
	assert_true(a.replaced);
	assert_int_equal(a.quality, OPAL_DEBUG_SYMTAB);
	a = di_upload(e->st, "di_zlib.debug", e->full_id, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
	assert_true(a.replaced);
	assert_int_equal(a.quality, OPAL_DEBUG_DWARF_INLINE);
	/* zstd DWARF (decompressed by opal) ranks as zlib does: forced, it
	 * replaces the stored file of equal quality */
	a = di_upload(e->st, "di_zstd.debug", e->full_id, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO, true);
	assert_int_equal(a.status, 200);
	assert_true(a.replaced);
	assert_int_equal(a.quality, OPAL_DEBUG_DWARF_INLINE);
	assert_int_equal(e->stored_calls, 3);
	assert_int_equal(e->stored_q, OPAL_DEBUG_DWARF_INLINE);
	a = di_upload(e->st, "di_symtab", e->full_id, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO, true);
	assert_int_equal(a.status, 200);
	assert_false(a.replaced);
	assert_non_null(strstr(a.reason, "not better"));
	enum opal_debug_quality q;
	int fd = opal_debuginfo_store_open_file(e->st, e->full_id, OPAL_DI_DEBUGINFO, &q, NULL, 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(q, OPAL_DEBUG_DWARF_INLINE);
}

/* Files without a build ID are uploaded by htlhash file ID. */
static void test_htlhash(void **state)
{
	struct env *e = *state;
	opal_file_id fid;
	char hex[33];
	int fd = di_open("di_nobid");
	assert_int_equal(opal_file_id_from_fd(fd, &fid), 0);
	close(fd);
	opal_file_id_to_hex(&fid, hex);
	/* A file with a build ID must be uploaded by it. */
	struct opal_di_answer a = di_upload(e->st, "di_full.debug", hex, OPAL_DI_ID_HTLHASH,
					    OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 400);
	assert_non_null(strstr(a.reason, "upload it by build ID"));
	a = di_upload(e->st, "di_nobid", hex, OPAL_DI_ID_HTLHASH, OPAL_DI_EXECUTABLE, false);
	assert_int_equal(a.status, 200);
	a = di_upload(e->st, "di_nobid.debug", hex, OPAL_DI_ID_HTLHASH, OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
	assert_int_equal(a.quality, OPAL_DEBUG_DWARF_INLINE);
	/* An executable upload must be the file itself. */
	a = di_upload(e->st, "di_stripped", hex, OPAL_DI_ID_HTLHASH, OPAL_DI_EXECUTABLE, true);
	assert_int_equal(a.status, 400);
}

static void test_sources(void **state)
{
	struct env *e = *state;
	struct opal_di_answer a = di_upload(e->st, "di_sources.tar.gz", e->full_id, OPAL_DI_ID_GNU,
					    OPAL_DI_SOURCES, false);
	assert_int_equal(a.status, 200);
	int fd = opal_debuginfo_store_open_file(e->st, e->full_id, OPAL_DI_SOURCES, NULL, NULL, 0);
	assert_true(fd >= 0);
	void *buf;
	size_t len;
	char member[PATH_MAX];
	assert_non_null(realpath(di_path("di.c"), member));
	assert_int_equal(opal_srctar_read_member(fd, member, &buf, &len), 0);
	assert_non_null(memmem(buf, len, "di_static_work", 14));
	free(buf);
	assert_int_equal(opal_srctar_read_member(fd, "/no/such/file.c", &buf, &len), -ENOENT);
	close(fd);
	a = di_upload(e->st, "di_full", e->full_id, OPAL_DI_ID_GNU, OPAL_DI_SOURCES, true);
	assert_int_equal(a.status, 400);
}

static void test_negative_cache(void **state)
{
	struct env *e = *state;
	assert_false(opal_debuginfo_store_miss_known(e->st, e->full_id, "debuginfo"));
	opal_debuginfo_store_miss_put(e->st, e->full_id, "debuginfo", 60);
	assert_true(opal_debuginfo_store_miss_known(e->st, e->full_id, "debuginfo"));
	assert_false(opal_debuginfo_store_miss_known(e->st, e->full_id, "executable"));
	opal_debuginfo_store_miss_put(e->st, e->full_id, "executable", 0);
	sleep(1);
	assert_false(opal_debuginfo_store_miss_known(e->st, e->full_id, "executable"));
}

static void test_ids(void **state)
{
	(void)state;
	assert_true(opal_di_id_valid("ab", OPAL_DI_ID_GNU));
	assert_false(opal_di_id_valid("abc", OPAL_DI_ID_GNU));
	assert_false(opal_di_id_valid("AB", OPAL_DI_ID_GNU));
	assert_false(opal_di_id_valid("../x", OPAL_DI_ID_GNU));
	assert_false(opal_di_id_valid("", OPAL_DI_ID_GNU));
	assert_true(opal_di_id_valid("0123456789abcdef0123456789abcdef", OPAL_DI_ID_HTLHASH));
	assert_false(opal_di_id_valid("0123456789abcdef", OPAL_DI_ID_HTLHASH));
	char longid[OPAL_DI_ID_HEX_MAX + 3];
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	assert_false(opal_di_id_valid(longid, OPAL_DI_ID_GNU));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_upload_flow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_finished, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index_recovered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_uploads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_and_hash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits_and_concurrency, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quality_ranking, setup, teardown),
		cmocka_unit_test_setup_teardown(test_htlhash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sources, setup, teardown),
		cmocka_unit_test_setup_teardown(test_negative_cache, setup, teardown),
		cmocka_unit_test(test_ids),
	};
	return cmocka_run_group_tests(tests, di_setup_fixtures, NULL);
}
