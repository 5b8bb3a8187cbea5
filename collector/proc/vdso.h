/* The vDSO as a file: its ELF image exists only in memory, and the kernel
 * maps the same image into every (64-bit) process, so the collector copies
 * its own [vdso] mapping into a memfd. That descriptor gets a file ID like
 * any mapped file, an unwind table, and goes to the symbolizer, so vDSO
 * frames unwind and symbolize like any other (docs/unwinding.md). */
#ifndef OPAL_COLLECTOR_VDSO_H
#define OPAL_COLLECTOR_VDSO_H

#include <stddef.h>
#include "proc/files.h"

/* Largest vDSO accepted, bytes (x86-64's is 8 KiB). */
#define OPAL_VDSO_MAX_SIZE (1u << 20)

/* Copies the collector's own vDSO (found in /proc/self/maps) into a
 * sealed memfd named "[vdso]" and registers it in `files` as a pinned file
 * (never closed or dropped). Returns 0 with *out
 * set, -ENOENT when the process has no vDSO, -E2BIG, -ENOEXEC when the
 * image is no ELF file, or -errno. */
int opal_vdso_register(struct opal_file_table *files, struct opal_file **out);

#endif
