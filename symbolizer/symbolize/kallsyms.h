/* Kernel symbol table from /proc/kallsyms text ("ffffffff81000000 T _stext"
 * lines, module symbols followed by "\t[module]"; see proc(5) and the
 * kernel's kallsyms). kallsyms gives no sizes, so a function is taken to
 * end where the next symbol of any kind of the same module begins; the
 * last symbol of a module before another module's symbols (or the end of
 * the table) covers only its first byte, so that an address past a
 * module's end, or past _etext, is never named after the last function. */
#ifndef OPAL_KALLSYMS_H
#define OPAL_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>
#include "symbolize/symbolize.h"

#define OPAL_KALLSYMS_MAX_BYTES   (256u << 20)  /* larger input: -EFBIG */
#define OPAL_KALLSYMS_MAX_SYMBOLS (8u << 20)    /* more lines: -E2BIG */
#define OPAL_KALLSYMS_MAX_LINE    1024          /* longer lines are skipped */
#define OPAL_KALLSYMS_MAX_MODULES 65535         /* more modules: -E2BIG */

struct opal_kallsyms;

/* Reads the whole descriptor (from offset 0 when seekable; the caller
 * keeps and closes `fd`). Keeps text symbols (types t, T, w, W) as
 * names; every symbol (and the _etext-style section markers, which are
 * never used as names) bounds the one before it. Returns 0 and *out,
 * -EPERM when every address reads as zero (kptr_restrict, no
 * CAP_SYSLOG), -ENODATA when no symbol was found, -EINVAL when `fd` is
 * not a regular file (a pipe could block forever), -EFBIG/-E2BIG over the
 * bounds above, -ENOMEM, or -errno from read. */
int opal_kallsyms_load(int fd, struct opal_kallsyms **out);

void opal_kallsyms_free(struct opal_kallsyms *k);

/* Number of text symbols kept. */
size_t opal_kallsyms_count(const struct opal_kallsyms *k);

/* Fills `out` (zeroed first) for kernel address `addr` (exact: no -1
 * applied here): one frame with the (demangled, for Rust) function name
 * and out->module set to the module name, "" for vmlinux. n = 0 when no
 * text symbol covers the address. Returns 0 or -ENOMEM. */
int opal_kallsyms_lookup(const struct opal_kallsyms *k, uint64_t addr,
			 struct opal_sym_result *out);

#endif
