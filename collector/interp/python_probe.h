/* Is an ELF file a CPython interpreter, which version, and where are the
 * symbols a Python frame walker needs? Read from the file alone with
 * libelf (.dynsym, .symtab, read-only data): an executable with the
 * interpreter linked in (Debian's stripped /usr/bin/python3.11, a C program
 * linked with libpython3.X.a) or a libpython3.X.so. The file is any user's
 * binary: every count and size is bounded. */
#ifndef OPAL_PYTHON_PROBE_H
#define OPAL_PYTHON_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what is read. */
#define OPAL_PY_PROBE_MAX_SYMBOLS  (4u << 20)    /* per symbol table */
#define OPAL_PY_PROBE_MAX_RODATA   (256u << 20)  /* read-only bytes scanned for PY_VERSION */
#define OPAL_PY_PROBE_MAX_SECTIONS 65535u

struct opal_py_symbol {
	bool found;
	uint64_t vaddr;   /* ELF virtual address (st_value) */
	uint64_t size;    /* st_size */
};

enum opal_py_version_source {
	OPAL_PY_VERSION_SYMBOL = 1,   /* the Py_Version constant (3.11+) */
	OPAL_PY_VERSION_STRING = 2,   /* a PY_VERSION string in read-only data */
};

struct opal_py_probe {
	uint8_t major, minor, micro;
	uint8_t level;       /* 0xA alpha, 0xB beta, 0xC candidate, 0xF final */
	uint8_t serial;
	uint32_t version_hex;   /* PY_VERSION_HEX of the above */
	enum opal_py_version_source version_source;
	bool has_symtab;        /* a .symtab was read (else .dynsym only) */
	struct opal_py_symbol runtime;     /* _PyRuntime: _PyRuntimeState (3.13: starts
					    * with _Py_DebugOffsets) */
	struct opal_py_symbol eval;        /* _PyEval_EvalFrameDefault */
	struct opal_py_symbol eval_cold;   /* _PyEval_EvalFrameDefault.cold (GCC's
					    * split-off part; .symtab only) */
	struct opal_py_symbol code_type;   /* PyCode_Type (PyTypeObject) */
	struct opal_py_symbol py_version;  /* Py_Version (3.11+) */
};

/* Probes the ELF file open on `fd` (read with pread through libelf; the
 * position is untouched; the caller keeps fd). A CPython interpreter
 * defines _PyRuntime and _PyEval_EvalFrameDefault (a program that only
 * links to libpython.so does not: probe the library). The version is the
 * value of Py_Version read from the file (3.11+), else the PY_VERSION
 * string "3.X.Y[a|b|rcN][+]" found NUL-terminated in read-only data (GCC
 * may share it as the tail of a longer string). When such strings name
 * several minor versions (the minor ones are at most 3.10 without
 * Py_Version), the one whose table size of _PyRuntimeState equals the
 * symbol's st_size is taken, if exactly one does.
 *
 * Returns 0 for an interpreter whose version is read; -ENOENT when the
 * file is ELF but not a CPython interpreter; -ENODATA for an interpreter
 * whose version cannot be read or is contradictory; -ENOEXEC for a file
 * that is not 64-bit little-endian x86-64 ELF or is malformed; -E2BIG
 * when a bound is passed; -errno. `out` is filled as far as known, also on
 * -ENODATA. Whether opal has a layout for the version is
 * opal_py_offsets_for_build's answer, not this one. `why` (why_len bytes,
 * may be NULL) gets a one-line reason on failure. */
int opal_py_probe_elf(int fd, struct opal_py_probe *out, char *why, size_t why_len);

/* Reads `len` bytes at ELF virtual address `vaddr` of the file open on
 * `fd` from the allocated, file-backed section holding them (e.g. a 3.13
 * _Py_DebugOffsets from .PyRuntime, whose initial value the file holds).
 * Returns 0, -ENOENT when no such section holds all of them (.bss, beyond
 * the file), -ENOEXEC for a non-ELF file, or -errno. */
int opal_py_read_vaddr(int fd, uint64_t vaddr, void *buf, size_t len);

#endif
