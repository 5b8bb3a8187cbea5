/* Names, file, first line and line table of a CPython code object, parsed
 * from raw bytes the collector copied out of another process: the code
 * object's struct and the objects it points to (co_name, co_qualname,
 * co_filename, the line table). Every byte is untrusted; copies may have
 * been cut at a cap. Layouts: CPython v3.8.18-v3.13.0 Include/cpython/
 * code.h, unicodeobject.h (PyASCIIObject, PyCompactUnicodeObject),
 * bytesobject.h; the offsets come with the frames (collector's
 * opal_py_offsets). */
#ifndef OPAL_PYTHON_CODE_H
#define OPAL_PYTHON_CODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPAL_PY_CODE_NONE UINT16_MAX   /* member absent in this version */

/* Byte offsets the parser needs; all below 64 KiB in every version. */
struct opal_py_code_layout {
	uint8_t major, minor;
	uint16_t firstlineno;          /* int, in the code object */
	uint16_t name;                 /* PyObject *, in the code object */
	uint16_t qualname;             /* PyObject * (3.11+), else OPAL_PY_CODE_NONE */
	uint16_t filename;             /* PyObject * */
	uint16_t linetable;            /* PyObject *: co_lnotab, co_linetable */
	uint16_t ob_size;              /* Py_ssize_t code units (3.11+), else NONE */
	uint16_t unicode_length;       /* Py_ssize_t, in PyASCIIObject */
	uint16_t unicode_state;        /* uint32_t bit field */
	uint16_t unicode_ascii_size;   /* sizeof(PyASCIIObject): compact ASCII data */
	uint16_t unicode_compact_size; /* sizeof(PyCompactUnicodeObject): other data */
	uint8_t kind_shift, compact_shift, ascii_shift;   /* state bits */
	uint16_t bytes_ob_size;        /* Py_ssize_t, in PyBytesObject */
	uint16_t bytes_ob_sval;        /* first byte */
};

struct opal_py_blob {
	const uint8_t *data;
	size_t len;                    /* bytes copied (the object may be longer) */
};

/* The copies; qualname's is empty before 3.11. */
struct opal_py_code_raw {
	struct opal_py_blob code, name, qualname, filename, linetable;
};

#define OPAL_PY_NAME_MAX 1024      /* bytes of a name in UTF-8 with its NUL */
#define OPAL_PY_FILENAME_MAX 4096

struct opal_py_code_info {
	char name[OPAL_PY_NAME_MAX];           /* co_name, UTF-8 */
	char qualname[OPAL_PY_NAME_MAX];       /* co_qualname; co_name before 3.11 */
	char filename[OPAL_PY_FILENAME_MAX];   /* co_filename */
	bool name_cut, qualname_cut, filename_cut;   /* copy or buffer too short */
	int32_t firstlineno;
	const uint8_t *linetable;              /* into raw->linetable: the table bytes */
	size_t linetable_len;
	bool linetable_complete;               /* false: the copy ended before the table */
	uint32_t n_units;                      /* code units (3.11+); 0: unknown */
};

/* Parses `raw` with `layout`. Strings must be compact (ASCII: 1-byte
 * ASCII data after PyASCIIObject; else UCS1/UCS2/UCS4 after
 * PyCompactUnicodeObject), of kind 1, 2 or 4, and are converted to UTF-8;
 * surrogates become U+FFFD. A string longer than its copy or the output
 * buffer is cut at a character boundary and flagged. The line table's
 * bytes are those of its bytes object (ob_size of them, or as many as
 * copied). Returns 0, or -EINVAL when anything is malformed: a copy
 * shorter than its header, negative or impossible lengths, unknown kind,
 * a non-compact string, non-ASCII bytes in an ASCII string, a code point
 * above U+10FFFF, a missing NUL terminator where the copy holds it, a
 * member offset beyond the code copy; -ENOTSUP for a layout of another
 * version than 3.8-3.13. */
int opal_py_code_parse(const struct opal_py_code_layout *layout,
		       const struct opal_py_code_raw *raw, struct opal_py_code_info *out);

#endif
