/* Interpreter processes and their code objects (interp.h). */
#include "interp/interp.h"

#include <bpf/bpf.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "interp/python_proc.h"
#include "interp/tctx.h"
#include "shared/log.h"

/* The runtimes opal knows, probed in this order. */
static const struct opal_runtime *const runtimes[] = { &opal_runtime_cpython };

/* The probe result of one file. */
struct interp_file {
	struct opal_hnode node;
	struct opal_list lru;
	opal_file_id id;
	const struct opal_runtime *rt;   /* NULL: not an interpreter */
	void *info;
	bool has_tctx;                   /* defines otel_thread_ctx_v1 */
	struct opal_tls_var tctx;
};

struct opal_interp_proc {
	bool synced;                 /* its current maps were looked at */
	bool installed;              /* BPF holds its walk parameters */
	const struct opal_runtime *rt;
	struct opal_interp_setup setup;
	struct opal_list codes;      /* its code cache entries */
	bool tctx_installed;         /* BPF holds its thread context walk */
	bool tctx_counted;           /* counted in thread_ctx_procs / _unsupported */
};

static struct opal_interp_proc *state_of(struct opal_proc *p)
{
	if (!p->interp && (p->interp = calloc(1, sizeof(*p->interp))))
		opal_list_init(&p->interp->codes);
	return p->interp;
}

/* Removes the walk `w` of `pid` from BPF, unless BPF holds another one
 * (it may have set a new image up since: an exec). */
static void remove_walk(struct opal_interp *ip, uint32_t pid, const struct opal_py_walk *w)
{
	struct opal_py_walk now;

	if (ip->walk_map_fd >= 0 && bpf_map_lookup_elem(ip->walk_map_fd, &pid, &now) == 0 &&
	    memcmp(&now, w, sizeof(now)) == 0)
		bpf_map_delete_elem(ip->walk_map_fd, &pid);
}

/* Forgets p's set-up; with `keep_bpf` its BPF entries stay for the caller
 * to overwrite or remove (opal_interp_sync). */
static void release(struct opal_interp *ip, struct opal_proc *p, bool keep_bpf)
{
	struct opal_interp_proc *s = p->interp;
	uint32_t pid = (uint32_t)p->pid;

	if (!s)
		return;
	if (s->installed && !keep_bpf)
		remove_walk(ip, pid, &s->setup.walk);
	s->installed = false;
	if (s->tctx_installed && !keep_bpf && ip->tctx_map_fd >= 0)
		bpf_map_delete_elem(ip->tctx_map_fd, &pid);
	s->tctx_installed = false;
	if (s->rt && s->setup.state)
		s->rt->free_state(s->setup.state);
	memset(&s->setup, 0, sizeof(s->setup));
	s->rt = NULL;
}

/* New maps (re-read, or from an exit event): look again at the next sample. */
static void on_maps_dropped(void *ctx, struct opal_proc *p)
{
	if (p->interp)
		p->interp->synced = false;
}

static void on_forgotten(void *ctx, struct opal_proc *p)
{
	struct opal_interp *ip = ctx;

	if (!p->interp)
		return;
	release(ip, p, false);
	opal_code_cache_forget_process(&ip->codes, &p->interp->codes);
}

static void on_freed(void *ctx, struct opal_proc *p)
{
	if (p->interp) {
		on_forgotten(ctx, p);
		free(p->interp);
		p->interp = NULL;
	}
}

int opal_interp_init(struct opal_interp *ip, struct opal_proc_table *procs, int walk_map_fd,
		     size_t code_cache_bytes, struct opal_counters *ctr)
{
	const struct opal_proc_hooks hooks = {
		.maps_dropped = on_maps_dropped,
		.forgotten = on_forgotten,
		.freed = on_freed,
		.ctx = ip,
	};
	int err;

	memset(ip, 0, sizeof(*ip));
	ip->runtimes = runtimes;
	ip->n_runtimes = sizeof(runtimes) / sizeof(runtimes[0]);
	ip->procs = procs;
	ip->walk_map_fd = walk_map_fd;
	ip->tctx_map_fd = -1;
	ip->files_map_fd = -1;
	ip->ctr = ctr;
	opal_list_init(&ip->files_lru);
	if (!(ip->copy_buf = malloc(OPAL_INTERP_CODE_COPY_MAX)))
		return -ENOMEM;
	if ((err = opal_code_cache_init(&ip->codes, code_cache_bytes, ctr)) < 0)
		goto fail_buf;
	if ((err = opal_htab_init(&ip->files, 8)) < 0)
		goto fail_codes;
	if ((err = opal_procs_add_hooks(procs, &hooks)) < 0)
		goto fail_files;
	return 0;
fail_files:
	opal_htab_destroy(&ip->files);
fail_codes:
	opal_code_cache_destroy(&ip->codes);
fail_buf:
	free(ip->copy_buf);
	return err;
}

static void free_file(struct opal_interp *ip, struct interp_file *f)
{
	opal_htab_remove(&ip->files, &f->node);
	opal_list_del(&f->lru);
	ip->n_files--;
	if (f->rt)
		f->rt->free_info(f->info);
	free(f);
}

static void release_list(struct opal_interp *ip, struct opal_list *head)
{
	for (struct opal_list *l = head->next; l != head; l = l->next)
		on_freed(ip, opal_container_of(l, struct opal_proc, lru));
}

void opal_interp_destroy(struct opal_interp *ip)
{
	struct opal_list *l;

	release_list(ip, &ip->procs->lru);
	release_list(ip, &ip->procs->gone);
	opal_procs_remove_hooks(ip->procs, ip);
	while ((l = opal_list_last(&ip->files_lru)))
		free_file(ip, opal_container_of(l, struct interp_file, lru));
	opal_htab_destroy(&ip->files);
	opal_code_cache_destroy(&ip->codes);
	free(ip->copy_buf);
}

/* The probe result of file `f` (probed now when unknown), or NULL on
 * ENOMEM. */
static struct interp_file *probe(struct opal_interp *ip, struct opal_file *f)
{
	uint64_t h = opal_hash_bytes(OPAL_HASH_SEED, f->id.b, sizeof(f->id.b));
	struct interp_file *e;
	const char *why = NULL;
	int fd;

	for (struct opal_hnode *n = opal_htab_first(&ip->files, h); n; n = opal_htab_next(n)) {
		e = opal_container_of(n, struct interp_file, node);
		if (opal_file_id_eq(&e->id, &f->id)) {
			opal_list_move_front(&ip->files_lru, &e->lru);
			return e;
		}
	}
	if ((fd = opal_files_fd(ip->procs->files, f)) < 0)
		return NULL;   /* no descriptor now: probed when it has one again */
	if (!(e = calloc(1, sizeof(*e))))
		return NULL;
	e->id = f->id;
	e->has_tctx = opal_tls_probe(fd, OPAL_TCTX_SYMBOL, &e->tctx) == 0;
	for (size_t i = 0; i < ip->n_runtimes && !e->rt; i++) {
		const struct opal_runtime *rt = ip->runtimes[i];
		int err = rt->probe_file(fd, &e->info, &why);
		if (err == 0) {
			e->rt = rt;
		} else if (err != -ENOENT) {
			ip->ctr->interp_unsupported++;
			opal_warn("%s: a %s interpreter opal cannot walk (%s): its processes get no "
				  "%s frames", f->path, rt->name, why ? why : strerror(-err), rt->name);
			break;
		}
	}
	opal_htab_insert(&ip->files, &e->node, h);
	opal_list_add(&ip->files_lru, &e->lru);
	if (++ip->n_files > OPAL_INTERP_MAX_FILES)
		free_file(ip, opal_container_of(opal_list_last(&ip->files_lru), struct interp_file,
						lru));
	return e;
}

int opal_interp_file_entry(const struct opal_file *file, const struct opal_py_walk *walk,
			   uint64_t bias, struct opal_interp_file_key *k, struct opal_interp_file *v)
{
	const struct opal_elf_info *e = &file->elf;

	memset(k, 0, sizeof(*k));
	memset(v, 0, sizeof(*v));
	k->dev = (uint32_t)(major(file->key.dev) << 20 | minor(file->key.dev));
	k->mtime_nsec = (uint32_t)file->key.mtime_nsec;
	k->ino = file->key.ino;
	k->size = file->key.size;
	k->mtime_sec = file->key.mtime_sec;
	v->walk = *walk;
	v->walk.runtime -= bias;
	v->exec_vaddr = UINT64_MAX;
	for (size_t i = 0; i < e->n_loads; i++)
		if ((e->loads[i].flags & PF_X) && e->loads[i].vaddr < v->exec_vaddr) {
			v->exec_vaddr = e->loads[i].vaddr;
			v->text_vaddr = e->loads[i].vaddr & ~(uint64_t)(OPAL_PAGE_SIZE - 1);
			v->text_offset = e->loads[i].offset & ~(uint64_t)(OPAL_PAGE_SIZE - 1);
		}
	return v->exec_vaddr == UINT64_MAX ? -ENOENT : 0;
}

/* Tells BPF how to set up the next processes of `file`. */
static void publish(struct opal_interp *ip, const struct opal_file *file,
		    const struct opal_py_walk *walk, uint64_t bias)
{
	struct opal_interp_file_key k;
	struct opal_interp_file v;

	if (ip->files_map_fd < 0 || opal_interp_file_entry(file, walk, bias, &k, &v) < 0)
		return;
	if (bpf_map_update_elem(ip->files_map_fd, &k, &v, BPF_ANY) < 0)
		opal_debug("%s: not published for BPF set-up: %s", file->path, strerror(errno));
}

static void install(struct opal_interp *ip, struct opal_proc *p, struct opal_interp_proc *s,
		    const struct interp_file *f, const struct opal_file *file, uint64_t bias)
{
	uint32_t pid = (uint32_t)p->pid;
	const char *why = NULL;
	int err;

	if ((err = f->rt->setup(f->info, p->pid, bias, &s->setup, &why)) < 0) {
		opal_debug("pid %d: %s interpreter not set up: %s", (int)p->pid, f->rt->name,
			   why ? why : strerror(-err));
		return;
	}
	s->rt = f->rt;
	if (ip->walk_map_fd >= 0 &&
	    bpf_map_update_elem(ip->walk_map_fd, &pid, &s->setup.walk, BPF_ANY) < 0) {
		opal_warn("pid %d: cannot install its %s walk parameters: %s", (int)p->pid,
			  f->rt->name, strerror(errno));
		return;
	}
	s->installed = true;
	ip->ctr->interp_procs++;
	publish(ip, file, &s->setup.walk, bias);
	opal_debug("pid %d: %s frames on", (int)p->pid, f->rt->name);
}

/* The range [lo, hi) of p's mappings of the file mapping `i` maps. */
static void module_range(const struct opal_proc *p, size_t i, uint64_t *lo, uint64_t *hi)
{
	*lo = p->maps[i].start;
	*hi = p->maps[i].limit;
	for (size_t k = 0; k < p->n_maps; k++)
		if (p->maps[k].inode == p->maps[i].inode && p->maps[k].dev_major == p->maps[i].dev_major &&
		    p->maps[k].dev_minor == p->maps[i].dev_minor) {
			*lo = p->maps[k].start < *lo ? p->maps[k].start : *lo;
			*hi = p->maps[k].limit > *hi ? p->maps[k].limit : *hi;
		}
}

/* Installs the thread context walk of module `f`, mapped by p's mapping
 * `i` with load bias `bias`. */
static void tctx_install(struct opal_interp *ip, struct opal_proc *p, struct opal_interp_proc *s,
			 const struct interp_file *f, size_t i, uint64_t bias)
{
	uint32_t pid = (uint32_t)p->pid;
	bool exe = f->tctx.has_interp || (p->info.exe && strcmp(p->info.exe, p->maps[i].path) == 0);
	struct opal_tctx_walk w;
	uint64_t lo, hi;
	int err;

	module_range(p, i, &lo, &hi);
	err = opal_tctx_walk_for(p->pid, &f->tctx, bias, exe, lo, hi, &w);
	if (err == -EAGAIN)
		s->synced = false;   /* ld.so has not resolved it yet: at the next look */
	if (err < 0) {
		if (err != -EAGAIN && !s->tctx_counted) {
			ip->ctr->thread_ctx_unsupported++;
			s->tctx_counted = true;
			opal_warn("pid %d: %s in %s not located (%s): no thread context", (int)p->pid,
				  OPAL_TCTX_SYMBOL, p->maps[i].path, strerror(-err));
		}
		return;
	}
	if (ip->tctx_map_fd >= 0 && bpf_map_update_elem(ip->tctx_map_fd, &pid, &w, BPF_ANY) < 0) {
		opal_warn("pid %d: cannot install its thread context walk: %s", (int)p->pid,
			  strerror(errno));
		return;
	}
	s->tctx_installed = true;
	if (!s->tctx_counted) {
		ip->ctr->thread_ctx_procs++;
		s->tctx_counted = true;
	}
	opal_debug("pid %d: thread context of %s: model %u", (int)p->pid, p->maps[i].path, w.model);
}

void opal_interp_sync(struct opal_interp *ip, struct opal_proc *p)
{
	uint32_t pid = (uint32_t)p->pid;
	struct opal_interp_proc *s;
	struct opal_py_walk old;
	bool runtime = false, had_walk, had_tctx;

	if (p->excluded || p->gone || !(s = state_of(p)) || s->synced)
		return;
	s->synced = true;
	/* BPF keeps the old entries until the new ones overwrite them:
	 * removed first, the process's samples, and the children it forks,
	 * would go without a walk while the new set-up reads its memory */
	had_walk = s->installed;
	had_tctx = s->tctx_installed;
	old = s->setup.walk;
	release(ip, p, true);
	for (size_t i = 0; i < p->n_maps; i++) {
		struct opal_file *file;
		const struct opal_map_res *r;
		struct interp_file *f;
		if (!p->maps[i].executable)
			continue;
		r = opal_procs_resolve(ip->procs, p, i, &file);
		if (r->state != OPAL_MAP_FILE || !file || !(f = probe(ip, file)))
			continue;
		if (f->has_tctx && !s->tctx_installed)
			tctx_install(ip, p, s, f, i, r->load_bias);
		if (f->rt && !runtime) {
			install(ip, p, s, f, file, r->load_bias);
			runtime = true;
		}
	}
	if (had_walk && !s->installed)
		remove_walk(ip, pid, &old);
	if (had_tctx && !s->tctx_installed && ip->tctx_map_fd >= 0)
		bpf_map_delete_elem(ip->tctx_map_fd, &pid);
}

bool opal_interp_is_eval(const struct opal_proc *p, uint64_t pc)
{
	const struct opal_interp_proc *s = p->interp;

	if (!s || !s->rt)
		return false;
	for (size_t i = 0; i < s->setup.n_eval; i++)
		if (pc >= s->setup.eval_start[i] && pc < s->setup.eval_limit[i])
			return true;
	return false;
}

int opal_interp_code_id(struct opal_interp *ip, struct opal_proc *p,
			const struct opal_interp_frame *f, uint64_t *code_id)
{
	struct opal_interp_proc *s = p->interp;
	Opal__Wire__V1__CodeObject msg = OPAL__WIRE__V1__CODE_OBJECT__INIT;
	struct opal_code_entry *e;
	bool capped = false;
	int err;

	if (!s || !s->rt)
		return -ENOENT;
	if ((e = opal_code_cache_find(&ip->codes, p->serial, f->code, f->check))) {
		*code_id = e->code_id;
		return 0;
	}
	ip->ctr->interp_code_reads++;
	err = s->rt->copy_code(s->setup.state, p->pid, f->code, f->check, &msg, ip->copy_buf,
			       OPAL_INTERP_CODE_COPY_MAX, &capped);
	if (err < 0) {
		ip->ctr->interp_code_errors++;
		return err;
	}
	if (capped)
		ip->ctr->interp_code_capped++;
	msg.pid = (uint32_t)p->pid;
	msg.truncated = capped;
	if (!(e = opal_code_cache_add(&ip->codes, &s->codes, p->serial, f->code, f->check, &msg)))
		return -ENOMEM;
	*code_id = e->code_id;
	return 0;
}
