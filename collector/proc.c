/* Per-process maps cache (proc.h). */
#include "proc.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "samples.h"
#include "unwind_proc.h"

int opal_procs_init(struct opal_proc_table *t, size_t max_procs, bool include_self,
		    const struct opal_proc_source *src, struct opal_file_table *files,
		    struct opal_counters *ctr)
{
	memset(t, 0, sizeof(*t));
	if (opal_htab_init(&t->by_pid, 8))
		return -ENOMEM;
	opal_list_init(&t->lru);
	opal_list_init(&t->parked);
	opal_list_init(&t->gone);
	t->max_procs = max_procs ? max_procs : 1;
	t->include_self = include_self;
	t->src = src;
	t->files = files;
	t->ctr = ctr;
	return 0;
}

static void drop_maps(struct opal_proc_table *t, struct opal_proc *p)
{
	opal_procs_release_tables(t, p);
	opal_maps_free(p->maps, p->n_maps);
	free(p->res);
	p->maps = NULL;
	p->res = NULL;
	p->n_maps = 0;
}

static void release_proc(struct opal_proc_table *t, struct opal_proc *p)
{
	opal_procs_uninstall(t, p);
	drop_maps(t, p);
	opal_proc_info_free(&p->info);
	free(p);
}

static void free_proc(struct opal_proc_table *t, struct opal_proc *p)
{
	opal_htab_remove(&t->by_pid, &p->node);
	opal_list_del(&p->lru);
	t->n_procs--;
	if (p->n_parked > 0) {
		/* its parked samples are unwound with these maps later; a new
		 * process with the same pid gets a new entry */
		opal_procs_uninstall(t, p);
		p->gone = true;
		opal_list_add(&t->gone, &p->lru);
		return;
	}
	release_proc(t, p);
}

void opal_procs_unparked(struct opal_proc_table *t, struct opal_proc *p)
{
	if (p->n_parked > 0 && --p->n_parked == 0 && p->gone) {
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
	opal_samples_drop_parked(t);
	opal_procs_clear(t);
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

	drop_maps(t, p);
	p->maps_read = true;
	p->maps_read_ns = t->src->now_ns(t->src->ctx);
	t->ctr->maps_reads++;
	err = t->src->read_maps(t->src->ctx, p->pid, &maps, &n);
	p->maps_err = err;
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
}

void opal_procs_set_maps(struct opal_proc_table *t, struct opal_proc *p,
			 struct opal_map_entry *maps, struct opal_map_res *res, size_t n)
{
	drop_maps(t, p);
	p->maps = maps;
	p->res = res;
	p->n_maps = n;
	p->maps_err = 0;
}

void opal_procs_reread(struct opal_proc_table *t, struct opal_proc *p)
{
	bool installed = p->installed;

	if (p->gone)
		return;   /* its maps are all its parked samples have */
	read_maps(t, p);
	/* BPF's array must not outlive the table references just released */
	if (installed)
		opal_procs_install(t, p);
}

static bool in_extra(const struct opal_proc_table *t, pid_t pid)
{
	for (size_t i = 0; i < t->n_extra_excluded; i++)
		if (t->extra_excluded[i] == pid)
			return true;
	return false;
}

struct opal_proc *opal_procs_get(struct opal_proc_table *t, pid_t pid)
{
	struct opal_proc *p = find(t, pid);

	if (p) {
		opal_list_move_front(&t->lru, &p->lru);
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	if (t->src->read_info(t->src->ctx, pid, &p->info) < 0) {
		free(p);
		return NULL;
	}
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

bool opal_procs_exited(struct opal_proc_table *t, pid_t pid)
{
	bool was = false;

	opal_procs_forget(t, pid);
	for (size_t i = 0; i < t->n_extra_excluded; i++) {
		if (t->extra_excluded[i] == pid) {
			t->extra_excluded[i] = t->extra_excluded[--t->n_extra_excluded];
			was = true;
			break;
		}
	}
	return was;
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
	opal_procs_reread(t, p);
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
