/* Unit tests of symbolizer/profile/flamegraph.c: the call tree built from an
 * opal_profile (root first, inline chains expanded, kinds kernel / native /
 * inline, unsymbolized frames named file+0xOFFSET), pid and time filters,
 * the same tree from the pprof encoding of the profile, the depth bound,
 * and the HTML page: template filled once, data JSON parseable, names
 * escaped so they cannot close the script element, no network reference. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/profile/flamegraph.h"
#include "symbolizer/profile/pprof.h"
#include "symbolizer/profile/profile.h"
#include "symbolizer/profile/report.h"

#define PERIOD 10000000ull
#define T0     1700000000000000000ull
#define EVIL   "op</script><b>&x"

/* pid 100: 3 samples of main>compute>[inline]inner>[kernel]do_syscall_64 at
 * T0, T0+1s, T0+2s; 2 samples of main>libfoo.so+0x1234 at T0+3s, T0+4s.
 * pid 200: 4 samples of main>EVIL at T0 .. T0+3s. */
static struct opal_profile *build(void)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping app = { .start = 0x400000, .limit = 0x500000,
					    .filename = "/usr/bin/app" };
	struct opal_profile_mapping lib = { .start = 0x7f0000000000, .limit = 0x7f0000100000,
					    .file_offset = 0x1000, .filename = "/usr/lib/libfoo.so" };
	struct opal_profile_mapping kern = { .start = 0xffffffff80000000,
					     .limit = 0xffffffffffffffff,
					     .filename = "[kernel.kallsyms]" };
	struct opal_profile_line chain[2] = { { "inner", "a.c", 1 }, { "compute", "a.c", 2 } };
	struct opal_profile_line mainl = { "main", "a.c", 3 };
	struct opal_profile_line evil = { EVIL, "b.c", 4 };
	struct opal_profile_line ksym = { "do_syscall_64", NULL, 0 };
	struct opal_profile_process p1 = { .pid = 100, .executable_name = "app",
					   .executable_path = "/usr/bin/app" };
	struct opal_profile_process p2 = { .pid = 200, .executable_name = "app",
					   .executable_path = "/usr/bin/app" };
	uint64_t ts[5];
	uint32_t cpus[5] = { 0 };

	assert_non_null(p);
	uint32_t ma = opal_profile_mapping(p, &app), ml = opal_profile_mapping(p, &lib);
	uint32_t mk = opal_profile_mapping(p, &kern);
	uint32_t l_k = opal_profile_location(p, mk, 0xffffffff81000000, OPAL_FRAME_KERNEL, &ksym, 1);
	uint32_t l_c = opal_profile_location(p, ma, 0x401000, OPAL_FRAME_NATIVE, chain, 2);
	uint32_t l_m = opal_profile_location(p, ma, 0x402000, OPAL_FRAME_NATIVE, &mainl, 1);
	uint32_t l_u = opal_profile_location(p, ml, 0x7f0000000234, OPAL_FRAME_NATIVE, NULL, 0);
	uint32_t l_e = opal_profile_location(p, ma, 0x403000, OPAL_FRAME_NATIVE, &evil, 1);
	uint32_t r1 = opal_profile_process(p, &p1), r2 = opal_profile_process(p, &p2);
	uint32_t s1[3] = { l_k, l_c, l_m }, s2[2] = { l_u, l_m }, s3[2] = { l_e, l_m };

	for (int i = 0; i < 5; i++)
		ts[i] = T0 + (uint64_t)i * 1000000000ull;
	assert_int_equal(opal_profile_add_sample(p, r1, 101, "t", s1, 3, ts, cpus, 3), 0);
	assert_int_equal(opal_profile_add_sample(p, r1, 101, "t", s2, 2, ts + 3, cpus, 2), 0);
	assert_int_equal(opal_profile_add_sample(p, r2, 201, "t", s3, 2, ts, cpus, 4), 0);
	opal_profile_set_time(p, T0, T0 + 5000000000ull);
	return p;
}

static char *page(const struct opal_flamegraph *fg)
{
	char *html;
	size_t len;

	assert_int_equal(opal_flamegraph_html_buf(fg, "test <title>", &html, &len), 0);
	assert_int_equal(strlen(html), len);
	return html;
}

/* The JSON of the opal-data script element. */
static json_t *data_of(const char *html)
{
	static const char open[] = "<script id=\"opal-data\" type=\"application/json\">";
	const char *b = strstr(html, open), *e;
	json_error_t err;

	assert_non_null(b);
	b += strlen(open);
	e = strstr(b, "</script>");
	assert_non_null(e);
	json_t *j = json_loadb(b, (size_t)(e - b), 0, &err);
	if (!j)
		fail_msg("data is not JSON: %s", err.text);
	return j;
}

struct tree {
	json_t *j, *names, *name, *kind, *parent, *value;
	size_t n;
};

static void tree_of(const char *html, struct tree *t)
{
	t->j = data_of(html);
	json_t *nodes = json_object_get(t->j, "nodes");
	t->names = json_object_get(t->j, "names");
	t->name = json_object_get(nodes, "name");
	t->kind = json_object_get(nodes, "kind");
	t->parent = json_object_get(nodes, "parent");
	t->value = json_object_get(nodes, "value");
	t->n = json_array_size(t->name);
	assert_int_equal(json_array_size(t->kind), t->n);
	assert_int_equal(json_array_size(t->parent), t->n);
	assert_int_equal(json_array_size(t->value), t->n);
}

static const char *node_name(const struct tree *t, size_t i)
{
	return json_string_value(json_array_get(t->names, (size_t)json_integer_value(json_array_get(t->name, i))));
}

static long long nval(json_t *arr, size_t i)
{
	return (long long)json_integer_value(json_array_get(arr, i));
}

/* Index of the node reached from the root through `path` ("a;b;c"), or -1. */
static long find_path(const struct tree *t, const char *path)
{
	char buf[256], *save, *tok;
	long cur = 0;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		long next = -1;
		for (size_t i = 0; i < t->n; i++)
			if (nval(t->parent, i) == cur && strcmp(node_name(t, i), tok) == 0)
				next = (long)i;
		if (next < 0)
			return -1;
		cur = next;
	}
	return cur;
}

static void expect_node(const struct tree *t, const char *path, long long value, int kind)
{
	long i = find_path(t, path);

	if (i < 0)
		fail_msg("no node %s", path);
	if (nval(t->value, (size_t)i) != value || nval(t->kind, (size_t)i) != kind)
		fail_msg("%s: value %lld kind %lld, want %lld kind %d", path,
			 nval(t->value, (size_t)i), nval(t->kind, (size_t)i), value, kind);
}

static void test_tree_and_page(void **state)
{
	struct opal_profile *p = build();
	struct opal_flamegraph *fg = opal_flamegraph_new();
	struct tree t;

	assert_int_equal(opal_flamegraph_add_profile(fg, p, NULL), 0);
	assert_int_equal(opal_flamegraph_total(fg), 9);
	assert_int_equal(opal_flamegraph_truncated(fg), 0);
	/* all, main, compute, inner, do_syscall_64, libfoo.so+0x1234, EVIL */
	assert_int_equal(opal_flamegraph_n_nodes(fg), 7);
	char *html = page(fg);
	tree_of(html, &t);
	assert_int_equal(t.n, 7);
	assert_string_equal(node_name(&t, 0), "all");
	assert_int_equal(nval(t.parent, 0), -1);
	assert_int_equal(nval(t.value, 0), 9);
	expect_node(&t, "main", 9, OPAL_FG_NATIVE);
	expect_node(&t, "main;compute", 3, OPAL_FG_NATIVE);
	expect_node(&t, "main;compute;inner", 3, OPAL_FG_INLINE);
	expect_node(&t, "main;compute;inner;do_syscall_64", 3, OPAL_FG_KERNEL);
	/* file offset = 0x234 + 0x1000 */
	expect_node(&t, "main;libfoo.so+0x1234", 2, OPAL_FG_NATIVE);
	expect_node(&t, "main;" EVIL, 4, OPAL_FG_NATIVE);
	/* preorder, siblings by decreasing value: main's children EVIL(4), compute(3), lib(2) */
	assert_string_equal(node_name(&t, 1), "main");
	assert_string_equal(node_name(&t, 2), EVIL);
	assert_string_equal(node_name(&t, 3), "compute");
	for (size_t i = 1; i < t.n; i++)
		assert_true(nval(t.parent, i) < (long long)i);
	assert_string_equal(json_string_value(json_object_get(t.j, "title")), "test <title>");
	assert_int_equal(json_integer_value(json_object_get(t.j, "total")), 9);
	json_decref(t.j);

	/* The template is filled once; names cannot end the script element. */
	assert_non_null(strstr(html, "<!DOCTYPE html>"));
	assert_null(strstr(html, "@@OPAL_FLAMEGRAPH_DATA@@"));
	assert_null(strstr(html, "</script><b>"));
	assert_non_null(strstr(html, "op\\u003c/script\\u003e\\u003cb\\u003e\\u0026x"));
	assert_null(strstr(html, "test <title>"));
	/* self-contained: nothing to fetch */
	assert_null(strstr(html, "://"));
	assert_null(strstr(html, " src="));
	assert_non_null(strstr(html, "default-src 'none'"));
	free(html);
	opal_flamegraph_free(fg);
	opal_profile_free(p);
}

static void test_filters(void **state)
{
	struct opal_profile *p = build();
	struct opal_flamegraph *fg = opal_flamegraph_new();
	struct opal_fg_filter pid = { .pid = 200 };
	/* [T0+1s, T0+3s): pid 100's stack at +1, +2; pid 200's at +1, +2 */
	struct opal_fg_filter window = { .start_unix_ns = T0 + 1000000000ull,
					 .end_unix_ns = T0 + 3000000000ull };
	struct opal_fg_filter both = window;
	struct tree t;
	char *html;

	assert_int_equal(opal_flamegraph_add_profile(fg, p, &pid), 0);
	assert_int_equal(opal_flamegraph_total(fg), 4);
	html = page(fg);
	tree_of(html, &t);
	assert_int_equal(find_path(&t, "main;compute"), -1);
	expect_node(&t, "main;" EVIL, 4, OPAL_FG_NATIVE);
	json_decref(t.j);
	free(html);
	opal_flamegraph_free(fg);

	fg = opal_flamegraph_new();
	assert_int_equal(opal_flamegraph_add_profile(fg, p, &window), 0);
	assert_int_equal(opal_flamegraph_total(fg), 4);
	html = page(fg);
	tree_of(html, &t);
	expect_node(&t, "main;compute;inner;do_syscall_64", 2, OPAL_FG_KERNEL);
	expect_node(&t, "main;" EVIL, 2, OPAL_FG_NATIVE);
	assert_int_equal(find_path(&t, "main;libfoo.so+0x1234"), -1);
	json_decref(t.j);
	free(html);
	opal_flamegraph_free(fg);

	/* several profiles add up; filters combine */
	both.pid = 100;
	fg = opal_flamegraph_new();
	assert_int_equal(opal_flamegraph_add_profile(fg, p, &both), 0);
	assert_int_equal(opal_flamegraph_add_profile(fg, p, &both), 0);
	assert_int_equal(opal_flamegraph_total(fg), 4);
	opal_flamegraph_free(fg);
	opal_profile_free(p);
}

static void test_pprof_same_tree(void **state)
{
	struct opal_profile *p = build();
	struct opal_flamegraph *a = opal_flamegraph_new(), *b = opal_flamegraph_new();
	uint8_t *buf;
	size_t len;
	char why[256];

	assert_int_equal(opal_pprof_encode(p, false, &buf, &len), 0);
	Perftools__Profiles__Profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	assert_non_null(pp);
	assert_int_equal(opal_report_validate(pp, why, sizeof(why)), 0);

	assert_int_equal(opal_flamegraph_add_profile(a, p, NULL), 0);
	assert_int_equal(opal_flamegraph_add_pprof(b, pp, NULL), 0);
	char *ha = page(a), *hb = page(b);
	assert_string_equal(ha, hb);
	free(ha);
	free(hb);
	opal_flamegraph_free(a);
	opal_flamegraph_free(b);

	/* pid from the "pid" label */
	struct opal_fg_filter pid = { .pid = 100 };
	a = opal_flamegraph_new();
	assert_int_equal(opal_flamegraph_add_pprof(a, pp, &pid), 0);
	assert_int_equal(opal_flamegraph_total(a), 5);
	opal_flamegraph_free(a);

	/* a window keeps the whole profile when it overlaps [T0, T0+5s) */
	struct opal_fg_filter late = { .start_unix_ns = T0 + 6000000000ull };
	struct opal_fg_filter overlap = { .start_unix_ns = T0 + 4000000000ull,
					  .end_unix_ns = T0 + 9000000000ull };
	a = opal_flamegraph_new();
	assert_int_equal(opal_flamegraph_add_pprof(a, pp, &late), 0);
	assert_int_equal(opal_flamegraph_total(a), 0);
	assert_int_equal(opal_flamegraph_add_pprof(a, pp, &overlap), 0);
	assert_int_equal(opal_flamegraph_total(a), 9);
	opal_flamegraph_free(a);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	opal_profile_free(p);
}

static void test_depth_bound(void **state)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping m = { .start = 0x1000, .limit = 0x2000, .filename = "/x" };
	struct opal_profile_line lines[OPAL_PROFILE_MAX_LINES];
	char names[OPAL_PROFILE_MAX_LINES][16];
	struct opal_profile_process proc = { .pid = 1, .executable_name = "x",
					     .executable_path = "/x" };
	uint32_t stack[100];
	uint64_t ts = T0;
	uint32_t cpu = 0;

	for (int i = 0; i < OPAL_PROFILE_MAX_LINES; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		lines[i] = (struct opal_profile_line){ .function = names[i] };
	}
	uint32_t mid = opal_profile_mapping(p, &m);
	uint32_t loc = opal_profile_location(p, mid, 0x1100, OPAL_FRAME_NATIVE, lines,
					     OPAL_PROFILE_MAX_LINES);
	for (int i = 0; i < 100; i++)
		stack[i] = loc;
	uint32_t pr = opal_profile_process(p, &proc);
	/* 100 x 64 = 6400 frames, over the 4096 bound */
	assert_int_equal(opal_profile_add_sample(p, pr, 1, NULL, stack, 100, &ts, &cpu, 1), 0);
	struct opal_flamegraph *fg = opal_flamegraph_new();
	assert_int_equal(opal_flamegraph_add_profile(fg, p, NULL), 0);
	assert_int_equal(opal_flamegraph_total(fg), 1);
	assert_int_equal(opal_flamegraph_truncated(fg), 1);
	assert_int_equal(opal_flamegraph_n_nodes(fg), OPAL_FLAMEGRAPH_MAX_DEPTH + 1);
	char *html = page(fg);
	json_t *j = data_of(html);
	assert_int_equal(json_integer_value(json_object_get(j, "truncated")), 1);
	json_decref(j);
	free(html);
	opal_flamegraph_free(fg);
	opal_profile_free(p);
}

static void test_empty(void **state)
{
	struct opal_flamegraph *fg = opal_flamegraph_new();
	struct tree t;
	char *html = page(fg);

	tree_of(html, &t);
	assert_int_equal(t.n, 1);
	assert_int_equal(nval(t.value, 0), 0);
	json_decref(t.j);
	free(html);
	opal_flamegraph_free(fg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tree_and_page),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_pprof_same_tree),
		cmocka_unit_test(test_depth_bound),
		cmocka_unit_test(test_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
