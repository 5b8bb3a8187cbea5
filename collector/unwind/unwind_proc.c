/* Processes and the BPF unwinder (unwind_proc.h). */
#include "unwind/unwind_proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "sampler/sampling.h"
#include "shared/log.h"

/* The unwinder's state of one process: whether BPF holds its array, and
 * per cached mapping the table reference and the slot installed. */
struct opal_unwind_proc {
	bool installed;             /* BPF holds its current mapping array */
	uint64_t install_ns;        /* time of the last install attempt */
	int install_err;            /* its result */
	uint8_t quick_rereads;      /* maps re-read within OPAL_MAPS_REREAD_NS
				     * (opal_unwinder_sync) */
	size_t n;                   /* entries in m[]: p->n_maps when made */
	struct unwind_mapping {
		struct opal_unwind_file *uf;   /* a reference, or NULL */
		uint32_t slot;                 /* last installed in BPF */
	} *m;
};

static uint64_t now_ns(const struct opal_unwinder *u)
{
	return u->procs->src->now_ns(u->procs->src->ctx);
}

/* p's state, made on first need; NULL on ENOMEM. Its mapping array
 * follows p's current maps (dropped with them: on_maps_dropped). */
static struct opal_unwind_proc *state_of(struct opal_proc *p)
{
	struct opal_unwind_proc *s = p->unwind;

	if (!s && !(s = p->unwind = calloc(1, sizeof(*s))))
		return NULL;
	if (!s->m && p->n_maps > 0) {
		if (!(s->m = calloc(p->n_maps, sizeof(*s->m))))
			return NULL;
		s->n = p->n_maps;
	}
	return s;
}

static void release_tables(struct opal_unwinder *u, struct opal_unwind_proc *s)
{
	uint64_t now = now_ns(u);

	for (size_t i = 0; i < s->n; i++)
		opal_unwind_file_put(u->maps, s->m[i].uf, now);
	free(s->m);
	s->m = NULL;
	s->n = 0;
}

static void uninstall(struct opal_unwinder *u, struct opal_proc *p)
{
	struct opal_unwind_proc *s = p->unwind;

	if (s && s->installed)
		opal_unwind_proc_remove(u->maps, (uint32_t)p->pid);
	if (s)
		s->installed = false;
}

static void on_maps_dropped(void *ctx, struct opal_proc *p)
{
	if (p->unwind)
		release_tables(ctx, p->unwind);
}

/* The table found an address in none of p's mappings and re-read them:
 * BPF's array must not outlive the references just released. */
static void on_maps_reread(void *ctx, struct opal_proc *p)
{
	if (p->unwind && p->unwind->installed)
		opal_unwinder_install(ctx, p);
}

static void on_forgotten(void *ctx, struct opal_proc *p)
{
	uninstall(ctx, p);
}

static void on_freed(void *ctx, struct opal_proc *p)
{
	if (p->unwind) {
		release_tables(ctx, p->unwind);
		free(p->unwind);
		p->unwind = NULL;
	}
}

int opal_unwinder_init(struct opal_unwinder *u, struct opal_proc_table *procs,
		       struct opal_unwind_maps *m, struct opal_counters *ctr)
{
	const struct opal_proc_hooks hooks = {
		.maps_dropped = on_maps_dropped,
		.maps_reread = on_maps_reread,
		.forgotten = on_forgotten,
		.freed = on_freed,
		.ctx = u,
	};

	*u = (struct opal_unwinder){ .procs = procs, .maps = m, .ctr = ctr };
	return opal_procs_add_hooks(procs, &hooks);
}

int opal_unwinder_attach(struct opal_unwinder *u, struct opal_proc_table *procs,
			 struct opal_unwind_maps *m, const struct opal_sampling *s,
			 struct opal_unwind_store *store, uint32_t build_pct,
			 struct opal_counters *ctr)
{
	int info, rules, bodies, pmaps, err;

	opal_sampling_unwind_fds(s, &info, &rules, &bodies, &pmaps);
	if ((err = opal_unwind_maps_init(m, info, rules, bodies, pmaps, 0, 0, ctr)) < 0)
		return err;
	if ((err = opal_unwind_maps_start_builder(m, store, build_pct)) < 0)
		opal_warn("no unwind table builder thread (%s): tables are built in the main loop",
			  strerror(-err));
	return opal_unwinder_init(u, procs, m, ctr);
}

static void detach_list(struct opal_unwinder *u, struct opal_list *head)
{
	for (struct opal_list *l = head->next; l != head; l = l->next)
		on_freed(u, opal_container_of(l, struct opal_proc, lru));
}

void opal_unwinder_detach(struct opal_unwinder *u)
{
	if (!u->maps)
		return;
	/* every process gives its array and references back */
	for (struct opal_list *l = u->procs->lru.next; l != &u->procs->lru; l = l->next)
		uninstall(u, opal_container_of(l, struct opal_proc, lru));
	detach_list(u, &u->procs->lru);
	detach_list(u, &u->procs->gone);
	opal_procs_remove_hooks(u->procs, u);
	opal_unwind_maps_destroy(u->maps);
	u->maps = NULL;
}

/* The table entry of the file of mapping `i` (a reference kept in p's
 * state), or NULL for mappings without a file. *file gets the file. */
static struct opal_unwind_file *mapping_table(struct opal_unwinder *u, struct opal_proc *p,
					      size_t i, struct opal_file **file, uint64_t now)
{
	const struct opal_map_res *r = opal_procs_resolve(u->procs, p, i, file);
	struct opal_unwind_proc *s;

	if (r->state != OPAL_MAP_FILE || !*file || !(s = state_of(p)) || i >= s->n)
		return NULL;
	if (!s->m[i].uf)
		s->m[i].uf = opal_unwind_file_get(u->maps, &(*file)->id, now);
	return s->m[i].uf;
}

uint32_t opal_unwinder_slot(const struct opal_proc *p, size_t i)
{
	const struct opal_unwind_proc *s = p->unwind;

	return s && s->installed && i < s->n ? s->m[i].slot : OPAL_SLOT_NONE;
}

/* Requests the table of busy file `f` now, before a sample needs it. */
static void build_ahead(struct opal_unwinder *u, struct opal_unwind_file *uf,
			struct opal_file *f, uint64_t now)
{
	int fd = opal_files_fd(u->procs->files, f);

	if (fd >= 0 && opal_unwind_file_request(u->maps, uf, fd, now) >= 0)
		u->ctr->unwind_tables_ahead++;
}

int opal_unwinder_install(struct opal_unwinder *u, struct opal_proc *p)
{
	struct opal_unwind_mapping *arr;
	struct opal_unwind_proc *s;
	uint64_t now;
	uint32_t n = 0;
	int err;

	if (p->excluded || p->gone)
		return 0;
	if (!(s = state_of(p)))
		return -ENOMEM;
	now = now_ns(u);
	s->install_ns = now;
	arr = calloc(p->n_maps ? p->n_maps : 1, sizeof(*arr));
	if (!arr) {
		err = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < p->n_maps && n < OPAL_PROC_MAX_MAPPINGS; i++) {
		const struct opal_map_entry *m = &p->maps[i];
		struct opal_unwind_mapping *e = &arr[n];
		struct opal_file *f;
		if (!m->executable)
			continue;
		struct opal_unwind_file *uf = mapping_table(u, p, i, &f, now);
		e->start = m->start;
		e->limit = m->limit;
		e->offset = m->offset;
		e->inode = m->inode;
		e->slot = OPAL_SLOT_NONE;
		if (uf) {
			if (opal_unwind_file_wants_ahead(u->maps, uf))
				build_ahead(u, uf, f, now);
			e->bias = p->res[i].load_bias;
			e->slot = opal_unwind_file_slot(uf, now);
		}
		if (p->res[i].no_inode_check)
			e->flags |= OPAL_MAPPING_NO_INODE_CHECK;
		if (opal_maps_is_jit(m))
			e->flags |= OPAL_MAPPING_JIT;
		if (i < s->n)
			s->m[i].slot = e->slot;
		n++;
	}
	err = opal_unwind_proc_install(u->maps, (uint32_t)p->pid, arr, n, ++u->install_gen);
	free(arr);
	if (err < 0)
		goto fail;
	s->installed = true;
	s->install_err = 0;
	return 0;
fail:
	opal_warn("pid %d: cannot install its mappings for the BPF unwinder: %s (its stacks "
		  "are unwound in userspace)", (int)p->pid, strerror(-err));
	s->installed = true;   /* remove whatever array BPF may still hold */
	uninstall(u, p);
	s->install_err = err;
	return err;
}

/* The mapping description the leaf was in, to notice an unchanged one. */
struct leaf_mapping {
	bool found;
	uint64_t start, limit, offset, inode;
};

static struct leaf_mapping leaf_of(const struct opal_proc *p, uint64_t pc)
{
	ssize_t i = opal_procs_mapping_of(p, pc);
	struct leaf_mapping l = { 0 };

	if (i >= 0)
		l = (struct leaf_mapping){ true, p->maps[i].start, p->maps[i].limit,
					   p->maps[i].offset, p->maps[i].inode };
	return l;
}

void opal_unwinder_sync(struct opal_unwinder *u, struct opal_proc *p,
			const struct opal_sample_event *ev)
{
	struct opal_unwind_proc *s;
	uint64_t now;
	bool suspect, soon;

	if (p->excluded || p->gone || !(s = state_of(p)))
		return;
	now = now_ns(u);
	/* BPF saw an address space our maps may not describe: they are
	 * re-read if they predate the sample */
	suspect = (ev->flags & OPAL_SAMPLE_STALE) ||
		  ((ev->flags & OPAL_SAMPLE_UNKNOWN_PROC) && s->installed &&
		   ev->ktime_ns > s->install_ns);
	soon = p->maps_read && now - p->maps_read_ns < OPAL_MAPS_REREAD_NS;
	if (suspect && (!p->maps_read || (ev->ktime_ns > p->maps_read_ns &&
					  (!soon || s->quick_rereads < OPAL_QUICK_REREADS)))) {
		bool leaf_known = ev->ustack_n > 0 && !(ev->uflags[0] & OPAL_UFRAME_ERROR);
		struct leaf_mapping before = leaf_of(p, ev->ustack[0]);
		s->quick_rereads += soon;
		opal_procs_reread(u->procs, p);
		struct leaf_mapping after = leaf_of(p, ev->ustack[0]);
		ssize_t i = opal_procs_mapping_of(p, ev->ustack[0]);
		/* the leaf's mapping did not change, yet BPF's check failed on
		 * it: the kernel's inode is not the one maps shows (overlayfs) */
		if ((ev->flags & OPAL_SAMPLE_STALE) && leaf_known && before.found && i >= 0 &&
		    memcmp(&before, &after, sizeof(before)) == 0 && p->maps[i].inode != 0)
			p->res[i].no_inode_check = true;
		opal_unwinder_install(u, p);
		return;
	}
	if (!s->installed && (s->install_err == 0 || now - s->install_ns >= OPAL_INSTALL_RETRY_NS))
		opal_unwinder_install(u, p);
}

struct walk {
	struct opal_unwinder *u;
	struct opal_proc *p;
	uint64_t now;
	bool may_wait;
	struct opal_unwind_file *wait_for;
};

/* The 8 bytes of code at `pc` in process `pid` into *code (0 when
 * unreadable: the process is gone, or the page is). */
static void read_code(pid_t pid, uint64_t pc, uint64_t *code)
{
	struct iovec local = { code, sizeof(*code) };
	struct iovec remote = { (void *)(uintptr_t)pc, sizeof(*code) };

	if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(*code))
		*code = 0;
}

/* The code a frame-pointer step at `pc` looks at: at an exact PC (a
 * prologue or a return there changes the step), none otherwise (0). */
static void read_exact_code(pid_t pid, uint64_t pc, bool exact, uint64_t *code)
{
	*code = 0;
	if (exact)
		read_code(pid, pc, code);
}

static int resolve_rule(void *ctx, uint64_t pc, bool exact, struct opal_unwind_body *body,
			uint64_t *code)
{
	struct walk *w = ctx;
	struct opal_proc *p = w->p;
	ssize_t i = opal_procs_mapping_of(p, pc);
	struct opal_file *f;
	int fd;

	if (i < 0 || !p->maps[i].executable)
		return -OPAL_UERR_NO_MAPPING;
	if (opal_maps_is_jit(&p->maps[i])) {
		read_code(p->pid, pc, code);
		return OPAL_UW_JIT;
	}
	struct opal_unwind_file *uf = mapping_table(w->u, p, (size_t)i, &f, w->now);
	if (!uf) {
		read_exact_code(p->pid, pc, exact, code);
		return OPAL_UW_FP;
	}
	if (uf->state == OPAL_UFILE_PENDING && (fd = opal_files_fd(w->u->procs->files, f)) >= 0)
		opal_unwind_file_request(w->u->maps, uf, fd, w->now);
	if (uf->state == OPAL_UFILE_PENDING || uf->state == OPAL_UFILE_BUILDING) {
		if (!w->may_wait)
			return -OPAL_UERR_NO_UNWIND_INFO;
		w->wait_for = uf;
		return OPAL_UW_WAIT;
	}
	if (uf->state != OPAL_UFILE_LOADED) {
		read_exact_code(p->pid, pc, exact, code);
		return OPAL_UW_FP;
	}
	uint64_t vaddr = pc - p->res[i].load_bias - (exact ? 0 : 1);
	int rc = opal_unwind_file_lookup(w->u->maps, uf, vaddr, body);
	if (rc < 0)
		return -OPAL_UERR_NO_UNWIND_INFO;
	if (rc == 0 && OPAL_UNWIND_KIND(body->cfa) == OPAL_CFA_GAP)
		read_exact_code(p->pid, pc, exact, code);   /* a frame-pointer step follows */
	return rc == 1 ? OPAL_UW_END : OPAL_UW_RULE;
}

struct opal_unwind_file *opal_unwinder_continue(struct opal_unwinder *u, struct opal_proc *p,
						struct opal_unwind_regs *regs,
						const struct opal_stack_copy *stack,
						uint64_t *pcs, uint8_t *flags, size_t *n,
						bool may_wait)
{
	struct walk w = { u, p, now_ns(u), may_wait, NULL };
	const struct opal_unwind_proc *s;

	if (opal_unwind_user_walk(resolve_rule, &w, regs, stack, pcs, flags, n) == OPAL_UW_WAIT) {
		opal_unwind_file_hold(u->maps, w.wait_for);   /* the caller's */
		return w.wait_for;
	}
	u->ctr->samples_deferred++;
	if (!(s = p->unwind) || !s->installed || p->gone)
		return NULL;
	for (size_t i = 0; i < s->n && i < p->n_maps; i++) {
		if (s->m[i].uf && p->maps[i].executable &&
		    opal_unwind_file_slot(s->m[i].uf, w.now) != s->m[i].slot) {
			opal_unwinder_install(u, p);
			break;
		}
	}
	return NULL;
}
