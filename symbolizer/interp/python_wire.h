/* A CPython code object as it arrives from a collector (wire CodeObject,
 * proto/opal/wire.proto) parsed into what names its frames: the layer
 * between the wire and the parsers (python_code.h, python_lines.h). */
#ifndef OPAL_SYMBOLIZER_PYTHON_WIRE_H
#define OPAL_SYMBOLIZER_PYTHON_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "interp/python_lines.h"
#include "opal/wire.pb-c.h"

/* A parsed code object; owns its strings and line table copy. */
struct opal_py_code {
	char *qualname;                /* co_qualname (3.11+), co_name before */
	char *filename;
	uint32_t first_line;           /* co_firstlineno, 0 when unknown */
	enum opal_py_lines_format fmt;
	uint8_t *linetable;
	size_t linetable_len;
	bool linetable_complete;
};

/* Parses `msg` (runtime CPYTHON, with its layout) into *out. Returns 0,
 * -EINVAL (malformed: counted by the caller), -ENOTSUP (a version opal
 * does not parse) or -ENOMEM. */
int opal_py_code_from_wire(const Opal__Wire__V1__CodeObject *msg, struct opal_py_code *out);

void opal_py_code_free(struct opal_py_code *c);

/* Heap bytes `c` owns (the caller's bound). */
size_t opal_py_code_bytes(const struct opal_py_code *c);

/* The line executing at code unit `unit` (opal_py_line_at), or the first
 * line when the table says none or is malformed there. */
uint32_t opal_py_code_line(const struct opal_py_code *c, uint32_t unit);

#endif
