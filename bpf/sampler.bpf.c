// SPDX-License-Identifier: GPL-2.0
/* opal CPU sampler: runs on every CPU-clock perf event, records the kernel
 * stack and unwinds the user stack of the interrupted task with the
 * collector's DWARF CFI tables (per file, bpf/unwind_rule.h) and its
 * per-process mapping arrays (bpf/unwind.h); reports exec / process exit
 * (sched_process_exec and sched_process_exit) so userspace drops stale
 * state, and gives new processes of a known interpreter their walk
 * (bpf/interp_early.h: exec, fork, first samples). Whatever BPF cannot finish (a process or mapping userspace has not
 * loaded yet, a table not built yet) goes to userspace as a deferred
 * sample with the registers and a copy of the stack, where
 * collector/unwind/unwind_user.c continues with the same step function.
 * Record layouts: sampler.h; design: docs/unwinding.md. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sampler.h"

char LICENSE[] SEC("license") = "GPL";

/* include/linux/sched.h and include/linux/mm.h: #defines, not in BTF */
#define OPAL_PF_KTHREAD 0x00200000
#define OPAL_VM_EXEC    0x00000004

#define OPAL_UNWIND_READ(ctx, dst, size, addr) \
	bpf_probe_read_user((dst), (size), (const void *)(unsigned long)(addr))
#include "unwind_step.h"
#define OPAL_RULES_ELEM(ctx, kp, k) (*(kp) = (k), (const void *)bpf_map_lookup_elem((ctx), (kp)))
#include "unwind_search.h"

/* Samples. Sized by userspace with bpf_map__set_max_entries before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Exec and exit events, apart from samples so that a burst of samples
 * cannot crowd them out (and the other way round). Sized likewise. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} lifecycle SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPAL_CTR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* tgid -> unused; filled by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OPAL_MAX_EXCLUDED_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} excluded SEC(".maps");

/* Per-file tables (docs/unwinding.md): slot -> info, slot -> inner array of
 * rules, slot -> inner array of bodies. The collector creates each inner
 * array with the file's own size (BPF_F_INNER_MAP) and writes the info
 * last (BPF_F_MMAPABLE: it fills them with one memcpy). The templates give
 * key_size/value_size rather than __type: clang 14 emits only a forward
 * declaration of the struct otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OPAL_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct opal_unwind_table_info);
} unwind_info SEC(".maps");

struct rules_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, OPAL_UNWIND_PAGE_BYTES);   /* index and rule pages */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, OPAL_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__array(values, struct rules_inner);
} unwind_rules SEC(".maps");

struct bodies_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, 16);   /* struct opal_unwind_body */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, OPAL_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__array(values, struct bodies_inner);
} unwind_bodies SEC(".maps");

/* tgid -> inner array: [0] struct opal_unwind_proc_hdr, [1..n] struct
 * opal_unwind_mapping sorted by start. Replaced whole by the collector. */
struct procmaps_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, 56);   /* struct opal_unwind_mapping */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, OPAL_PROC_MAX_PROCS);
	__type(key, __u32);
	__array(values, struct procmaps_inner);
} proc_maps SEC(".maps");

/* Processes with a sample deferred as unknown (no mapping array yet) or
 * stale (a mapping the array does not have): their exit event lists their
 * executable VMAs. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OPAL_MAX_UNKNOWN_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} unknown_pids SEC(".maps");

/* tgid -> the executable file mappings it made, for kernels without the
 * VMA iterator (opal_mmap; loaded only there). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OPAL_MMAP_PROCS);
	__type(key, __u32);
	__type(value, struct opal_mmap_vmas);
} mmap_vmas SEC(".maps");

/* tgid -> CPython walk parameters (interp.h), written by the collector. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OPAL_INTERP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct opal_py_walk);
} interp_procs SEC(".maps");

/* Interpreter files the collector has set a process up from, by inode:
 * what BPF sets new processes up with (interp_early.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OPAL_INTERP_BPF_FILES);
	__type(key, struct opal_interp_file_key);
	__type(value, struct opal_interp_file);
} interp_files SEC(".maps");

/* tid -> the thread's PyThreadState as last found (interp_python.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OPAL_INTERP_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct opal_py_thread);
} interp_threads SEC(".maps");

/* A rule lookup's question and answer (opal_find_body). */
struct opal_find_req {
	__u64 vaddr;                   /* ELF virtual address */
	__u32 slot;                    /* table slot */
	__u32 key;                     /* vaddr - the table's base */
	struct opal_unwind_body body;  /* RULE_FOUND: the rule's body */
	struct opal_unwind_table_info info;   /* the table's, copied */
};

/* The record being built and the walk's scratch state, one per CPU (a
 * perf_event program does not nest on a CPU), indexed by CPU number: a
 * plain array because per-CPU values are limited to 32 KiB. max_entries is
 * set to the number of possible CPUs by userspace. */
struct scratch {
	struct opal_sample_event ev;
	struct opal_find_req find;
	__u64 sc[17];      /* signal frame registers */
	__u32 done;        /* the walk ended (or was deferred) */
	__u32 vma_used;    /* bpf_find_vma already called in this sample */
	__u32 fp_gap;      /* the last frame was found by frame pointers from a
			    * PC without FDE: a guess, taken back unless its
			    * PC lies in a known mapping */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);

	if (v)
		*v += 1;
}

#include "interp_early.h"
#include "interp_python.h"
#include "thread_ctx_read.h"

/* ---- mapping and rule lookup -------------------------------------------- */

/* The mapping of `pc` among elements 1..n of a process array, or NULL. */
static __always_inline struct opal_unwind_mapping *find_mapping(void *pmaps, __u32 n, __u64 pc)
{
	struct opal_unwind_mapping *m;
	__u32 lo = 1, hi = n + 1, idx;

	for (int i = 0; i < OPAL_PROC_SEARCH_STEPS; i++) {
		if (lo >= hi)
			break;
		__u32 mid = lo + ((hi - lo) >> 1);
		m = bpf_map_lookup_elem(pmaps, &mid);
		if (!m)
			return NULL;
		if (m->start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo <= 1)
		return NULL;
	idx = lo - 1;
	m = bpf_map_lookup_elem(pmaps, &idx);
	if (!m || pc >= m->limit)
		return NULL;
	return m;
}

/* The value of unknown_pids entries, read from .rodata: a byte on the
 * walk's stack would count into opal_switch's 512 bytes on 6.1. */
static const __u8 opal_one = 1;

/* Outcome of a rule lookup besides a body. */
#define RULE_FOUND   0
#define RULE_GAP     1   /* no unwind info at this address */
#define RULE_PENDING 2   /* the slot holds no table (yet) */
#define RULE_ENTRY   3   /* no unwind info, but the file's entry code: outermost */

/* RULE_ENTRY when `vaddr` lies in the file's entry code, else RULE_GAP. */
static __always_inline int gap_at(const struct opal_unwind_table_info *info, __u64 vaddr)
{
	return info->entry && vaddr >= info->entry && vaddr - info->entry < OPAL_UNWIND_ENTRY_SPAN
		       ? RULE_ENTRY
		       : RULE_GAP;
}

/* The rule body for ELF virtual address q->vaddr in table q->slot, copied
 * to q->body when RULE_FOUND: the search of bpf/unwind_search.h, which the
 * collector's lookups share. `q` is in the per-CPU scratch, so that its
 * fields are read from memory after each map lookup rather than kept in
 * registers or spilled (the frame stays 32 bytes: see opal_unwind_search).
 * A global function: the verifier checks it once, on its own, not again on
 * every path of the walk that reaches it (on 6.18.44 those visits were
 * most of opal_sample's count). */
__noinline int opal_find_body(struct opal_find_req *q)
{
	struct opal_unwind_table_info *info;
	struct opal_unwind_body *b;
	void *rules, *bodies;
	__u32 k;   /* every lookup's key: a map key must be on the stack (6.1) */
	int rc;

	if (!q)
		return RULE_GAP;
	k = q->slot;
	info = bpf_map_lookup_elem(&unwind_info, &k);
	if (!info || info->n_rules == 0)
		return RULE_PENDING;
	rules = bpf_map_lookup_elem(&unwind_rules, &k);
	if (!rules)
		return RULE_PENDING;
	q->info = *info;
	if (q->vaddr < q->info.base || q->vaddr - q->info.base > 0xffffffffull)
		return gap_at(&q->info, q->vaddr);
	q->key = (__u32)(q->vaddr - q->info.base);
	rc = opal_unwind_search(rules, &q->info, &q->key, &k);
	if (rc == OPAL_SEARCH_BELOW)
		return gap_at(&q->info, q->vaddr);
	if (rc < 0)
		return RULE_PENDING;
	k = q->slot;
	bodies = bpf_map_lookup_elem(&unwind_bodies, &k);
	if (!bodies)
		return RULE_PENDING;
	k = (__u32)rc;
	b = bpf_map_lookup_elem(bodies, &k);
	if (!b || OPAL_UNWIND_KIND(b->cfa) == OPAL_CFA_GAP)
		return gap_at(&q->info, q->vaddr);
	q->body = *b;
	return RULE_FOUND;
}

/* ---- bpf_find_vma ----------------------------------------------------------- */

struct vma_info {
	__u64 start, end, offset, inode;
	struct inode *ino;   /* the file's (for interp_at_text), or NULL */
	__u32 exec, found;
};

static long vma_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_info *v)
{
	struct file *f = vma->vm_file;
	struct inode *ino = f ? BPF_CORE_READ(f, f_inode) : NULL;

	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->exec = (vma->vm_flags & OPAL_VM_EXEC) != 0;
	v->offset = f ? (__u64)vma->vm_pgoff << 12 : 0;
	v->ino = ino;
	v->inode = ino ? BPF_CORE_READ(ino, i_ino) : 0;
	v->found = 1;
	return 0;
}

/* Asks the kernel for the VMA at `pc`. Only one call per sample can work
 * (with interrupts off, bpf_find_vma releases mmap_lock through a per-CPU
 * irq_work that is busy until this program returns). Returns 0 with *v
 * filled, -ENOENT when no VMA holds pc, or -EBUSY. */
static __always_inline int lookup_vma(struct scratch *s, __u64 pc, struct vma_info *v)
{
	struct task_struct *task = bpf_get_current_task_btf();
	long err;

	if (s->vma_used)
		return -16;   /* EBUSY */
	s->vma_used = 1;
	v->found = 0;
	err = bpf_find_vma(task, pc, vma_cb, v, 0);
	count(OPAL_CTR_VMA_CHECKS);
	if (err == -16)
		count(OPAL_CTR_VMA_BUSY);
	if (err == -2 /* ENOENT */ || (err == 0 && !v->found))
		return -2;
	return err < 0 ? -16 : 0;
}

/* ---- the walk ------------------------------------------------------------------ */

struct walk_ctx {
	struct scratch *s;
	void *pmaps;
	__u32 n_maps;
	__u32 tgid;
};

static __always_inline void push(struct opal_sample_event *ev, __u64 value, __u8 flags)
{
	__u32 i = (__u32)ev->ustack_n;

	if (i >= OPAL_USTACK_SLOTS)
		return;
	ev->ustack[i] = value;
	ev->uflags[i] = flags;
	ev->ustack_n = (__s32)(i + 1);
}

static __always_inline void defer(struct scratch *s, __u32 why)
{
	s->ev.flags |= OPAL_SAMPLE_DEFERRED | why;
	s->done = 1;
}

static __always_inline void stop_error(struct scratch *s, __u32 err)
{
	push(&s->ev, err, OPAL_UFRAME_ERROR);
	s->done = 1;
}

/* Does the array's mapping `m` still describe the VMA at `pc`? Checked at
 * most every OPAL_MAPPING_CHECK_NS per mapping; unsure (bpf_find_vma busy)
 * counts as yes, no VMA at pc any more as no. */
static __always_inline bool mapping_current(struct scratch *s, struct opal_unwind_mapping *m,
					    __u64 pc)
{
	__u64 now = s->ev.ktime_ns;
	struct vma_info v;

	int rc;

	if (now - m->checked_ns < OPAL_MAPPING_CHECK_NS)
		return true;
	rc = lookup_vma(s, pc, &v);
	if (rc < 0)
		return rc != -2;   /* unmapped since: stale; busy: unknown */
	if (v.start == m->start && v.end == m->limit && v.exec &&
	    (v.inode == 0 || v.offset == m->offset) &&
	    (v.inode == m->inode || (m->flags & OPAL_MAPPING_NO_INODE_CHECK))) {
		m->checked_ns = now;
		return true;
	}
	return false;
}

/* The 8 bytes of code at user address `pc`, 0 when unreadable. */
static __always_inline __u64 code_at(__u64 pc)
{
	__u64 code = 0;

	if (bpf_probe_read_user(&code, sizeof(code), (const void *)pc) < 0)
		return 0;
	return code;
}

/* The code at an exact PC, for a frame-pointer step to see a prologue or
 * a return; a return address needs none (0). */
static __always_inline __u64 exact_code(const struct opal_unwind_regs *regs)
{
	return (regs->flags & OPAL_REGS_EXACT_PC) ? code_at(regs->r[OPAL_DWARF_PC]) : 0;
}

/* One iteration per frame: the frame on top of ustack (registers in
 * ev.regs) is unwound to its caller, which is pushed. */
static long walk_step(__u32 index, struct walk_ctx *w)
{
	struct scratch *s = w->s;
	struct opal_sample_event *ev;
	struct opal_unwind_regs *regs;
	struct opal_unwind_mapping *m;
	struct vma_info v;
	__u64 pc, vaddr;
	__u8 flags = 0;
	int rc;

	if (!s || s->done)
		return 1;
	ev = &s->ev;
	regs = &ev->regs;
	pc = regs->r[OPAL_DWARF_PC];
	m = find_mapping(w->pmaps, w->n_maps, pc);
	if (!m && s->fp_gap) {
		ev->ustack_n--;   /* not a frame: the code had no frame pointers either */
		stop_error(s, OPAL_UERR_NO_UNWIND_INFO);
		return 1;
	}
	s->fp_gap = 0;
	if (!m) {
		/* a new mapping (dlopen, JIT) userspace has not seen, or a
		 * PC in nothing executable: the kernel knows which */
		rc = lookup_vma(s, pc, &v);
		if (rc == -2 || (rc == 0 && !v.exec)) {
			stop_error(s, OPAL_UERR_NO_MAPPING);
		} else {
			if (rc == 0 && v.ino)
				interp_at_text(w->tgid, v.ino, v.start, v.offset);
			defer(s, OPAL_SAMPLE_STALE);
			/* userspace reads its maps again: in case the process
			 * is gone by then, its exit event lists them */
			bpf_map_update_elem(&unknown_pids, &w->tgid, &opal_one, BPF_ANY);
		}
		return 1;
	}
	/* The leaf's mapping is checked against the kernel's VMA (at most
	 * every OPAL_MAPPING_CHECK_NS): a library unloaded and another
	 * loaded at the same address, or unmapped since. */
	if (index == 0 && !mapping_current(s, m, pc)) {
		defer(s, OPAL_SAMPLE_STALE);
		return 1;
	}
	if (m->slot == OPAL_SLOT_PENDING) {
		defer(s, OPAL_SAMPLE_PENDING);
		return 1;
	}
	if (m->flags & OPAL_MAPPING_JIT) {
		rc = opal_unwind_jit_step(regs, code_at(pc), NULL);
		flags = OPAL_UFRAME_FP;
	} else if (m->slot == OPAL_SLOT_NONE) {
		rc = opal_unwind_fp_step(regs, exact_code(regs), NULL);
		flags = OPAL_UFRAME_FP;
	} else {
		vaddr = pc - m->bias;
		if (!(regs->flags & OPAL_REGS_EXACT_PC))
			vaddr -= 1;   /* a return address may be past the call's function */
		s->find.slot = m->slot;
		s->find.vaddr = vaddr;
		rc = opal_find_body(&s->find);
		if (rc == RULE_PENDING) {
			defer(s, OPAL_SAMPLE_PENDING);
			return 1;
		}
		if (rc == RULE_ENTRY) {
			s->done = 1;
			return 1;
		}
		if (rc == RULE_GAP) {
			/* no FDE: code built without unwind tables, which
			 * may keep frame pointers (docs/unwinding.md) */
			rc = opal_unwind_fp_step(regs, exact_code(regs), NULL);
			if (rc != OPAL_STEP_OK) {
				stop_error(s, OPAL_UERR_NO_UNWIND_INFO);
				return 1;
			}
			flags = OPAL_UFRAME_FP;
			s->fp_gap = 1;
		} else {
			/* the kernel "returns" into a signal trampoline: its
			 * PC was never a call's return address */
			if (OPAL_UNWIND_KIND(s->find.body.cfa) == OPAL_CFA_SIGNAL) {
				__u32 top = (__u32)ev->ustack_n - 1;
				if (top < OPAL_USTACK_SLOTS)
					ev->uflags[top] &= ~OPAL_UFRAME_RETURN;
			}
			rc = opal_unwind_step(&s->find.body, regs, s->sc, NULL);
		}
	}
	if (rc == OPAL_STEP_END) {
		s->done = 1;
		return 1;
	}
	if (rc < 0) {
		stop_error(s, (__u32)-rc);
		return 1;
	}
	if (ev->ustack_n >= OPAL_MAX_USER_FRAMES) {
		stop_error(s, OPAL_UERR_TRUNCATED);   /* a caller exists beyond the limit */
		return 1;
	}
	if (!(regs->flags & OPAL_REGS_EXACT_PC))
		flags |= OPAL_UFRAME_RETURN;
	push(ev, regs->r[OPAL_DWARF_PC], flags);
	return 0;
}

/* Word i of the perf event's registers (ctx->regs, the UAPI struct pt_regs
 * of arch/x86/include/uapi/asm/ptrace.h: r15 r14 r13 r12 rbp rbx r11 r10
 * r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss). The context
 * allows only 8-byte loads at constant offsets; volatile keeps clang from
 * merging them into pointer arithmetic the verifier refuses. */
#define UREG(ctx, i) (*(volatile const __u64 *)((const char *)(ctx) + (i) * 8))

/* The user registers a task saved at its last kernel entry (its pt_regs):
 * 0, or -1 when they are not user mode ones. */
static __always_inline int task_user_regs(struct task_struct *task, struct opal_sample_event *ev)
{
	struct opal_unwind_regs *r = &ev->regs;
	struct pt_regs *kr = (struct pt_regs *)bpf_task_pt_regs(task);

	if (!kr || (kr->cs & 3) != 3)
		return -1;
	ev->flags |= OPAL_SAMPLE_KERNEL_MODE;
	r->r[0] = kr->ax;
	r->r[1] = kr->dx;
	r->r[2] = kr->cx;
	r->r[3] = kr->bx;
	r->r[4] = kr->si;
	r->r[5] = kr->di;
	r->r[6] = kr->bp;
	r->r[7] = kr->sp;
	r->r[8] = kr->r8;
	r->r[9] = kr->r9;
	r->r[10] = kr->r10;
	r->r[11] = kr->r11;
	r->r[12] = kr->r12;
	r->r[13] = kr->r13;
	r->r[14] = kr->r14;
	r->r[15] = kr->r15;
	r->r[16] = kr->ip;
	r->valid = OPAL_REGS_ALL_VALID;
	r->flags = OPAL_REGS_EXACT_PC;
	return 0;
}

/* The user registers of the interrupted task: the perf event's when it was
 * interrupted in user mode, else those saved at its last kernel entry. */
static __always_inline int user_regs(struct bpf_perf_event_data *ctx, struct task_struct *task,
				     struct opal_sample_event *ev)
{
	struct opal_unwind_regs *r = &ev->regs;

	if ((UREG(ctx, 17) & 3) != 3)   /* cs: kernel mode */
		return task_user_regs(task, ev);
	r->r[0] = UREG(ctx, 10);   /* rax */
	r->r[1] = UREG(ctx, 12);   /* rdx */
	r->r[2] = UREG(ctx, 11);   /* rcx */
	r->r[3] = UREG(ctx, 5);    /* rbx */
	r->r[4] = UREG(ctx, 13);   /* rsi */
	r->r[5] = UREG(ctx, 14);   /* rdi */
	r->r[6] = UREG(ctx, 4);    /* rbp */
	r->r[7] = UREG(ctx, 19);   /* rsp */
	r->r[8] = UREG(ctx, 9);
	r->r[9] = UREG(ctx, 8);
	r->r[10] = UREG(ctx, 7);
	r->r[11] = UREG(ctx, 6);
	r->r[12] = UREG(ctx, 3);
	r->r[13] = UREG(ctx, 2);
	r->r[14] = UREG(ctx, 1);
	r->r[15] = UREG(ctx, 0);
	r->r[16] = UREG(ctx, 16);  /* rip */
	r->valid = OPAL_REGS_ALL_VALID;
	r->flags = OPAL_REGS_EXACT_PC;
	return 0;
}

/* ---- the stack copy of a deferred sample ------------------------------------ */

/* A copy of whole pages of user memory from `addr` (page aligned) into
 * ev->stack at byte `at`, until `top` (exclusive; 0: none), an unreadable
 * page or the end of ev->stack: `len` bytes copied, `end` set when it
 * stopped at `top` or an unreadable page. One page per bpf_loop step (a
 * plain loop costs the verifier a pass per page). */
struct page_copy {
	struct opal_sample_event *ev;
	__u64 addr, top;
	__u32 at, len;
	bool end;
};

static long copy_page(__u32 i, struct page_copy *c)
{
	__u32 dst;

	if (c->top && c->addr + c->len >= c->top) {
		c->end = true;
		return 1;
	}
	dst = c->at + c->len;
	barrier_var(dst);   /* bound the register used as the offset */
	if (dst > OPAL_STACK_COPY - OPAL_STACK_PAGE)
		return 1;
	if (bpf_probe_read_user(c->ev->stack + dst, OPAL_STACK_PAGE,
				(const void *)(unsigned long)(c->addr + c->len)) < 0) {
		c->end = true;
		return 1;
	}
	c->len += OPAL_STACK_PAGE;
	return 0;
}

static __always_inline __u32 copy_pages(struct opal_sample_event *ev, __u32 at, __u64 addr,
					__u64 top, bool *end)
{
	struct page_copy c = { .ev = ev, .addr = addr, .top = top, .at = at };

	bpf_loop(OPAL_STACK_COPY_PAGES, copy_page, &c, 0);
	*end = c.end;
	return c.len;
}

/* The search for the outermost signal frame on an alternate signal stack,
 * in region 0 of the copy. */
struct sigframe_scan {
	struct opal_sample_event *ev;
	__u64 base, len;      /* region 0: user address and bytes */
	__u64 top;            /* the signal stack's top */
	__u64 ss_sp, ss_size; /* the thread's sigaltstack */
	__u64 rsp;            /* found: the stack pointer the signal interrupted */
};

/* Candidate i, from the top down: a struct ucontext (16-byte aligned, as
 * the kernel's align_sigframe leaves it) whose uc_stack is the thread's
 * signal stack (arch/x86/kernel/signal.c saves it there). */
static long sigframe_probe(__u32 i, struct sigframe_scan *c)
{
	__u64 uc = ((c->top - OPAL_SIGFRAME_SIZE) & ~15ull) - (__u64)i * 16, off;
	__u64 *w;

	if (uc < c->base)
		return 1;
	off = uc - c->base;
	if (off + OPAL_SIGFRAME_SIZE > c->len)
		return 0;   /* above the copied part */
	barrier_var(off);
	if (off > OPAL_STACK_COPY - OPAL_SIGFRAME_SIZE)
		return 1;
	w = (__u64 *)(c->ev->stack + off);
	if (w[OPAL_UCONTEXT_SS_SP / 8] != c->ss_sp || w[OPAL_UCONTEXT_SS_SIZE / 8] != c->ss_size)
		return 0;
	c->rsp = w[OPAL_SIGFRAME_RSP / 8];
	return 1;
}

/* Copies the user stack for the userspace walk (bpf/unwind.h): region 0
 * from the page holding RSP up; when RSP is on the thread's alternate
 * signal stack, region 0 ends at that stack's top and region 1 holds the
 * stack its outermost signal frame says was interrupted. A handler using
 * SS_AUTODISARM runs with the settings cleared: its samples get region 0
 * only. */
static __always_inline void copy_stack(struct opal_sample_event *ev, struct task_struct *task)
{
	__u64 rsp = ev->regs.r[OPAL_DWARF_RSP], base = rsp & ~(__u64)(OPAL_STACK_PAGE - 1);
	__u64 ss_sp = task->sas_ss_sp, ss_size = task->sas_ss_size, top = 0;
	struct sigframe_scan c = {};
	__u32 len0, len1;
	bool end;

	if (ss_size && rsp - ss_sp < ss_size)
		top = ss_sp + ss_size;
	len0 = copy_pages(ev, 0, base, top, &end);
	ev->regions[0] = (struct opal_stack_region){ base, len0, end ? OPAL_REGION_END : 0 };
	ev->regions[1] = (struct opal_stack_region){};
	ev->stack_len = len0;
	if (!top || !end)
		return;
	c = (struct sigframe_scan){ ev, base, len0, top, ss_sp, ss_size, 0 };
	bpf_loop(OPAL_SIGFRAME_SCAN / 16, sigframe_probe, &c, 0);
	if (c.rsp == 0 || c.rsp - ss_sp < ss_size)
		return;
	base = c.rsp & ~(__u64)(OPAL_STACK_PAGE - 1);
	len1 = copy_pages(ev, len0, base, 0, &end);
	ev->regions[1] = (struct opal_stack_region){ base, len1, end ? OPAL_REGION_END : 0 };
	ev->stack_len = len0 + len1;
}

/* Walks the user stack of the current task into s->ev from the registers
 * in s->ev.regs (`regs`: 0, or -1 when there were no user registers). */
static __always_inline void unwind_user(struct scratch *s, struct task_struct *task, __u32 tgid,
					int regs)
{
	struct opal_sample_event *ev = &s->ev;
	struct opal_unwind_proc_hdr *hdr;
	struct walk_ctx w = { .s = s };
	__u32 zero = 0;
	__u8 one = 1;
	__u64 mm;

	if (regs < 0) {
		stop_error(s, OPAL_UERR_NO_REGS);
		return;
	}
	w.tgid = tgid;
	push(ev, ev->regs.r[OPAL_DWARF_PC], 0);
	w.pmaps = bpf_map_lookup_elem(&proc_maps, &tgid);
	hdr = w.pmaps ? bpf_map_lookup_elem(w.pmaps, &zero) : NULL;
	mm = (__u64)(unsigned long)BPF_CORE_READ(task, mm);
	if (hdr && hdr->mm == 0 && mm != 0)
		hdr->mm = mm;   /* the first sample since the collector installed it */
	/* no array, or one of another image (exec) or process (pid reuse) */
	if (!hdr || hdr->n > OPAL_PROC_MAX_MAPPINGS || mm == 0 || hdr->mm != mm) {
		defer(s, OPAL_SAMPLE_UNKNOWN_PROC);
		/* its exit event will list its executable VMAs, in case it is
		 * gone before userspace reads its maps */
		bpf_map_update_elem(&unknown_pids, &tgid, &one, BPF_ANY);
		return;
	}
	w.n_maps = (__u32)hdr->n;
	bpf_loop(OPAL_MAX_USER_FRAMES, walk_step, &w, 0);
	if (!s->done)
		stop_error(s, OPAL_UERR_TRUNCATED);
}

/* Starts the record of a sample of the current task in s->ev: its head,
 * no frames yet. */
static __always_inline struct opal_sample_event *sample_begin(struct scratch *s, __u64 pid_tgid,
							      __u32 cpu)
{
	struct opal_sample_event *ev = &s->ev;

	s->done = 0;
	s->vma_used = 0;
	s->fp_gap = 0;
	ev->kind = OPAL_EVENT_SAMPLE;
	ev->pid = pid_tgid >> 32;
	ev->tid = (__u32)pid_tgid;
	ev->cpu = cpu;
	ev->ktime_ns = bpf_ktime_get_ns();
	ev->off_cpu_ns = 0;
	ev->flags = 0;
	ev->ustack_n = 0;
	ev->stack_len = 0;
	ev->iframes_n = 0;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	return ev;
}

/* No user stack for kernel threads, nor during execve: past its point of
 * no return the saved user registers belong to the old image and the
 * address space to the new one. Nor on the exit path once exit_mm() has
 * dropped the address space (task->mm is NULL while exit_mmap() tears it
 * down): no user byte is readable any more, so the sample is the kernel's
 * stack alone, as perf's callchain is. */
static __always_inline bool has_user_stack(struct task_struct *task)
{
	return !(task->flags & OPAL_PF_KTHREAD) && !BPF_CORE_READ_BITFIELD_PROBED(task, in_execve) &&
	       BPF_CORE_READ(task, mm);
}

/* The user part of s->ev from the user registers `regs` got (0, or -1
 * without any): the walk, the interpreter frames, and the stack copy of a
 * walk deferred to userspace. */
static __always_inline void sample_user(struct scratch *s, struct task_struct *task, __u32 tgid,
					int regs)
{
	struct opal_sample_event *ev = &s->ev;

	struct vma_info v;

	unwind_user(s, task, tgid, regs);
	if ((ev->flags & OPAL_SAMPLE_UNKNOWN_PROC) && !interp_at_exe(task, tgid) &&
	    ev->ustack_n > 0 && lookup_vma(s, ev->ustack[0], &v) == 0 && v.exec && v.ino)
		interp_at_text(tgid, v.ino, v.start, v.offset);
	py_record(ev, task, tgid, ev->tid);
	if (ev->flags & OPAL_SAMPLE_DEFERRED)
		copy_stack(ev, task);
}

/* Submit flags of a record the reader need not act on at once: it waits
 * for the next poll unless the ring is half full (off-CPU samples at a
 * high rate of context switches fill it faster than the poll drains). */
static __always_inline __u64 events_wakeup(void)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	return avail * 2 >= size ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Writes s->ev into the sample ring, counting a failure in `lost`. */
static __always_inline void sample_send(struct scratch *s, __u32 lost)
{
	struct opal_sample_event *ev = &s->ev;
	__u64 size;

	if (ev->flags & OPAL_SAMPLE_DEFERRED)
		size = OPAL_SAMPLE_FIXED_SIZE + (__u64)ev->stack_len;
	else   /* only the interpreter frames recorded */
		size = OPAL_SAMPLE_HEAD_SIZE + (__u64)ev->iframes_n * sizeof(ev->iframes[0]);
	/* The bound must be on the register passed as the size: without
	 * the barrier clang compares stack_len instead, and verifiers older
	 * than the tracking of "linked" registers with a constant delta
	 * (commit 98d7ca374ba4, 2024) do not carry a bound from a register
	 * to register + constant ("R3 unbounded memory access" on 6.1;
	 * docs/unwinding.md). */
	barrier_var(size);
	if (size > sizeof(*ev))
		size = sizeof(*ev);
	/* Waking the reader costs an irq_work self-interrupt and a context
	 * switch: only records it must act on at once (a process or mapping
	 * it does not know yet, before the process may exit) wake it; the
	 * rest wait for its next poll (at most 100 ms later). */
	if (bpf_ringbuf_output(&events, ev, size,
			       ev->flags & (OPAL_SAMPLE_UNKNOWN_PROC | OPAL_SAMPLE_STALE |
					    OPAL_SAMPLE_PENDING) ? 0 : events_wakeup()) < 0)
		count(lost);
}

SEC("perf_event")
int opal_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, cpu = bpf_get_smp_processor_id();
	struct opal_sample_event *ev;
	struct task_struct *task;
	struct scratch *s;
	long n;

	count(OPAL_CTR_SAMPLES);
	if (tgid == 0) {
		count(OPAL_CTR_IDLE);
		return 0;
	}
	if (bpf_map_lookup_elem(&excluded, &tgid)) {
		count(OPAL_CTR_EXCLUDED);
		return 0;
	}
	s = bpf_map_lookup_elem(&scratch, &cpu);
	if (!s)
		return 0;
	ev = sample_begin(s, pid_tgid, cpu);
	n = bpf_get_stack(ctx, ev->kstack, sizeof(ev->kstack), 0);
	ev->kstack_n = n < 0 ? (__s32)n : (__s32)(n / sizeof(__u64));

	task = bpf_get_current_task_btf();
	if (has_user_stack(task)) {
		sample_user(s, task, tgid, user_regs(ctx, task, ev));
		/* CPU samples only: an off-CPU sample's time and CPU become
		 * those of its end record, which no thread context record
		 * could be paired by (docs/correlation.md) */
		tctx_record(ev, task, tgid);
	}
	sample_send(s, OPAL_CTR_LOST);
	return 0;
}

/* ---- off-CPU samples (docs/offcpu.md) --------------------------------------- */

/* The share of blocking switches recorded, of 2^32 (2^32: every one),
 * and the most recorded per CPU per second (0: no bound); set by the
 * collector before load. */
const volatile __u64 offcpu_threshold = 0;
const volatile __u32 offcpu_max_rate = 0;

/* tid -> bpf_ktime_get_ns() when the thread blocked, for the blocks the
 * threshold chose, until the thread runs again. A hash, not a per-CPU
 * map: the thread may run again on any CPU. Only preallocated maps here:
 * sched_switch runs under the run queue's lock, where an allocation (task
 * storage allocates on 6.1) may wake kswapd onto that same lock. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OPAL_OFFCPU_MAX_THREADS);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_start SEC(".maps");

/* Recorded threads per slot (tid % OPAL_OFFCPU_SLOTS): the switch in,
 * which runs at every context switch of the machine, looks in the hash
 * only for a tid whose slot is not 0; an array look-up is inlined. */
#define OPAL_OFFCPU_SLOTS 65536
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OPAL_OFFCPU_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_slots SEC(".maps");

/* Per CPU: the blocks recorded in the current one-second window, against
 * offcpu_max_rate. */
struct offcpu_budget {
	__u64 window_ns;
	__u32 used;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_budget);
} offcpu_budget SEC(".maps");

/* The off-CPU record being built, one per CPU like `scratch`, apart from
 * it so that neither program ever writes into the other's record. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} offcpu_scratch SEC(".maps");

/* Kernel frames of the tracepoint's own call above __schedule. */
#define OPAL_OFFCPU_SKIP 2

/* include/linux/sched.h: states of a task that will not run again */
#define OPAL_EXIT_ZOMBIE 0x0020
#define OPAL_EXIT_DEAD   0x0010
#define OPAL_TASK_DEAD   0x0080

/* True when this CPU may record one more block in the current second. */
static __always_inline bool offcpu_within_rate(__u64 now)
{
	__u32 zero = 0;
	struct offcpu_budget *b;

	if (!offcpu_max_rate)
		return true;
	b = bpf_map_lookup_elem(&offcpu_budget, &zero);
	if (!b)
		return false;
	if (now - b->window_ns >= 1000000000ull) {
		b->window_ns = now;
		b->used = 0;
	}
	if (b->used >= offcpu_max_rate)
		return false;
	b->used++;
	return true;
}

/* The switch out of `prev` (the current task): a user task leaving the CPU
 * in a sleeping state (not preempted, not yielding with TASK_RUNNING, not
 * exiting), when the threshold picks it and the CPU's rate allows, has its
 * start recorded and its stack sent, walked as the CPU sampler walks it. The sample's value
 * follows in the OPAL_EVENT_OFFCPU_END record of its run again: a
 * thread's memory can only be read while it is the current task. */
static __always_inline void offcpu_out(void *ctx, struct task_struct *prev)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32, cpu;
	__u32 slot_key = tid & (OPAL_OFFCPU_SLOTS - 1), *slot;
	struct opal_sample_event *ev;
	struct scratch *s;
	unsigned int state;
	long n;

	if (tgid == 0 || (prev->flags & OPAL_PF_KTHREAD) || tid != (__u32)prev->pid)
		return;
	state = prev->__state;
	if (state == 0 || (state & (OPAL_EXIT_ZOMBIE | OPAL_EXIT_DEAD | OPAL_TASK_DEAD)))
		return;
	count(OPAL_CTR_OFFCPU_SWITCHES);
	/* the draw before any map look-up: most switches end here */
	if ((__u64)bpf_get_prandom_u32() >= offcpu_threshold)
		return;
	if (bpf_map_lookup_elem(&excluded, &tgid))
		return;
	count(OPAL_CTR_OFFCPU_SAMPLED);
	if (!offcpu_within_rate(bpf_ktime_get_ns())) {
		count(OPAL_CTR_OFFCPU_CAPPED);
		return;
	}
	cpu = bpf_get_smp_processor_id();
	s = bpf_map_lookup_elem(&offcpu_scratch, &cpu);
	if (!s)
		return;
	ev = sample_begin(s, pid_tgid, cpu);
	slot = bpf_map_lookup_elem(&offcpu_slots, &slot_key);
	if (!slot || bpf_map_update_elem(&offcpu_start, &tid, &ev->ktime_ns, BPF_NOEXIST) < 0) {
		count(OPAL_CTR_OFFCPU_FULL);
		return;
	}
	__sync_fetch_and_add(slot, 1);
	ev->flags = OPAL_SAMPLE_OFF_CPU;
	/* the leaf is __schedule: this program and bpf_trace_run4 skipped */
	n = bpf_get_stack(ctx, ev->kstack, sizeof(ev->kstack), OPAL_OFFCPU_SKIP & BPF_F_SKIP_FIELD_MASK);
	ev->kstack_n = n < 0 ? (__s32)n : (__s32)(n / sizeof(__u64));
	if (has_user_stack(prev))
		sample_user(s, prev, tgid, task_user_regs(prev, ev));
	/* A deferred record carries up to 128 KiB of stack: once the ring is
	 * half full they go first, so that a burst of blocking new processes
	 * does not crowd out the few-KiB records of the rest. */
	if ((ev->flags & OPAL_SAMPLE_DEFERRED) && events_wakeup() == BPF_RB_FORCE_WAKEUP) {
		count(OPAL_CTR_OFFCPU_LOST);
		bpf_map_delete_elem(&offcpu_start, &tid);
		__sync_fetch_and_add(slot, -1);
		return;
	}
	sample_send(s, OPAL_CTR_OFFCPU_LOST);
}

/* The run again of `next`: a thread whose start is recorded gets its end
 * record, with the time it was off CPU. */
static __always_inline void offcpu_in(struct task_struct *next)
{
	__u32 tid = next->pid, slot_key = tid & (OPAL_OFFCPU_SLOTS - 1), *slot;
	struct opal_offcpu_end *e;
	__u64 now, start, *t;

	slot = bpf_map_lookup_elem(&offcpu_slots, &slot_key);
	if (!slot || !*slot || !(t = bpf_map_lookup_elem(&offcpu_start, &tid)))
		return;
	start = *t;
	bpf_map_delete_elem(&offcpu_start, &tid);
	__sync_fetch_and_add(slot, -1);
	now = bpf_ktime_get_ns();
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(OPAL_CTR_OFFCPU_LOST);
		return;
	}
	e->kind = OPAL_EVENT_OFFCPU_END;
	e->pid = next->tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->ktime_ns = now;
	e->off_cpu_ns = now > start ? now - start : 0;
	bpf_ringbuf_submit(e, events_wakeup());
}

/* Every context switch, in the context of `prev` (docs/offcpu.md). */
SEC("tp_btf/sched_switch")
int BPF_PROG(opal_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (!preempt)
		offcpu_out(ctx, prev);
	offcpu_in(next);
	return 0;
}

/* Submit flags of a lifecycle event: nothing in one needs the reader at
 * once (the mm check in each process array catches an exec first), so it
 * waits for the next poll unless the ring is half full: under process
 * churn the reader is woken before events are lost. */
static __always_inline __u64 lifecycle_wakeup(void)
{
	__u64 avail = bpf_ringbuf_query(&lifecycle, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&lifecycle, BPF_RB_RING_SIZE);

	return avail * 2 >= size ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void proc_event(__u32 kind, __u32 tgid)
{
	struct opal_proc_event *e = bpf_ringbuf_reserve(&lifecycle, sizeof(*e), 0);

	if (!e) {
		count(OPAL_CTR_PROC_LOST);
		return;
	}
	e->kind = kind;
	e->pid = tgid;
	e->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, lifecycle_wakeup());
}

/* BTF-typed raw tracepoints: attached by name, so they need no tracefs
 * mount. Arguments as in include/trace/events/sched.h. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(opal_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	interp_exec(p);
	proc_event(OPAL_EVENT_EXEC, p->tgid);
	return 0;
}

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

#define OPAL_PROT_EXEC 4   /* include/uapi/asm-generic/mman-common.h */

/* An empty record (too large for the stack) to start a process's. */
const struct opal_mmap_vmas no_vmas = {};

/* Records each executable file mapping a process makes (the exec's own,
 * ld.so's, dlopen's), for its exit event on kernels without the VMA
 * iterator. vm_mmap_pgoff is what both the mmap system call and the ELF
 * loader map through (mm/util.c). */
SEC("fexit/vm_mmap_pgoff")
int BPF_PROG(opal_mmap, struct file *file, unsigned long addr, unsigned long len,
	     unsigned long prot, unsigned long flag, unsigned long pgoff, unsigned long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 mm = (__u64)(unsigned long)task->mm;
	struct opal_mmap_vmas *m;

	if (!file || !(prot & OPAL_PROT_EXEC) || ret >= (unsigned long)-4095 || !mm)
		return 0;
	m = bpf_map_lookup_elem(&mmap_vmas, &tgid);
	if (!m || m->mm != mm) {
		/* first mapping of this process or of its new image */
		bpf_map_update_elem(&mmap_vmas, &tgid, &no_vmas, BPF_ANY);
		m = bpf_map_lookup_elem(&mmap_vmas, &tgid);
		if (!m)
			return 0;
		m->mm = mm;
	}
	/* the ELF loader maps the image before it sets the vDSO up */
	if (!m->vdso) {
		m->vdso = (__u64)(unsigned long)BPF_CORE_READ(task, mm, context.vdso);
		m->vdso_size = BPF_CORE_READ(task, mm, context.vdso_image, size);
	}
	/* not atomic: threads of a process rarely map code at once, and one
	 * lost or doubled record costs one mapping at most */
	__u32 i = m->n++ % OPAL_MMAP_TRACK;
	struct opal_vma_rec *r = &m->vmas[i];
	r->start = ret;
	r->limit = ret + ((len + 4095) & ~4095ul);
	r->offset = (__u64)pgoff << 12;
	r->inode = BPF_CORE_READ(file, f_inode, i_ino);
	r->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	r->flags = 0;
	return 0;
}

/* Fills exit event `e` of `p` from the mappings opal_mmap recorded, and the
 * vDSO. Where do_exit calls exit_mm before this tracepoint (6.1 does) the
 * task's mm is gone by now: the record of its last image is used. */
static __always_inline void mmap_vmas_of(struct task_struct *p, struct opal_exit_event *e)
{
	__u32 tgid = p->tgid;
	struct opal_mmap_vmas *m = bpf_map_lookup_elem(&mmap_vmas, &tgid);
	__u64 vdso = 0, vdso_size = 0;
	__u32 n = 0;

	if (m) {
		vdso = m->vdso;
		vdso_size = m->vdso_size;
		n = m->n < OPAL_MMAP_TRACK ? m->n : OPAL_MMAP_TRACK;
		for (__u32 i = 0; i < OPAL_MMAP_TRACK && i < OPAL_MAX_VMAS - 1; i++) {
			if (i >= n)
				break;
			e->vmas[i] = m->vmas[i];
		}
	}
	e->seen = n;
	if (vdso && n < OPAL_MAX_VMAS) {
		struct opal_vma_rec *r = &e->vmas[n & (OPAL_MAX_VMAS - 1)];
		r->start = vdso;
		r->limit = vdso + vdso_size;
		r->offset = r->inode = 0;
		r->dev = 0;
		r->flags = OPAL_VMA_VDSO;
		n++;
	}
	e->n_vmas = n;
	bpf_map_delete_elem(&mmap_vmas, &tgid);
}

/* The exit event of a process userspace may not have read the maps of:
 * its executable VMAs, from the VMA iterator (it cannot take mmap_lock in a
 * perf event's interrupt, but can here, in the exiting task, whose mm is
 * still attached at this tracepoint). */
static __always_inline void exit_with_vmas(struct task_struct *p)
{
	struct opal_exit_event *e = bpf_ringbuf_reserve(&lifecycle, sizeof(*e), 0);
	__u64 vdso = (__u64)(unsigned long)BPF_CORE_READ(p, mm, context.vdso);
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;

	if (!e) {
		count(OPAL_CTR_PROC_LOST);
		return;
	}
	e->kind = OPAL_EVENT_EXIT;
	e->pid = p->tgid;
	e->ktime_ns = bpf_ktime_get_ns();
	e->n_vmas = 0;
	e->seen = 0;
	if (!bpf_iter_task_vma_new) {
		mmap_vmas_of(p, e);
	} else {   /* the kernel has the kfuncs (6.7+) */
		bpf_iter_task_vma_new(&it, p, 0);
		/* The counters live in ring buffer memory, not registers: the
		 * verifier then sees every iteration alike and the loop
		 * converges (a register counter makes it walk each value).
		 * A failed _new leaves an iterator whose _next gives NULL. */
		while ((vma = bpf_iter_task_vma_next(&it))) {
			__u32 k = e->n_vmas;
			if (e->seen++ >= OPAL_VMA_SCAN || k >= OPAL_MAX_VMAS)
				break;
			if (!(vma->vm_flags & OPAL_VM_EXEC))
				continue;
			struct opal_vma_rec *r = &e->vmas[k & (OPAL_MAX_VMAS - 1)];
			struct file *f = vma->vm_file;
			r->start = vma->vm_start;
			r->limit = vma->vm_end;
			r->offset = f ? (__u64)vma->vm_pgoff << 12 : 0;
			r->inode = f ? BPF_CORE_READ(f, f_inode, i_ino) : 0;
			r->dev = f ? BPF_CORE_READ(f, f_inode, i_sb, s_dev) : 0;
			r->flags = r->start == vdso ? OPAL_VMA_VDSO : 0;
			e->n_vmas = k + 1;
		}
		bpf_iter_task_vma_destroy(&it);
	}
	bpf_ringbuf_submit(e, lifecycle_wakeup());
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(opal_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	/* Fires for every thread; only the leader's exit ends the process's
	 * cache entry (its maps and /proc directory go with it). */
	if (p->pid != p->tgid)
		return 0;
	/* the iterator needs the task's mm; the recorded mappings do not */
	if (bpf_map_lookup_elem(&unknown_pids, &tgid) && (p->mm || !bpf_iter_task_vma_new)) {
		bpf_map_delete_elem(&unknown_pids, &tgid);
		exit_with_vmas(p);
	} else {
		bpf_map_delete_elem(&mmap_vmas, &tgid);
		proc_event(OPAL_EVENT_EXIT, tgid);
	}
	bpf_map_delete_elem(&interp_procs, &tgid);
	return 0;
}

/* A new process starts with its parent's interpreter walk and, where
 * opal_mmap records them, its parent's executable mappings: a child that
 * never execs nor maps code, gone before userspace read its maps, then
 * still has them in its exit event. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(opal_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct opal_mmap_vmas *m;

	interp_fork(parent, child);
	if (ctgid == ptgid || !(m = bpf_map_lookup_elem(&mmap_vmas, &ptgid)))
		return 0;
	if (bpf_map_update_elem(&mmap_vmas, &ctgid, m, BPF_ANY) == 0 &&
	    (m = bpf_map_lookup_elem(&mmap_vmas, &ctgid)))
		m->mm = (__u64)(unsigned long)child->mm;
	return 0;
}
