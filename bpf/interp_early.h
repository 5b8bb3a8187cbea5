/* Interpreter walk parameters for a process the collector has not looked
 * at yet, for bpf/sampler.bpf.c (included after its maps): a new process
 * is often sampled before userspace has read its maps, and its first
 * samples would otherwise have no interpreter frames. The collector
 * publishes each interpreter file it has set a process up from
 * (interp_files, keyed by inode); BPF then sets up a process that execs
 * that file or forks from a process set up, and at a sample of a process
 * without a walk whose executable, or the library of a PC its mapping
 * array lacks (libpython3.X.so), is a published file (docs/interpreters.md,
 * "Set up in BPF"). */
#ifndef OPAL_BPF_INTERP_EARLY_H
#define OPAL_BPF_INTERP_EARLY_H

/* Earlier names of the inode's mtime: a struct timespec64 i_mtime until
 * 6.6, __i_mtime in 6.6; 6.7 split it into i_mtime_sec and i_mtime_nsec. */
struct inode___timespec {
	struct timespec64 i_mtime;
} __attribute__((preserve_access_index));

struct inode___private {
	struct timespec64 __i_mtime;
} __attribute__((preserve_access_index));

static __always_inline void interp_file_key(struct inode *ino, struct opal_interp_file_key *k)
{
	struct inode___timespec *t = (void *)ino;
	struct inode___private *pr = (void *)ino;

	k->dev = BPF_CORE_READ(ino, i_sb, s_dev);
	k->ino = BPF_CORE_READ(ino, i_ino);
	k->size = BPF_CORE_READ(ino, i_size);
	if (bpf_core_field_exists(ino->i_mtime_sec)) {
		k->mtime_sec = BPF_CORE_READ(ino, i_mtime_sec);
		k->mtime_nsec = BPF_CORE_READ(ino, i_mtime_nsec);
	} else if (bpf_core_field_exists(t->i_mtime)) {
		k->mtime_sec = BPF_CORE_READ(t, i_mtime.tv_sec);
		k->mtime_nsec = BPF_CORE_READ(t, i_mtime.tv_nsec);
	} else {
		k->mtime_sec = BPF_CORE_READ(pr, __i_mtime.tv_sec);
		k->mtime_nsec = BPF_CORE_READ(pr, __i_mtime.tv_nsec);
	}
}

/* Process `tgid` gets file `f`'s walk at load bias `bias`. */
static __always_inline void interp_set_up(__u32 tgid, const struct opal_interp_file *f, __u64 bias,
					  __u64 flags)
{
	struct opal_py_walk w = f->walk;

	w.runtime += bias;
	if (bpf_map_update_elem(&interp_procs, &tgid, &w, flags) == 0)
		count(OPAL_CTR_INTERP_EARLY);
}

/* The load bias of `task`'s executable, when it is a published
 * interpreter file (*f set): binfmt_elf sets mm->start_code to the lowest
 * executable p_vaddr plus the load bias. */
static __always_inline __u64 exe_bias(struct task_struct *task, struct opal_interp_file **f)
{
	struct opal_interp_file_key k = {};
	struct inode *ino = BPF_CORE_READ(task, mm, exe_file, f_inode);

	*f = NULL;
	if (!ino)
		return 0;
	interp_file_key(ino, &k);
	*f = bpf_map_lookup_elem(&interp_files, &k);
	return *f ? BPF_CORE_READ(task, mm, start_code) - (*f)->exec_vaddr : 0;
}

/* At exec: the old image's walk and its thread's remembered state go;
 * an executable with the interpreter linked in (Debian's python3.X) is
 * set up at once. */
static __always_inline void interp_exec(struct task_struct *p)
{
	__u32 tgid = p->tgid, tid = p->pid;
	struct opal_interp_file *f;
	__u64 bias;

	bpf_map_delete_elem(&interp_procs, &tgid);
	bpf_map_delete_elem(&interp_threads, &tid);
	bias = exe_bias(p, &f);
	if (f)
		interp_set_up(tgid, f, bias, BPF_ANY);
}

/* At a sample of process `tgid`, which has no mapping array (userspace
 * has not looked at it yet): its executable, when a published interpreter
 * file, sets it up now (a burst of processes started at once, before the
 * first of them was published). Returns true when it has a walk. */
static __always_inline bool interp_at_exe(struct task_struct *task, __u32 tgid)
{
	struct opal_interp_file *f;
	__u64 bias;

	if (bpf_map_lookup_elem(&interp_procs, &tgid))
		return true;
	bias = exe_bias(task, &f);
	if (f)
		interp_set_up(tgid, f, bias, BPF_NOEXIST);
	return f != NULL;
}

/* At a sample of process `tgid` whose PC is in an executable file VMA
 * [start, ...) of file offset `offset` and inode `ino` that its mapping
 * array lacks (or it has none): a published interpreter's text
 * (libpython3.X.so, mapped by ld.so after exec) sets it up, unless it has
 * a walk already. */
static __always_inline void interp_at_text(__u32 tgid, struct inode *ino, __u64 start,
					   __u64 offset)
{
	struct opal_interp_file_key k = {};
	struct opal_interp_file *f;

	if (bpf_map_lookup_elem(&interp_procs, &tgid))
		return;
	interp_file_key(ino, &k);
	f = bpf_map_lookup_elem(&interp_files, &k);
	if (f && f->text_offset == offset)
		interp_set_up(tgid, f, start - f->text_vaddr, BPF_NOEXIST);
}

/* At fork: a new process (not a thread) is a copy of its parent's address
 * space, so the parent's walk is its own. */
static __always_inline void interp_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct opal_py_walk *w;

	if (ctgid == ptgid)
		return;
	w = bpf_map_lookup_elem(&interp_procs, &ptgid);
	if (w && bpf_map_update_elem(&interp_procs, &ctgid, w, BPF_ANY) == 0)
		count(OPAL_CTR_INTERP_EARLY);
}

#endif
