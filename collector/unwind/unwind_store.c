/* On-disk unwind table cache (unwind_store.h). */
#include "unwind/unwind_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>
#include "shared/log.h"

static const char store_magic[8] = { 'O', 'P', 'A', 'L', 'U', 'N', 'W', 'T' };

#define ENTRY_SUFFIX ".tab"
#define TEMP_PREFIX  "tmp."
/* 32 hex digits and the suffix */
#define ENTRY_NAME_LEN (2 * OPAL_FILE_ID_LEN + sizeof(ENTRY_SUFFIX) - 1)

void opal_unwind_store_init_off(struct opal_unwind_store *s)
{
	memset(s, 0, sizeof(*s));
	s->dir_fd = -1;
	pthread_mutex_init(&s->mu, NULL);
}

static void entry_name(const opal_file_id *id, char name[ENTRY_NAME_LEN + 1])
{
	opal_file_id_to_hex(id, name);
	memcpy(name + 2 * OPAL_FILE_ID_LEN, ENTRY_SUFFIX, sizeof(ENTRY_SUFFIX));
}

static bool is_entry_name(const char *name)
{
	opal_file_id id;
	char hex[2 * OPAL_FILE_ID_LEN + 1];

	if (strlen(name) != ENTRY_NAME_LEN || strcmp(name + 2 * OPAL_FILE_ID_LEN, ENTRY_SUFFIX))
		return false;
	memcpy(hex, name, 2 * OPAL_FILE_ID_LEN);
	hex[2 * OPAL_FILE_ID_LEN] = '\0';
	return opal_file_id_from_hex(hex, &id) == 0;
}

static uint64_t entry_bytes(uint32_t n_rules, uint32_t n_bodies)
{
	return sizeof(struct opal_unwind_store_hdr) +
	       (uint64_t)n_rules * sizeof(struct opal_unwind_rule) +
	       (uint64_t)n_bodies * sizeof(struct opal_unwind_body);
}

static uint32_t entry_crc(const struct opal_unwind_store_hdr *h,
			  const struct opal_unwind_rule *rules, const struct opal_unwind_body *bodies)
{
	struct opal_unwind_store_hdr z = *h;
	uLong crc = crc32(0L, Z_NULL, 0);

	z.crc = 0;
	crc = crc32(crc, (const Bytef *)&z, sizeof(z));
	crc = crc32_z(crc, (const Bytef *)rules, (z_size_t)h->n_rules * sizeof(*rules));
	crc = crc32_z(crc, (const Bytef *)bodies, (z_size_t)h->n_bodies * sizeof(*bodies));
	return (uint32_t)crc;
}

/* One entry seen by a folder scan. */
struct scanned {
	char name[ENTRY_NAME_LEN + 1];
	struct timespec mtime;
	uint64_t bytes;
};

static int by_mtime(const void *a, const void *b)
{
	const struct scanned *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return 0;
}

/* Reads the folder: at open (`at_open`) deletes temporary files, counts the entries (files
 * of ours with an entry's name; others are left alone, never read) into
 * bytes and n_files, and when over a bound deletes the least recently
 * used entries down to 3/4 of it. Called with mu held. */
static void scan_and_trim(struct opal_unwind_store *s, bool at_open)
{
	struct scanned *e = calloc(OPAL_UNWIND_STORE_MAX_FILES, sizeof(*e));
	int dfd = dup(s->dir_fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	uint64_t bytes = 0;
	size_t n = 0;
	struct dirent *de;

	if (!e || !d) {
		free(e);
		if (d)
			closedir(d);
		else if (dfd >= 0)
			close(dfd);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat st;
		if (fstatat(s->dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (!strncmp(de->d_name, TEMP_PREFIX, sizeof(TEMP_PREFIX) - 1)) {
			if (at_open)   /* of a writer that crashed */
				unlinkat(s->dir_fd, de->d_name, 0);
			continue;
		}
		if (!is_entry_name(de->d_name) || n == OPAL_UNWIND_STORE_MAX_FILES)
			continue;
		memcpy(e[n].name, de->d_name, ENTRY_NAME_LEN + 1);
		e[n].mtime = st.st_mtim;
		e[n].bytes = (uint64_t)st.st_size;
		bytes += e[n].bytes;
		n++;
	}
	closedir(d);
	if (bytes > s->max_bytes || n >= OPAL_UNWIND_STORE_MAX_FILES) {
		size_t kept = n;
		qsort(e, n, sizeof(*e), by_mtime);
		for (size_t i = 0; i < n && (bytes > s->max_bytes / 4 * 3 ||
					     kept > OPAL_UNWIND_STORE_MAX_FILES / 4 * 3); i++) {
			if (unlinkat(s->dir_fd, e[i].name, 0) < 0)
				continue;
			bytes -= e[i].bytes;
			kept--;
			s->evicted++;
		}
		n = kept;
	}
	s->bytes = bytes;
	s->n_files = (uint32_t)n;
	free(e);
}

/* mkdir -p of `dir`, each folder made 0700 (an existing one is left as
 * it is). Returns 0 or -errno. */
static int make_folders(const char *dir)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = c;
		if (c == '\0')
			return 0;
	}
}

int opal_unwind_store_open(struct opal_unwind_store *s, const char *dir, const void *ident,
			   size_t ident_len, uint64_t max_bytes)
{
	struct stat st;
	int fd, err;

	opal_unwind_store_init_off(s);
	if (ident_len == 0 || ident_len > OPAL_UNWIND_STORE_IDENT_MAX)
		return -EINVAL;
	if ((err = make_folders(dir)) < 0)
		return err;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return -EPERM;
	}
	s->dir_fd = fd;
	memcpy(s->ident, ident, ident_len);
	s->ident_len = (uint32_t)ident_len;
	s->max_bytes = max_bytes ? max_bytes : OPAL_UNWIND_STORE_DEFAULT_BYTES;
	pthread_mutex_lock(&s->mu);
	scan_and_trim(s, true);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

void opal_unwind_store_close(struct opal_unwind_store *s)
{
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	s->dir_fd = -1;
	pthread_mutex_destroy(&s->mu);
}

/* The checks of a table read back: what the builder guarantees
 * (bpf/unwind_rule.h) and the BPF search relies on. */
static bool table_ok(const struct opal_unwind_store_hdr *h, const struct opal_unwind_rule *r,
		     const struct opal_unwind_body *b)
{
	static const struct opal_unwind_body gap = { .cfa = OPAL_UNWIND_PACK(OPAL_CFA_GAP, 0) };

	if (memcmp(&b[0], &gap, sizeof(gap)) != 0 || r[h->n_rules - 1].body != 0)
		return false;
	for (uint32_t i = 0; i < h->n_rules; i++)
		if (r[i].body >= h->n_bodies || (i > 0 && r[i].addr <= r[i - 1].addr))
			return false;
	return true;
}

/* Forgets entry `name` of `bytes` bytes (damaged or replaced). */
static void drop_entry(struct opal_unwind_store *s, const char *name, uint64_t bytes)
{
	if (unlinkat(s->dir_fd, name, 0) < 0)
		return;
	pthread_mutex_lock(&s->mu);
	s->bytes = s->bytes >= bytes ? s->bytes - bytes : 0;
	if (s->n_files)
		s->n_files--;
	pthread_mutex_unlock(&s->mu);
}

/* Reads and checks the entry open on `fd` (`size` bytes). Returns 0,
 * -ESTALE for an entry of another identity or debug state (a miss, not
 * damage), -EBADMSG or -ENOMEM. */
static int read_entry(struct opal_unwind_store *s, int fd, uint64_t size, const opal_file_id *id,
		      bool debug_seen, struct opal_unwind_table *out)
{
	struct opal_unwind_store_hdr h;

	if (size < sizeof(h) || size > OPAL_UNWIND_STORE_MAX_ENTRY ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, store_magic, sizeof(store_magic)) != 0)
		return -EBADMSG;
	if (h.version != OPAL_UNWIND_STORE_VERSION || h.ident_len != s->ident_len ||
	    memcmp(h.ident, s->ident, s->ident_len) != 0 || h.debug_seen != (uint32_t)debug_seen)
		return -ESTALE;
	if (!opal_file_id_eq(&h.id, id) || h.n_rules == 0 || h.n_rules > OPAL_UNWIND_MAX_RULES ||
	    h.n_bodies == 0 || h.n_bodies > OPAL_UNWIND_MAX_BODIES ||
	    entry_bytes(h.n_rules, h.n_bodies) != size)
		return -EBADMSG;
	out->rules = malloc((size_t)h.n_rules * sizeof(*out->rules));
	out->bodies = malloc((size_t)h.n_bodies * sizeof(*out->bodies));
	if (!out->rules || !out->bodies)
		return -ENOMEM;
	size_t rb = (size_t)h.n_rules * sizeof(*out->rules);
	size_t bb = (size_t)h.n_bodies * sizeof(*out->bodies);
	struct iovec iov[2] = { { out->rules, rb }, { out->bodies, bb } };
	if (preadv(fd, iov, 2, sizeof(h)) != (ssize_t)(rb + bb) ||
	    entry_crc(&h, out->rules, out->bodies) != h.crc || !table_ok(&h, out->rules, out->bodies))
		return -EBADMSG;
	out->base = h.base;
	out->n_rules = h.n_rules;
	out->n_bodies = h.n_bodies;
	out->stats = h.stats;
	return 0;
}

int opal_unwind_store_get(struct opal_unwind_store *s, const opal_file_id *id, bool debug_seen,
			  struct opal_unwind_table *out)
{
	char name[ENTRY_NAME_LEN + 1];
	struct stat st;
	int fd, err;

	memset(out, 0, sizeof(*out));
	if (s->dir_fd < 0) {
		s->misses++;
		return -ENOENT;
	}
	entry_name(id, name);
	fd = openat(s->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		s->misses++;
		return -ENOENT;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		s->misses++;
		return -ENOENT;
	}
	err = read_entry(s, fd, (uint64_t)st.st_size, id, debug_seen, out);
	if (err == 0)
		futimens(fd, NULL);   /* recently used: evicted last */
	close(fd);
	if (err == 0) {
		s->hits++;
		return 0;
	}
	opal_unwind_table_free(out);
	s->misses++;
	if (err == -ESTALE || err == -ENOMEM)
		return -ENOENT;
	char hex[33];
	opal_file_id_to_hex(id, hex);
	opal_warn("unwind table cache: entry %s damaged: deleted, the table is built again", hex);
	s->errors++;
	drop_entry(s, name, (uint64_t)st.st_size);
	return -EBADMSG;
}

static int write_all(int fd, const struct iovec *iov, int n, size_t total)
{
	ssize_t w = writev(fd, iov, n);

	if (w < 0)
		return -errno;
	return (size_t)w == total ? 0 : -EIO;
}

int opal_unwind_store_put(struct opal_unwind_store *s, const opal_file_id *id, bool debug_seen,
			  const struct opal_unwind_table *t)
{
	struct opal_unwind_store_hdr h;
	char name[ENTRY_NAME_LEN + 1], tmp[64];
	struct stat old;
	int fd, err;

	if (s->dir_fd < 0)
		return -ENOENT;
	if (t->n_rules == 0 || t->n_rules > OPAL_UNWIND_MAX_RULES || t->n_bodies == 0 ||
	    t->n_bodies > OPAL_UNWIND_MAX_BODIES)
		return -E2BIG;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, store_magic, sizeof(store_magic));
	h.version = OPAL_UNWIND_STORE_VERSION;
	h.ident_len = s->ident_len;
	memcpy(h.ident, s->ident, s->ident_len);
	h.id = *id;
	h.base = t->base;
	h.n_rules = t->n_rules;
	h.n_bodies = t->n_bodies;
	h.debug_seen = debug_seen;
	h.stats = t->stats;
	h.crc = entry_crc(&h, t->rules, t->bodies);

	uint64_t bytes = entry_bytes(t->n_rules, t->n_bodies);
	struct iovec iov[3] = {
		{ &h, sizeof(h) },
		{ t->rules, (size_t)t->n_rules * sizeof(*t->rules) },
		{ t->bodies, (size_t)t->n_bodies * sizeof(*t->bodies) },
	};
	entry_name(id, name);
	snprintf(tmp, sizeof(tmp), TEMP_PREFIX "%d.%lx", getpid(), (unsigned long)pthread_self());
	fd = openat(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		s->errors++;
		return -errno;
	}
	err = write_all(fd, iov, 3, (size_t)bytes);
	if (close(fd) < 0 && !err)
		err = -errno;
	bool replaced = fstatat(s->dir_fd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
	if (!err && renameat(s->dir_fd, tmp, s->dir_fd, name) < 0)
		err = -errno;
	if (err) {
		unlinkat(s->dir_fd, tmp, 0);
		s->errors++;
		return err;
	}
	s->writes++;
	pthread_mutex_lock(&s->mu);
	if (replaced) {
		s->bytes = s->bytes >= (uint64_t)old.st_size ? s->bytes - (uint64_t)old.st_size : 0;
		s->n_files--;
	}
	s->bytes += bytes;
	s->n_files++;
	if (s->bytes > s->max_bytes || s->n_files > OPAL_UNWIND_STORE_MAX_FILES)
		scan_and_trim(s, false);
	pthread_mutex_unlock(&s->mu);
	return 0;
}
