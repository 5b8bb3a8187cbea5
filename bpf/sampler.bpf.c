// SPDX-License-Identifier: GPL-2.0
/* opal CPU sampler: runs on every CPU-clock perf event, records the kernel
 * stack and unwinds the user stack of the interrupted task with the
 * collector's DWARF CFI tables (per file, bpf/unwind_rule.h) and its
 * per-process mapping arrays (bpf/unwind.h); reports exec / process exit
 * (sched_process_exec and sched_process_exit) so userspace drops stale
 * state. Whatever BPF cannot finish (a process or mapping userspace has not
 * loaded yet, a table not built yet) goes to userspace as a deferred
 * sample with the registers and a copy of the stack, where
 * collector/unwind_user.c continues with the same step function.
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

/* Sized by userspace with bpf_map__set_max_entries before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

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
	__uint(value_size, 8);    /* struct opal_unwind_rule */
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

/* Processes with a sample deferred as unknown (no mapping array yet): their
 * exit event lists their executable VMAs. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, OPAL_MAX_UNKNOWN_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} unknown_pids SEC(".maps");

/* The record being built and the walk's scratch state, one per CPU (a
 * perf_event program does not nest on a CPU), indexed by CPU number: a
 * plain array because per-CPU values are limited to 32 KiB. max_entries is
 * set to the number of possible CPUs by userspace. */
struct scratch {
	struct opal_sample_event ev;
	__u64 sc[17];      /* signal frame registers */
	__u32 done;        /* the walk ended (or was deferred) */
	__u32 vma_used;    /* bpf_find_vma already called in this sample */
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

/* Outcome of a rule lookup besides a body. */
#define RULE_FOUND   0
#define RULE_GAP     1   /* no unwind info at this address */
#define RULE_PENDING 2   /* the slot holds no table (yet) */
#define RULE_ENTRY   3   /* no unwind info, but the file's entry code: outermost */

/* The rule body for ELF virtual address `vaddr` in table `slot`: the
 * reference lookup of collector/unwind_lookup.c. */
static __always_inline int find_body(__u32 slot, __u64 vaddr, struct opal_unwind_body **out)
{
	struct opal_unwind_table_info *info = bpf_map_lookup_elem(&unwind_info, &slot);
	struct opal_unwind_rule *r;
	void *rules, *bodies;
	__u32 lo = 0, hi, key, idx;
	int gap = RULE_GAP;

	if (!info || info->n_rules == 0)
		return RULE_PENDING;
	rules = bpf_map_lookup_elem(&unwind_rules, &slot);
	bodies = bpf_map_lookup_elem(&unwind_bodies, &slot);
	if (!rules || !bodies)
		return RULE_PENDING;
	if (info->entry && vaddr >= info->entry && vaddr - info->entry < OPAL_UNWIND_ENTRY_SPAN)
		gap = RULE_ENTRY;
	if (vaddr < info->base || vaddr - info->base > 0xffffffffull)
		return gap;
	key = (__u32)(vaddr - info->base);
	hi = info->n_rules;
	for (int i = 0; i < OPAL_UNWIND_SEARCH_STEPS; i++) {
		if (lo >= hi)
			break;
		__u32 mid = lo + ((hi - lo) >> 1);
		r = bpf_map_lookup_elem(rules, &mid);
		if (!r)
			return gap;
		if (r->addr <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return gap;
	idx = lo - 1;
	r = bpf_map_lookup_elem(rules, &idx);
	if (!r)
		return gap;
	idx = r->body;
	*out = bpf_map_lookup_elem(bodies, &idx);
	if (!*out)
		return gap;
	return OPAL_UNWIND_KIND((*out)->cfa) == OPAL_CFA_GAP ? gap : RULE_FOUND;
}

/* ---- bpf_find_vma ----------------------------------------------------------- */

struct vma_info {
	__u64 start, end, offset, inode;
	__u32 exec, found;
};

static long vma_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_info *v)
{
	struct file *f = vma->vm_file;

	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->exec = (vma->vm_flags & OPAL_VM_EXEC) != 0;
	v->offset = f ? (__u64)vma->vm_pgoff << 12 : 0;
	v->inode = f ? BPF_CORE_READ(f, f_inode, i_ino) : 0;
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

/* One iteration per frame: the frame on top of ustack (registers in
 * ev.regs) is unwound to its caller, which is pushed. */
static long walk_step(__u32 index, struct walk_ctx *w)
{
	struct scratch *s = w->s;
	struct opal_sample_event *ev;
	struct opal_unwind_regs *regs;
	struct opal_unwind_mapping *m;
	struct opal_unwind_body *b = NULL;
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
	if (!m) {
		/* a new mapping (dlopen, JIT) userspace has not seen, or a
		 * PC in nothing executable: the kernel knows which */
		rc = lookup_vma(s, pc, &v);
		if (rc == -2 || (rc == 0 && !v.exec))
			stop_error(s, OPAL_UERR_NO_MAPPING);
		else
			defer(s, OPAL_SAMPLE_STALE);
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
	if (m->slot == OPAL_SLOT_NONE) {
		rc = opal_unwind_fp_step(regs, NULL);
		flags = OPAL_UFRAME_FP;
	} else {
		vaddr = pc - m->bias;
		if (!(regs->flags & OPAL_REGS_EXACT_PC))
			vaddr -= 1;   /* a return address may be past the call's function */
		rc = find_body(m->slot, vaddr, &b);
		if (rc == RULE_PENDING) {
			defer(s, OPAL_SAMPLE_PENDING);
			return 1;
		}
		if (rc == RULE_ENTRY) {
			s->done = 1;
			return 1;
		}
		if (rc == RULE_GAP || !b) {
			stop_error(s, OPAL_UERR_NO_UNWIND_INFO);
			return 1;
		}
		/* the kernel "returns" into a signal trampoline: its PC was
		 * never a call's return address */
		if (OPAL_UNWIND_KIND(b->cfa) == OPAL_CFA_SIGNAL) {
			__u32 top = (__u32)ev->ustack_n - 1;
			if (top < OPAL_USTACK_SLOTS)
				ev->uflags[top] &= ~OPAL_UFRAME_RETURN;
		}
		rc = opal_unwind_step(b, regs, s->sc, NULL);
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

/* The user registers of the interrupted task: the perf event's when it was
 * interrupted in user mode, else those saved at its last kernel entry. */
static __always_inline int user_regs(struct bpf_perf_event_data *ctx, struct task_struct *task,
				     struct opal_sample_event *ev)
{
	struct opal_unwind_regs *r = &ev->regs;
	struct pt_regs *kr;

	if ((UREG(ctx, 17) & 3) == 3) {   /* cs: user mode */
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
	} else {
		kr = (struct pt_regs *)bpf_task_pt_regs(task);
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
	}
	r->valid = OPAL_REGS_ALL_VALID;
	r->flags = OPAL_REGS_EXACT_PC;
	return 0;
}

/* Copies whole pages from the one holding RSP up, until a page is
 * unreadable (the end of the stack) or OPAL_STACK_COPY_PAGES. */
static __always_inline void copy_stack(struct opal_sample_event *ev)
{
	__u64 base = ev->regs.r[OPAL_DWARF_RSP] & ~(__u64)(OPAL_STACK_PAGE - 1);
	__u32 len = 0;

	ev->stack_addr = base;
#pragma unroll
	for (int i = 0; i < OPAL_STACK_COPY_PAGES; i++) {
		if (bpf_probe_read_user(ev->stack + i * OPAL_STACK_PAGE, OPAL_STACK_PAGE,
					(const void *)(unsigned long)(base + i * OPAL_STACK_PAGE)) < 0)
			break;
		len += OPAL_STACK_PAGE;
	}
	ev->stack_len = len;
}

/* Walks the user stack of the current task into s->ev. */
static __always_inline void unwind_user(struct bpf_perf_event_data *ctx, struct scratch *s,
					struct task_struct *task, __u32 tgid)
{
	struct opal_sample_event *ev = &s->ev;
	struct opal_unwind_proc_hdr *hdr;
	struct walk_ctx w = { .s = s };
	__u32 zero = 0;
	__u8 one = 1;
	__u64 mm;

	if (user_regs(ctx, task, ev) < 0) {
		stop_error(s, OPAL_UERR_NO_REGS);
		return;
	}
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

SEC("perf_event")
int opal_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, cpu = bpf_get_smp_processor_id();
	struct opal_sample_event *ev;
	struct task_struct *task;
	struct scratch *s;
	__u64 size;
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
	ev = &s->ev;
	s->done = 0;
	s->vma_used = 0;
	ev->kind = OPAL_EVENT_SAMPLE;
	ev->pid = tgid;
	ev->tid = (__u32)pid_tgid;
	ev->cpu = cpu;
	ev->ktime_ns = bpf_ktime_get_ns();
	ev->flags = 0;
	ev->ustack_n = 0;
	ev->stack_len = 0;
	ev->stack_addr = 0;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));

	n = bpf_get_stack(ctx, ev->kstack, sizeof(ev->kstack), 0);
	ev->kstack_n = n < 0 ? (__s32)n : (__s32)(n / sizeof(__u64));

	task = bpf_get_current_task_btf();
	/* no user stack for kernel threads, nor during execve: past its
	 * point of no return the saved user registers belong to the old
	 * image and the address space to the new one */
	if (!(task->flags & OPAL_PF_KTHREAD) && !BPF_CORE_READ_BITFIELD_PROBED(task, in_execve)) {
		unwind_user(ctx, s, task, tgid);
		if (ev->flags & OPAL_SAMPLE_DEFERRED)
			copy_stack(ev);
	}
	size = OPAL_SAMPLE_FIXED_SIZE;
	if (ev->flags & OPAL_SAMPLE_DEFERRED)
		size += (__u64)ev->stack_len;
	if (size > sizeof(*ev))
		size = sizeof(*ev);
	/* Waking the reader costs an irq_work self-interrupt and a context
	 * switch: only records it must act on at once (a process or mapping
	 * it does not know yet, before the process may exit) wake it; the
	 * rest, exec and exit events included, wait for its next poll (at
	 * most 100 ms later). */
	if (bpf_ringbuf_output(&events, ev, size,
			       ev->flags & (OPAL_SAMPLE_UNKNOWN_PROC | OPAL_SAMPLE_STALE |
					    OPAL_SAMPLE_PENDING) ? 0 : BPF_RB_NO_WAKEUP) < 0)
		count(OPAL_CTR_LOST);
	return 0;
}

static __always_inline void proc_event(__u32 kind, __u32 tgid)
{
	struct opal_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(OPAL_CTR_PROC_LOST);
		return;
	}
	e->kind = kind;
	e->pid = tgid;
	e->ktime_ns = bpf_ktime_get_ns();
	/* nothing here needs the reader at once (the mm check in each
	 * process array catches an exec first): no wakeup */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* BTF-typed raw tracepoints: attached by name, so they need no tracefs
 * mount. Arguments as in include/trace/events/sched.h. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(opal_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	proc_event(OPAL_EVENT_EXEC, p->tgid);
	return 0;
}

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

/* The exit event of a process userspace may not have read the maps of:
 * its executable VMAs, from the VMA iterator (it cannot take mmap_lock in a
 * perf event's interrupt, but can here, in the exiting task, whose mm is
 * still attached at this tracepoint). */
static __always_inline void exit_with_vmas(struct task_struct *p)
{
	struct opal_exit_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
	if (bpf_iter_task_vma_new) {   /* the kernel has the kfuncs (6.7+) */
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
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(opal_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	/* Fires for every thread; only the leader's exit ends the process's
	 * cache entry (its maps and /proc directory go with it). */
	if (p->pid != p->tgid)
		return 0;
	if (bpf_map_lookup_elem(&unknown_pids, &tgid) && p->mm) {
		bpf_map_delete_elem(&unknown_pids, &tgid);
		exit_with_vmas(p);
	} else {
		proc_event(OPAL_EVENT_EXIT, tgid);
	}
	return 0;
}
