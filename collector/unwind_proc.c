/* Processes and the BPF unwinder (unwind_proc.h). */
#include "unwind_proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "log.h"
#include "samples.h"
#include "sampling.h"
#include "vdso.h"

static uint64_t now_ns(const struct opal_proc_table *t)
{
	return t->src->now_ns(t->src->ctx);
}

int opal_unwinder_attach(struct opal_proc_table *t, struct opal_unwind_maps *m,
			 const struct opal_sampling *s, struct opal_counters *ctr)
{
	int info, rules, bodies, procs, err;

	opal_sampling_unwind_fds(s, &info, &rules, &bodies, &procs);
	if ((err = opal_unwind_maps_init(m, info, rules, bodies, procs, 0, 0, ctr)) < 0)
		return err;
	if ((err = opal_unwind_maps_start_builder(m)) < 0)
		opal_warn("no unwind table builder thread (%s): tables are built in the main loop",
			  strerror(-err));
	t->unwind = m;
	if ((err = opal_vdso_register(t->files, &t->vdso)) < 0)
		opal_warn("vDSO unavailable as a file (%s): its frames unwind with frame "
			  "pointers and stay unsymbolized", strerror(-err));
	return 0;
}

void opal_unwinder_detach(struct opal_proc_table *t)
{
	struct opal_unwind_maps *m = t->unwind;
	struct opal_list *l;

	if (!m)
		return;
	opal_samples_drop_parked(t);
	/* every installed process gives its array and references back */
	for (l = t->lru.next; l != &t->lru; l = l->next) {
		struct opal_proc *p = opal_container_of(l, struct opal_proc, lru);
		opal_procs_uninstall(t, p);
		opal_procs_release_tables(t, p);
	}
	t->unwind = NULL;
	opal_unwind_maps_destroy(m);
}

/* The table entry of the file of mapping `i` (a reference kept in
 * p->res[i].uf), or NULL for mappings without a file. *file gets the file. */
static struct opal_unwind_file *mapping_table(struct opal_proc_table *t, struct opal_proc *p,
					      size_t i, struct opal_file **file, uint64_t now)
{
	const struct opal_map_res *r = opal_procs_resolve(t, p, i, file);

	if (r->state != OPAL_MAP_FILE || !*file)
		return NULL;
	if (!p->res[i].uf)
		p->res[i].uf = opal_unwind_file_get(t->unwind, &(*file)->id, now);
	return p->res[i].uf;
}

void opal_procs_release_tables(struct opal_proc_table *t, struct opal_proc *p)
{
	if (!t->unwind)
		return;
	uint64_t now = now_ns(t);
	for (size_t i = 0; i < p->n_maps; i++) {
		opal_unwind_file_put(t->unwind, p->res[i].uf, now);
		p->res[i].uf = NULL;
	}
}

void opal_procs_uninstall(struct opal_proc_table *t, struct opal_proc *p)
{
	if (t->unwind && p->installed)
		opal_unwind_proc_remove(t->unwind, (uint32_t)p->pid);
	p->installed = false;
}

/* Requests the table of busy file `f` now, before a sample needs it. */
static void build_ahead(struct opal_proc_table *t, struct opal_unwind_file *uf,
			struct opal_file *f, uint64_t now)
{
	int fd = opal_files_fd(t->files, f);

	if (fd >= 0 && opal_unwind_file_request(t->unwind, uf, fd, now) >= 0)
		t->ctr->unwind_tables_ahead++;
}

int opal_procs_install(struct opal_proc_table *t, struct opal_proc *p)
{
	struct opal_unwind_mapping *arr;
	uint64_t now;
	uint32_t n = 0;
	int err;

	if (!t->unwind || p->excluded || p->gone)
		return 0;
	now = now_ns(t);
	p->install_ns = now;
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
		struct opal_unwind_file *uf = mapping_table(t, p, i, &f, now);
		e->start = m->start;
		e->limit = m->limit;
		e->offset = m->offset;
		e->inode = m->inode;
		e->slot = OPAL_SLOT_NONE;
		if (uf) {
			if (opal_unwind_file_wants_ahead(t->unwind, uf))
				build_ahead(t, uf, f, now);
			e->bias = p->res[i].load_bias;
			e->slot = opal_unwind_file_slot(uf, now);
		}
		if (p->res[i].no_inode_check)
			e->flags |= OPAL_MAPPING_NO_INODE_CHECK;
		p->res[i].slot = e->slot;
		n++;
	}
	err = opal_unwind_proc_install(t->unwind, (uint32_t)p->pid, arr, n, ++t->install_gen);
	free(arr);
	if (err < 0)
		goto fail;
	p->installed = true;
	p->install_err = 0;
	return 0;
fail:
	opal_warn("pid %d: cannot install its mappings for the BPF unwinder: %s (its stacks "
		  "are unwound in userspace)", (int)p->pid, strerror(-err));
	p->installed = true;   /* remove whatever array BPF may still hold */
	opal_procs_uninstall(t, p);
	p->install_err = err;
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

/* The known file with device `dev` (userspace encoding) and inode
 * `ino`, or NULL. A linear scan: only for processes gone unread. */
static struct opal_file *file_by_inode(struct opal_file_table *ft, uint64_t dev, uint64_t ino)
{
	const struct opal_list *heads[2] = { &ft->lru, &ft->pinned };

	for (int h = 0; h < 2; h++)
		for (struct opal_list *l = heads[h]->next; l != heads[h]; l = l->next) {
			struct opal_file *f = opal_container_of(l, struct opal_file, lru);
			if (f->key.ino == ino && f->key.dev == dev)
				return f;
		}
	return NULL;
}

void opal_procs_maps_from_vmas(struct opal_proc_table *t, struct opal_proc *p,
			       const struct opal_vma_rec *vmas, size_t n)
{
	size_t k = 0;
	struct opal_map_entry *maps = calloc(n ? n : 1, sizeof(*maps));
	struct opal_map_res *res = calloc(n ? n : 1, sizeof(*res));

	if (!maps || !res)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const struct opal_vma_rec *v = &vmas[i];
		struct opal_map_entry *e = &maps[k];
		const struct opal_file *f = NULL;
		const char *path = "";
		if (v->limit <= v->start || (k > 0 && v->start < maps[k - 1].limit))
			continue;   /* BPF lists them sorted and disjoint */
		e->start = v->start;
		e->limit = v->limit;
		e->offset = v->offset;
		e->inode = v->inode;
		e->dev_major = v->dev >> 20;
		e->dev_minor = v->dev & 0xfffff;
		e->readable = e->executable = true;
		if (v->flags & OPAL_VMA_VDSO) {
			path = "[vdso]";   /* resolved like any vDSO mapping */
		} else if (v->inode) {
			f = file_by_inode(t->files, makedev(e->dev_major, e->dev_minor), v->inode);
			res[k].state = OPAL_MAP_ERROR;
			if (f && opal_elf_load_bias(&f->elf, e->start, e->limit, e->offset, true,
						    &res[k].load_bias) == 0) {
				res[k].state = OPAL_MAP_FILE;
				res[k].key = f->key;
				path = f->path;
			}
		}
		if (!(e->path = strdup(path)))
			goto fail;
		k++;
	}
	opal_procs_set_maps(t, p, maps, res, k);
	opal_debug("pid %d: gone before its maps were read: %zu executable mappings from its "
		   "exit event", (int)p->pid, k);
	return;
fail:
	opal_maps_free(maps, k);
	free(res);
}

void opal_procs_unwind_sync(struct opal_proc_table *t, struct opal_proc *p,
			    const struct opal_sample_event *ev)
{
	uint64_t now;
	bool suspect;

	if (!t->unwind || p->excluded || p->gone)
		return;
	now = now_ns(t);
	/* BPF saw an address space our maps may not describe: they are
	 * re-read if they predate the sample */
	suspect = (ev->flags & OPAL_SAMPLE_STALE) ||
		  ((ev->flags & OPAL_SAMPLE_UNKNOWN_PROC) && p->installed &&
		   ev->ktime_ns > p->install_ns);
	if (suspect && (!p->maps_read || (ev->ktime_ns > p->maps_read_ns &&
					  now - p->maps_read_ns >= OPAL_MAPS_REREAD_NS))) {
		bool leaf_known = ev->ustack_n > 0 && !(ev->uflags[0] & OPAL_UFRAME_ERROR);
		struct leaf_mapping before = leaf_of(p, ev->ustack[0]);
		opal_procs_reread(t, p);
		struct leaf_mapping after = leaf_of(p, ev->ustack[0]);
		ssize_t i = opal_procs_mapping_of(p, ev->ustack[0]);
		/* the leaf's mapping did not change, yet BPF's check failed on
		 * it: the kernel's inode is not the one maps shows (overlayfs) */
		if ((ev->flags & OPAL_SAMPLE_STALE) && leaf_known && before.found && i >= 0 &&
		    memcmp(&before, &after, sizeof(before)) == 0 && p->maps[i].inode != 0)
			p->res[i].no_inode_check = true;
		opal_procs_install(t, p);
		return;
	}
	if (!p->installed && (p->install_err == 0 || now - p->install_ns >= OPAL_INSTALL_RETRY_NS))
		opal_procs_install(t, p);
}

struct walk {
	struct opal_proc_table *t;
	struct opal_proc *p;
	uint64_t now;
	bool may_wait;
	struct opal_unwind_file *wait_for;
};

static int resolve_rule(void *ctx, uint64_t pc, bool exact, struct opal_unwind_body *body)
{
	struct walk *w = ctx;
	struct opal_proc *p = w->p;
	ssize_t i = opal_procs_mapping_of(p, pc);
	struct opal_file *f;
	int fd;

	if (i < 0 || !p->maps[i].executable)
		return -OPAL_UERR_NO_MAPPING;
	struct opal_unwind_file *uf = mapping_table(w->t, p, (size_t)i, &f, w->now);
	if (!uf)
		return OPAL_UW_FP;
	if (uf->state == OPAL_UFILE_PENDING && (fd = opal_files_fd(w->t->files, f)) >= 0)
		opal_unwind_file_request(w->t->unwind, uf, fd, w->now);
	if (uf->state == OPAL_UFILE_PENDING || uf->state == OPAL_UFILE_BUILDING) {
		if (!w->may_wait)
			return -OPAL_UERR_NO_UNWIND_INFO;
		w->wait_for = uf;
		return OPAL_UW_WAIT;
	}
	if (uf->state != OPAL_UFILE_LOADED)
		return OPAL_UW_FP;
	uint64_t vaddr = pc - p->res[i].load_bias - (exact ? 0 : 1);
	int rc = opal_unwind_file_lookup(w->t->unwind, uf, vaddr, body);
	if (rc < 0)
		return -OPAL_UERR_NO_UNWIND_INFO;
	return rc == 1 ? OPAL_UW_END : OPAL_UW_RULE;
}

struct opal_unwind_file *opal_procs_unwind_continue(struct opal_proc_table *t,
						    struct opal_proc *p,
						    struct opal_unwind_regs *regs,
						    const struct opal_stack_copy *stack,
						    uint64_t *pcs, uint8_t *flags, size_t *n,
						    bool may_wait)
{
	struct walk w = { t, p, 0, may_wait, NULL };

	if (!t->unwind) {
		if (*n < OPAL_USTACK_SLOTS) {
			pcs[*n] = OPAL_UERR_NO_UNWIND_INFO;
			flags[(*n)++] = OPAL_UFRAME_ERROR;
		}
		return NULL;
	}
	w.now = now_ns(t);
	if (opal_unwind_user_walk(resolve_rule, &w, regs, stack, pcs, flags, n) == OPAL_UW_WAIT) {
		opal_unwind_file_hold(t->unwind, w.wait_for);   /* the caller's */
		return w.wait_for;
	}
	t->ctr->samples_deferred++;
	if (!p->installed || p->gone)
		return NULL;
	for (size_t i = 0; i < p->n_maps; i++) {
		if (p->res[i].uf && p->maps[i].executable &&
		    opal_unwind_file_slot(p->res[i].uf, w.now) != p->res[i].slot) {
			opal_procs_install(t, p);
			break;
		}
	}
	return NULL;
}
