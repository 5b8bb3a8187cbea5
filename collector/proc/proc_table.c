/* Per-process maps cache (proc_table.h). */
#include "proc/proc_table.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "shared/log.h"

int opal_procs_init(struct opal_proc_table *t, size_t max_procs, bool include_self,
		    const struct opal_proc_source *src, struct opal_file_table *files,
		    struct opal_counters *ctr)
{
	memset(t, 0, sizeof(*t));
	if (opal_htab_init(&t->by_pid, 8))
		return -ENOMEM;
	opal_list_init(&t->lru);
	opal_list_init(&t->gone);
	opal_list_init(&t->exits);
	t->max_procs = max_procs ? max_procs : 1;
	t->include_self = include_self;
	t->src = src;
	t->files = files;
	t->ctr = ctr;
	return 0;
}

#define HOOK(t, name, p) \
	do { \
		for (size_t h_ = 0; h_ < (t)->n_hooks; h_++) \
			if ((t)->hooks[h_].name) \
				(t)->hooks[h_].name((t)->hooks[h_].ctx, (p)); \
	} while (0)

int opal_procs_add_hooks(struct opal_proc_table *t, const struct opal_proc_hooks *h)
{
	if (t->n_hooks == OPAL_PROC_MAX_HOOKS)
		return -ENOSPC;
	t->hooks[t->n_hooks++] = *h;
	return 0;
}

void opal_procs_remove_hooks(struct opal_proc_table *t, void *ctx)
{
	size_t k = 0;

	for (size_t i = 0; i < t->n_hooks; i++)
		if (t->hooks[i].ctx != ctx)
			t->hooks[k++] = t->hooks[i];
	t->n_hooks = k;
}

static void drop_maps(struct opal_proc_table *t, struct opal_proc *p)
{
	HOOK(t, maps_dropped, p);
	opal_maps_free(p->maps, p->n_maps);
	free(p->res);
	p->maps = NULL;
	p->res = NULL;
	p->n_maps = 0;
}

static void release_proc(struct opal_proc_table *t, struct opal_proc *p)
{
	drop_maps(t, p);
	HOOK(t, freed, p);
	opal_proc_info_free(&p->info);
	opal_procctx_clear(&p->ctx);
	free(p);
}

static void free_proc(struct opal_proc_table *t, struct opal_proc *p)
{
	opal_htab_remove(&t->by_pid, &p->node);
	opal_list_del(&p->lru);
	if (p->exited) {
		opal_list_del(&p->exit_node);
		p->exited = false;
	}
	t->n_procs--;
	HOOK(t, forgotten, p);
	if (p->pins > 0) {
		/* its holders read these maps later; a new process with the
		 * same pid gets a new entry */
		p->gone = true;
		opal_list_add(&t->gone, &p->lru);
		return;
	}
	release_proc(t, p);
}

void opal_procs_pin(struct opal_proc *p)
{
	p->pins++;
}

void opal_procs_unpin(struct opal_proc_table *t, struct opal_proc *p)
{
	if (p->pins > 0 && --p->pins == 0 && p->gone) {
		opal_list_del(&p->lru);
		release_proc(t, p);
	}
}

void opal_procs_clear(struct opal_proc_table *t)
{
	struct opal_list *l;

	while ((l = opal_list_last(&t->lru)))
		free_proc(t, opal_container_of(l, struct opal_proc, lru));
}

void opal_procs_destroy(struct opal_proc_table *t)
{
	struct opal_list *l;

	opal_procs_clear(t);
	/* holders are gone too at this point: what they pinned goes */
	while ((l = opal_list_last(&t->gone))) {
		opal_list_del(l);
		release_proc(t, opal_container_of(l, struct opal_proc, lru));
	}
	opal_htab_destroy(&t->by_pid);
}

static struct opal_proc *find(struct opal_proc_table *t, pid_t pid)
{
	uint64_t h = opal_hash_u64((uint64_t)pid);

	for (struct opal_hnode *n = opal_htab_first(&t->by_pid, h); n; n = opal_htab_next(n)) {
		struct opal_proc *p = opal_container_of(n, struct opal_proc, node);
		if (p->pid == pid)
			return p;
	}
	return NULL;
}

struct opal_proc *opal_procs_peek(struct opal_proc_table *t, pid_t pid)
{
	return find(t, pid);
}

static void read_maps(struct opal_proc_table *t, struct opal_proc *p)
{
	struct opal_map_entry *maps = NULL;
	size_t n = 0;
	int err;

	p->maps_read = true;
	p->maps_read_ns = t->src->now_ns(t->src->ctx);
	t->ctr->maps_reads++;
	err = t->src->read_maps(t->src->ctx, p->pid, &maps, &n);
	p->maps_err = err;
	/* gone (or a zombie's empty maps) since the last read: what it
	 * mapped is still what its samples in flight ran in */
	if ((err == -ESRCH || (err == 0 && n == 0)) && p->n_maps > 0) {
		opal_maps_free(maps, n);
		return;
	}
	drop_maps(t, p);
	if (err < 0 && err != -E2BIG) {
		opal_debug("pid %d: maps unreadable: %s", (int)p->pid, strerror(-err));
		return;
	}
	if (err == -E2BIG)
		opal_warn("pid %d: more than %d mappings, the rest ignored", (int)p->pid,
			  OPAL_MAPS_MAX_ENTRIES);
	p->res = calloc(n ? n : 1, sizeof(*p->res));
	if (!p->res) {
		opal_maps_free(maps, n);
		return;
	}
	p->maps = maps;
	p->n_maps = n;
	uint64_t header = opal_procctx_find(maps, n);
	if (header != p->ctx.header) {   /* published (again) since: copy anew */
		opal_procctx_clear(&p->ctx);
		p->ctx.header = header;
	}
}

/* Scans p's maps for an OTEL_CTX mapping published since they were read,
 * when its backoff (procctx.h) allows. */
static void scan_for_context(struct opal_proc_table *t, struct opal_proc *p)
{
	uint64_t now = t->src->now_ns(t->src->ctx);
	struct opal_map_entry *maps = NULL;
	size_t n = 0;

	if (now < p->ctx.next_scan_ns)
		return;
	p->ctx.scan_gap_ns = p->ctx.scan_gap_ns ? p->ctx.scan_gap_ns * 2 : OPAL_PROCCTX_SCAN_MIN_NS;
	if (p->ctx.scan_gap_ns > OPAL_PROCCTX_SCAN_MAX_NS)
		p->ctx.scan_gap_ns = OPAL_PROCCTX_SCAN_MAX_NS;
	p->ctx.next_scan_ns = now + p->ctx.scan_gap_ns;
	if (!p->ctx.checked_seq)
		return;   /* its maps were read for its first sample just now */
	t->ctr->process_ctx_scans++;
	int err = t->src->read_maps(t->src->ctx, p->pid, &maps, &n);
	if (err == 0 || err == -E2BIG)
		p->ctx.header = opal_procctx_find(maps, n);
	opal_maps_free(maps, n);
}

const struct opal_procctx *opal_procs_context(struct opal_proc_table *t, struct opal_proc *p,
					      uint64_t seq)
{
	int err;

	if (p->ctx.checked_seq == seq || p->gone || p->exited)
		return &p->ctx;   /* an exiting process keeps the copy it had */
	if (!p->ctx.header)
		scan_for_context(t, p);
	p->ctx.checked_seq = seq;
	if (!p->ctx.header)
		return &p->ctx;
	err = opal_procctx_read(p->pid, &p->ctx);
	if (err > 0) {
		t->ctr->process_ctx_reads++;
	} else if (err == -ENOENT || err == -EFAULT) {
		/* unpublished (unmapped, or another header), or the process is
		 * exiting (its memory going while its last samples come in): the
		 * copy stays until another context is found */
		t->ctr->process_ctx_errors++;
		p->ctx.header = 0;
		p->ctx.next_scan_ns = p->ctx.scan_gap_ns = 0;
	} else if (err < 0 && err != -ESRCH) {
		t->ctr->process_ctx_errors++;
		opal_debug("pid %d: process context not read: %s", (int)p->pid, strerror(-err));
	}
	return &p->ctx;
}

static int cmp_vma(const void *a, const void *b)
{
	const struct opal_vma_rec *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* `n` VMAs in the order they were made into `out`: disjoint (a later one
 * replaces the earlier ones it overlaps: a MAP_FIXED remap), sorted.
 * Returns how many. */
static size_t disjoint_vmas(const struct opal_vma_rec *vmas, size_t n, struct opal_vma_rec *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (vmas[i].limit <= vmas[i].start)
			continue;
		size_t w = 0;
		for (size_t j = 0; j < k; j++)
			if (out[j].limit <= vmas[i].start || out[j].start >= vmas[i].limit)
				out[w++] = out[j];
		k = w;
		out[k++] = vmas[i];
	}
	qsort(out, k, sizeof(*out), cmp_vma);
	return k;
}

void opal_procs_maps_from_vmas(struct opal_proc_table *t, struct opal_proc *p,
			       const struct opal_vma_rec *in, size_t n_in)
{
	struct opal_vma_rec vmas[OPAL_MAX_VMAS];
	size_t k = 0, n = disjoint_vmas(in, n_in < OPAL_MAX_VMAS ? n_in : OPAL_MAX_VMAS, vmas);
	struct opal_map_entry *maps = calloc(n ? n : 1, sizeof(*maps));
	struct opal_map_res *res = calloc(n ? n : 1, sizeof(*res));

	if (!maps || !res)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const struct opal_vma_rec *v = &vmas[i];
		struct opal_map_entry *e = &maps[k];
		const struct opal_file *f = NULL;
		const char *path = "";
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
			f = opal_files_by_inode(t->files, makedev(e->dev_major, e->dev_minor),
						v->inode);
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
	drop_maps(t, p);
	p->maps = maps;
	p->res = res;
	p->n_maps = k;
	p->maps_err = 0;
	opal_debug("pid %d: gone before its maps were read: %zu executable mappings from its "
		   "exit event", (int)p->pid, k);
	return;
fail:
	opal_maps_free(maps, k);
	free(res);
}

void opal_procs_reread(struct opal_proc_table *t, struct opal_proc *p)
{
	if (p->gone)
		return;   /* its maps are all its holders have */
	read_maps(t, p);
}

static bool in_extra(const struct opal_proc_table *t, pid_t pid)
{
	for (size_t i = 0; i < t->n_extra_excluded; i++)
		if (t->extra_excluded[i] == pid)
			return true;
	return false;
}

void opal_procs_reap(struct opal_proc_table *t)
{
	uint64_t now = t->src->now_ns(t->src->ctx);
	struct opal_list *l;

	while ((l = opal_list_last(&t->exits))) {
		struct opal_proc *p = opal_container_of(l, struct opal_proc, exit_node);
		if (now - p->exited_ns < OPAL_EXIT_GRACE_NS)
			break;
		free_proc(t, p);
	}
}

/* Is exited entry p's pid still its process (a zombie, or in its exit
 * path) or nobody's? Otherwise a new process has it. */
static bool still_dying(struct opal_proc_table *t, const struct opal_proc *p)
{
	struct opal_proc_identity now;

	if (!t->src->identity)
		return true;
	int err = t->src->identity(t->src->ctx, p->pid, &now);
	return err == -ESRCH || (err == 0 && now.start_ticks == p->id.start_ticks);
}

struct opal_proc *opal_procs_get(struct opal_proc_table *t, pid_t pid)
{
	struct opal_proc *p;

	opal_procs_reap(t);
	p = find(t, pid);
	if (p && p->exited && !still_dying(t, p)) {
		free_proc(t, p);
		p = NULL;
	}
	if (p) {
		opal_list_move_front(&t->lru, &p->lru);
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->serial = ++t->next_serial;
	if (t->src->read_info(t->src->ctx, pid, &p->info) < 0) {
		free(p);
		return NULL;
	}
	if (t->command_line && t->src->read_command_line &&
	    t->src->read_command_line(t->src->ctx, pid, &p->info.command_line) == -ENOMEM) {
		opal_proc_info_free(&p->info);
		free(p);
		return NULL;
	}
	if (t->src->identity)
		t->src->identity(t->src->ctx, pid, &p->id);
	if (!t->include_self &&
	    (in_extra(t, pid) || opal_is_opal_program(p->info.comm, p->info.exe))) {
		p->excluded = true;
		if (t->on_exclude)
			t->on_exclude(t->on_exclude_ctx, pid);
		opal_debug("pid %d (%s): opal's own process, excluded", (int)pid, p->info.comm);
	}
	opal_list_init(&p->lru);
	opal_htab_insert(&t->by_pid, &p->node, opal_hash_u64((uint64_t)pid));
	opal_list_add(&t->lru, &p->lru);
	t->n_procs++;
	while (t->n_procs > t->max_procs) {
		struct opal_list *last = opal_list_last(&t->lru);
		free_proc(t, opal_container_of(last, struct opal_proc, lru));
		t->ctr->procs_evicted++;
	}
	if (!p->excluded)
		read_maps(t, p);
	return p;
}

void opal_procs_forget(struct opal_proc_table *t, pid_t pid)
{
	struct opal_proc *p = find(t, pid);

	if (p)
		free_proc(t, p);
}

/* Drops `pid` from the explicitly excluded pids; true when it was one. */
static bool unexclude(struct opal_proc_table *t, pid_t pid)
{
	for (size_t i = 0; i < t->n_extra_excluded; i++) {
		if (t->extra_excluded[i] == pid) {
			t->extra_excluded[i] = t->extra_excluded[--t->n_extra_excluded];
			return true;
		}
	}
	return false;
}

bool opal_procs_exited(struct opal_proc_table *t, pid_t pid)
{
	struct opal_proc *p;

	opal_procs_reap(t);
	p = find(t, pid);
	if (p && !p->exited) {
		p->exited = true;
		p->exited_ns = t->src->now_ns(t->src->ctx);
		opal_list_add(&t->exits, &p->exit_node);
	}
	return unexclude(t, pid);
}

/* Is the process behind p's pid still the one p describes? */
static bool still_same(struct opal_proc_table *t, const struct opal_proc *p)
{
	struct opal_proc_identity now;

	return t->src->identity && t->src->identity(t->src->ctx, p->pid, &now) == 0 &&
	       p->id.start_ticks != 0 && now.start_ticks == p->id.start_ticks &&
	       now.exe_dev == p->id.exe_dev && now.exe_ino == p->id.exe_ino;
}

size_t opal_procs_revalidate(struct opal_proc_table *t, void (*gone)(void *ctx, pid_t pid),
			     void *ctx)
{
	struct opal_list *l, *prev;
	struct opal_proc_identity id;
	size_t n = 0;

	for (l = opal_list_last(&t->lru); l && l != &t->lru; l = prev) {
		struct opal_proc *p = opal_container_of(l, struct opal_proc, lru);
		pid_t pid = p->pid;
		prev = l->prev;
		if (p->exited || still_same(t, p))
			continue;
		opal_debug("pid %d (%s): gone or replaced since it was cached: dropped", (int)pid,
			   p->info.comm);
		/* at once: when it exited is unknown, and an exec keeps the
		 * start time still_dying looks at */
		opal_procs_forget(t, pid);
		unexclude(t, pid);
		n++;
		if (gone)
			gone(ctx, pid);
	}
	/* the explicitly excluded pids not in the table (opal's daemons):
	 * only "gone" can be told */
	for (size_t i = 0; i < t->n_extra_excluded;) {
		pid_t pid = t->extra_excluded[i];
		if (find(t, pid) || !t->src->identity ||
		    t->src->identity(t->src->ctx, pid, &id) != -ESRCH) {
			i++;
			continue;
		}
		unexclude(t, pid);
		n++;
		if (gone)
			gone(ctx, pid);
	}
	return n;
}

void opal_procs_exclude(struct opal_proc_table *t, pid_t pid)
{
	struct opal_proc *p;

	if (t->include_self || in_extra(t, pid))
		return;
	if (t->n_extra_excluded == OPAL_MAX_EXTRA_EXCLUDED) {
		memmove(&t->extra_excluded[0], &t->extra_excluded[1],
			(OPAL_MAX_EXTRA_EXCLUDED - 1) * sizeof(pid_t));
		t->n_extra_excluded--;
	}
	t->extra_excluded[t->n_extra_excluded++] = pid;
	if ((p = find(t, pid)))
		p->excluded = true;
	if (t->on_exclude)
		t->on_exclude(t->on_exclude_ctx, pid);
}

void opal_procs_renotify_excluded(struct opal_proc_table *t)
{
	for (size_t i = 0; i < t->n_extra_excluded && t->on_exclude; i++)
		t->on_exclude(t->on_exclude_ctx, t->extra_excluded[i]);
}

ssize_t opal_procs_mapping_of(const struct opal_proc *p, uint64_t addr)
{
	const struct opal_map_entry *m = opal_maps_find(p->maps, p->n_maps, addr);

	return m ? m - p->maps : -1;
}

bool opal_procs_refresh_for(struct opal_proc_table *t, struct opal_proc *p, const uint64_t *addrs,
			    size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (opal_procs_mapping_of(p, addrs[i]) < 0)
			break;
	if (i == n || p->gone)
		return false;
	if (p->maps_read && t->src->now_ns(t->src->ctx) - p->maps_read_ns < OPAL_MAPS_REREAD_NS)
		return false;
	read_maps(t, p);
	HOOK(t, maps_reread, p);
	return true;
}

/* A mapping backed by a file we can open through map_files: it has an
 * inode and a path, and is not a kernel-provided area like [vdso]. */
static bool is_file_mapping(const struct opal_map_entry *m)
{
	return m->inode != 0 && m->path[0] != '\0' && m->path[0] != '[';
}

/* The vDSO: the same image as the collector's own (vdso.h) when the sizes
 * agree (64-bit processes of this kernel). */
static bool resolve_vdso(struct opal_proc_table *t, const struct opal_map_entry *m,
			 struct opal_map_res *r)
{
	const struct opal_file *v = t->vdso;

	if (!v || strcmp(m->path, "[vdso]") != 0 || m->limit - m->start != v->key.size ||
	    opal_elf_load_bias(&v->elf, m->start, m->limit, 0, m->executable, &r->load_bias) < 0)
		return false;
	r->key = v->key;
	r->state = OPAL_MAP_FILE;
	return true;
}

const struct opal_map_res *opal_procs_resolve(struct opal_proc_table *t, struct opal_proc *p,
					      size_t i, struct opal_file **file)
{
	struct opal_map_res *r = &p->res[i];
	const struct opal_map_entry *m = &p->maps[i];
	struct opal_file *f;
	int err;

	*file = NULL;
	if (r->state == OPAL_MAP_FILE) {
		if ((*file = opal_files_lookup(t->files, &r->key)))
			return r;
		r->state = OPAL_MAP_UNRESOLVED;   /* its entry was dropped by the bound */
	}
	if (r->state != OPAL_MAP_UNRESOLVED)
		return r;
	if (resolve_vdso(t, m, r)) {
		*file = t->vdso;
		return r;
	}
	if (!is_file_mapping(m)) {
		r->state = OPAL_MAP_NOFILE;
		return r;
	}
	err = opal_files_resolve(t->files, p->pid, m, &f);
	/* gone since its maps were read: a file already known by its device
	 * and inode is the one it mapped (as for an exit event's VMAs) */
	if (err == -ESRCH || err == -ENOENT) {
		struct opal_file *known = opal_files_by_inode(t->files, makedev(m->dev_major,
									      m->dev_minor),
							      m->inode);
		if (known) {
			f = known;
			err = 0;
		}
	}
	if (err == 0 &&
	    (err = opal_elf_load_bias(&f->elf, m->start, m->limit, m->offset, m->executable,
				     &r->load_bias)) < 0)
		t->ctr->file_open_errors++;   /* the mapping lies outside every PT_LOAD */
	if (err < 0) {
		opal_debug("pid %d: %s: unusable for address translation: %s", (int)p->pid, m->path,
			   strerror(-err));
		r->state = OPAL_MAP_ERROR;
		return r;
	}
	r->key = f->key;
	r->state = OPAL_MAP_FILE;
	*file = f;
	return r;
}

bool opal_procs_has_jit(const struct opal_proc *p)
{
	for (size_t i = 0; i < p->n_maps; i++)
		if (opal_maps_is_jit(&p->maps[i]))
			return true;
	return false;
}
