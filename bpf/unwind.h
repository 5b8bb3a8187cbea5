/* The BPF unwinder's data shared with the collector: per-process mapping
 * arrays, register state, per-frame flags and unwind error reasons.
 * Included by BPF code after vmlinux.h and by userspace C, so only
 * __u8/__u32/__u64-style types and plain macros are used.
 * Design, map layout and limits: docs/unwinding.md ("The BPF unwinder"). */
#ifndef OPAL_BPF_UNWIND_H
#define OPAL_BPF_UNWIND_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "unwind_rule.h"

/* User frames per sample, leaf first, plus one slot for a final error or
 * truncation frame. */
#define OPAL_MAX_USER_FRAMES 256
#define OPAL_USTACK_SLOTS    (OPAL_MAX_USER_FRAMES + 1)

/* Executable mappings per process in its BPF mapping array; the binary
 * search takes at most OPAL_PROC_SEARCH_STEPS probes. A process with more
 * keeps the first ones (by address). */
#define OPAL_PROC_MAX_MAPPINGS 4096
#define OPAL_PROC_SEARCH_STEPS 13
/* Processes with a BPF mapping array (HASH_OF_MAPS entries). */
#define OPAL_PROC_MAX_PROCS    8192

/* User stack copied for userspace unwinding, in whole pages: at most
 * OPAL_STACK_COPY bytes in up to OPAL_STACK_REGIONS regions. Region 0
 * starts at the page holding the stack pointer; on a thread's alternate
 * signal stack it ends at that stack's top, and region 1 then holds the
 * stack the outermost signal there interrupted, from the page of the
 * stack pointer its signal frame saved. 128 KiB: frames of 40-70 KB and
 * alloca blocks of as much still leave their callers in the copy. */
#define OPAL_STACK_PAGE        4096
#define OPAL_STACK_COPY_PAGES  32
#define OPAL_STACK_COPY        (OPAL_STACK_PAGE * OPAL_STACK_COPY_PAGES)
#define OPAL_STACK_REGIONS     2
/* Bytes below an alternate signal stack's top searched for the outermost
 * signal frame: the kernel puts it under the saved FPU state (up to
 * ~11 KiB with AMX) at the top. */
#define OPAL_SIGFRAME_SCAN     (16u << 10)

struct opal_stack_region {
	__u64 addr;    /* user address of its first byte (page aligned) */
	__u32 len;     /* bytes, a multiple of OPAL_STACK_PAGE (0: unused) */
	__u32 flags;   /* OPAL_REGION_* */
};
/* The copy stops where the region ends: the next page was unreadable, or
 * the region is a signal stack and ends at its top. Without it, a region
 * stopped at the copy budget: the stack goes on. */
#define OPAL_REGION_END 1u

/* Executable VMAs of a process at its exit, sent when it was sampled
 * before userspace knew it: userspace falls back on them when the process
 * is gone before it could read /proc/PID/maps. From the VMA iterator
 * (bpf_iter_task_vma, 6.7+; lowest first, at most OPAL_VMA_SCAN VMAs
 * looked at), or on older kernels from the executable file mappings the
 * process made (fexit of vm_mmap_pgoff: its exec's and ld.so's, in the
 * order made; the last OPAL_MMAP_TRACK kept per process). */
#define OPAL_MAX_VMAS 64
#define OPAL_VMA_SCAN 256
#define OPAL_MMAP_TRACK 32
/* Processes whose executable mappings are tracked (least recently
 * mapping first forgotten). */
#define OPAL_MMAP_PROCS 4096

struct opal_vma_rec {
	__u64 start, limit;  /* runtime addresses, [start, limit) */
	__u64 offset;        /* file offset of start, bytes (0 when anonymous) */
	__u64 inode;         /* the kernel's inode number, 0 when anonymous */
	__u32 dev;           /* the inode's superblock device, kernel encoding
			      * (major << 20 | minor) */
	__u32 flags;         /* OPAL_VMA_* */
};
#define OPAL_VMA_VDSO 1u     /* the process's vDSO */

/* The executable file mappings a process made (mmap_vmas[tgid]). */
struct opal_mmap_vmas {
	__u64 mm;            /* the address space they belong to (exec replaces it) */
	__u64 vdso, vdso_size;   /* its vDSO, once a mapping saw it set up */
	__u32 n;             /* mappings recorded; vmas[i % OPAL_MMAP_TRACK] */
	__u32 pad;
	struct opal_vma_rec vmas[OPAL_MMAP_TRACK];
};

/* opal_unwind_mapping.slot values other than table slots. */
#define OPAL_SLOT_NONE    0xffffffffu  /* no table will exist (JIT, anonymous,
					* unreadable file, no CFI): frame pointers */
#define OPAL_SLOT_PENDING 0xfffffffeu  /* table not built yet: defer to userspace */

/* One executable mapping of a process, as the collector last read it from
 * /proc/PID/maps. Element 0 of a process's array is a
 * struct opal_unwind_proc_hdr; elements 1..n are mappings sorted by start. */
struct opal_unwind_mapping {
	__u64 start, limit;  /* runtime addresses, [start, limit) */
	__u64 bias;          /* load bias: runtime address = ELF vaddr + bias */
	__u64 offset;        /* file offset of start, bytes (0 when anonymous) */
	__u64 inode;         /* inode number as /proc/PID/maps shows it, 0 if none */
	__u32 slot;          /* table slot (< OPAL_UNWIND_MAX_TABLES) or OPAL_SLOT_* */
	__u32 flags;         /* OPAL_MAPPING_* */
	__u64 checked_ns;    /* BPF: when bpf_find_vma last confirmed it (0: never) */
};

/* A mapping is checked against the kernel's VMA at most this often: each
 * bpf_find_vma costs an irq_work self-interrupt (~10 us in a VM). */
#define OPAL_MAPPING_CHECK_NS 100000000ull

/* The kernel's inode differs from the one /proc/PID/maps shows (overlayfs
 * backing files): compare start, limit and offset only. */
#define OPAL_MAPPING_NO_INODE_CHECK 1u
/* Anonymous executable memory (JIT code, opal_maps_is_jit): walked by
 * opal_unwind_jit_step, never taken for the outermost frame. */
#define OPAL_MAPPING_JIT 2u

/* Element 0 of a process's mapping array; same size as a mapping. */
struct opal_unwind_proc_hdr {
	__u64 n;        /* mappings in elements 1..n */
	__u64 mm;       /* task->mm the array belongs to: 0 until the first
			 * sample claims it; another mm (exec, pid reuse)
			 * means the array is stale */
	__u64 gen;      /* install generation (collector's count, for logs) */
	__u64 reserved[3];
	__u32 reserved2[2];
};

/* Register state of one frame. r[] uses DWARF numbers (unwind_rule.h):
 * 0-15 general registers, 16 the PC. */
#define OPAL_UNWIND_NREGS 17
#define OPAL_DWARF_PC     16
struct opal_unwind_regs {
	__u64 r[OPAL_UNWIND_NREGS];
	__u32 valid;   /* bit i set: r[i] is known */
	__u32 flags;   /* OPAL_REGS_* */
};
#define OPAL_REGS_ALL_VALID ((1u << OPAL_UNWIND_NREGS) - 1)
/* The PC is where the frame was interrupted (leaf, or the frame a signal
 * interrupted): look up its rule at PC itself, not PC - 1, and do not
 * call it a return address. */
#define OPAL_REGS_EXACT_PC  1u

/* Per-frame flags in the sample record (uflags[]). */
#define OPAL_UFRAME_RETURN 1u  /* a return address: symbolize at address - 1 */
#define OPAL_UFRAME_FP     2u  /* found by a frame-pointer step (caller's mapping had no table) */
#define OPAL_UFRAME_ERROR  4u  /* not a frame: ustack[] holds an enum opal_unwind_err */

/* Why a walk stopped early (an error frame). Values are collector-side;
 * samples.c maps them to the wire's UnwindError. */
enum opal_unwind_err {
	OPAL_UERR_NO_MAPPING = 1,     /* PC in no executable mapping */
	OPAL_UERR_TRUNCATED = 2,      /* more than OPAL_MAX_USER_FRAMES frames,
				       * or the stack copy ended */
	OPAL_UERR_NO_UNWIND_INFO = 3, /* PC in a table's GAP (no FDE) */
	OPAL_UERR_UNREADABLE = 4,     /* a stack read failed */
	OPAL_UERR_INVALID_CFI = 5,    /* the rule is INVALID (not representable) */
	OPAL_UERR_REG_UNKNOWN = 6,    /* the rule needs a register this frame
				       * cannot recover */
	OPAL_UERR_BAD_FRAME = 7,      /* the CFA did not move up the stack */
	OPAL_UERR_NO_REGS = 8,        /* no user registers for the task */
	OPAL_UERR_NO_PROCESS = 9,     /* userspace: the process is gone */
	OPAL_UERR_MAX,
};

/* Result of one step besides a negative enum opal_unwind_err. */
#define OPAL_STEP_OK  0
#define OPAL_STEP_END 1   /* outermost frame: return address undefined or 0,
                           * or RBP 0 in a frame-pointer step */

#endif
