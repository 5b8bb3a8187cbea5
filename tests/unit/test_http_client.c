/* Tests of the HTTP client (symbolizer/http/http_client.h) and the fleet mode
 * (symbolizer/http/upstream.h) against an in-process "central" server
 * (symbolizer/http/http_server.h) on loopback: the upload flow's outcomes,
 * batches of poorly resolved addresses answered by the central, and the
 * upload of a new file's debug parts. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include "debuginfo_helpers.h"
#include "symbolizer/base/sym_result.h"
#include "symbolizer/debuginfo/debuginfo_sources.h"
#include "symbolizer/http/http_client.h"
#include "symbolizer/http/http_server.h"
#include "symbolizer/http/upstream.h"

#define TOKEN "central-token"

struct env {
	char dir[PATH_MAX];
	struct opal_debuginfo_store *st;
	struct opal_symbolizer *central;
	struct opal_http_server *h;
	char base[64];
	struct opal_http_client client;
	char full_id[OPAL_DI_ID_HEX_MAX + 1];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	di_mktemp(e->dir, sizeof(e->dir));
	e->st = di_store(e->dir, 0, 0);
	e->central = opal_symbolizer_new(NULL, 8);
	struct opal_sym_sources_config sc = { .store = e->st };
	assert_int_equal(opal_sym_sources_init(&sc), 0);
	struct opal_http_config hc = { .listen = "127.0.0.1:0", .token = TOKEN, .sym = e->central,
				       .store = e->st };
	e->h = opal_http_start(&hc);
	assert_non_null(e->h);
	snprintf(e->base, sizeof(e->base), "http://127.0.0.1:%u", opal_http_port(e->h));
	e->client = (struct opal_http_client){ .base = e->base, .token = TOKEN };
	di_build_id("di_full", e->full_id);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	opal_http_stop(e->h);
	opal_symbolizer_free(e->central);
	opal_sym_sources_reset();
	opal_debuginfo_store_close(e->st);
	di_rmtree(e->dir);
	free(e);
	return 0;
}

static void test_upload_outcomes(void **state)
{
	struct env *e = *state;
	char why[512];
	int fd = di_open("di_full");
	assert_int_equal(opal_http_client_upload_debug(&e->client, fd, e->full_id, OPAL_DI_ID_GNU,
						       e->dir, false, why, sizeof(why)),
			 OPAL_UPLOAD_OUT_DONE);
	assert_non_null(strstr(why, "dwarf"));
	assert_int_equal(opal_http_client_upload_debug(&e->client, fd, e->full_id, OPAL_DI_ID_GNU,
						       e->dir, false, why, sizeof(why)),
			 OPAL_UPLOAD_OUT_NOT_NEEDED);
	close(fd);

	/* Another upload of the ID is running: "in progress", to retry. */
	char d4[OPAL_DI_ID_HEX_MAX + 1];
	di_build_id("di_dwarf4", d4);
	struct opal_di_request rq = { .id_type = OPAL_DI_ID_GNU, .type = OPAL_DI_DEBUGINFO,
				      .size = 10 };
	struct opal_di_answer a;
	snprintf(rq.id, sizeof(rq.id), "%s", d4);
	memset(rq.hash, 'a', 64);
	assert_int_equal(opal_debuginfo_initiate(e->st, &rq, &a), 0);
	assert_int_equal(a.status, 200);
	fd = di_open("di_dwarf4");
	assert_int_equal(opal_http_client_upload_debug(&e->client, fd, d4, OPAL_DI_ID_GNU, e->dir,
						       false, why, sizeof(why)),
			 OPAL_UPLOAD_OUT_IN_PROGRESS);
	/* Wrong build ID for the bytes: rejected by the server. */
	assert_int_equal(opal_http_client_upload(&e->client, fd, e->full_id, OPAL_DI_ID_GNU,
						 OPAL_DI_EXECUTABLE, false, why, sizeof(why)),
			 OPAL_UPLOAD_OUT_REJECTED);
	assert_non_null(strstr(why, "build ID mismatch"));
	struct opal_http_client bad = { .base = e->base, .token = "nope" };
	assert_int_equal(opal_http_client_upload(&bad, fd, e->full_id, OPAL_DI_ID_GNU,
						 OPAL_DI_EXECUTABLE, false, why, sizeof(why)),
			 OPAL_UPLOAD_OUT_REJECTED);
	assert_non_null(strstr(why, "403"));
	struct opal_http_client down = { .base = "http://127.0.0.1:1" };
	assert_int_equal(opal_http_client_upload(&down, fd, e->full_id, OPAL_DI_ID_GNU,
						 OPAL_DI_EXECUTABLE, false, why, sizeof(why)),
			 OPAL_UPLOAD_OUT_ERROR);
	close(fd);
}

static bool wait_until(bool (*cond)(void *), void *arg, int seconds)
{
	for (int i = 0; i < seconds * 20; i++) {
		if (cond(arg))
			return true;
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL);
	}
	return cond(arg);
}

struct probe {
	struct opal_symbolizer *s;
	opal_file_id id;
	uint64_t addr;
	struct opal_debuginfo_store *st;
	const char *build_id;
};

static bool named(void *arg)
{
	struct probe *p = arg;
	struct opal_sym_result r;
	bool ok = opal_symbolize_native(p->s, &p->id, p->addr, false, &r) == 0 && r.n == 3 &&
		  r.frames[2].function && !strcmp(r.frames[2].function, "di_outer");
	opal_sym_result_free(&r);
	return ok;
}

static bool uploaded(void *arg)
{
	struct probe *p = arg;
	int fd = opal_debuginfo_store_open_file(p->st, p->build_id, OPAL_DI_DEBUGINFO, NULL, NULL, 0);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* A host symbolizer with only the stripped file asks the central, which
 * has the upload; the answer lands in the host's cache, and settling (the
 * file is new) waits for it. A new file with DWARF on the host gets its
 * debug parts uploaded to the central. */
static void test_fleet(void **state)
{
	struct env *e = *state;
	struct opal_di_answer a = di_upload(e->st, "di_full.debug", e->full_id, OPAL_DI_ID_GNU,
					    OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
	/* Both symbolizers share this process's sources: let the central
	 * register the upload now, then take the sources away, so that the
	 * host finds nothing locally. */
	opal_file_id key;
	assert_int_equal(opal_symbolizer_ensure_build_id(e->central, e->full_id, &key), 0);
	opal_sym_sources_reset();

	struct opal_symbolizer *host = opal_symbolizer_new(NULL, 8);
	struct opal_upstream_config uc = { .url = e->base, .token = TOKEN,
					   .upload_debuginfo = true, .tmp_dir = e->dir };
	struct opal_upstream *up = opal_upstream_start(&uc, host);
	assert_non_null(up);

	uint8_t bid[OPAL_BUILD_ID_MAX];
	int n = opal_hex_decode(e->full_id, bid, sizeof(bid));
	struct probe p = { .s = host, .id = { { 0xab } },
			   .addr = di_sym_addr("di_full", "di_mark_leaf") };
	assert_int_equal(opal_symbolizer_add_file(host, &p.id, di_open("di_stripped"), bid,
						  (size_t)n, "/app/di_stripped"), 0);
	struct opal_sym_result r;
	assert_int_equal(opal_symbolize_native(host, &p.id, p.addr, false, &r), 0);
	assert_int_equal(r.n, 0);   /* locally: nothing */
	/* the file is new: held until the answer came, which was better */
	assert_int_equal(opal_upstream_settle(up, 10000), 1);
	assert_true(named(&p));
	/* nothing new since */
	assert_int_equal(opal_upstream_settle(up, 10000), 0);
	/* another address of the same file: no longer new, not waited for */
	struct probe p2 = { .s = host, .id = p.id, .addr = di_sym_addr("di_full", "di_mark_static") };
	assert_int_equal(opal_symbolize_native(host, &p2.id, p2.addr, false, &r), 0);
	opal_sym_result_free(&r);
	assert_int_equal(opal_upstream_settle(up, 10000), 0);

	char d4[OPAL_DI_ID_HEX_MAX + 1];
	di_build_id("di_dwarf4", d4);
	n = opal_hex_decode(d4, bid, sizeof(bid));
	opal_file_id id4 = { { 0xac } };
	assert_int_equal(opal_symbolizer_add_file(host, &id4, di_open("di_dwarf4"), bid, (size_t)n,
						  "/app/di_dwarf4"), 0);
	enum opal_debug_quality q;
	assert_int_equal(opal_symbolizer_file_quality(host, &id4, &q), 0);   /* opens it */
	struct probe u = { .st = e->st, .build_id = d4 };
	assert_true(wait_until(uploaded, &u, 10));
	opal_upstream_stop(up);
	opal_symbolizer_free(host);
}

int main(void)
{
	opal_http_client_global_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_upload_outcomes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fleet, setup, teardown),
	};
	return cmocka_run_group_tests(tests, di_setup_fixtures, NULL);
}
