/* Compact unwind rules shared by the collector (collector/unwind/table/unwind_table.c
 * builds them from .eh_frame / .debug_frame) and the BPF unwinder (reads
 * them from maps). Included by BPF code after vmlinux.h and by userspace C,
 * so only __u8/__s16/__u32-style types and plain macros are used.
 * Representation, limits and map layout: docs/unwinding.md.
 *
 * A file's table is two arrays:
 *   rules[n_rules]   8 bytes each, sorted by strictly increasing `addr`;
 *                    rules[i] holds for ELF virtual addresses
 *                    [base + rules[i].addr, base + rules[i+1].addr); the
 *                    last rule is always a GAP (no unwind info past the
 *                    last FDE) and addresses below base + rules[0].addr have
 *                    no unwind info either.
 *   bodies[n_bodies] 16 bytes each, the distinct rule bodies of the file;
 *                    rules[i].body indexes it. bodies[0] is always the GAP
 *                    body, so a zeroed rule means "no unwind info".
 * `base` (an ELF virtual address, u64) is kept next to the arrays.
 *
 * Register numbers are DWARF numbers of the x86-64 psABI (section 3.6.2):
 * 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15,
 * 16 return address (rip). */
#ifndef OPAL_BPF_UNWIND_RULE_H
#define OPAL_BPF_UNWIND_RULE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define OPAL_DWARF_RBX 3
#define OPAL_DWARF_RBP 6
#define OPAL_DWARF_RSP 7
#define OPAL_DWARF_RA  16

/* Hard ceilings. Rules per file bound the binary search: it finds the rule
 * in at most OPAL_UNWIND_SEARCH_STEPS probes (ceil(log2(MAX_RULES)) + 1).
 * Bodies are few in practice (libc: ~360, libLLVM-15: ~1000). */
#define OPAL_UNWIND_MAX_RULES    (1u << 21)
#define OPAL_UNWIND_SEARCH_STEPS 22
#define OPAL_UNWIND_MAX_BODIES   (1u << 16)

/* BPF layout (docs/unwinding.md): per-file inner arrays sized to the
 * file, found through outer arrays indexed by a table slot that the
 * collector allocates per loaded file and stores in each mapping it reports
 * to BPF. */
#define OPAL_UNWIND_MAX_TABLES   4096

/* One address range: holds from base + addr to the next rule's address. */
struct opal_unwind_rule {
	__u32 addr;   /* ELF virtual address - table base */
	__u32 body;   /* index into the file's bodies */
};

/* In BPF a file's rules are an array of 4 KiB elements, so that a lookup
 * is three map lookups and searches inside map values rather than a map
 * lookup per probe (a call each: inner arrays are not inlined):
 *   [0, n_index)                 index pages: index page e holds the first
 *                                address of rule pages e * INDEX_PAGES ...
 *   [n_index, n_index + n_pages) rule pages: rules[p * PAGE_RULES ...],
 *                                the last one zero-padded.
 * The first address of each index page is in the info (`top`). */
#define OPAL_UNWIND_PAGE_RULES   512    /* rules per rule page */
#define OPAL_UNWIND_PAGE_STEPS   10     /* probes to search one (log2 + 1) */
#define OPAL_UNWIND_INDEX_PAGES  1024   /* rule pages per index page */
#define OPAL_UNWIND_INDEX_STEPS  11
#define OPAL_UNWIND_MAX_INDEX                                                              \
	(OPAL_UNWIND_MAX_RULES / (OPAL_UNWIND_PAGE_RULES * OPAL_UNWIND_INDEX_PAGES))
#define OPAL_UNWIND_PAGE_BYTES   4096

/* A search's results besides a body index (bpf/unwind_search.h). */
#define OPAL_SEARCH_BELOW   (-1)   /* below the first rule: no unwind info */
#define OPAL_SEARCH_MISSING (-2)   /* an element is missing: the table is being replaced */

struct opal_unwind_rule_page {
	struct opal_unwind_rule r[OPAL_UNWIND_PAGE_RULES];
};

struct opal_unwind_index_page {
	__u32 addr[OPAL_UNWIND_INDEX_PAGES];   /* rule page's first rule's addr */
};

/* How to find the caller's CFA. */
enum opal_cfa_kind {
	OPAL_CFA_GAP = 0,      /* no FDE covers the address: no unwind info */
	OPAL_CFA_INVALID = 1,  /* CFI present but not representable; aux = reason */
	OPAL_CFA_REG = 2,      /* CFA = reg + cfa_off */
	OPAL_CFA_DEREF = 3,    /* CFA = *(u64 *)(reg + cfa_off) + aux */
	OPAL_CFA_PLT = 4,      /* CFA = rsp + cfa_off + ((rip & 15) >= aux ? 8 : 0);
				* reg is always rsp (the psABI lazy PLT stub) */
	OPAL_CFA_SIGNAL = 5,   /* rt_sigframe: RSP points at a ucontext; the
				* interrupted registers are read from it at
				* OPAL_SIGFRAME_* offsets (ra/rbp/rbx hold the
				* same as AT_REG rules on RSP); the next lookup
				* uses the exact interrupted PC, not PC - 1 */
};

/* How to recover one register (RA, RBP or RBX) of the caller. */
enum opal_reg_kind {
	OPAL_REG_SAME = 0,        /* unchanged by this frame */
	OPAL_REG_AT_CFA = 1,      /* *(u64 *)(CFA + off) */
	OPAL_REG_AT_REG = 2,      /* *(u64 *)(reg + off), reg of this frame */
	OPAL_REG_VAL_CFA = 3,     /* CFA + off */
	OPAL_REG_IN_REG = 4,      /* this frame's register reg (DW_CFA_register) */
	OPAL_REG_UNDEFINED = 5,   /* RA only: outermost frame, stop cleanly */
	OPAL_REG_UNSUPPORTED = 6, /* not representable: error if it is needed */
};

/* Why a body is OPAL_CFA_INVALID (stored in aux). */
enum opal_unwind_invalid {
	OPAL_INVALID_CFA_EXPR = 1,  /* CFA rule neither reg+off nor a known expression */
	OPAL_INVALID_RA = 2,        /* return address rule not representable */
	OPAL_INVALID_RSP = 3,       /* caller's RSP is not the CFA */
	OPAL_INVALID_SIGNAL = 4,    /* signal frame CFI with an unknown layout */
	OPAL_INVALID_ROW_LIMIT = 5, /* FDE longer than the per-FDE row limit */
	OPAL_INVALID_CFI_ERROR = 6, /* libdw could not evaluate the FDE */
};

/* A register rule byte: kind in the low nibble, DWARF register (0-15) in
 * the high nibble. The CFA byte uses the same packing for opal_cfa_kind. */
#define OPAL_UNWIND_PACK(kind, reg) ((__u8)(((kind) & 0xf) | (((reg) & 0xf) << 4)))
#define OPAL_UNWIND_KIND(b)         ((b) & 0xf)
#define OPAL_UNWIND_REG(b)          (((b) >> 4) & 0xf)

/* What holds at one address. 16 bytes. */
struct opal_unwind_body {
	__u8 cfa;       /* OPAL_UNWIND_PACK(opal_cfa_kind, reg) */
	__u8 ra;        /* OPAL_UNWIND_PACK(opal_reg_kind, reg), return address */
	__u8 rbp;       /* same, caller's RBP */
	__u8 rbx;       /* same, caller's RBX */
	__s32 cfa_off;  /* bytes */
	__s16 ra_off;   /* bytes, for AT_CFA / AT_REG / VAL_CFA */
	__s16 rbp_off;
	__s16 rbx_off;
	__s16 aux;      /* DEREF: added after the load; PLT: threshold;
			 * INVALID: enum opal_unwind_invalid; REG on
			 * RBP: OPAL_CFA_AUX_STACK_SWITCH or 0 */
};

/* aux of an RBP-based REG body whose frame moved to another stack (Go's
 * functions that call on the system stack, collector/unwind/table/
 * unwind_go.h): the caller's CFA may lie below this frame's RSP. */
#define OPAL_CFA_AUX_STACK_SWITCH 1

/* Per-file values BPF needs next to the two arrays. */
struct opal_unwind_table_info {
	__u64 base;      /* ELF virtual address rule addresses are relative to */
	__u32 n_rules;
	__u32 n_bodies;
	__u64 entry;     /* ELF entry point (e_entry), 0 if none: a GAP within
			  * OPAL_UNWIND_ENTRY_SPAN bytes after it is the
			  * outermost frame (entry code such as ld.so's _start
			  * often has no CFI, and nothing calls it) */
	__u32 n_index;   /* index pages before the rule pages */
	__u32 top[OPAL_UNWIND_MAX_INDEX];   /* index page e's first addr */
};
/* Covers glibc's crt1 _start up to its call of __libc_start_main, whose
 * return address is 0x21-0x25 bytes in (0x25 with endbr64); the next
 * function starts 16-byte aligned after its hlt, and only a gap counts. */
#define OPAL_UNWIND_ENTRY_SPAN 48

/* Linux x86-64 rt_sigframe (arch/x86/include/asm/sigframe.h): at
 * __restore_rt the handler's `ret` has popped pretcode, so RSP points at
 * struct ucontext; uc_mcontext (struct sigcontext_64, uapi
 * asm/sigcontext.h) starts 40 bytes in (uc_flags 8, uc_link 8, uc_stack
 * 24). Offsets below are from that RSP; glibc's __restore_rt CFI uses the
 * same ones (its CFA is *(RSP + 160)). */
#define OPAL_SIGFRAME_MCONTEXT 40
#define OPAL_SIGFRAME_R8   (OPAL_SIGFRAME_MCONTEXT + 0)
#define OPAL_SIGFRAME_RDI  (OPAL_SIGFRAME_MCONTEXT + 64)
#define OPAL_SIGFRAME_RBP  (OPAL_SIGFRAME_MCONTEXT + 80)
#define OPAL_SIGFRAME_RBX  (OPAL_SIGFRAME_MCONTEXT + 88)
#define OPAL_SIGFRAME_RSP  (OPAL_SIGFRAME_MCONTEXT + 120)
#define OPAL_SIGFRAME_RIP  (OPAL_SIGFRAME_MCONTEXT + 128)
/* struct ucontext's uc_stack (stack_t: ss_sp, ss_flags, ss_size), which
 * the kernel fills with the thread's sigaltstack settings, and the bytes
 * from the ucontext up to the end of the saved RIP. */
#define OPAL_UCONTEXT_SS_SP   16
#define OPAL_UCONTEXT_SS_SIZE 32
#define OPAL_SIGFRAME_SIZE    (OPAL_SIGFRAME_RIP + 8)

#endif
