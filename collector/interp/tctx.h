/* OTEP 4947 thread contexts, the collector's part: for a process whose
 * executable or a library defines otel_thread_ctx_v1 (in .dynsym), the
 * BPF walk parameters (bpf/thread_ctx.h) that find the variable from a
 * thread's thread pointer, for each TLS access model the OTEP names:
 *  - defined in the main executable (local-exec or initial-exec after
 *    relaxation, or any model: a main executable's TLS block is static):
 *    thread pointer - the block's offset (from PT_TLS) + st_value;
 *  - in a library, through the GOT ld.so resolved: a TLSDESC slot pair
 *    whose argument is a thread pointer offset (static TLS) or points to
 *    glibc's {module, offset} (dynamic TLS: the DTV), a general dynamic
 *    DTPMOD64/DTPOFF64 pair (the DTV), or an initial-exec TPOFF64 slot.
 * A TLSDESC slot not resolved yet (lazy) is tried again at the next read
 * of the process's maps. docs/correlation.md. */
#ifndef OPAL_COLLECTOR_TCTX_H
#define OPAL_COLLECTOR_TCTX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "bpf/thread_ctx.h"
#include "interp/tls_probe.h"

#define OPAL_TCTX_SYMBOL "otel_thread_ctx_v1"

/* The walk for variable `v` of a module loaded with bias `bias` (runtime
 * address = ELF vaddr + bias) in process `pid`; `exe` when the module is
 * the main executable. [lo, hi) is the module's mapped range (a TLSDESC
 * argument inside it is an unresolved lazy relocation). Returns 0 with
 * *w filled, -EAGAIN when ld.so has not resolved the slots yet, -ENOTSUP
 * when no access model opal knows reaches it, or -errno from the reads. */
int opal_tctx_walk_for(pid_t pid, const struct opal_tls_var *v, uint64_t bias, bool exe,
		       uint64_t lo, uint64_t hi, struct opal_tctx_walk *w);

#endif
