/* Unit tests of symbolizer/interp/python_code.c on code objects copied by
 * tests/fixtures/python/gen_code.py out of live interpreters (committed
 * dumps of every version 3.8-3.13, and those of every CPython on this
 * machine), with offsets from collector/interp/python_layout.c: the
 * parsed names, file, first line, line table and length must be Python's
 * own, and the pointers at the table's offsets must be the objects'
 * addresses. Cut and corrupted copies must be flagged or refused.
 * Fixtures: $OPAL_FIXTURES/python (tests/fixtures/python/build.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "py_code_records.h"
#include "py_fixture.h"
#include "collector/interp/python_layout.h"
#include "symbolizer/interp/python_code.h"

static uint16_t u16(uint32_t off)
{
	return off == OPAL_PY_NONE ? OPAL_PY_CODE_NONE : (uint16_t)off;
}

/* What the collector would send for a version. */
static struct opal_py_code_layout layout_of(unsigned major, unsigned minor)
{
	struct opal_py_offsets o;
	if (opal_py_offsets_lookup(major, minor, &o) < 0)
		fail_msg("no layout for %u.%u", major, minor);
	return (struct opal_py_code_layout){
		.major = o.major, .minor = o.minor,
		.firstlineno = u16(o.code.firstlineno), .name = u16(o.code.name),
		.qualname = u16(o.code.qualname), .filename = u16(o.code.filename),
		.linetable = u16(o.code.linetable), .ob_size = u16(o.code.ob_size),
		.unicode_length = u16(o.unicode.length), .unicode_state = u16(o.unicode.state),
		.unicode_ascii_size = u16(o.unicode.ascii_size),
		.unicode_compact_size = u16(o.unicode.compact_size),
		.kind_shift = o.unicode.kind_shift, .compact_shift = o.unicode.compact_shift,
		.ascii_shift = o.unicode.ascii_shift,
		.bytes_ob_size = u16(o.bytes.ob_size), .bytes_ob_sval = u16(o.bytes.ob_sval),
	};
}

static struct opal_py_code_raw raw_of(const struct py_code_record *r)
{
	return (struct opal_py_code_raw){
		.code = { r->blob[PY_B_CODE], r->len[PY_B_CODE] },
		.name = { r->blob[PY_B_NAME], r->len[PY_B_NAME] },
		.qualname = { r->blob[PY_B_QUALNAME], r->len[PY_B_QUALNAME] },
		.filename = { r->blob[PY_B_FILENAME], r->len[PY_B_FILENAME] },
		.linetable = { r->blob[PY_B_LINETABLE], r->len[PY_B_LINETABLE] },
	};
}

static uint64_t ptr_at(const struct py_code_record *r, uint16_t off)
{
	uint64_t v = 0;
	assert_true(off + 8u <= r->len[PY_B_CODE]);
	for (int i = 7; i >= 0; i--)
		v = v << 8 | r->blob[PY_B_CODE][off + i];
	return v;
}

/* The parser on one record, and on cut copies of its strings. */
static void check_record(const char *file, const struct opal_py_code_layout *l,
			 const struct py_code_record *r)
{
	struct opal_py_code_raw raw = raw_of(r);
	struct opal_py_code_info info;
	int rc = opal_py_code_parse(l, &raw, &info);
	if (rc != 0)
		fail_msg("%s %s: parse %d", file, r->qualname, rc);
	if (strcmp(info.name, r->name) || strcmp(info.qualname, r->qualname) ||
	    strcmp(info.filename, r->filename))
		fail_msg("%s: parsed %s / %s / %s, Python says %s / %s / %s", file, info.name,
			 info.qualname, info.filename, r->name, r->qualname, r->filename);
	assert_false(info.name_cut || info.qualname_cut || info.filename_cut);
	assert_int_equal(info.firstlineno, r->firstlineno);
	assert_int_equal(info.n_units, r->units);
	assert_true(info.linetable_complete);
	assert_int_equal(info.linetable_len, r->linetable_len);
	assert_memory_equal(info.linetable, r->linetable, r->linetable_len);

	/* The table's pointer offsets hold the addresses of those objects. */
	assert_int_equal(ptr_at(r, l->name), r->id[PY_B_NAME]);
	assert_int_equal(ptr_at(r, l->filename), r->id[PY_B_FILENAME]);
	assert_int_equal(ptr_at(r, l->linetable), r->id[PY_B_LINETABLE]);
	if (l->qualname != OPAL_PY_CODE_NONE)
		assert_int_equal(ptr_at(r, l->qualname), r->id[PY_B_QUALNAME]);

	/* Cut copies: a header short is refused; past it the string is a
	 * prefix, at a character boundary, flagged. */
	size_t full = r->len[PY_B_FILENAME];
	for (size_t cut = 0; cut < full; cut++) {
		struct opal_py_code_raw c = raw;
		c.filename.len = cut;
		rc = opal_py_code_parse(l, &c, &info);
		if (cut < l->unicode_ascii_size) {
			assert_int_equal(rc, -EINVAL);
			continue;
		}
		if (rc == -EINVAL)
			continue;   /* the non-ASCII header is longer than the cut */
		assert_int_equal(rc, 0);
		size_t n = strlen(info.filename);
		assert_memory_equal(info.filename, r->filename, n);
		assert_true(r->filename[n] == '\0' || ((uint8_t)r->filename[n] & 0xc0) != 0x80);
		/* The NUL character is the last one: only cuts before it flag. */
		assert_true(info.filename_cut == (n < strlen(r->filename)));
	}
	/* A line table cut short is flagged incomplete. */
	if (r->linetable_len > 0) {
		struct opal_py_code_raw c = raw;
		c.linetable.len = l->bytes_ob_sval + r->linetable_len - 1;
		assert_int_equal(opal_py_code_parse(l, &c, &info), 0);
		assert_false(info.linetable_complete);
		assert_int_equal(info.linetable_len, r->linetable_len - 1);
	}
	/* A code copy ending before firstlineno is refused. */
	struct opal_py_code_raw c = raw;
	c.code.len = l->firstlineno + 3u;
	assert_int_equal(opal_py_code_parse(l, &c, &info), -EINVAL);
}

struct check_ctx {
	const struct py_fixture_file *f;
	struct opal_py_code_layout l;
	unsigned *non_ascii;
};

static void check_one(void *arg, const struct py_code_record *r)
{
	struct check_ctx *c = arg;

	check_record(c->f->name, &c->l, r);
	for (const char *p = r->filename; *p; p++)
		if ((uint8_t)*p >= 0x80) {
			(*c->non_ascii)++;
			break;
		}
}

/* Checks each record of a gen_code.py dump; returns the count. */
static size_t check_file(const struct py_fixture_file *f, unsigned *non_ascii)
{
	struct check_ctx c = { f, layout_of(f->major, f->minor), non_ascii };

	return py_code_records(f, check_one, &c);
}

static void run_dir(const char *sub, bool need_every_minor)
{
	struct py_fixture_file files[PY_FIXTURE_MAX_FILES];
	size_t n = py_fixture_list(py_fixture_dir(sub), "code", files, PY_FIXTURE_MAX_FILES);
	if (n == 0)
		fail_msg("no code-object dumps in %s (fresh: no CPython 3.8-3.13 found; Debian's "
			 "python3.11 at least: scripts/install-deps.sh)", py_fixture_dir(sub));
	bool seen[14] = { false };
	for (size_t i = 0; i < n; i++) {
		unsigned non_ascii = 0;
		size_t k = check_file(&files[i], &non_ascii);
		printf("%s %s: %zu code objects parsed as Python says (%u with a non-ASCII file name)\n",
		       sub, files[i].name, k, non_ascii);
		if (non_ascii < 3)
			fail_msg("%s: Latin-1, BMP and astral file names expected", files[i].name);
		if (files[i].minor < 14)
			seen[files[i].minor] = true;
	}
	for (unsigned m = 8; need_every_minor && m <= 13; m++)
		if (!seen[m])
			fail_msg("no committed code-object dump of 3.%u", m);
}

static void test_committed_every_version(void **state)
{
	run_dir("committed", true);
}

static void test_this_machines_interpreters(void **state)
{
	run_dir("fresh", false);
}

/* Hand-made objects in the 3.12 layout. */
struct made {
	uint8_t code[256], name[4200], qual[64], file[64], table[64];
};

static void make_str(uint8_t *b, unsigned kind, bool ascii, const uint32_t *cps, size_t n,
		     const struct opal_py_code_layout *l, size_t *len)
{
	size_t data = ascii ? l->unicode_ascii_size : l->unicode_compact_size;
	memset(b, 0, data + (n + 1) * kind);
	for (int i = 0; i < 8; i++)
		b[l->unicode_length + i] = (uint8_t)((uint64_t)n >> (8 * i));
	uint32_t state = kind << l->kind_shift | 1u << l->compact_shift |
			 (ascii ? 1u << l->ascii_shift : 0);
	memcpy(b + l->unicode_state, &state, 4);
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < kind; k++)
			b[data + i * kind + k] = (uint8_t)(cps[i] >> (8 * k));
	*len = data + (n + 1) * kind;
}

static int parse_made(const struct opal_py_code_layout *l, struct made *m, size_t name_len,
		      struct opal_py_code_info *info)
{
	static const uint32_t q[] = { 'q' }, f[] = { 'f' };
	size_t ql, fl;
	make_str(m->qual, 1, true, q, 1, l, &ql);
	make_str(m->file, 1, true, f, 1, l, &fl);
	memset(m->table, 0, sizeof(m->table));
	m->table[l->bytes_ob_size] = 2;
	m->table[l->bytes_ob_sval] = 0x80;
	m->table[l->bytes_ob_sval + 1] = 0x12;
	memset(m->code, 0, sizeof(m->code));
	m->code[l->firstlineno] = 7;
	m->code[l->ob_size] = 1;
	struct opal_py_code_raw raw = {
		.code = { m->code, sizeof(m->code) }, .name = { m->name, name_len },
		.qualname = { m->qual, ql }, .filename = { m->file, fl },
		.linetable = { m->table, l->bytes_ob_sval + 3u },
	};
	return opal_py_code_parse(l, &raw, info);
}

static void test_string_kinds_and_corruption(void **state)
{
	struct opal_py_code_layout l = layout_of(3, 12);
	static struct made m;
	static struct opal_py_code_info info;
	size_t len;

	const uint32_t ucs2[] = { 0x51fd, 0xdc80, 'x' };   /* lone surrogate -> U+FFFD */
	make_str(m.name, 2, false, ucs2, 3, &l, &len);
	assert_int_equal(parse_made(&l, &m, len, &info), 0);
	assert_string_equal(info.name, "\xe5\x87\xbd\xef\xbf\xbdx");
	assert_int_equal(info.firstlineno, 7);
	assert_int_equal(info.n_units, 1);
	assert_int_equal(info.linetable_len, 2);

	const uint32_t ucs4[] = { 0x10000, 0xe9 };
	make_str(m.name, 4, false, ucs4, 2, &l, &len);
	assert_int_equal(parse_made(&l, &m, len, &info), 0);
	assert_string_equal(info.name, "\xf0\x90\x80\x80\xc3\xa9");

	/* A name longer than the output buffer is cut at a character. */
	static uint32_t many[2000];
	for (size_t i = 0; i < 2000; i++)
		many[i] = 0xe9;
	make_str(m.name, 1, false, many, 2000, &l, &len);
	assert_int_equal(parse_made(&l, &m, len, &info), 0);
	assert_true(info.name_cut);
	assert_int_equal(strlen(info.name), OPAL_PY_NAME_MAX - 2);   /* 2-byte characters */

	const uint32_t bad[] = { 0x110000 };
	make_str(m.name, 4, false, bad, 1, &l, &len);
	assert_int_equal(parse_made(&l, &m, len, &info), -EINVAL);

	const uint32_t hi[] = { 0xe9 };
	make_str(m.name, 1, true, hi, 1, &l, &len);   /* ASCII flag, byte >= 0x80 */
	assert_int_equal(parse_made(&l, &m, len, &info), -EINVAL);

	const uint32_t ok[] = { 'o', 'k' };
	make_str(m.name, 1, true, ok, 2, &l, &len);
	assert_int_equal(parse_made(&l, &m, len, &info), 0);
	assert_string_equal(info.name, "ok");
	m.name[l.unicode_ascii_size + 2] = 'x';   /* no NUL after the data */
	assert_int_equal(parse_made(&l, &m, len, &info), -EINVAL);

	make_str(m.name, 1, true, ok, 2, &l, &len);
	uint32_t st;
	memcpy(&st, m.name + l.unicode_state, 4);
	uint32_t kind3 = (st & ~(7u << l.kind_shift)) | 3u << l.kind_shift;
	memcpy(m.name + l.unicode_state, &kind3, 4);
	assert_int_equal(parse_made(&l, &m, len, &info), -EINVAL);
	uint32_t legacy = st & ~(1u << l.compact_shift);
	memcpy(m.name + l.unicode_state, &legacy, 4);
	assert_int_equal(parse_made(&l, &m, len, &info), -EINVAL);
	memcpy(m.name + l.unicode_state, &st, 4);
	m.name[l.unicode_length + 7] = 0x80;   /* negative length */
	assert_int_equal(parse_made(&l, &m, len, &info), -EINVAL);
	assert_string_equal(info.name, "");   /* nothing left behind on failure */

	/* Line table: negative size, no NUL after its bytes; code object of
	 * zero code units; an empty file-name copy. */
	make_str(m.name, 1, true, ok, 2, &l, &len);
	size_t ql, fl;
	make_str(m.qual, 1, true, ok, 2, &l, &ql);
	make_str(m.file, 1, true, ok, 2, &l, &fl);
	struct opal_py_code_raw raw = {
		.code = { m.code, sizeof(m.code) }, .name = { m.name, len },
		.qualname = { m.qual, ql }, .filename = { m.file, fl },
		.linetable = { m.table, l.bytes_ob_sval + 3u },
	};
	assert_int_equal(opal_py_code_parse(&l, &raw, &info), 0);
	m.table[l.bytes_ob_size + 7] = 0xff;
	assert_int_equal(opal_py_code_parse(&l, &raw, &info), -EINVAL);
	m.table[l.bytes_ob_size + 7] = 0;
	m.table[l.bytes_ob_sval + 2] = 1;
	assert_int_equal(opal_py_code_parse(&l, &raw, &info), -EINVAL);
	m.table[l.bytes_ob_sval + 2] = 0;
	m.code[l.ob_size] = 0;
	assert_int_equal(opal_py_code_parse(&l, &raw, &info), -EINVAL);
	m.code[l.ob_size] = 1;
	raw.filename.len = 0;
	assert_int_equal(opal_py_code_parse(&l, &raw, &info), -EINVAL);
	raw.filename.len = fl;
	assert_int_equal(opal_py_code_parse(&l, &raw, &info), 0);

	struct opal_py_code_layout other = l;
	other.minor = 7;
	assert_int_equal(opal_py_code_parse(&other, &raw, &info), -ENOTSUP);
	other = l;
	other.qualname = OPAL_PY_CODE_NONE;   /* 3.12 has co_qualname */
	assert_int_equal(opal_py_code_parse(&other, &raw, &info), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_committed_every_version),
		cmocka_unit_test(test_this_machines_interpreters),
		cmocka_unit_test(test_string_kinds_and_corruption),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
