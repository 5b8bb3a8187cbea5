/* _Py_DebugOffsets of CPython 3.13 (v3.13.0 Include/internal/pycore_runtime.h):
 * char cookie[8] then uint64_t members, read by index. */
#include "interp/python_debug_offsets.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Index of each uint64_t after the cookie, in declaration order. */
enum {
	D_VERSION = 0, D_FREE_THREADED,
	D_RT_SIZE, D_RT_FINALIZING, D_RT_INTERPRETERS_HEAD,
	D_IS_SIZE, D_IS_ID, D_IS_NEXT, D_IS_THREADS_HEAD, D_IS_GC, D_IS_IMPORTS_MODULES,
	D_IS_SYSDICT, D_IS_BUILTINS, D_IS_CEVAL_GIL, D_IS_GIL_RUNTIME_STATE,
	D_IS_GIL_ENABLED, D_IS_GIL_LOCKED, D_IS_GIL_HOLDER,
	D_TS_SIZE, D_TS_PREV, D_TS_NEXT, D_TS_INTERP, D_TS_CURRENT_FRAME, D_TS_THREAD_ID,
	D_TS_NATIVE_THREAD_ID, D_TS_DATASTACK_CHUNK, D_TS_STATUS,
	D_FR_SIZE, D_FR_PREVIOUS, D_FR_EXECUTABLE, D_FR_INSTR_PTR, D_FR_LOCALSPLUS, D_FR_OWNER,
	D_CO_SIZE, D_CO_FILENAME, D_CO_NAME, D_CO_QUALNAME, D_CO_LINETABLE, D_CO_FIRSTLINENO,
	D_CO_ARGCOUNT, D_CO_LOCALSPLUSNAMES, D_CO_LOCALSPLUSKINDS, D_CO_CODE_ADAPTIVE,
	D_OB_SIZE, D_OB_TYPE,
	D_TY_SIZE, D_TY_NAME, D_TY_REPR, D_TY_FLAGS,
	D_TU_SIZE, D_TU_ITEM, D_TU_OB_SIZE,
	D_LI_SIZE, D_LI_ITEM, D_LI_OB_SIZE,
	D_DI_SIZE, D_DI_KEYS, D_DI_VALUES,
	D_FL_SIZE, D_FL_FVAL,
	D_LO_SIZE, D_LO_TAG, D_LO_DIGIT,
	D_BY_SIZE, D_BY_OB_SIZE, D_BY_OB_SVAL,
	D_UN_SIZE, D_UN_STATE, D_UN_LENGTH, D_UN_ASCII_SIZE,
	D_GC_SIZE, D_GC_COLLECTING,
	D_COUNT
};

_Static_assert(8 + 8 * D_COUNT == OPAL_PY_DEBUG_OFFSETS_313_SIZE,
	       "_Py_DebugOffsets of 3.13 is a cookie and 72 uint64_t");

/* Caps on published sizes: far above any real build (3.13.0:
 * _PyRuntimeState 283320 bytes, PyInterpreterState about 110 KiB, the
 * others under 1 KiB), low enough that offsets fit uint32_t. */
#define MAX_BIG_STRUCT   (16u << 20)
#define MAX_SMALL_STRUCT (64u << 10)

static uint64_t get(const uint8_t *b, unsigned idx)
{
	const uint8_t *p = b + 8 + 8 * (size_t)idx;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int fail(char *why, size_t why_len, int rc, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* One member: its offset and width, to check it fits its struct and
 * overlaps no other member of the same struct. */
struct member {
	const char *name;
	uint64_t off;
	uint64_t width;
};

static bool check_struct(const char *sname, uint64_t size, uint64_t cap,
			 const struct member *m, size_t n, char *why, size_t why_len)
{
	if (size == 0 || size > cap) {
		fail(why, why_len, 0, "%s size %llu is implausible", sname,
		     (unsigned long long)size);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (m[i].off > size || m[i].width > size - m[i].off) {
			fail(why, why_len, 0, "%s.%s at %llu does not fit its %llu bytes", sname,
			     m[i].name, (unsigned long long)m[i].off, (unsigned long long)size);
			return false;
		}
		for (size_t j = 0; j < i; j++) {
			if (m[i].off < m[j].off + m[j].width && m[j].off < m[i].off + m[i].width) {
				fail(why, why_len, 0, "%s.%s overlaps %s.%s", sname, m[i].name,
				     sname, m[j].name);
				return false;
			}
		}
	}
	return true;
}

#define M(name, off, width) { name, off, width }
#define CHECK(sname, size, cap, ...)                                                      \
	do {                                                                              \
		const struct member ms_[] = { __VA_ARGS__ };                              \
		if (!check_struct(sname, size, cap, ms_, sizeof(ms_) / sizeof(ms_[0]),   \
				  why, why_len))                                          \
			return -EINVAL;                                                   \
	} while (0)

int opal_py_offsets_from_debug(const void *buf, size_t len, uint64_t runtime_size,
			       struct opal_py_offsets *out, uint32_t *version_hex,
			       char *why, size_t why_len)
{
	const uint8_t *b = buf;

	if (!buf || len < 16)
		return fail(why, why_len, -EINVAL, "%zu bytes: too short for _Py_DebugOffsets", len);
	if (memcmp(b, OPAL_PY_DEBUG_COOKIE, 8) != 0)
		return fail(why, why_len, -EINVAL, "no \"xdebugpy\" cookie");
	uint64_t version = get(b, D_VERSION);
	unsigned major = (unsigned)(version >> 24 & 0xff), minor = (unsigned)(version >> 16 & 0xff);
	unsigned level = (unsigned)(version >> 4 & 0xf);
	if (version >> 32 || major != 3)
		return fail(why, why_len, -EINVAL, "version 0x%llx is not CPython 3",
			    (unsigned long long)version);
	if (minor != 13)
		return fail(why, why_len, -ENOTSUP,
			    "_Py_DebugOffsets of 3.%u: only the 3.13 structure is known", minor);
	if (level == 0xa || level == 0xb)
		return fail(why, why_len, -ENOTSUP,
			    "3.13 %s build: its _Py_DebugOffsets may differ from 3.13.0's",
			    level == 0xa ? "alpha" : "beta");
	if (level != 0xc && level != 0xf)
		return fail(why, why_len, -EINVAL, "release level 0x%x is not one", level);
	if (len < OPAL_PY_DEBUG_OFFSETS_313_SIZE)
		return fail(why, why_len, -EINVAL, "%zu bytes: 3.13 _Py_DebugOffsets has %u", len,
			    OPAL_PY_DEBUG_OFFSETS_313_SIZE);
	uint64_t ft = get(b, D_FREE_THREADED);
	if (ft == 1)
		return fail(why, why_len, -ENOTSUP, "free-threaded build");
	if (ft != 0)
		return fail(why, why_len, -EINVAL, "free_threaded is %llu", (unsigned long long)ft);

	uint64_t rt_size = get(b, D_RT_SIZE);
	if (runtime_size && rt_size != runtime_size)
		return fail(why, why_len, -EINVAL,
			    "_PyRuntimeState size %llu differs from the symbol's %llu",
			    (unsigned long long)rt_size, (unsigned long long)runtime_size);
	uint64_t head = get(b, D_RT_INTERPRETERS_HEAD);
	/* interpreters.main is the pointer after interpreters.head. */
	CHECK("_PyRuntimeState", rt_size, MAX_BIG_STRUCT,
	      M("interpreters.head", head, 8), M("interpreters.main", head + 8, 8),
	      M("_finalizing", get(b, D_RT_FINALIZING), 8));

	CHECK("PyInterpreterState", get(b, D_IS_SIZE), MAX_BIG_STRUCT,
	      M("next", get(b, D_IS_NEXT), 8), M("id", get(b, D_IS_ID), 8),
	      M("threads.head", get(b, D_IS_THREADS_HEAD), 8));

	CHECK("PyThreadState", get(b, D_TS_SIZE), MAX_SMALL_STRUCT,
	      M("prev", get(b, D_TS_PREV), 8), M("next", get(b, D_TS_NEXT), 8),
	      M("interp", get(b, D_TS_INTERP), 8),
	      M("current_frame", get(b, D_TS_CURRENT_FRAME), 8),
	      M("thread_id", get(b, D_TS_THREAD_ID), 8),
	      M("native_thread_id", get(b, D_TS_NATIVE_THREAD_ID), 8));

	CHECK("_PyInterpreterFrame", get(b, D_FR_SIZE), MAX_SMALL_STRUCT,
	      M("previous", get(b, D_FR_PREVIOUS), 8),
	      M("f_executable", get(b, D_FR_EXECUTABLE), 8),
	      M("instr_ptr", get(b, D_FR_INSTR_PTR), 8), M("owner", get(b, D_FR_OWNER), 1),
	      M("localsplus", get(b, D_FR_LOCALSPLUS), 8));

	uint64_t ob_size = get(b, D_OB_SIZE), ob_type = get(b, D_OB_TYPE);
	/* A GIL build's PyObject: ob_refcnt then ob_type (Include/object.h). */
	if (ob_size != 16 || ob_type != 8)
		return fail(why, why_len, -EINVAL, "PyObject of %llu bytes, ob_type at %llu",
			    (unsigned long long)ob_size, (unsigned long long)ob_type);

	uint64_t adaptive = get(b, D_CO_CODE_ADAPTIVE);
	/* Every member read lies before the inline bytecode, after the
	 * PyVarObject header (ob_size at 16). */
	CHECK("PyCodeObject", get(b, D_CO_SIZE), MAX_SMALL_STRUCT,
	      M("PyVarObject", 0, 24),
	      M("co_filename", get(b, D_CO_FILENAME), 8), M("co_name", get(b, D_CO_NAME), 8),
	      M("co_qualname", get(b, D_CO_QUALNAME), 8),
	      M("co_linetable", get(b, D_CO_LINETABLE), 8),
	      M("co_firstlineno", get(b, D_CO_FIRSTLINENO), 4));
	uint64_t co_ends[] = { get(b, D_CO_FILENAME) + 8, get(b, D_CO_NAME) + 8,
			       get(b, D_CO_QUALNAME) + 8, get(b, D_CO_LINETABLE) + 8,
			       get(b, D_CO_FIRSTLINENO) + 4 };
	for (size_t i = 0; i < sizeof(co_ends) / sizeof(co_ends[0]); i++)
		if (co_ends[i] > adaptive)
			return fail(why, why_len, -EINVAL,
				    "PyCodeObject member past co_code_adaptive (%llu)",
				    (unsigned long long)adaptive);
	if (adaptive > get(b, D_CO_SIZE) || adaptive & 1)
		return fail(why, why_len, -EINVAL, "co_code_adaptive at %llu is implausible",
			    (unsigned long long)adaptive);

	uint64_t by_size = get(b, D_BY_SIZE), by_obsize = get(b, D_BY_OB_SIZE),
		 by_sval = get(b, D_BY_OB_SVAL);
	CHECK("PyBytesObject", by_size, MAX_SMALL_STRUCT, M("PyObject", 0, 16),
	      M("ob_size", by_obsize, 8), M("ob_sval", by_sval, 1));
	if (by_sval < by_obsize)
		return fail(why, why_len, -EINVAL, "ob_sval before ob_size");

	uint64_t un_size = get(b, D_UN_SIZE), un_ascii = get(b, D_UN_ASCII_SIZE),
		 un_state = get(b, D_UN_STATE), un_length = get(b, D_UN_LENGTH);
	/* PyUnicodeObject is PyCompactUnicodeObject (PyASCIIObject, utf8_length,
	 * utf8) plus its data pointer: 16 and 8 bytes more than PyASCIIObject. */
	if (un_ascii < 24 || un_ascii > MAX_SMALL_STRUCT || un_size != un_ascii + 24)
		return fail(why, why_len, -EINVAL,
			    "PyASCIIObject %llu bytes, PyUnicodeObject %llu: not 3.13's shape",
			    (unsigned long long)un_ascii, (unsigned long long)un_size);
	CHECK("PyASCIIObject", un_ascii, MAX_SMALL_STRUCT, M("PyObject", 0, 16),
	      M("length", un_length, 8), M("state", un_state, 4));

	struct opal_py_offsets o;
	if (opal_py_offsets_lookup(3, 13, &o) < 0)
		return fail(why, why_len, -ENOTSUP, "no 3.13 table");
	bool code_as_table = get(b, D_CO_FILENAME) == o.code.filename &&
			     get(b, D_CO_NAME) == o.code.name &&
			     get(b, D_CO_QUALNAME) == o.code.qualname &&
			     get(b, D_CO_LINETABLE) == o.code.linetable &&
			     get(b, D_CO_FIRSTLINENO) == o.code.firstlineno &&
			     adaptive == o.code.code_adaptive;

	o.from_debug_offsets = true;
	o.runtime.size = (uint32_t)rt_size;
	o.runtime.interpreters_head = (uint32_t)head;
	o.runtime.interpreters_main = (uint32_t)(head + 8);
	o.interp.next = (uint32_t)get(b, D_IS_NEXT);
	o.interp.id = (uint32_t)get(b, D_IS_ID);
	o.interp.threads_head = (uint32_t)get(b, D_IS_THREADS_HEAD);
	o.tstate.next = (uint32_t)get(b, D_TS_NEXT);
	o.tstate.interp = (uint32_t)get(b, D_TS_INTERP);
	o.tstate.thread_id = (uint32_t)get(b, D_TS_THREAD_ID);
	o.tstate.native_thread_id = (uint32_t)get(b, D_TS_NATIVE_THREAD_ID);
	o.tstate.current_frame = (uint32_t)get(b, D_TS_CURRENT_FRAME);
	o.frame.size = (uint32_t)get(b, D_FR_SIZE);
	o.frame.previous = (uint32_t)get(b, D_FR_PREVIOUS);
	o.frame.code = (uint32_t)get(b, D_FR_EXECUTABLE);
	o.frame.instr = (uint32_t)get(b, D_FR_INSTR_PTR);
	o.frame.owner = (uint32_t)get(b, D_FR_OWNER);
	o.code.copy_size = (uint32_t)adaptive;
	o.code.firstlineno = (uint32_t)get(b, D_CO_FIRSTLINENO);
	o.code.name = (uint32_t)get(b, D_CO_NAME);
	o.code.qualname = (uint32_t)get(b, D_CO_QUALNAME);
	o.code.filename = (uint32_t)get(b, D_CO_FILENAME);
	o.code.linetable = (uint32_t)get(b, D_CO_LINETABLE);
	o.code.code_adaptive = (uint32_t)adaptive;
	if (!code_as_table)
		o.code.firsttraceable = OPAL_PY_NONE;
	o.unicode.length = (uint32_t)un_length;
	o.unicode.state = (uint32_t)un_state;
	o.unicode.ascii_size = (uint32_t)un_ascii;
	o.unicode.compact_size = (uint32_t)(un_ascii + 16);
	o.bytes.ob_size = (uint32_t)by_obsize;
	o.bytes.ob_sval = (uint32_t)by_sval;
	o.object.ob_type = (uint32_t)ob_type;
	*out = o;
	if (version_hex)
		*version_hex = (uint32_t)version;
	return 0;
}
