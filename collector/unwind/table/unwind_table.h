/* Per-file unwind tables: the CFI of an ELF file (.eh_frame, and the
 * file's own .debug_frame, or that of its separate debug file, where
 * .eh_frame has no FDE for a range) evaluated
 * with libdw into the compact, sorted rules of bpf/unwind_rule.h, which the
 * BPF unwinder searches; in a Go binary, the Go functions' rules come
 * from .gopclntab instead (unwind_go.h), .eh_frame keeping the C code of
 * a cgo binary and .debug_frame used only when the table is unreadable. Representation and limits: docs/unwinding.md.
 * FDEs outside executable PT_LOADs, FDEs that overlap another FDE of
 * their section (libdw could use either) and FDEs whose CFI program is
 * beyond unwind_prog.h's bounds are left out: their ranges read as GAP
 * unless the other section covers them.
 *
 * The builder reads any user's files as root: every section size, entry
 * count, row count and the total CFI work are bounded by
 * struct opal_unwind_limits, and malformed or truncated files give an
 * error, never a crash (fuzzed by tests/fuzz/). x86-64 ELF only. */
#ifndef OPAL_COLLECTOR_UNWIND_TABLE_H
#define OPAL_COLLECTOR_UNWIND_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/unwind_rule.h"

struct opal_unwind_limits {
	uint32_t max_fdes;          /* FDEs (and CIEs) per CFI section */
	uint32_t max_rows_per_fde;  /* rows evaluated per FDE; the rest of a longer
				     * FDE becomes OPAL_INVALID_ROW_LIMIT */
	uint32_t max_rules;         /* rules in the table, <= OPAL_UNWIND_MAX_RULES */
	uint64_t max_section_bytes; /* .eh_frame (above it: -E2BIG) and .debug_frame
				     * uncompressed (above it: ignored) */
	uint64_t max_work;          /* bytes libdw may interpret or copy, summed
				     * over all row lookups (each reruns its FDE
				     * from the start): opal_cfi_lookup_cost */
};

/* Defaults (docs/unwinding.md): 1M FDEs, 16384 rows per FDE,
 * OPAL_UNWIND_MAX_RULES rules, 64 MiB per section, 4 GiB of CFI work
 * (about 12 s of CPU at worst; GCC 12's cc1 and cc1plus need 1.7-1.8 G
 * of it, 0.3 s; libLLVM-15 389 M, 0.5 s).
 * The builder holds at most 1.5 * max_rules 16-byte spans and max_rules
 * 8-byte rules at once, plus one CFI section. */
void opal_unwind_limits_default(struct opal_unwind_limits *lim);

struct opal_unwind_stats {
	uint32_t fdes_eh;          /* .eh_frame FDEs walked */
	uint32_t fdes_debug;       /* .debug_frame FDEs that filled a range .eh_frame leaves uncovered */
	uint32_t fdes_skipped;     /* FDEs left out: empty range, outside every
				    * executable PT_LOAD, overlapping another FDE,
				    * or a CFI program beyond unwind_prog.h's bounds */
	uint32_t rows;             /* CFI rows evaluated */
	uint32_t invalid_rows;     /* rows that became OPAL_CFA_INVALID */
	uint32_t unsupported_regs; /* rows with an RBP or RBX rule OPAL_REG_UNSUPPORTED */
	uint32_t truncated_fdes;   /* FDEs cut at max_rows_per_fde */
	uint32_t cfi_errors;       /* malformed CFI entries or libdw evaluation failures */
	bool debug_frame_skipped;  /* .debug_frame present but not used: too large,
				    * unreadable or malformed */
	bool debug_file;           /* the .debug_frame came from the debug file */
	uint32_t go_funcs;         /* Go functions with rules from .gopclntab (unwind_go.h) */
	uint32_t go_funcs_skipped; /* Go functions left out: SPWRITE, under .eh_frame, bad pcsp */
	uint32_t go_table_errors;  /* a .gopclntab that could not be read */
	uint32_t rules, bodies;    /* table size */
	uint64_t bytes;            /* rules * 8 + bodies * 16 */
	uint64_t work;             /* bytes charged against max_work */
};

struct opal_unwind_table {
	uint64_t base;                    /* ELF virtual address of rule address 0 */
	struct opal_unwind_rule *rules;   /* n_rules, malloc'd, sorted by addr */
	struct opal_unwind_body *bodies;  /* n_bodies, malloc'd; [0] is the GAP body */
	uint32_t n_rules, n_bodies;
	struct opal_unwind_stats stats;
};

/* Builds the table of the ELF file open on `fd` (read with pread through
 * libelf, position untouched; not mmap'd, so a file truncated meanwhile
 * gives an error rather than SIGBUS). `lim` NULL means the defaults.
 * On success `out` owns its arrays (free with opal_unwind_table_free).
 * Returns 0; -ENOEXEC for a non-ELF, non-x86-64, malformed or truncated
 * file, or an .eh_frame with an FDE opal cannot decode (unwind_fde.h);
 * -ENODATA when it has no usable FDE at all; -E2BIG when a limit other
 * than max_rows_per_fde is exceeded; -ENOMEM; or -errno from fstat. On
 * error `out` is zeroed. */
int opal_unwind_table_build(int fd, const struct opal_unwind_limits *lim,
			    struct opal_unwind_table *out);

/* The same, with the CFI of the file's separate debug file open on
 * `debug_fd` (-1: none; read as `fd` is, only its .debug_frame): when the
 * file has no .debug_frame of its own (strip moved it into the debug
 * file), the debug file's fills the ranges .eh_frame leaves uncovered, as
 * the file's own would. It is used only when its executable PT_LOADs equal
 * the file's (same addresses); a debug file that is unusable in any way is
 * left aside without error (stats.debug_file says whether it was used). */
int opal_unwind_table_build_debug(int fd, int debug_fd, const struct opal_unwind_limits *lim,
				  struct opal_unwind_table *out);

/* Same for an ELF image of `size` bytes in memory (the vDSO, copied out of
 * a process). The image is copied; the caller keeps ownership. */
int opal_unwind_table_build_mem(const void *image, size_t size,
				const struct opal_unwind_limits *lim,
				struct opal_unwind_table *out);

/* Frees the arrays and zeroes `t`; safe on a zeroed table. */
void opal_unwind_table_free(struct opal_unwind_table *t);

/* Reference lookup, the algorithm the BPF unwinder mirrors: the last rule
 * with base + addr <= vaddr, found by binary search in at most
 * OPAL_UNWIND_SEARCH_STEPS probes. Returns its body (owned by `t`), or a
 * static GAP body for addresses outside [base, base + 2^32) or before the
 * first rule. When `start`/`end` are non-NULL they receive the ELF virtual
 * range [start, end) the rule covers (end = UINT64_MAX after the last
 * rule; for an address before the first rule, [0, first rule)). */
const struct opal_unwind_body *opal_unwind_table_lookup(const struct opal_unwind_table *t,
							uint64_t vaddr, uint64_t *start,
							uint64_t *end);

#endif
