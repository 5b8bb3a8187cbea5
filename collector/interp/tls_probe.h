/* Where a file's thread-local variable lives, from the ELF file alone
 * (libelf): the TLS symbol in .dynsym, the file's PT_TLS segment, and the
 * dynamic relocations through which code reaches the variable (their GOT
 * slots hold, once ld.so has resolved them, what locates it in a thread).
 * Used for OTEP 4947's otel_thread_ctx_v1 (docs/correlation.md). The file
 * is any user's binary: every count and size is bounded. x86-64 only. */
#ifndef OPAL_TLS_PROBE_H
#define OPAL_TLS_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPAL_TLS_MAX_SYMBOLS (4u << 20)   /* .dynsym entries read */
#define OPAL_TLS_MAX_RELOCS  (4u << 20)   /* dynamic relocations read */

/* How code reaches the variable: the first relocation found of each kind
 * (GOT slot addresses are ELF virtual addresses). */
struct opal_tls_var {
	uint64_t value;            /* st_value: offset in the module's TLS block */
	uint64_t size;             /* st_size */
	bool has_tls_segment;      /* PT_TLS present */
	uint64_t tls_vaddr, tls_memsz, tls_align;   /* PT_TLS */
	bool has_interp;           /* PT_INTERP: a main executable */
	uint64_t tlsdesc_got;      /* R_X86_64_TLSDESC slot pair, 0: none */
	uint64_t dtpmod_got;       /* R_X86_64_DTPMOD64 slot (general dynamic), 0: none */
	uint64_t dtpoff_got;       /* R_X86_64_DTPOFF64 slot, 0: none */
	uint64_t tpoff_got;        /* R_X86_64_TPOFF64 slot (initial exec), 0: none */
};

/* Looks `name` up as a defined STT_TLS symbol of the .dynsym of the ELF
 * file open on `fd` (borrowed; read with pread). Returns 0 with *out
 * filled, -ENOENT when the file does not define it, -ENOEXEC for a file
 * that is not 64-bit little-endian x86-64 ELF or is malformed, -E2BIG
 * past a bound. */
int opal_tls_probe(int fd, const char *name, struct opal_tls_var *out);

/* The offset of a main executable's TLS block below the thread pointer
 * (x86-64 TLS variant II, as glibc's _dl_determine_tlsoffset gives it to
 * the first module, and as the linker's local-exec relaxation assumes):
 * the variable is at thread pointer - offset + st_value. */
uint64_t opal_tls_exe_offset(const struct opal_tls_var *v);

#endif
