/* BPF unwind tables and process mapping arrays (unwind_maps.h). */
#include "unwind/unwind_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "proc/debugfile.h"
#include "unwind/table/unwind_paged.h"
#include "shared/log.h"

static size_t finish_jobs(struct opal_unwind_maps *m, struct opal_unwind_job *j, uint64_t now_ns,
			  bool load);

static uint64_t id_hash(const opal_file_id *id)
{
	return opal_hash_bytes(OPAL_HASH_SEED, id->b, sizeof(id->b));
}

int opal_unwind_maps_init(struct opal_unwind_maps *m, int info_fd, int rules_fd, int bodies_fd,
			  int procs_fd, uint64_t max_bytes, size_t max_files,
			  struct opal_counters *ctr)
{
	memset(m, 0, sizeof(*m));
	if (opal_htab_init(&m->by_id, 8))
		return -ENOMEM;
	opal_list_init(&m->idle);
	m->info_fd = info_fd;
	m->rules_fd = rules_fd;
	m->bodies_fd = bodies_fd;
	m->procs_fd = procs_fd;
	m->max_bytes = max_bytes ? max_bytes : OPAL_UNWIND_DEFAULT_MAX_BYTES;
	m->max_files = max_files ? max_files : OPAL_UNWIND_DEFAULT_MAX_FILES;
	m->ctr = ctr;
	opal_unwind_limits_default(&m->lim);
	m->debug_root = OPAL_DEBUGFILE_ROOT;
	/* slot 0 is handed out first */
	for (uint32_t i = 0; i < OPAL_UNWIND_MAX_TABLES; i++)
		m->free_slots[i] = OPAL_UNWIND_MAX_TABLES - 1 - i;
	m->n_free = OPAL_UNWIND_MAX_TABLES;
	return 0;
}

static bool have_bpf(const struct opal_unwind_maps *m)
{
	return m->info_fd >= 0;
}

/* Removes `f`'s table from BPF (info first, so BPF stops using the arrays
 * before they go) and frees its slot. */
static void unload(struct opal_unwind_maps *m, struct opal_unwind_file *f)
{
	if (f->state != OPAL_UFILE_LOADED)
		return;
	if (have_bpf(m)) {
		struct opal_unwind_table_info none = { 0 };
		bpf_map_update_elem(m->info_fd, &f->slot, &none, BPF_ANY);
		bpf_map_delete_elem(m->rules_fd, &f->slot);
		bpf_map_delete_elem(m->bodies_fd, &f->slot);
	}
	if (f->rules)
		munmap((void *)f->rules, (size_t)f->n_elems * OPAL_UNWIND_PAGE_BYTES);
	if (f->bodies)
		munmap((void *)f->bodies, f->n_bodies ? (size_t)f->n_bodies * sizeof(*f->bodies) : 1);
	f->rules = NULL;
	f->bodies = NULL;
	opal_unwind_table_free(&f->table);
	m->free_slots[m->n_free++] = f->slot;
	m->bytes -= f->bytes;
	m->n_loaded--;
	f->bytes = 0;
	f->state = OPAL_UFILE_PENDING;
	m->ctr->unwind_tables_unloaded++;
}

static void free_file(struct opal_unwind_maps *m, struct opal_unwind_file *f)
{
	unload(m, f);
	opal_htab_remove(&m->by_id, &f->node);
	if (opal_list_linked(&f->idle))
		opal_list_del(&f->idle);
	m->n_files--;
	free(f);
}

void opal_unwind_maps_destroy(struct opal_unwind_maps *m)
{
	if (m->threaded) {
		finish_jobs(m, opal_unwind_builder_stop(&m->builder), 0, false);
		m->threaded = false;
	}
	for (size_t b = 0; b < m->by_id.nbuckets; b++) {
		while (m->by_id.buckets[b]) {
			struct opal_unwind_file *f =
				opal_container_of(m->by_id.buckets[b], struct opal_unwind_file, node);
			free_file(m, f);
		}
	}
	opal_htab_destroy(&m->by_id);
}

struct opal_unwind_file *opal_unwind_file_get(struct opal_unwind_maps *m, const opal_file_id *id,
					      uint64_t now_ns)
{
	uint64_t h = id_hash(id);
	struct opal_unwind_file *f;

	for (struct opal_hnode *n = opal_htab_first(&m->by_id, h); n; n = opal_htab_next(n)) {
		f = opal_container_of(n, struct opal_unwind_file, node);
		if (opal_file_id_eq(&f->id, id)) {
			if (f->refs++ == 0 && opal_list_linked(&f->idle))
				opal_list_del(&f->idle);
			return f;
		}
	}
	/* make room among entries nobody holds, oldest first */
	while (m->n_files >= m->max_files) {
		struct opal_list *last = opal_list_last(&m->idle);
		if (!last)
			break;   /* every entry is held: the bound is the processes' */
		free_file(m, opal_container_of(last, struct opal_unwind_file, idle));
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->id = *id;
	f->state = OPAL_UFILE_PENDING;
	f->refs = 1;
	opal_list_init(&f->idle);
	opal_htab_insert(&m->by_id, &f->node, h);
	m->n_files++;
	(void)now_ns;
	return f;
}

void opal_unwind_file_put(struct opal_unwind_maps *m, struct opal_unwind_file *f,
			  uint64_t now_ns)
{
	if (!f || f->refs == 0)
		return;
	if (--f->refs == 0) {
		f->idle_since_ns = now_ns;
		opal_list_add(&m->idle, &f->idle);
	}
}

void opal_unwind_file_hold(struct opal_unwind_maps *m, struct opal_unwind_file *f)
{
	(void)m;
	if (f->refs++ == 0 && opal_list_linked(&f->idle))
		opal_list_del(&f->idle);
}

uint32_t opal_unwind_file_slot(struct opal_unwind_file *f, uint64_t now_ns)
{
	switch (f->state) {
	case OPAL_UFILE_LOADED:
		return f->slot;
	case OPAL_UFILE_FAILED:
		if (f->err == -ENOSPC && now_ns - f->failed_ns >= OPAL_UNWIND_RETRY_NS) {
			f->state = OPAL_UFILE_PENDING;
			return OPAL_SLOT_PENDING;
		}
		return OPAL_SLOT_NONE;
	}
	return OPAL_SLOT_PENDING;
}

bool opal_unwind_file_wants_ahead(const struct opal_unwind_maps *m,
				  const struct opal_unwind_file *f)
{
	return f->state == OPAL_UFILE_PENDING && f->refs >= OPAL_UNWIND_AHEAD_REFS &&
	       m->bytes < m->max_bytes / 2;
}

/* Unloads idle tables, least recently released first, until a slot and
 * `bytes` more fit. Returns 0 or -ENOSPC. */
static int make_room(struct opal_unwind_maps *m, uint64_t bytes)
{
	struct opal_list *l = m->idle.prev;

	while ((m->n_free == 0 || m->bytes + bytes > m->max_bytes) && l != &m->idle) {
		struct opal_unwind_file *f = opal_container_of(l, struct opal_unwind_file, idle);
		l = l->prev;
		unload(m, f);
	}
	return m->n_free > 0 && m->bytes + bytes <= m->max_bytes ? 0 : -ENOSPC;
}

/* An inner array like the BPF object's templates: same type, sizes and
 * flags (BPF_F_INNER_MAP lets its size differ). Returns fd or -errno. */
static int create_inner(const char *name, uint32_t value_size, uint32_t n, uint32_t flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_INNER_MAP | flags);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, name, 4, value_size, n ? n : 1, &o);

	return fd < 0 ? -errno : fd;
}

/* Writes values[0..n) at keys first..first+n-1 of array `fd` in batches
 * of BATCH (one system call each). */
static int fill_array(int fd, uint32_t first, const void *values, size_t value_size, uint32_t n)
{
	enum { BATCH = 4096 };
	static uint32_t keys[BATCH];
	const char *v = values;

	for (uint32_t done = 0; done < n;) {
		uint32_t cnt = n - done < BATCH ? n - done : BATCH;
		for (uint32_t i = 0; i < cnt; i++)
			keys[i] = first + done + i;
		if (bpf_map_update_batch(fd, keys, v + (size_t)done * value_size, &cnt, NULL) < 0)
			return -errno;
		done += cnt;
	}
	return 0;
}

/* Maps BPF_F_MMAPABLE array `fd` (`bytes` of values, bytes > 0) writable.
 * Returns it or MAP_FAILED (errno). */
static void *map_array(int fd, size_t bytes)
{
	return mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

/* Puts built table `t` into BPF at f->slot: inner arrays (the rules in
 * the paged layout, unwind_paged.h), outer entries, info last. The arrays
 * stay mapped (read-only) for lookups; their descriptors are closed (the
 * outer maps and the mappings hold them). */
static int load_bpf(struct opal_unwind_maps *m, struct opal_unwind_file *f,
		    const struct opal_unwind_table *t)
{
	uint32_t n_elems = opal_unwind_paged_elems(t->n_rules);
	size_t rbytes = (size_t)n_elems * OPAL_UNWIND_PAGE_BYTES;
	size_t bbytes = (size_t)t->n_bodies * sizeof(*t->bodies);
	void *rmap = MAP_FAILED, *bmap = MAP_FAILED;
	int rfd = -1, bfd = -1, err;

	if ((rfd = err = create_inner("opal_rules", OPAL_UNWIND_PAGE_BYTES, n_elems,
				      BPF_F_MMAPABLE)) < 0 ||
	    (bfd = err = create_inner("opal_bodies", sizeof(struct opal_unwind_body), t->n_bodies,
				      BPF_F_MMAPABLE)) < 0)
		goto fail;
	if ((rmap = map_array(rfd, rbytes)) == MAP_FAILED ||
	    (bmap = map_array(bfd, bbytes ? bbytes : 1)) == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	opal_unwind_paged_fill(t, f->entry, rmap, &f->info);
	memcpy(bmap, t->bodies, bbytes);
	mprotect(rmap, rbytes, PROT_READ);
	mprotect(bmap, bbytes ? bbytes : 1, PROT_READ);
	if (bpf_map_update_elem(m->rules_fd, &f->slot, &rfd, BPF_ANY) < 0 ||
	    bpf_map_update_elem(m->bodies_fd, &f->slot, &bfd, BPF_ANY) < 0 ||
	    bpf_map_update_elem(m->info_fd, &f->slot, &f->info, BPF_ANY) < 0) {
		err = -errno;
		bpf_map_delete_elem(m->rules_fd, &f->slot);
		bpf_map_delete_elem(m->bodies_fd, &f->slot);
		goto fail;
	}
	close(rfd);
	close(bfd);
	f->rules = rmap;
	f->n_elems = n_elems;
	f->bodies = bmap;
	return 0;
fail:
	if (rmap != MAP_FAILED)
		munmap(rmap, rbytes);
	if (bmap != MAP_FAILED)
		munmap(bmap, bbytes ? bbytes : 1);
	if (rfd >= 0)
		close(rfd);
	if (bfd >= 0)
		close(bfd);
	return err;
}

static int fail_file(struct opal_unwind_maps *m, struct opal_unwind_file *f, int err,
		     uint64_t now_ns)
{
	f->state = OPAL_UFILE_FAILED;
	f->err = err;
	f->failed_ns = now_ns;
	m->ctr->unwind_table_errors++;
	return err;
}

/* Loads the result of job `j` for file `f` (BUILDING or PENDING). */
static int finish(struct opal_unwind_maps *m, struct opal_unwind_file *f,
		  struct opal_unwind_job *j, uint64_t now_ns)
{
	struct opal_unwind_table *t = &j->table;
	char hex[33];
	int err;

	opal_file_id_to_hex(&f->id, hex);
	if (j->err < 0) {
		opal_debug("file %s: no unwind table: %s", hex, strerror(-j->err));
		return fail_file(m, f, j->err, now_ns);
	}
	/* in BPF the rules take whole 4 KiB pages, and their index */
	uint64_t bytes = have_bpf(m) ? (uint64_t)opal_unwind_paged_elems(t->n_rules) *
						       OPAL_UNWIND_PAGE_BYTES +
					       (uint64_t)t->n_bodies * sizeof(*t->bodies)
				     : t->stats.bytes;
	if ((err = make_room(m, bytes)) < 0) {
		opal_warn("file %s: unwind table of %llu bytes does not fit (%llu of %llu bytes, "
			  "%zu tables loaded): frame pointers until room frees up", hex,
			  (unsigned long long)bytes, (unsigned long long)m->bytes,
			  (unsigned long long)m->max_bytes, m->n_loaded);
		return fail_file(m, f, err, now_ns);
	}
	f->slot = m->free_slots[--m->n_free];
	f->entry = j->entry;
	f->base = t->base;
	f->n_rules = t->n_rules;
	f->n_bodies = t->n_bodies;
	f->bytes = bytes;
	if (have_bpf(m)) {
		if ((err = load_bpf(m, f, t)) < 0) {
			m->free_slots[m->n_free++] = f->slot;
			f->bytes = 0;
			opal_warn("file %s: loading its unwind table into BPF: %s", hex,
				  strerror(-err));
			return fail_file(m, f, err, now_ns);
		}
	} else {
		f->table = *t;   /* userspace copy for lookups */
		memset(t, 0, sizeof(*t));
	}
	f->state = OPAL_UFILE_LOADED;
	m->bytes += f->bytes;
	m->n_loaded++;
	m->ctr->unwind_tables_built++;
	opal_debug("file %s: unwind table in slot %u: %u rules, %u bodies, %llu bytes, %s in "
		   "%.1f ms%s", hex, f->slot, f->n_rules, f->n_bodies, (unsigned long long)f->bytes,
		   j->cached ? "read from the cache" : "built", j->build_ns / 1e6,
		   t->stats.debug_file ? "; .debug_frame of its debug file" : "");
	return 0;
}

int opal_unwind_maps_start_builder(struct opal_unwind_maps *m, struct opal_unwind_store *store,
				   uint32_t build_pct)
{
	m->store = store;
	m->build_pct = build_pct ? build_pct : OPAL_UNWIND_DEFAULT_BUILD_PCT;
	int err = opal_unwind_builder_start(&m->builder, &m->lim, m->debug_root, store,
					    m->build_pct);

	m->threaded = err == 0;
	return err;
}

int opal_unwind_file_request(struct opal_unwind_maps *m, struct opal_unwind_file *f, int fd,
			     uint64_t now_ns)
{
	if (f->state == OPAL_UFILE_BUILDING)
		return 1;
	if (f->state != OPAL_UFILE_PENDING)
		return 0;
	struct stat st;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0 || fstat(dfd, &st) < 0) {
		fail_file(m, f, -errno, now_ns);
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	/* small files are built at once (a few ms): only large ones would
	 * hold up the main loop */
	if (!m->threaded || ((uint64_t)st.st_size <= OPAL_UNWIND_INLINE_BYTES &&
			     opal_unwind_builder_may_run(&m->builder))) {
		struct opal_unwind_job j = { .fd = dfd, .id = f->id, .debug_root = m->debug_root,
					     .store = m->store };
		opal_unwind_job_run(&j, &m->lim);
		if (m->threaded)
			opal_unwind_builder_charge(&m->builder, j.cpu_ns);
		finish(m, f, &j, now_ns);
		close(dfd);
		opal_unwind_table_free(&j.table);
		return 0;
	}
	if (opal_unwind_builder_submit(&m->builder, f, dfd, &f->id) < 0)
		return -EAGAIN;
	f->state = OPAL_UFILE_BUILDING;
	opal_unwind_file_hold(m, f);   /* by the job */
	m->n_building++;
	return 1;
}

/* Ends BUILDING for the file of each job in list `j`, loading the tables
 * when `load`. */
static size_t finish_jobs(struct opal_unwind_maps *m, struct opal_unwind_job *j, uint64_t now_ns,
			  bool load)
{
	size_t n = 0;

	while (j) {
		struct opal_unwind_job *next = j->next;
		struct opal_unwind_file *f = j->cookie;
		f->state = OPAL_UFILE_PENDING;
		m->n_building--;
		if (load && j->err != -ECANCELED)
			finish(m, f, j, now_ns);
		opal_unwind_file_put(m, f, now_ns);
		opal_unwind_job_free(j);
		j = next;
		n++;
	}
	return n;
}

size_t opal_unwind_maps_poll(struct opal_unwind_maps *m, uint64_t now_ns)
{
	if (!m->threaded || m->n_building == 0)
		return 0;
	return finish_jobs(m, opal_unwind_builder_take(&m->builder), now_ns, true);
}

bool opal_unwind_maps_wait(struct opal_unwind_maps *m, int timeout_ms, uint64_t now_ns)
{
	if (m->threaded && m->n_building > 0)
		opal_unwind_builder_wait(&m->builder, timeout_ms);
	opal_unwind_maps_poll(m, now_ns);
	return m->n_building == 0;
}

int opal_unwind_file_lookup(struct opal_unwind_maps *m, const struct opal_unwind_file *f,
			    uint64_t vaddr, struct opal_unwind_body *out)
{
	int gap = f->entry && vaddr >= f->entry && vaddr - f->entry < OPAL_UNWIND_ENTRY_SPAN;
	const struct opal_unwind_body *b;

	(void)m;
	memset(out, 0, sizeof(*out));   /* GAP */
	if (f->state != OPAL_UFILE_LOADED)
		return -ENOENT;
	if (f->rules) {
		/* the search BPF runs, over the mapped BPF arrays */
		int i = opal_unwind_paged_lookup(f->rules, f->n_elems, &f->info, vaddr);
		if (i < 0 || (uint32_t)i >= f->n_bodies)
			return gap;
		b = &f->bodies[i];
	} else {
		b = opal_unwind_table_lookup(&f->table, vaddr, NULL, NULL);
	}
	*out = *b;
	return OPAL_UNWIND_KIND(out->cfa) == OPAL_CFA_GAP ? gap : 0;
}

void opal_unwind_maps_expire(struct opal_unwind_maps *m, uint64_t now_ns)
{
	struct opal_list *l;

	while ((l = opal_list_last(&m->idle))) {
		struct opal_unwind_file *f = opal_container_of(l, struct opal_unwind_file, idle);
		if (now_ns - f->idle_since_ns < OPAL_UNWIND_IDLE_NS && m->n_files <= m->max_files)
			break;
		free_file(m, f);
	}
}

int opal_unwind_proc_install(struct opal_unwind_maps *m, uint32_t pid,
			     const struct opal_unwind_mapping *maps, uint32_t n, uint64_t gen)
{
	struct opal_unwind_proc_hdr hdr = { .n = n, .gen = gen };
	uint32_t zero = 0;
	int fd, err = 0;

	_Static_assert(sizeof(hdr) == sizeof(struct opal_unwind_mapping), "header size");
	if (n > OPAL_PROC_MAX_MAPPINGS)
		return -E2BIG;
	m->ctr->proc_installs++;
	if (m->procs_fd < 0)
		return 0;
	fd = err = create_inner("opal_procmaps", sizeof(struct opal_unwind_mapping), n + 1, 0);
	if (fd < 0)
		goto out;
	if (bpf_map_update_elem(fd, &zero, &hdr, BPF_ANY) < 0)
		err = -errno;
	else if (n > 0)
		err = fill_array(fd, 1, maps, sizeof(*maps), n);
	if (err == 0 && bpf_map_update_elem(m->procs_fd, &pid, &fd, BPF_ANY) < 0)
		err = errno == ENOSPC ? -E2BIG : -errno;
	close(fd);
out:
	if (err < 0)
		m->ctr->proc_install_errors++;
	return err;
}

void opal_unwind_proc_remove(struct opal_unwind_maps *m, uint32_t pid)
{
	if (m->procs_fd >= 0)
		bpf_map_delete_elem(m->procs_fd, &pid);
}
