/* CPython frames of the sampled thread, for bpf/sampler.bpf.c (included
 * after its maps and scratch record). The thread's own PyThreadState is
 * found in the main interpreter's list by its thread_id, which
 * PyThread_get_thread_ident sets to pthread_self(): on x86-64 the
 * thread's FS base (glibc's and musl's thread pointer), present in every
 * version; then remembered per tid; its frames are recorded innermost
 * first, each C-level evaluation's last one marked OPAL_IFRAME_ENTRY, so
 * that userspace can put each evaluation's frames at the native frame of
 * the evaluation function that runs them (collector/interp/).
 * Parameters per process: struct opal_py_walk (interp.h), written by the
 * collector. Every read is bounded and every loop runs in bpf_loop. */
#ifndef OPAL_BPF_INTERP_PYTHON_H
#define OPAL_BPF_INTERP_PYTHON_H

static __always_inline int py_read(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)(unsigned long)addr);
}

static __always_inline __u64 py_ptr(__u64 base, __u16 off, int *err)
{
	__u64 v = 0;

	if (py_read(&v, sizeof(v), base + off) < 0)
		*err = 1;
	return v;
}

struct py_find {
	const struct opal_py_walk *w;
	__u64 ts;          /* thread state looked at next */
	__u64 found;
	__u64 fsbase;
	int err;
};

static long py_find_step(__u32 i, struct py_find *f)
{
	__u64 id = 0;

	if (!f->ts)
		return 1;
	if (py_read(&id, sizeof(id), f->ts + f->w->ts_thread_id) < 0) {
		f->err = 1;
		return 1;
	}
	if (id == f->fsbase) {
		f->found = f->ts;
		return 1;
	}
	f->ts = py_ptr(f->ts, f->w->ts_next, &f->err);
	return f->err ? 1 : 0;
}

/* The PyThreadState of thread `tid` (FS base `fsbase`) of process `pid`,
 * or 0: the one remembered when it still names the thread, else searched
 * (when none was found, again after a delay that doubles with each miss:
 * OPAL_PY_RETRY_MIN_NS). */
static __always_inline __u64 py_thread_state(const struct opal_py_walk *w, __u32 pid, __u32 tid,
					     __u64 fsbase, __u64 now)
{
	struct opal_py_thread *t = bpf_map_lookup_elem(&interp_threads, &tid);
	struct opal_py_thread nt = { .pid = pid, .found_ns = now };
	struct py_find f = { .w = w, .fsbase = fsbase };
	__u64 id = 0;
	int err = 0;

	if (!fsbase)
		return 0;
	if (t && t->pid == pid) {
		if (t->tstate && py_read(&id, sizeof(id), t->tstate + w->ts_thread_id) == 0 &&
		    id == fsbase)
			return t->tstate;
		if (!t->tstate) {
			__u32 d = t->misses < OPAL_PY_RETRY_DOUBLINGS ? t->misses : OPAL_PY_RETRY_DOUBLINGS;
			if (now - t->found_ns < OPAL_PY_RETRY_MIN_NS << d)
				return 0;
			nt.misses = t->misses + 1;
		}
	}
	__u64 interp = py_ptr(w->runtime, w->rt_interp_main, &err);
	if (err || !interp)
		return 0;
	f.ts = py_ptr(interp, w->interp_threads, &err);
	if (err)
		return 0;
	bpf_loop(OPAL_PY_MAX_THREADS, py_find_step, &f, 0);
	if (f.err)
		return 0;   /* the list changed under us: look again next time */
	nt.tstate = f.found;
	bpf_map_update_elem(&interp_threads, &tid, &nt, BPF_ANY);
	return f.found;
}

struct py_walk {
	struct opal_sample_event *ev;
	const struct opal_py_walk *w;
	__u64 frame;
};

static __always_inline void py_push(struct opal_sample_event *ev, __u64 code, __u32 lasti,
				    __u32 check)
{
	__u32 i = ev->iframes_n;

	if (i >= OPAL_INTERP_SLOTS)
		return;
	ev->iframes[i].code = code;
	ev->iframes[i].lasti = lasti;
	ev->iframes[i].check = check;
	ev->iframes_n = i + 1;
}

static __always_inline long py_stop(struct opal_sample_event *ev, __u32 err)
{
	py_push(ev, err, OPAL_IFRAME_ERROR << 24, 0);
	return 1;
}

/* The code unit index executing in a frame, with OPAL_IFRAME_NO_LASTI
 * when it has none yet. */
static __always_inline __u32 py_lasti(const struct opal_py_walk *w, __u64 frame, __u64 code,
				      int *err)
{
	if (w->model == OPAL_PY_FRAME_OBJECTS) {
		__s32 lasti = 0;
		if (py_read(&lasti, sizeof(lasti), frame + w->f_instr) < 0)
			*err = 1;
		if (lasti < 0)
			return OPAL_IFRAME_NO_LASTI << 24;
		return ((__u32)lasti >> (w->lasti_units ? 0 : 1)) & OPAL_IFRAME_LASTI_MASK;
	}
	/* 3.11/3.12 prev_instr (the executing instruction, or a CALL's last
	 * cache unit: the same line), 3.13 instr_ptr (the instruction running
	 * or about to) */
	__u64 ip = py_ptr(frame, w->f_instr, err);
	__u64 first = code + w->code_units;
	if (ip < first)
		return OPAL_IFRAME_NO_LASTI << 24;   /* before the first instruction */
	return (__u32)((ip - first) >> 1) & OPAL_IFRAME_LASTI_MASK;
}

static long py_walk_step(__u32 i, struct py_walk *p)
{
	const struct opal_py_walk *w = p->w;
	struct opal_sample_event *ev = p->ev;
	__u64 frame = p->frame, code, name;
	__u32 first_line = 0, flags = 0;
	__u8 mark = 0;
	int err = 0;

	if (!frame)
		return 1;
	if (ev->iframes_n >= OPAL_MAX_INTERP_FRAMES)
		return py_stop(ev, OPAL_IERR_TRUNCATED);
	code = py_ptr(frame, w->f_code, &err);
	p->frame = py_ptr(frame, w->f_previous, &err);
	if (w->model != OPAL_PY_FRAME_OBJECTS &&
	    py_read(&mark, sizeof(mark), frame + w->f_entry) < 0)
		err = 1;
	if (err)
		return py_stop(ev, OPAL_IERR_READ);
	if (p->frame == frame)
		return py_stop(ev, OPAL_IERR_BAD_FRAME);
	if (w->model == OPAL_PY_CSTACK_OWNER && mark == w->cstack_owner) {
		/* the shim below an evaluation's frames (none, when it has
		 * not pushed one yet): no frame of the program's, but the
		 * end of that evaluation */
		py_push(ev, 0, OPAL_IFRAME_BOUNDARY << 24, 0);
		return 0;
	}
	if (py_read(&first_line, sizeof(first_line), code + w->code_firstlineno) < 0)
		return py_stop(ev, OPAL_IERR_READ);
	name = py_ptr(code, w->code_name, &err);
	__u32 lasti = py_lasti(w, frame, code, &err);
	if (err)
		return py_stop(ev, OPAL_IERR_READ);
	if (w->model == OPAL_PY_FRAME_OBJECTS || (w->model == OPAL_PY_ENTRY_FLAG && mark))
		flags = OPAL_IFRAME_ENTRY;
	py_push(ev, code, lasti | flags << 24, first_line ^ (__u32)(name >> 4));
	return 0;
}

/* Records the Python frames of the current thread of process `pid` into
 * ev->iframes when interp_procs has walk parameters for it. */
static __always_inline void py_record(struct opal_sample_event *ev, struct task_struct *task,
				      __u32 pid, __u32 tid)
{
	const struct opal_py_walk *w = bpf_map_lookup_elem(&interp_procs, &pid);
	struct py_walk p = { .ev = ev };
	__u64 ts;
	int err = 0;

	if (!w)
		return;
	p.w = w;
	ts = py_thread_state(w, pid, tid, BPF_CORE_READ(task, thread.fsbase), ev->ktime_ns);
	if (!ts)
		return;
	if (w->ts_cframe != OPAL_PY_NO_OFFSET) {
		ts = py_ptr(ts, w->ts_cframe, &err);
		if (err || !ts)
			return;
	}
	p.frame = py_ptr(ts, w->ts_frame, &err);
	if (err) {
		py_stop(ev, OPAL_IERR_READ);
		return;
	}
	bpf_loop(OPAL_MAX_INTERP_FRAMES + 1, py_walk_step, &p, 0);
}

#endif
