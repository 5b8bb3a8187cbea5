/* Tests of the symbolizer's code table (symbolizer/interp/code_table.h)
 * with the wire layer below it (python_wire.h): every code object of the
 * committed CPython dumps (tests/fixtures/python), sent as a collector
 * sends it (layout from collector/interp/python_proc.h), is named as
 * Python names it, and its frames' lines are the line table's; bad or
 * unknown code objects are refused and counted; a connection's are
 * dropped with it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "collector/interp/python_layout.h"
#include "collector/interp/python_proc.h"
#include "py_code_records.h"
#include "symbolizer/interp/code_table.h"
#include "symbolizer/interp/python_lines.h"

struct named {
	char function[OPAL_PY_NAME_MAX], file[OPAL_PY_FILENAME_MAX];
	uint32_t first_line, line;
};

static int keep(void *arg, const struct opal_code_frame *f)
{
	struct named *n = arg;

	snprintf(n->function, sizeof(n->function), "%s", f->function);
	snprintf(n->file, sizeof(n->file), "%s", f->file);
	n->first_line = f->first_line;
	n->line = f->line;
	return 0;
}

struct run {
	struct opal_code_table *t;
	Opal__Wire__V1__CPythonLayout layout;
	unsigned minor;
	uint64_t next_id;
	size_t n;
};

static ProtobufCBinaryData bin(const struct py_code_record *r, int k)
{
	return (ProtobufCBinaryData){ r->len[k], r->blob[k] };
}

static void each(void *arg, const struct py_code_record *r)
{
	struct run *c = arg;
	Opal__Wire__V1__CodeObject msg = OPAL__WIRE__V1__CODE_OBJECT__INIT;
	struct named got;
	uint64_t id = ++c->next_id;

	msg.code_id = id;
	msg.runtime = OPAL__WIRE__V1__RUNTIME__RUNTIME_CPYTHON;
	msg.cpython = &c->layout;
	msg.code = bin(r, PY_B_CODE);
	msg.name = bin(r, PY_B_NAME);
	msg.qualname = bin(r, PY_B_QUALNAME);
	msg.filename = bin(r, PY_B_FILENAME);
	msg.line_table = bin(r, PY_B_LINETABLE);
	assert_int_equal(opal_code_table_put(c->t, 1, &msg), 0);
	assert_int_equal(opal_code_table_with(c->t, 1, id, UINT32_MAX, keep, &got), 0);
	assert_string_equal(got.function, r->qualname[0] ? r->qualname : r->name);
	assert_string_equal(got.file, r->filename);
	assert_int_equal(got.first_line, (uint32_t)r->firstlineno);
	assert_int_equal(got.line, (uint32_t)r->firstlineno);   /* no instruction yet */
	int fmt = opal_py_lines_format(3, c->minor);
	uint32_t units = r->units ? r->units : (uint32_t)(r->len[PY_B_CODE] / 2);
	for (uint32_t u = 0; u < units; u++) {
		int32_t want;
		if (opal_py_line_at((enum opal_py_lines_format)fmt, r->linetable, r->linetable_len,
				    true, r->firstlineno, u, &want) != 0 || want <= 0)
			want = r->firstlineno;
		assert_int_equal(opal_code_table_with(c->t, 1, id, u, keep, &got), 0);
		if (got.line != (uint32_t)want)
			fail_msg("%s unit %u: line %u, the table says %d", r->qualname, u, got.line,
				 want);
	}
	/* another connection has none of it */
	assert_int_equal(opal_code_table_with(c->t, 2, id, 0, keep, &got), -ENOENT);
	/* a copy cut inside the code object's struct is refused */
	msg.code.len = c->layout.firstlineno;
	assert_int_equal(opal_code_table_put(c->t, 1, &msg), -EINVAL);
	c->n++;
}

static void test_every_dump(void **state)
{
	(void)state;
	struct py_fixture_file files[PY_FIXTURE_MAX_FILES];
	size_t nf = py_fixture_list(py_fixture_dir("committed"), "code", files, PY_FIXTURE_MAX_FILES);
	struct opal_code_table_stats st;
	struct run c = { 0 };

	assert_true(nf >= 6);
	assert_non_null(c.t = opal_code_table_new());
	for (size_t i = 0; i < nf; i++) {
		struct opal_py_offsets o;
		assert_int_equal(opal_py_offsets_lookup(files[i].major, files[i].minor, &o), 0);
		opal_py_wire_layout(&o, &c.layout);
		c.minor = files[i].minor;
		size_t before = c.n;
		py_code_records(&files[i], each, &c);
		printf("%s: %zu code objects named through the code table\n", files[i].name,
		       c.n - before);
	}
	opal_code_table_stats(c.t, &st);
	assert_int_equal(st.added, c.n);
	assert_int_equal(st.invalid, c.n);
	assert_int_equal(st.unknown, c.n);
	assert_int_equal(st.entries, c.n);
	opal_code_table_drop_conn(c.t, 1);
	opal_code_table_stats(c.t, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	opal_code_table_free(c.t);
}

/* A runtime opal does not parse, or a version it has no format for. */
static void test_refused(void **state)
{
	(void)state;
	struct opal_code_table *t = opal_code_table_new();
	Opal__Wire__V1__CodeObject msg = OPAL__WIRE__V1__CODE_OBJECT__INIT;
	Opal__Wire__V1__CPythonLayout l = OPAL__WIRE__V1__CPYTHON_LAYOUT__INIT;
	struct opal_code_table_stats st;

	msg.code_id = 7;
	assert_int_equal(opal_code_table_put(t, 1, &msg), -EINVAL);   /* no runtime */
	msg.runtime = OPAL__WIRE__V1__RUNTIME__RUNTIME_CPYTHON;
	assert_int_equal(opal_code_table_put(t, 1, &msg), -EINVAL);   /* no layout */
	l.major = 3;
	l.minor = 7;
	msg.cpython = &l;
	assert_int_equal(opal_code_table_put(t, 1, &msg), -ENOTSUP);
	opal_code_table_stats(t, &st);
	assert_int_equal(st.invalid, 2);
	assert_int_equal(st.entries, 0);
	opal_code_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_dump),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
