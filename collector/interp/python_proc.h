/* CPython as an opal runtime (interp.h): recognising an interpreter in an
 * ELF file, its walk parameters for BPF (bpf/interp_python.h) and the
 * bounded copy of its code objects. Versions 3.8 to 3.13 (x86-64): the
 * layouts come from python_layout.h, or from the interpreter's own
 * _Py_DebugOffsets (3.13+). docs/interpreters.md. */
#ifndef OPAL_COLLECTOR_PYTHON_PROC_H
#define OPAL_COLLECTOR_PYTHON_PROC_H

#include "interp/interp.h"
#include "interp/python_layout.h"
#include "opal/wire.pb-c.h"

extern const struct opal_runtime opal_runtime_cpython;

/* The offsets the symbolizer parses a code object's copy with (wire
 * CPythonLayout), from the collector's `o`; 65535 for a member `o` lacks. */
void opal_py_wire_layout(const struct opal_py_offsets *o, Opal__Wire__V1__CPythonLayout *l);

#endif
