/* Mapped-file table with descriptor LRU (files.h). */
#include "proc/files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shared/log.h"

int opal_file_key_from_fd(int fd, struct opal_file_key *k)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	memset(k, 0, sizeof(*k));
	k->dev = st.st_dev;
	k->ino = st.st_ino;
	k->size = (uint64_t)st.st_size;
	k->mtime_sec = st.st_mtim.tv_sec;
	k->mtime_nsec = st.st_mtim.tv_nsec;
	return 0;
}

static uint64_t key_hash(const struct opal_file_key *k)
{
	return opal_hash_bytes(OPAL_HASH_SEED, k, sizeof(*k));
}

static uint64_t id_hash(const opal_file_id *id)
{
	return opal_hash_bytes(OPAL_HASH_SEED, id->b, sizeof(id->b));
}

static bool key_eq(const struct opal_file_key *a, const struct opal_file_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec;
}

int opal_files_init(struct opal_file_table *t, size_t max_files, size_t max_fds,
		    const struct opal_proc_source *src, struct opal_counters *ctr)
{
	memset(t, 0, sizeof(*t));
	if (opal_htab_init(&t->by_key, 8) || opal_htab_init(&t->by_id, 8)) {
		opal_htab_destroy(&t->by_key);
		return -ENOMEM;
	}
	opal_list_init(&t->lru);
	opal_list_init(&t->fd_lru);
	opal_list_init(&t->pinned);
	t->max_files = max_files ? max_files : 1;
	t->max_fds = max_fds ? max_fds : 1;
	t->src = src;
	t->ctr = ctr;
	return 0;
}

static void close_fd(struct opal_file_table *t, struct opal_file *f)
{
	if (f->fd < 0)
		return;
	close(f->fd);
	f->fd = -1;
	opal_list_del(&f->fd_lru);
	t->n_fds--;
}

/* Gives `f` descriptor `fd` (which it must not have) and enforces the
 * descriptor bound on the other files. */
static void attach_fd(struct opal_file_table *t, struct opal_file *f, int fd)
{
	f->fd = fd;
	opal_list_add(&t->fd_lru, &f->fd_lru);
	t->n_fds++;
	while (t->n_fds > t->max_fds) {
		struct opal_list *last = opal_list_last(&t->fd_lru);
		close_fd(t, opal_container_of(last, struct opal_file, fd_lru));
	}
}

static void free_file(struct opal_file_table *t, struct opal_file *f)
{
	close_fd(t, f);
	opal_htab_remove(&t->by_key, &f->by_key);
	opal_htab_remove(&t->by_id, &f->by_id);
	opal_list_del(&f->lru);
	t->n_files--;
	free(f->path);
	free(f);
}

void opal_files_destroy(struct opal_file_table *t)
{
	struct opal_list *l;

	while ((l = opal_list_last(&t->lru)))
		free_file(t, opal_container_of(l, struct opal_file, lru));
	while ((l = opal_list_last(&t->pinned))) {
		struct opal_file *f = opal_container_of(l, struct opal_file, lru);
		opal_list_del(&f->lru);
		opal_htab_remove(&t->by_key, &f->by_key);
		opal_htab_remove(&t->by_id, &f->by_id);
		close(f->fd);
		free(f->path);
		free(f);
	}
	opal_htab_destroy(&t->by_key);
	opal_htab_destroy(&t->by_id);
}

static void touch(struct opal_file_table *t, struct opal_file *f)
{
	if (f->pinned)
		return;
	opal_list_move_front(&t->lru, &f->lru);
	if (f->fd >= 0)
		opal_list_move_front(&t->fd_lru, &f->fd_lru);
}

struct opal_file *opal_files_lookup(struct opal_file_table *t, const struct opal_file_key *k)
{
	uint64_t h = key_hash(k);

	for (struct opal_hnode *n = opal_htab_first(&t->by_key, h); n; n = opal_htab_next(n)) {
		struct opal_file *f = opal_container_of(n, struct opal_file, by_key);
		if (key_eq(&f->key, k)) {
			touch(t, f);
			return f;
		}
	}
	return NULL;
}

struct opal_file *opal_files_find_id(struct opal_file_table *t, const opal_file_id *id)
{
	uint64_t h = id_hash(id);

	for (struct opal_hnode *n = opal_htab_first(&t->by_id, h); n; n = opal_htab_next(n)) {
		struct opal_file *f = opal_container_of(n, struct opal_file, by_id);
		if (opal_file_id_eq(&f->id, id))
			return f;
	}
	return NULL;
}

/* Witnesses are kept newest first; a repeated one moves to the front. */
static void add_witness(struct opal_file *f, pid_t pid, uint64_t start, uint64_t limit)
{
	unsigned i;

	for (i = 0; i < f->n_witness; i++)
		if (f->witness[i].pid == pid && f->witness[i].start == start &&
		    f->witness[i].limit == limit)
			break;
	if (i == f->n_witness && f->n_witness < OPAL_FILE_WITNESSES)
		f->n_witness++;
	if (i == OPAL_FILE_WITNESSES)
		i--;
	memmove(&f->witness[1], &f->witness[0], i * sizeof(f->witness[0]));
	f->witness[0] = (struct opal_file_witness){ pid, start, limit };
}

static void drop_first_witness(struct opal_file *f)
{
	f->n_witness--;
	memmove(&f->witness[0], &f->witness[1], f->n_witness * sizeof(f->witness[0]));
}

/* Builds a new entry for the regular file open on `fd`. */
static int new_file(struct opal_file_table *t, int fd, const struct opal_file_key *k,
		    const char *path, struct opal_file **out)
{
	struct opal_file *f = calloc(1, sizeof(*f));
	int err;

	if (!f)
		return -ENOMEM;
	if ((err = opal_elf_info_from_fd(fd, &f->elf)) < 0 ||
	    (err = opal_file_id_from_fd(fd, &f->id)) < 0) {
		free(f);
		return err;
	}
	f->path = strdup(path ? path : "");
	if (!f->path) {
		free(f);
		return -ENOMEM;
	}
	f->key = *k;
	f->fd = -1;
	opal_list_init(&f->lru);
	opal_list_init(&f->fd_lru);
	opal_htab_insert(&t->by_key, &f->by_key, key_hash(k));
	opal_htab_insert(&t->by_id, &f->by_id, id_hash(&f->id));
	opal_list_add(&t->lru, &f->lru);
	t->n_files++;
	while (t->n_files > t->max_files) {
		struct opal_list *last = opal_list_last(&t->lru);
		free_file(t, opal_container_of(last, struct opal_file, lru));
	}
	*out = f;
	return 0;
}

int opal_files_resolve(struct opal_file_table *t, pid_t pid, const struct opal_map_entry *m,
		       struct opal_file **out)
{
	struct opal_file_key k;
	struct opal_file *f;
	int fd, err;

	fd = t->src->open_mapped(t->src->ctx, pid, m->start, m->limit);
	if (fd < 0) {
		t->ctr->file_open_errors++;
		return fd;
	}
	t->ctr->files_opened++;
	if ((err = opal_file_key_from_fd(fd, &k)) < 0)
		goto fail;
	f = opal_files_lookup(t, &k);
	if (!f) {
		if ((err = new_file(t, fd, &k, m->path, &f)) < 0)
			goto fail;
		opal_debug("file %s: %zu PT_LOADs, build ID %zu bytes", m->path, f->elf.n_loads,
			   f->elf.build_id_len);
	}
	add_witness(f, pid, m->start, m->limit);
	if (f->fd < 0)
		attach_fd(t, f, fd);
	else
		close(fd);
	*out = f;
	return 0;
fail:
	close(fd);
	t->ctr->file_open_errors++;
	return err;
}

int opal_files_add_pinned(struct opal_file_table *t, int fd, const char *path,
			  struct opal_file **out)
{
	struct opal_file_key k;
	struct opal_file *f;
	int err;

	if ((err = opal_file_key_from_fd(fd, &k)) < 0)
		return err;
	if (opal_files_lookup(t, &k))
		return -EEXIST;
	if ((err = new_file(t, fd, &k, path, &f)) < 0)
		return err;
	/* out of the LRU orders: neither dropped nor closed by the bounds */
	opal_list_del(&f->lru);
	t->n_files--;
	opal_list_add(&t->pinned, &f->lru);
	f->pinned = true;
	f->fd = fd;
	*out = f;
	return 0;
}

int opal_files_fd(struct opal_file_table *t, struct opal_file *f)
{
	touch(t, f);
	if (f->fd >= 0)
		return f->fd;
	/* Newest witness first: it is the likeliest to be alive. */
	while (f->n_witness > 0) {
		struct opal_file_witness w = f->witness[0];
		struct opal_file_key k;
		int fd = t->src->open_mapped(t->src->ctx, w.pid, w.start, w.limit);
		if (fd >= 0) {
			t->ctr->files_opened++;
			if (opal_file_key_from_fd(fd, &k) == 0 && key_eq(&k, &f->key)) {
				attach_fd(t, f, fd);
				return fd;
			}
			close(fd);
		}
		drop_first_witness(f);
	}
	return -ENOENT;
}

struct opal_file *opal_files_by_inode(struct opal_file_table *t, uint64_t dev, uint64_t ino)
{
	const struct opal_list *heads[2] = { &t->lru, &t->pinned };

	for (int h = 0; h < 2; h++)
		for (struct opal_list *l = heads[h]->next; l != heads[h]; l = l->next) {
			struct opal_file *f = opal_container_of(l, struct opal_file, lru);
			if (f->key.ino == ino && f->key.dev == dev)
				return f;
		}
	return NULL;
}
