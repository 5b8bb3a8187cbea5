/* Per-version CPython layouts (x86-64). Each entry is written from the
 * headers of the tag named above it; tests/unit/test_py_layout.c compares
 * every number with the DWARF of the builds on the machine. */
#include "interp/python_layout.h"

#include <errno.h>

#define N OPAL_PY_NONE

/* PyASCIIObject.state in 3.8-3.13: interned:2, kind:3, compact:1, ascii:1
 * (then ready:1 or statically_allocated:1), allocated from bit 0 on
 * x86-64 (System V psABI bit-field order). */
#define UNICODE_BITS .kind_shift = 2, .compact_shift = 5, .ascii_shift = 6

static const struct opal_py_offsets table[] = {
	/* v3.8.18: Include/cpython/pystate.h (struct _ts),
	 * Include/internal/pycore_pystate.h (struct _is, _PyRuntimeState),
	 * Include/frameobject.h, Include/code.h, Include/cpython/unicodeobject.h,
	 * Include/bytesobject.h. */
	{
		.major = 3, .minor = 8,
		.frames = OPAL_PY_FRAMES_OBJECT, .instr = OPAL_PY_INSTR_LASTI_BYTES,
		.runtime = { .size = 1464, .interpreters_head = 32, .interpreters_main = 40 },
		.interp = { .next = 0, .id = 16, .threads_head = 8 },
		.tstate = { .next = 8, .interp = 16, .thread_id = 176, .native_thread_id = N,
			    .frame = 24, .cframe = N, .current_frame = N },
		.cframe = { .current_frame = N },
		.frame = { .size = 368, .previous = 24, .code = 32, .instr = 104,
			   .is_entry = N, .owner = N },
		.code = { .copy_size = 176, .ob_size = N, .firstlineno = 40, .name = 112,
			  .qualname = N, .filename = 104, .linetable = 120,
			  .code_adaptive = N, .firsttraceable = N },
		.unicode = { .length = 16, .state = 32, .ascii_size = 48, .compact_size = 72,
			     UNICODE_BITS },
		.bytes = { .ob_size = 16, .ob_sval = 32 },
		.object = { .ob_type = 8 },
	},
	/* v3.9.18: Include/cpython/pystate.h, Include/internal/pycore_interp.h,
	 * pycore_runtime.h, Include/cpython/frameobject.h, Include/cpython/code.h. */
	{
		.major = 3, .minor = 9,
		.frames = OPAL_PY_FRAMES_OBJECT, .instr = OPAL_PY_INSTR_LASTI_BYTES,
		.runtime = { .size = 656, .interpreters_head = 32, .interpreters_main = 40 },
		.interp = { .next = 0, .id = 24, .threads_head = 8 },
		.tstate = { .next = 8, .interp = 16, .thread_id = 176, .native_thread_id = N,
			    .frame = 24, .cframe = N, .current_frame = N },
		.cframe = { .current_frame = N },
		.frame = { .size = 368, .previous = 24, .code = 32, .instr = 104,
			   .is_entry = N, .owner = N },
		.code = { .copy_size = 176, .ob_size = N, .firstlineno = 40, .name = 112,
			  .qualname = N, .filename = 104, .linetable = 120,
			  .code_adaptive = N, .firsttraceable = N },
		.unicode = { .length = 16, .state = 32, .ascii_size = 48, .compact_size = 72,
			     UNICODE_BITS },
		.bytes = { .ob_size = 16, .ob_sval = 32 },
		.object = { .ob_type = 8 },
	},
	/* v3.10.13: as 3.9; f_lasti counts code units (Include/cpython/frameobject.h),
	 * co_lnotab became co_linetable (Include/cpython/code.h). */
	{
		.major = 3, .minor = 10,
		.frames = OPAL_PY_FRAMES_OBJECT, .instr = OPAL_PY_INSTR_LASTI_UNITS,
		.runtime = { .size = 672, .interpreters_head = 32, .interpreters_main = 40 },
		.interp = { .next = 0, .id = 24, .threads_head = 8 },
		.tstate = { .next = 8, .interp = 16, .thread_id = 176, .native_thread_id = N,
			    .frame = 24, .cframe = N, .current_frame = N },
		.cframe = { .current_frame = N },
		.frame = { .size = 360, .previous = 24, .code = 32, .instr = 96,
			   .is_entry = N, .owner = N },
		.code = { .copy_size = 176, .ob_size = N, .firstlineno = 40, .name = 112,
			  .qualname = N, .filename = 104, .linetable = 120,
			  .code_adaptive = N, .firsttraceable = N },
		.unicode = { .length = 16, .state = 32, .ascii_size = 48, .compact_size = 72,
			     UNICODE_BITS },
		.bytes = { .ob_size = 16, .ob_sval = 32 },
		.object = { .ob_type = 8 },
	},
	/* v3.11.7: Include/cpython/pystate.h (struct _ts, _PyCFrame),
	 * Include/internal/pycore_interp.h, pycore_runtime.h, pycore_frame.h
	 * (_PyInterpreterFrame, enum _frameowner), Include/cpython/code.h. */
	{
		.major = 3, .minor = 11,
		.frames = OPAL_PY_FRAMES_CFRAME_ENTRY, .instr = OPAL_PY_INSTR_PREV_INSTR,
		.runtime = { .size = 166688, .interpreters_head = 40, .interpreters_main = 48 },
		.interp = { .next = 0, .id = 48, .threads_head = 16 },
		.tstate = { .next = 8, .interp = 16, .thread_id = 152, .native_thread_id = 160,
			    .frame = N, .cframe = 56, .current_frame = N },
		.cframe = { .current_frame = 8 },
		.frame = { .size = 80, .previous = 48, .code = 32, .instr = 56,
			   .is_entry = 68, .owner = 69, .owner_cstack = 0, .owner_generator = 1 },
		.code = { .copy_size = 184, .ob_size = 16, .firstlineno = 72, .name = 120,
			  .qualname = 128, .filename = 112, .linetable = 136,
			  .code_adaptive = 184, .firsttraceable = 168 },
		.unicode = { .length = 16, .state = 32, .ascii_size = 48, .compact_size = 72,
			     UNICODE_BITS },
		.bytes = { .ob_size = 16, .ob_sval = 32 },
		.object = { .ob_type = 8 },
	},
	/* v3.12.1: the same headers; PyASCIIObject lost wstr
	 * (Include/cpython/unicodeobject.h). */
	{
		.major = 3, .minor = 12,
		.frames = OPAL_PY_FRAMES_CFRAME_CSTACK, .instr = OPAL_PY_INSTR_PREV_INSTR,
		.runtime = { .size = 459944, .interpreters_head = 40, .interpreters_main = 48 },
		.interp = { .next = 0, .id = 8, .threads_head = 72 },
		.tstate = { .next = 8, .interp = 16, .thread_id = 136, .native_thread_id = 144,
			    .frame = N, .cframe = 56, .current_frame = N },
		.cframe = { .current_frame = 0 },
		.frame = { .size = 80, .previous = 8, .code = 0, .instr = 56,
			   .is_entry = N, .owner = 70, .owner_cstack = 3, .owner_generator = 1 },
		.code = { .copy_size = 192, .ob_size = 16, .firstlineno = 68, .name = 120,
			  .qualname = 128, .filename = 112, .linetable = 136,
			  .code_adaptive = 192, .firsttraceable = 176 },
		.unicode = { .length = 16, .state = 32, .ascii_size = 40, .compact_size = 56,
			     UNICODE_BITS },
		.bytes = { .ob_size = 16, .ob_sval = 32 },
		.object = { .ob_type = 8 },
	},
	/* v3.13.0: the same headers, pycore_runtime.h also holding
	 * _Py_DebugOffsets; _PyCFrame is gone (tstate->current_frame). */
	{
		.major = 3, .minor = 13,
		.frames = OPAL_PY_FRAMES_CURRENT_CSTACK, .instr = OPAL_PY_INSTR_INSTR_PTR,
		.runtime = { .size = 283320, .interpreters_head = 632, .interpreters_main = 640 },
		.interp = { .next = 7264, .id = 7272, .threads_head = 7344 },
		.tstate = { .next = 8, .interp = 16, .thread_id = 152, .native_thread_id = 160,
			    .frame = N, .cframe = N, .current_frame = 72 },
		.cframe = { .current_frame = N },
		.frame = { .size = 80, .previous = 8, .code = 0, .instr = 56,
			   .is_entry = N, .owner = 70, .owner_cstack = 3, .owner_generator = 1 },
		.code = { .copy_size = 200, .ob_size = 16, .firstlineno = 68, .name = 120,
			  .qualname = 128, .filename = 112, .linetable = 136,
			  .code_adaptive = 200, .firsttraceable = 184 },
		.unicode = { .length = 16, .state = 32, .ascii_size = 40, .compact_size = 56,
			     UNICODE_BITS },
		.bytes = { .ob_size = 16, .ob_sval = 32 },
		.object = { .ob_type = 8 },
	},
};

int opal_py_offsets_lookup(unsigned major, unsigned minor, struct opal_py_offsets *out)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (table[i].major == major && table[i].minor == minor) {
			*out = table[i];
			return 0;
		}
	}
	return -ENOTSUP;
}

int opal_py_offsets_for_build(unsigned major, unsigned minor, uint64_t runtime_size,
			      struct opal_py_offsets *out)
{
	struct opal_py_offsets o;
	int rc = opal_py_offsets_lookup(major, minor, &o);
	if (rc < 0)
		return rc;
	if (runtime_size != o.runtime.size)
		return -ENOTSUP;
	*out = o;
	return 0;
}

/* More code units than any code object holds (CPython caps code at
 * INT_MAX bytes). */
#define MAX_UNITS (INT64_C(1) << 31)

int opal_py_instr_unit(const struct opal_py_offsets *o, uint64_t code_addr, uint64_t instr,
		       int64_t *unit)
{
	int64_t u;

	switch (o->instr) {
	case OPAL_PY_INSTR_LASTI_BYTES:
	case OPAL_PY_INSTR_LASTI_UNITS: {
		int64_t lasti = (int64_t)instr;
		if (lasti == -1) {
			*unit = -1;
			return 0;
		}
		if (lasti < 0 || lasti > INT32_MAX)
			return -EINVAL;
		if (o->instr == OPAL_PY_INSTR_LASTI_BYTES && (lasti & 1))
			return -EINVAL;
		u = o->instr == OPAL_PY_INSTR_LASTI_BYTES ? lasti / 2 : lasti;
		break;
	}
	case OPAL_PY_INSTR_PREV_INSTR:
	case OPAL_PY_INSTR_INSTR_PTR: {
		if (o->code.code_adaptive == OPAL_PY_NONE)
			return -EINVAL;
		uint64_t first = code_addr + o->code.code_adaptive;
		/* Unsigned difference read as signed: a pointer before the
		 * code comes out negative. */
		int64_t diff = (int64_t)(instr - first);
		if (diff & 1)
			return -EINVAL;
		u = diff / 2;
		if (u < -1 || (u == -1 && o->instr == OPAL_PY_INSTR_INSTR_PTR))
			return -EINVAL;
		break;
	}
	default:
		return -EINVAL;
	}
	if (u >= MAX_UNITS)
		return -EINVAL;
	*unit = u;
	return 0;
}
