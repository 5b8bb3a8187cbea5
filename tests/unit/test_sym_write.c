/* Tests of the warm path and the write path of the symbolizer: shared
 * result views of the in-memory cache (symbolizer/symbolize/sym_memcache.h) and
 * their CLOCK eviction, batched SQLite writes (opal_cache_put_frames_batch
 * and the symbolizer's write queue, opal_symbolizer_flush), the session
 * memory bound (opal_symbolizer_set_max_debug_memory), the sampled
 * latency histogram (metrics.h), and the fleet's remote answers
 * (upstream.h) reaching SQLite by themselves. Fixtures:
 * $OPAL_FIXTURES/symbolize (default build/fixtures/symbolize: run `make
 * fixtures` first). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "elf_symbol.h"
#include "fake_http.h"
#include "symbolizer/base/metrics.h"
#include "symbolizer/base/sym_result.h"
#include "symbolizer/http/http_client.h"
#include "symbolizer/http/upstream.h"
#include "symbolizer/symbolize/sym_memcache.h"
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

static int open_fixture(const char *name)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", fixdir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* Start and size of FUNC symbol `sym` in fixture `name`'s .symtab. */
static uint64_t sym_range(const char *name, const char *sym, uint64_t *size)
{
	int fd = open_fixture(name);
	uint64_t value = test_elf_symbol(fd, name, sym, size);
	close(fd);
	return value;
}

static opal_file_id make_id(uint8_t tag)
{
	opal_file_id id;
	for (int i = 0; i < OPAL_FILE_ID_LEN; i++)
		id.b[i] = (uint8_t)(tag * 37 + i);
	return id;
}

/* A result owning heap copies of two frames named after `tag`. */
static void owned_result(struct opal_sym_result *r, unsigned tag)
{
	char name[64];
	memset(r, 0, sizeof(*r));
	r->frames = calloc(2, sizeof(*r->frames));
	assert_non_null(r->frames);
	r->n = 2;
	snprintf(name, sizeof(name), "inner_%u", tag);
	r->frames[0] = (struct opal_sym_frame){ .function = strdup(name),
						.file = strdup("/src/w.c"), .line = tag,
						.inlined = true };
	snprintf(name, sizeof(name), "outer_%u", tag);
	r->frames[1] = (struct opal_sym_frame){ .function = strdup(name), .line = tag + 1 };
}

static void assert_tagged(const struct opal_sym_result *r, unsigned tag)
{
	char name[64];
	assert_int_equal(r->n, 2);
	snprintf(name, sizeof(name), "inner_%u", tag);
	assert_string_equal(r->frames[0].function, name);
	assert_string_equal(r->frames[0].file, "/src/w.c");
	assert_int_equal(r->frames[0].line, tag);
	assert_true(r->frames[0].inlined);
	snprintf(name, sizeof(name), "outer_%u", tag);
	assert_string_equal(r->frames[1].function, name);
	assert_null(r->frames[1].file);
	assert_int_equal(r->frames[1].line, tag + 1);
	assert_false(r->frames[1].inlined);
}

/* Deep copy of `src` into `dst` (overwritten, not freed), owning its
 * memory (dst->shared NULL) whether `src` is a shared view or not, with
 * strdup rather than the cache's packing. Returns 0 or -ENOMEM. */
static int copy_result(struct opal_sym_result *dst, const struct opal_sym_result *src)
{
	memset(dst, 0, sizeof(*dst));
	if (src->module) {
		dst->module = strdup(src->module);
		if (!dst->module)
			return -ENOMEM;
	}
	if (src->n == 0)
		return 0;
	dst->frames = calloc(src->n, sizeof(*dst->frames));
	if (!dst->frames)
		goto nomem;
	for (size_t i = 0; i < src->n; i++) {
		const struct opal_sym_frame *f = &src->frames[i];
		struct opal_sym_frame *g = &dst->frames[i];
		dst->n = i + 1;
		g->line = f->line;
		g->inlined = f->inlined;
		if (f->function && !(g->function = strdup(f->function)))
			goto nomem;
		if (f->file && !(g->file = strdup(f->file)))
			goto nomem;
	}
	return 0;
nomem:
	opal_sym_result_free(dst);
	return -ENOMEM;
}

/* A view stays readable after its entry is evicted or replaced, until
 * released; unresolved entries hand out empty results without a block. */
static void test_views_outlive_entries(void **state)
{
	struct opal_sym_memcache *mc = opal_sym_memcache_new(2, 0);
	assert_non_null(mc);
	opal_file_id a = make_id(1);
	struct opal_sym_result in, v1, v2, v3, empty = { 0 };

	owned_result(&in, 7);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 1, &in, &v1), 0);
	opal_sym_result_free(&in);   /* the cache holds its own copy */
	assert_non_null(v1.shared);
	assert_tagged(&v1, 7);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &v2), 1);
	assert_ptr_equal(v2.shared, v1.shared);   /* no copy */

	owned_result(&in, 8);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 1, &in, NULL), 0);   /* replaces */
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 2, &empty, NULL), 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 3, &empty, NULL), 0);   /* evicts a/1 */
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &v3), 0);
	assert_tagged(&v1, 7);
	assert_tagged(&v2, 7);
	opal_sym_result_free(&v1);
	assert_null(v1.shared);
	assert_int_equal(v1.n, 0);
	assert_tagged(&v2, 7);
	opal_sym_result_free(&v2);

	assert_int_equal(opal_sym_memcache_get(mc, &a, 3, &v3), 1);
	assert_int_equal(v3.n, 0);
	assert_null(v3.shared);
	opal_sym_memcache_free(mc);

	/* A view outlives the whole cache too. */
	mc = opal_sym_memcache_new(0, 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 5, &in, &v1), 0);
	opal_sym_memcache_free(mc);
	assert_tagged(&v1, 8);
	opal_sym_result_free(&v1);
	opal_sym_result_free(&in);

	/* A deep copy of a view owns its memory. */
	mc = opal_sym_memcache_new(0, 0);
	owned_result(&in, 9);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 6, &in, &v1), 0);
	assert_int_equal(copy_result(&v2, &v1), 0);
	assert_null(v2.shared);
	opal_sym_result_free(&v1);
	opal_sym_memcache_free(mc);
	assert_tagged(&v2, 9);
	opal_sym_result_free(&v2);
	opal_sym_result_free(&in);
}

/* CLOCK: entries leave oldest first, but a hit buys one more round. */
static void test_clock_order(void **state)
{
	struct opal_sym_memcache *mc = opal_sym_memcache_new(3, 0);
	opal_file_id a = make_id(2);
	struct opal_sym_result empty = { 0 }, out;
	for (uint64_t k = 1; k <= 3; k++)
		assert_int_equal(opal_sym_memcache_put_view(mc, &a, k, &empty, NULL), 0);
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &out), 1);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 4, &empty, NULL), 0);   /* 2 goes, 1 stays */
	assert_int_equal(opal_sym_memcache_get(mc, &a, 2, &out), 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 5, &empty, NULL), 0);   /* 3 goes */
	assert_int_equal(opal_sym_memcache_get(mc, &a, 3, &out), 0);
	assert_int_equal(opal_sym_memcache_put_view(mc, &a, 6, &empty, NULL), 0);   /* now 1 goes */
	assert_int_equal(opal_sym_memcache_get(mc, &a, 1, &out), 0);
	for (uint64_t k = 4; k <= 6; k++)
		assert_int_equal(opal_sym_memcache_get(mc, &a, k, &out), 1);
	assert_int_equal(opal_sym_memcache_count(mc), 3);
	opal_sym_memcache_free(mc);
}

/* Many keys of two files, interleaved: eviction, growth and removal by
 * file keep every remaining key reachable and no removed key. */
static void test_table_churn(void **state)
{
	enum { MAX = 20000, N = 50000 };
	struct opal_sym_memcache *mc = opal_sym_memcache_new(MAX, 0);
	opal_file_id a = make_id(3), b = make_id(4);
	struct opal_sym_result empty = { 0 }, out;
	for (uint64_t k = 0; k < N; k++)
		assert_int_equal(opal_sym_memcache_put_view(mc, k % 2 ? &b : &a, k * 0x10, &empty,
							    NULL), 0);
	assert_int_equal(opal_sym_memcache_count(mc), MAX);
	for (uint64_t k = 0; k < N; k++)   /* no hits: first in, first out */
		assert_int_equal(opal_sym_memcache_get(mc, k % 2 ? &b : &a, k * 0x10, &out),
				 k >= N - MAX);
	opal_sym_memcache_drop_file(mc, &b);
	assert_int_equal(opal_sym_memcache_count(mc), MAX / 2);
	for (uint64_t k = N - MAX; k < N; k++)
		assert_int_equal(opal_sym_memcache_get(mc, k % 2 ? &b : &a, k * 0x10, &out),
				 k % 2 == 0);
	/* the same addresses under the other file are other keys */
	for (uint64_t k = N - MAX; k < N; k += 2)
		assert_int_equal(opal_sym_memcache_get(mc, &b, k * 0x10, &out), 0);
	opal_sym_memcache_free(mc);
}

/* One batch, one transaction: later rows of a key win; inside the
 * caller's transaction the batch joins it. */
static void test_cache_batch(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	opal_file_id a = make_id(5);
	enum { N = 300 };
	struct opal_cache_frames_row *rows = calloc(N + 1, sizeof(*rows));
	assert_non_null(rows);
	for (unsigned i = 0; i < N; i++) {
		rows[i].id = a;
		rows[i].addr = 0x1000 + i;
		owned_result(&rows[i].res, i);
	}
	rows[N].id = a;   /* the same key as row 0, later: replaces it */
	rows[N].addr = 0x1000;
	owned_result(&rows[N].res, 999);
	assert_false(opal_cache_in_transaction(c));
	assert_int_equal(opal_cache_put_frames_batch(c, rows, N + 1), 0);
	assert_false(opal_cache_in_transaction(c));
	assert_int_equal(opal_cache_put_frames_batch(c, rows, 0), 0);
	opal_cache_close(c);

	c = opal_cache_open(db);
	assert_non_null(c);
	struct opal_sym_result out;
	assert_int_equal(opal_cache_get_frames(c, &a, 0x1000, &out), 0);
	assert_tagged(&out, 999);
	opal_sym_result_free(&out);
	for (unsigned i = 1; i < N; i += 37) {
		assert_int_equal(opal_cache_get_frames(c, &a, 0x1000 + i, &out), 0);
		assert_tagged(&out, i);
		opal_sym_result_free(&out);
	}

	assert_int_equal(opal_cache_begin(c), 0);
	assert_true(opal_cache_in_transaction(c));
	rows[0].addr = 0x9000;
	assert_int_equal(opal_cache_put_frames_batch(c, rows, 1), 0);
	assert_true(opal_cache_in_transaction(c));   /* not committed by the batch */
	assert_int_equal(opal_cache_commit(c), 0);
	assert_int_equal(opal_cache_get_frames(c, &a, 0x9000, &out), 0);
	assert_tagged(&out, 0);
	opal_sym_result_free(&out);
	opal_cache_close(c);
	for (unsigned i = 0; i <= N; i++)
		opal_sym_result_free(&rows[i].res);
	free(rows);
	rm_db(db);
}

/* Rows wait in the symbolizer's queue until a flush (or free) writes them
 * in one transaction; invalidation drops queued rows too; inside the
 * caller's transaction rows are written at once. */
static void test_write_queue(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db), *peek = opal_cache_open(db);
	assert_non_null(c);
	assert_non_null(peek);
	opal_file_id id = make_id(6);
	uint64_t size, leaf = sym_range("inline_pie", "opal_mark_leaf", &size);
	struct opal_symbolizer *s = opal_symbolizer_new(c, 4);
	assert_non_null(s);
	assert_int_equal(opal_symbolizer_add_file(s, &id, open_fixture("inline_pie"), NULL, 0,
						  "inline_pie"), 0);
	struct opal_sym_result r, d;
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
	assert_int_equal(r.n, 3);
	opal_sym_result_free(&r);
	assert_int_equal(opal_symbolize_native(s, &id, 0x10, false, &r), 0);   /* unresolved */
	struct opal_symbolizer_stats st;
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.rows_pending, 2);
	assert_int_equal(opal_cache_get_frames(peek, &id, leaf, &d), -ENOENT);

	assert_int_equal(opal_symbolizer_flush(s), 0);
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.rows_pending, 0);
	assert_int_equal(opal_cache_get_frames(peek, &id, leaf, &d), 0);
	assert_int_equal(d.n, 3);
	opal_sym_result_free(&d);
	assert_int_equal(opal_cache_get_frames(peek, &id, 0x10, &d), 0);
	assert_int_equal(d.n, 0);

	/* queued, then invalidated: never written */
	assert_int_equal(opal_symbolize_native(s, &id, leaf + 1, false, &r), 0);
	opal_sym_result_free(&r);
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.rows_pending, 1);
	assert_int_equal(opal_symbolizer_invalidate_file(s, &id), 0);
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.rows_pending, 0);
	assert_int_equal(opal_symbolizer_flush(s), 0);
	assert_int_equal(opal_cache_get_frames(peek, &id, leaf + 1, &d), -ENOENT);
	assert_int_equal(opal_cache_get_frames(peek, &id, leaf, &d), -ENOENT);

	/* inside the caller's transaction: written into it at once */
	assert_int_equal(opal_cache_begin(c), 0);
	assert_int_equal(opal_symbolize_native(s, &id, leaf + 2, false, &r), 0);
	opal_sym_result_free(&r);
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.rows_pending, 0);
	assert_int_equal(opal_cache_commit(c), 0);
	assert_int_equal(opal_cache_get_frames(peek, &id, leaf + 2, &d), 0);
	opal_sym_result_free(&d);

	/* free writes what is queued */
	assert_int_equal(opal_symbolize_native(s, &id, leaf + 3, false, &r), 0);
	opal_sym_result_free(&r);
	opal_symbolizer_free(s);
	assert_int_equal(opal_cache_get_frames(peek, &id, leaf + 3, &d), 0);
	assert_int_equal(d.n, 3);
	opal_sym_result_free(&d);

	/* a view handed out stays valid after the symbolizer is gone */
	s = opal_symbolizer_new(c, 4);
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), -ENOENT);
	assert_int_equal(opal_symbolize_native(s, &id, leaf + 3, false, &r), 0);   /* SQLite */
	assert_int_equal(opal_symbolize_native(s, &id, leaf + 3, false, &d), 0);   /* memory */
	assert_non_null(d.shared);
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.cache_hits, 1);
	assert_int_equal(st.mem_hits, 1);
	opal_symbolizer_free(s);
	assert_int_equal(d.n, 3);
	assert_string_equal(d.frames[2].function, r.frames[2].function);
	opal_sym_result_free(&d);
	opal_sym_result_free(&r);
	opal_cache_close(peek);
	opal_cache_close(c);
	rm_db(db);
}

/* The memory of the open sessions is bounded: past the bound the least
 * recently used other session closes; the one in use stays open. */
static void test_debug_memory_bound(void **state)
{
	static const char *const names[] = { "inline_pie", "inline_nopie", "inline_clang" };
	opal_file_id ids[3];
	uint64_t addrs[3], size;
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 8);
	assert_non_null(s);
	for (int i = 0; i < 3; i++) {
		ids[i] = make_id((uint8_t)(10 + i));
		addrs[i] = sym_range(names[i], "opal_mark_leaf", &size);
		assert_int_equal(opal_symbolizer_add_file(s, &ids[i], open_fixture(names[i]), NULL,
							  0, names[i]), 0);
	}
	struct opal_sym_result r;
	struct opal_symbolizer_stats st;
	opal_symbolizer_set_max_debug_memory(s, 0);   /* unbounded: all stay open */
	size_t depth[3];
	for (int i = 0; i < 3; i++) {
		assert_int_equal(opal_symbolize_native(s, &ids[i], addrs[i], false, &r), 0);
		assert_true(r.n >= 1);
		depth[i] = r.n;
		opal_sym_result_free(&r);
	}
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.files_open, 3);
	assert_true(st.debug_bytes > 0);
	uint64_t all = st.debug_bytes;

	/* a bound below the sum closes the least recently used at once */
	opal_symbolizer_set_max_debug_memory(s, all - 1);
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.files_open, 2);
	assert_int_equal(st.files_evicted, 1);
	assert_true(st.debug_bytes < all);

	/* one byte: only the session in use stays, and answers stay right
	 * (the neighbouring byte is in the same function) */
	opal_symbolizer_set_max_debug_memory(s, 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(opal_symbolize_native(s, &ids[i], addrs[i] + 1, false, &r), 0);
		assert_int_equal(r.n, depth[i]);
		opal_sym_result_free(&r);
		opal_symbolizer_stats(s, &st);
		assert_int_equal(st.files_open, 1);
	}
	opal_symbolizer_free(s);
}

struct hammer {
	struct opal_symbolizer *s;
	opal_file_id id;
	uint64_t start, size;
	const char *outer;   /* the real function of every address */
	int bad;
};

/* Looks up every byte of the function over and over; checks the outer
 * frame of each answer, memory hits and recomputed ones alike. */
static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	for (int round = 0; round < 20; round++) {
		for (uint64_t a = h->start; a < h->start + h->size; a++) {
			struct opal_sym_result r;
			if (opal_symbolize_native(h->s, &h->id, a, false, &r) != 0 || r.n == 0 ||
			    !r.frames[r.n - 1].function ||
			    strcmp(r.frames[r.n - 1].function, h->outer) != 0)
				__atomic_fetch_add(&h->bad, 1, __ATOMIC_RELAXED);
			opal_sym_result_free(&r);
		}
	}
	return NULL;
}

/* Views are released by two threads while a third invalidates the file
 * and flushes: every answer stays whole. */
static void test_threads(void **state)
{
	char db[PATH_MAX];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db);
	assert_non_null(c);
	struct hammer h = { .id = make_id(30), .outer = "outer" };
	h.start = sym_range("inline_pie", "outer", &h.size);
	assert_true(h.size > 0);
	h.s = opal_symbolizer_new(c, 4);
	assert_int_equal(opal_symbolizer_add_file(h.s, &h.id, open_fixture("inline_pie"), NULL, 0,
						  "inline_pie"), 0);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h), 0);
	for (int i = 0; i < 50; i++) {
		assert_int_equal(opal_symbolizer_invalidate_file(h.s, &h.id), 0);
		assert_int_equal(opal_symbolizer_flush(h.s), 0);
		usleep(1000);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(h.bad, 0);
	opal_symbolizer_free(h.s);
	opal_cache_close(c);
	rm_db(db);
}

/* Value of the sample `name` (a full metric name with labels) in text. */
static double metric(const char *text, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = text; (p = strstr(p, name)); p += len)
		if ((p == text || p[-1] == '\n') && p[len] == ' ')
			return strtod(p + len + 1, NULL);
	fail_msg("metric %s missing", name);
	return 0;
}

/* Every lookup is counted in the histogram: memory hits through the
 * sample that stands for them, so the count may be up to 15 behind, or
 * ahead by untimed hits of this thread from before the reset. */
static void test_latency_histogram(void **state)
{
	opal_file_id id = make_id(20);
	uint64_t size, leaf = sym_range("inline_pie", "opal_mark_leaf", &size);
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 4);
	assert_int_equal(opal_symbolizer_add_file(s, &id, open_fixture("inline_pie"), NULL, 0,
						  "inline_pie"), 0);
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);   /* warm up */
	opal_sym_result_free(&r);
	opal_metrics_reset();
	enum { MISSES = 5, HITS = 200 };
	for (int i = 1; i <= MISSES; i++) {
		assert_int_equal(opal_symbolize_native(s, &id, leaf + (uint64_t)i, false, &r), 0);
		opal_sym_result_free(&r);
	}
	for (int i = 0; i < HITS; i++) {
		assert_int_equal(opal_symbolize_native(s, &id, leaf, false, &r), 0);
		opal_sym_result_free(&r);
	}
	struct opal_symbolizer_stats st;
	char *text;
	size_t len;
	opal_symbolizer_stats(s, &st);
	struct opal_process_stats ps = { .seccomp_denials = 3 };
	assert_int_equal(opal_metrics_render(&st, &ps, &text, &len), 0);
	assert_true(metric(text, "opal_seccomp_denials_total") == 3);
	double count = metric(text, "opal_symbolize_duration_seconds_count");
	double sum = metric(text, "opal_symbolize_duration_seconds_sum");
	double inf = metric(text, "opal_symbolize_duration_seconds_bucket{le=\"+Inf\"}");
	assert_true(count >= MISSES + HITS - 15 && count <= MISSES + HITS + 15);
	assert_true(inf == count);
	assert_true(sum > 0);
	free(text);
	opal_symbolizer_free(s);
}

/* A central symbolizer's POST /symbolize/v1: every address answers one
 * frame, remote_fn at /remote.c:7. Runs on a server thread: no asserts. */
static void central_handle(void *arg, const char *method, const char *path, const char *body,
			   size_t body_len, struct fake_http_answer *a)
{
	(void)arg;
	a->status = 400;
	if (strcmp(method, "POST") != 0 || strcmp(path, "/symbolize/v1") != 0)
		return;
	json_t *req = json_loadb(body, body_len, 0, NULL), *results = json_array();
	json_t *reqs = json_object_get(req, "requests"), *r;
	size_t i, k;
	json_array_foreach(reqs, i, r) {
		json_t *locs = json_array(), *addr;
		json_array_foreach(json_object_get(r, "addresses"), k, addr)
			json_array_append_new(locs, json_pack("{s:O,s:[{s:s,s:s,s:i,s:b}]}",
							      "address", addr, "frames",
							      "function", "remote_fn", "file",
							      "/remote.c", "line", 7, "inlined", 0));
		const char *key = json_object_get(r, "build_id") ? "build_id" : "file_id";
		json_array_append_new(results, json_pack("{s:O,s:o}", key,
							 json_object_get(r, key),
							 "locations", locs));
	}
	json_t *ans = json_pack("{s:o}", "results", results);
	a->body = json_is_array(reqs) && ans ? json_dumps(ans, JSON_COMPACT) : NULL;
	if (a->body) {
		a->status = 200;
		a->len = strlen(a->body);
	}
	json_decref(ans);
	json_decref(req);
}

/* An address the host cannot resolve goes to the central symbolizer; its
 * answer replaces the host's cached one in SQLite too, without waiting
 * for the next interval's flush. */
static void test_upstream_flush(void **state)
{
	char db[PATH_MAX], url[64];
	tmp_db(db, sizeof(db));
	struct opal_cache *c = opal_cache_open(db), *peek = opal_cache_open(db);
	assert_non_null(c);
	assert_non_null(peek);
	opal_file_id id = make_id(40);
	struct opal_symbolizer *s = opal_symbolizer_new(c, 4);
	assert_non_null(s);
	assert_int_equal(opal_symbolizer_add_file(s, &id, open_fixture("inline_pie"), NULL, 0,
						  "inline_pie"), 0);
	struct fake_http central;
	fake_http_start(&central, central_handle, NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", central.port);
	struct opal_upstream_config uc = { .url = url, .tmp_dir = "/tmp" };
	struct opal_upstream *up = opal_upstream_start(&uc, s);
	assert_non_null(up);

	struct opal_sym_result r, d = { 0 };
	assert_int_equal(opal_symbolize_native(s, &id, 0x10, false, &r), 0);
	assert_int_equal(r.n, 0);   /* locally: nothing, so it is asked upstream */
	assert_int_equal(opal_symbolizer_flush(s), 0);   /* the interval's flush */
	bool remote = false;
	for (int i = 0; i < 1000 && !remote; i++) {
		usleep(10000);
		remote = opal_cache_get_frames(peek, &id, 0x10, &d) == 0 && d.n == 1;
		if (!remote)
			opal_sym_result_free(&d);
	}
	if (!remote)
		fail_msg("the remote answer did not reach SQLite within 10 s (%u requests)",
			 fake_http_requests(&central));
	assert_string_equal(d.frames[0].function, "remote_fn");
	assert_string_equal(d.frames[0].file, "/remote.c");
	assert_int_equal(d.frames[0].line, 7);
	opal_sym_result_free(&d);
	struct opal_symbolizer_stats st;
	opal_symbolizer_stats(s, &st);
	assert_int_equal(st.rows_pending, 0);
	opal_upstream_stop(up);
	opal_symbolizer_free(s);
	fake_http_stop(&central);
	opal_cache_close(peek);
	opal_cache_close(c);
	rm_db(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_views_outlive_entries),
		cmocka_unit_test(test_clock_order),
		cmocka_unit_test(test_table_churn),
		cmocka_unit_test(test_cache_batch),
		cmocka_unit_test(test_write_queue),
		cmocka_unit_test(test_debug_memory_bound),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_latency_histogram),
		cmocka_unit_test(test_upstream_flush),
	};
	if (opal_http_client_global_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, setup_fixtures, NULL);
}
