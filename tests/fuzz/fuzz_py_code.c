/* libFuzzer target: the CPython code-object parser and line-table
 * decoders (symbolizer/interp/python_code.h, python_lines.h) on arbitrary
 * copies. Input: one byte choosing the version (3.8 + byte % 6), then five
 * blobs (code, name, qualname, filename, line table), each a 2-byte
 * little-endian length and its bytes (cut at the end of the input). The
 * parser must accept with results in range or refuse; every decoder
 * answer must be a line >= 0, no line or -EINVAL; nothing may crash,
 * leak or read outside the blobs.
 *
 * fuzz-sources: symbolizer/interp/python_code.c symbolizer/interp/python_lines.c
 *   collector/interp/python_layout.c (the offsets); see tests/fuzz/run_py_code.sh
 * Seeds: code objects of tests/fixtures/python/committed/code-*.txt */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/interp/python_layout.h"
#include "symbolizer/interp/python_code.h"
#include "symbolizer/interp/python_lines.h"

static uint16_t u16(uint32_t off)
{
	return off == OPAL_PY_NONE ? OPAL_PY_CODE_NONE : (uint16_t)off;
}

static void check_line(int rc, int32_t line)
{
	if (!(rc == 0 || rc == -ENOENT || rc == -EINVAL) || (rc == 0 && line < 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned minor = 8 + data[0] % 6;
	struct opal_py_offsets o;
	if (opal_py_offsets_lookup(3, minor, &o) != 0)
		abort();
	struct opal_py_code_layout l = {
		.major = 3, .minor = (uint8_t)minor,
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
	struct opal_py_blob b[5] = { { 0 } };
	size_t at = 1;
	for (int i = 0; i < 5 && at + 2 <= size; i++) {
		size_t n = (size_t)data[at] | (size_t)data[at + 1] << 8;
		at += 2;
		if (n > size - at)
			n = size - at;
		/* Each blob in its own allocation, so ASan sees any overread. */
		uint8_t *copy = malloc(n ? n : 1);
		if (!copy)
			abort();
		memcpy(copy, data + at, n);
		b[i] = (struct opal_py_blob){ copy, n };
		at += n;
	}
	struct opal_py_code_raw raw = { b[0], b[1], b[2], b[3], b[4] };
	static struct opal_py_code_info info;
	int rc = opal_py_code_parse(&l, &raw, &info);
	if (rc == 0) {
		if (info.firstlineno < 0 || strlen(info.name) >= sizeof(info.name) ||
		    strlen(info.filename) >= sizeof(info.filename) ||
		    (info.linetable_len && (info.linetable < b[4].data ||
					    info.linetable + info.linetable_len > b[4].data + b[4].len)))
			abort();
	} else if (rc != -EINVAL) {
		abort();
	}
	/* The decoders on the last blob as a table, with either flag. */
	int fmt = opal_py_lines_format(3, minor);
	int32_t first = b[0].len >= 4 ? (int32_t)(b[0].data[0] | b[0].data[1] << 8) : 1;
	for (uint32_t unit = 0; unit < 64; unit += 1 + unit / 8) {
		int32_t line = -1;
		int r = opal_py_line_at(fmt, b[4].data, b[4].len, unit & 1, first, unit, &line);
		check_line(r, line);
	}
	for (int i = 0; i < 5; i++)
		free((void *)b[i].data);
	return 0;
}
