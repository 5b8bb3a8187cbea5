/* Where CPython 3.8-3.13 (x86-64, default and Py_DEBUG builds, GIL) keeps
 * what a frame walker and a code-object copier read: byte offsets of struct
 * members and sizes, per minor version. Written from each version's own
 * headers (tags v3.8.18, v3.9.18, v3.10.13, v3.11.7, v3.12.1, v3.13.0:
 * Include/cpython/pystate.h, Include/internal/pycore_runtime.h,
 * pycore_interp.h, pycore_frame.h, Include/cpython/code.h, frameobject.h,
 * unicodeobject.h, bytesobject.h) and checked against the DWARF of those
 * builds (tests/unit/test_py_layout.c; docs/python.md lists them all).
 * 3.13 publishes the same facts in _Py_DebugOffsets at the start of
 * _PyRuntime: opal_py_offsets_from_debug() reads them from there. */
#ifndef OPAL_PYTHON_LAYOUT_H
#define OPAL_PYTHON_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A member the version does not have. */
#define OPAL_PY_NONE UINT32_MAX

/* Bytes of one bytecode code unit (_Py_CODEUNIT: opcode and argument). */
#define OPAL_PY_CODE_UNIT 2u

/* How the chain of Python frames of a thread is reached and ended. */
enum opal_py_frame_kind {
	/* 3.8-3.10: tstate->frame, PyFrameObject linked by f_back; each
	 * _PyEval_EvalFrameDefault call runs exactly one frame. */
	OPAL_PY_FRAMES_OBJECT = 1,
	/* 3.11: tstate->cframe->current_frame, _PyInterpreterFrame linked by
	 * previous; is_entry != 0 marks the last frame of one
	 * _PyEval_EvalFrameDefault call. */
	OPAL_PY_FRAMES_CFRAME_ENTRY = 2,
	/* 3.12: tstate->cframe->current_frame; a frame whose owner is
	 * FRAME_OWNED_BY_CSTACK is the shim that _PyEval_EvalFrameDefault
	 * pushes on entry: the frames above it belong to that call. */
	OPAL_PY_FRAMES_CFRAME_CSTACK = 3,
	/* 3.13: tstate->current_frame, otherwise as 3.12; f_executable may be
	 * a non-code object (None in the shim frame). */
	OPAL_PY_FRAMES_CURRENT_CSTACK = 4,
};

/* What the frame's instruction member holds (see opal_py_instr_unit). */
enum opal_py_instr_kind {
	OPAL_PY_INSTR_LASTI_BYTES = 1,   /* int f_lasti, byte offset (3.8, 3.9) */
	OPAL_PY_INSTR_LASTI_UNITS = 2,   /* int f_lasti, code-unit index (3.10) */
	OPAL_PY_INSTR_PREV_INSTR = 3,    /* _Py_CODEUNIT *prev_instr (3.11, 3.12) */
	OPAL_PY_INSTR_INSTR_PTR = 4,     /* _Py_CODEUNIT *instr_ptr (3.13) */
};

/* Byte offsets within each struct; OPAL_PY_NONE where absent. Pointers,
 * Py_ssize_t and unsigned long are 8 bytes; int members 4 bytes. */
struct opal_py_offsets {
	uint8_t major, minor;
	enum opal_py_frame_kind frames;
	enum opal_py_instr_kind instr;
	bool from_debug_offsets;     /* filled from the process's _Py_DebugOffsets */

	struct {                     /* _PyRuntimeState (the _PyRuntime symbol) */
		uint32_t size;           /* sizeof: the symbol's st_size in a matching build */
		uint32_t interpreters_head;   /* PyInterpreterState *, newest first */
		uint32_t interpreters_main;   /* PyInterpreterState *, the main one */
	} runtime;
	struct {                     /* PyInterpreterState (struct _is) */
		uint32_t next;           /* PyInterpreterState * */
		uint32_t id;             /* int64_t; 0 for the main interpreter */
		uint32_t threads_head;   /* PyThreadState *: tstate_head (3.8-3.10), threads.head */
	} interp;
	struct {                     /* PyThreadState (struct _ts) */
		uint32_t next;           /* PyThreadState * */
		uint32_t interp;         /* PyInterpreterState * */
		uint32_t thread_id;      /* unsigned long: pthread_self() of the thread */
		uint32_t native_thread_id;   /* unsigned long: kernel tid (3.11+; NONE before) */
		uint32_t frame;          /* PyFrameObject * (3.8-3.10) */
		uint32_t cframe;         /* _PyCFrame * (3.11, 3.12) */
		uint32_t current_frame;  /* _PyInterpreterFrame * (3.13) */
	} tstate;
	struct {                     /* _PyCFrame (3.11, 3.12) */
		uint32_t current_frame;  /* _PyInterpreterFrame * */
	} cframe;
	struct {                     /* PyFrameObject (3.8-3.10), _PyInterpreterFrame (3.11+) */
		uint32_t size;           /* sizeof, localsplus/f_localsplus of one slot included */
		uint32_t previous;       /* f_back / previous */
		uint32_t code;           /* f_code (PyCodeObject *) / f_executable (3.13) */
		uint32_t instr;          /* f_lasti (int) / prev_instr / instr_ptr (pointer) */
		uint32_t is_entry;       /* bool (3.11) */
		uint32_t owner;          /* char (3.11+) */
		uint8_t owner_cstack;    /* FRAME_OWNED_BY_CSTACK (3.12+); 0 when none */
		uint8_t owner_generator; /* FRAME_OWNED_BY_GENERATOR (3.11+) */
	} frame;
	struct {                     /* PyCodeObject */
		uint32_t copy_size;      /* bytes holding every member below: sizeof (3.8-3.10),
					  * offsetof(co_code_adaptive) (3.11+, = tp_basicsize) */
		uint32_t ob_size;        /* Py_ssize_t code units (3.11+, a PyVarObject) */
		uint32_t firstlineno;    /* int */
		uint32_t name;           /* PyUnicodeObject * */
		uint32_t qualname;       /* PyUnicodeObject * (3.11+) */
		uint32_t filename;       /* PyUnicodeObject * */
		uint32_t linetable;      /* PyBytesObject *: co_lnotab (3.8, 3.9), co_linetable */
		uint32_t code_adaptive;  /* first code unit, inline (3.11+) */
		uint32_t firsttraceable; /* int _co_firsttraceable, code units (3.11+) */
	} code;
	struct {                     /* PyASCIIObject, PyCompactUnicodeObject */
		uint32_t length;         /* Py_ssize_t, code points */
		uint32_t state;          /* 32-bit bit field, bits as below */
		uint32_t ascii_size;     /* sizeof(PyASCIIObject): data of compact ASCII */
		uint32_t compact_size;   /* sizeof(PyCompactUnicodeObject): other compact data */
		uint8_t kind_shift;      /* kind = (state >> kind_shift) & 7: 1, 2, 4 bytes */
		uint8_t compact_shift;   /* compact = (state >> compact_shift) & 1 */
		uint8_t ascii_shift;     /* ascii = (state >> ascii_shift) & 1 */
	} unicode;
	struct {                     /* PyBytesObject */
		uint32_t ob_size;        /* Py_ssize_t, bytes (ob_base.ob_size) */
		uint32_t ob_sval;        /* first byte; the bytes end with a NUL */
	} bytes;
	struct {                     /* PyObject */
		uint32_t ob_type;        /* PyTypeObject * */
	} object;
};

/* Offsets of CPython major.minor from opal's table. Returns 0, or -ENOTSUP
 * for a version opal has no table for (anything but 3.8-3.13). */
int opal_py_offsets_lookup(unsigned major, unsigned minor, struct opal_py_offsets *out);

/* As opal_py_offsets_lookup, for an interpreter whose _PyRuntime symbol is
 * `runtime_size` bytes (its st_size): a build whose _PyRuntimeState has
 * another size than the one the table was checked against was configured
 * differently (other options change the structs) and gets -ENOTSUP, not
 * guessed offsets. 3.13+ interpreters publish their layout: read it with
 * opal_py_offsets_from_debug instead (this still answers for 3.13 builds
 * of the checked size). */
int opal_py_offsets_for_build(unsigned major, unsigned minor, uint64_t runtime_size,
			      struct opal_py_offsets *out);

/* The code-unit index of "the instruction executing" in a frame, from the
 * value of its instruction member `instr` (f_lasti's int sign-extended to
 * 64 bits, or the pointer) and, for pointers, the code object's address
 * `code_addr`:
 *   f_lasti (3.8, 3.9): byte offset of the instruction executing; / 2.
 *   f_lasti (3.10): its code-unit index.
 *   prev_instr (3.11, 3.12): the code unit before the next one to run: the
 *     executing instruction when it runs, or (in a caller) the last inline
 *     CACHE unit of its CALL; (prev_instr - (code_addr + co_code_adaptive))
 *     / 2. Both belong to the same location-table entry, so the line is
 *     the same as for the instruction's first unit.
 *   instr_ptr (3.13): the instruction executing, or about to begin.
 * -1 means the frame has not run its first instruction (f_lasti -1;
 * prev_instr one unit before the code). Returns 0, or -EINVAL for a value
 * that cannot be one (odd byte offset, before -1, beyond 2^31 units). */
int opal_py_instr_unit(const struct opal_py_offsets *o, uint64_t code_addr, uint64_t instr,
		       int64_t *unit);

#endif
