/* Line of a CPython code object at an instruction, from the code object's
 * line table bytes (untrusted: they come from another process's memory).
 * Three formats:
 *   3.8, 3.9   co_lnotab (Objects/lnotab_notes.txt of v3.9.18): byte pairs
 *              (bytecode byte delta, signed line delta), from offset 0 and
 *              co_firstlineno; an offset's line is the one reached before the
 *              first pair whose address passes it.
 *   3.10       co_linetable (PEP 626; Objects/lnotab_notes.txt of v3.10.13):
 *              byte pairs (range length in bytes, signed line delta, -128 =
 *              no line), each pair one address range.
 *   3.11-3.13  location table (Objects/locations.md of v3.11.7): entries
 *              of a first byte 1CCCCLLL (code C, length L+1 code units) and
 *              varint/signed varint payloads; code 15 no location, 14 long
 *              form, 13 no columns, 10-12 one line (delta C-10), 0-9 short
 *              form (same line).
 * Offsets are in code units (2-byte _Py_CODEUNIT), for every version. */
#ifndef OPAL_PYTHON_LINES_H
#define OPAL_PYTHON_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum opal_py_lines_format {
	OPAL_PY_LINES_LNOTAB = 1,      /* 3.8, 3.9 co_lnotab */
	OPAL_PY_LINES_LINETABLE = 2,   /* 3.10 co_linetable */
	OPAL_PY_LINES_LOCATIONS = 3,   /* 3.11-3.13 co_linetable */
};

/* The line-table format of CPython major.minor; -ENOTSUP outside 3.8-3.13. */
int opal_py_lines_format(unsigned major, unsigned minor);

/* The line executing at code unit `unit` of a code object whose line
 * table is `table` (len bytes) and whose co_firstlineno is `firstlineno`.
 * `complete` is false when the table was cut short by a copy cap: for
 * co_lnotab an offset past the bytes held then has no known line (in the
 * other formats running out of entries already means no line).
 * Returns 0 with *line set (>= 0); -ENOENT when the code unit has no line
 * (a no-location entry, past the table); -EINVAL for a malformed table
 * (truncated entry, an entry not starting with its marker bit, a line
 * leaving 0..INT32_MAX, unknown format). Time is linear in len; nothing
 * is allocated. */
int opal_py_line_at(enum opal_py_lines_format fmt, const uint8_t *table, size_t len,
		    bool complete, int32_t firstlineno, uint32_t unit, int32_t *line);

#endif
