/* CPython line tables: co_lnotab (3.8, 3.9), PEP 626 co_linetable (3.10),
 * location table (3.11-3.13). Each decoder walks the table once, from its
 * start, and stops at the entry covering the offset. */
#include "interp/python_lines.h"

#include <errno.h>

int opal_py_lines_format(unsigned major, unsigned minor)
{
	if (major != 3 || minor < 8 || minor > 13)
		return -ENOTSUP;
	if (minor <= 9)
		return OPAL_PY_LINES_LNOTAB;
	return minor == 10 ? OPAL_PY_LINES_LINETABLE : OPAL_PY_LINES_LOCATIONS;
}

/* Lines are int in CPython; an accumulated line outside this range is a
 * corrupt table. */
static int valid_line(int64_t line, int32_t *out)
{
	if (line < 0 || line > INT32_MAX)
		return -EINVAL;
	*out = (int32_t)line;
	return 0;
}

/* v3.9.18 Objects/codeobject.c PyCode_Addr2Line: add each pair's byte
 * delta, stop when the address passes the offset, else add its line
 * delta. */
static int lnotab(const uint8_t *t, size_t len, bool complete, int64_t line, uint64_t byte,
		  int32_t *out)
{
	uint64_t addr = 0;

	if (len % 2)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 2) {
		addr += t[i];
		if (addr > byte)
			return valid_line(line, out);
		line += (int8_t)t[i + 1];
		if (line < INT32_MIN || line > INT32_MAX)
			return -EINVAL;
	}
	if (!complete)
		return -ENOENT;
	return valid_line(line, out);
}

/* v3.10.13 Objects/codeobject.c advance(): each pair ends the previous
 * range and opens [end, end + delta) with line += ldelta, or no line for
 * ldelta -128 (the line itself then stays). */
static int linetable(const uint8_t *t, size_t len, int64_t line, uint64_t byte, int32_t *out)
{
	uint64_t end = 0;

	if (len % 2)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 2) {
		uint64_t start = end;
		end += t[i];
		int8_t ldelta = (int8_t)t[i + 1];
		bool no_line = ldelta == -128;
		if (!no_line) {
			line += ldelta;
			if (line < INT32_MIN || line > INT32_MAX)
				return -EINVAL;
		}
		if (byte >= start && byte < end)
			return no_line ? -ENOENT : valid_line(line, out);
	}
	return -ENOENT;
}

/* Objects/locations.md: unsigned, 6-bit chunks least significant first,
 * bit 6 set on all but the last; payload bytes never have bit 7 set.
 * CPython writes 32-bit values: more than 6 chunks is corrupt. */
static int varint(const uint8_t *t, size_t len, size_t *i, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift <= 30; shift += 6) {
		if (*i >= len || t[*i] & 0x80)
			return -EINVAL;
		uint8_t b = t[(*i)++];
		*v |= (uint64_t)(b & 0x3f) << shift;
		if (!(b & 0x40))
			return 0;
	}
	return -EINVAL;
}

static int svarint(const uint8_t *t, size_t len, size_t *i, int64_t *v)
{
	uint64_t u;
	int rc = varint(t, len, i, &u);
	if (rc < 0)
		return rc;
	*v = u & 1 ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
	return 0;
}

/* Payload bytes that carry no line (column bytes). */
static int skip(const uint8_t *t, size_t len, size_t *i, size_t n)
{
	for (size_t k = 0; k < n; k++, (*i)++)
		if (*i >= len || t[*i] & 0x80)
			return -EINVAL;
	return 0;
}

enum {
	LOC_ONE_LINE0 = 10,   /* 10-12: line += code - 10 */
	LOC_NO_COLUMNS = 13,
	LOC_LONG = 14,
	LOC_NONE = 15,
};

static int locations(const uint8_t *t, size_t len, int64_t line, uint64_t unit, int32_t *out)
{
	uint64_t start = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t first = t[i++];
		if (!(first & 0x80))
			return -EINVAL;
		unsigned code = first >> 3 & 15, n = (first & 7) + 1u;
		int64_t delta = 0;
		uint64_t ignored;
		int rc = 0;
		if (code == LOC_LONG) {
			rc = svarint(t, len, &i, &delta);
			for (int k = 0; rc == 0 && k < 3; k++)   /* end line, columns */
				rc = varint(t, len, &i, &ignored);
		} else if (code == LOC_NO_COLUMNS) {
			rc = svarint(t, len, &i, &delta);
		} else if (code >= LOC_ONE_LINE0 && code < LOC_NO_COLUMNS) {
			delta = code - LOC_ONE_LINE0;
			rc = skip(t, len, &i, 2);
		} else if (code < LOC_ONE_LINE0) {
			rc = skip(t, len, &i, 1);
		}
		if (rc < 0)
			return rc;
		line += delta;
		if (line < INT32_MIN || line > INT32_MAX)
			return -EINVAL;
		if (unit >= start && unit < start + n)
			return code == LOC_NONE ? -ENOENT : valid_line(line, out);
		start += n;
	}
	return -ENOENT;
}

int opal_py_line_at(enum opal_py_lines_format fmt, const uint8_t *table, size_t len,
		    bool complete, int32_t firstlineno, uint32_t unit, int32_t *line)
{
	if (!table && len)
		return -EINVAL;
	switch (fmt) {
	case OPAL_PY_LINES_LNOTAB:
		return lnotab(table, len, complete, firstlineno, (uint64_t)unit * 2, line);
	case OPAL_PY_LINES_LINETABLE:
		return linetable(table, len, firstlineno, (uint64_t)unit * 2, line);
	case OPAL_PY_LINES_LOCATIONS:
		return locations(table, len, firstlineno, unit, line);
	}
	return -EINVAL;
}
