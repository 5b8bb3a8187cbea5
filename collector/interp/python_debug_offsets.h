/* Reads the _Py_DebugOffsets structure that CPython 3.13 places at the
 * start of _PyRuntime (CPython v3.13.0 Include/internal/pycore_runtime.h,
 * initialised in pycore_runtime_init.h): the interpreter's own account of
 * its struct layouts, so a build configured otherwise than the one opal's
 * table was checked against is still read right. The bytes come from the
 * process (or the file's .PyRuntime section, which holds the same static
 * initialiser); they are untrusted. */
#ifndef OPAL_PYTHON_DEBUG_OFFSETS_H
#define OPAL_PYTHON_DEBUG_OFFSETS_H

#include <stddef.h>
#include <stdint.h>
#include "python_layout.h"

#define OPAL_PY_DEBUG_COOKIE "xdebugpy"   /* 8 bytes, no NUL */

/* Bytes of the 3.13 _Py_DebugOffsets: 72 little-endian uint64_t after the
 * 8-byte cookie. Callers read at least this much. */
#define OPAL_PY_DEBUG_OFFSETS_313_SIZE 584u

/* Parses `len` bytes read from the start of _PyRuntime. `runtime_size` is
 * the _PyRuntime symbol's st_size (0 when unknown): when given, the
 * published sizeof(_PyRuntimeState) must equal it. The layout of the
 * structure itself is stable only within one minor version, so only 3.13
 * final and release-candidate builds with the GIL are read.
 *
 * Published members fill `out` (runtime interpreters head; interpreter
 * next, id, threads head; thread state next, interp, current_frame,
 * thread_id, native_thread_id; frame previous, executable, instr_ptr,
 * owner, size; code filename, name, qualname, linetable, firstlineno,
 * co_code_adaptive; PyObject ob_type; bytes ob_size, ob_sval; unicode
 * state, length, sizeof(PyASCIIObject)). What 3.13 does not publish comes
 * from the v3.13.0 headers: interpreters.main sits one pointer after
 * interpreters.head (struct pyinterpreters), PyCompactUnicodeObject is
 * PyASCIIObject plus utf8_length and utf8 (16 bytes), PyCodeObject is a
 * PyVarObject (ob_size at 16), the state bit field, the frame-owner
 * values; _co_firsttraceable is taken from the table only when every
 * published code-object offset equals the table's, else it is
 * OPAL_PY_NONE.
 *
 * Every offset is checked against the size published for its struct (a
 * member must fit inside it) and every size against a cap; members of one
 * struct must not overlap. Returns 0; -EINVAL when the bytes are not a
 * _Py_DebugOffsets (short, wrong cookie, version not 3.x) or hold an
 * implausible value; -ENOTSUP for a version or build whose structure opal
 * does not know (not 3.13, alpha or beta, free-threaded). On failure
 * `why` (why_len bytes, may be NULL) gets a one-line reason. */
int opal_py_offsets_from_debug(const void *buf, size_t len, uint64_t runtime_size,
			       struct opal_py_offsets *out, uint32_t *version_hex,
			       char *why, size_t why_len);

#endif
