/* JIT files of processes, opened for the symbolizer (jitsrc.h). */
#include "proc/jitsrc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shared/log.h"

int opal_status_ns_pid(const char *text, size_t len)
{
	static const char key[] = "NSpid:";
	const char *end = text + len;

	for (const char *p = text; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if ((size_t)(le - p) >= sizeof(key) - 1 && memcmp(p, key, sizeof(key) - 1) == 0) {
			long last = -1;
			for (const char *q = p + sizeof(key) - 1; q < le;) {
				if (*q == ' ' || *q == '\t') {
					q++;
					continue;
				}
				if (!isdigit((unsigned char)*q))
					return -EINVAL;
				long v = 0;
				for (; q < le && isdigit((unsigned char)*q); q++) {
					v = v * 10 + (*q - '0');
					if (v > 0x7fffffffL)
						return -EINVAL;
				}
				last = v;
			}
			return last > 0 ? (int)last : -EINVAL;
		}
		p = le + 1;
	}
	return -EINVAL;
}

bool opal_jit_is_jitdump_path(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	if (strncmp(base, "jit-", 4) != 0)
		return false;
	n = strspn(base + 4, "0123456789");
	return n > 0 && strcmp(base + 4 + n, ".dump") == 0;
}

/* ---- the live /proc ---------------------------------------------------------- */

static int live_ns_pid(void *ctx, pid_t pid)
{
	char path[64], *buf;
	ssize_t n;
	int fd, r;

	(void)ctx;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (!(buf = malloc(OPAL_JIT_STATUS_MAX))) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, buf, OPAL_JIT_STATUS_MAX);
	r = n < 0 ? -errno : opal_status_ns_pid(buf, (size_t)n);
	close(fd);
	free(buf);
	return r;
}

static int live_open_mapped(void *ctx, pid_t pid, uint64_t start, uint64_t limit)
{
	char path[96];
	int fd, err = opal_map_files_path(path, sizeof(path), pid, start, limit);

	(void)ctx;
	if (err)
		return err;
	/* O_NONBLOCK: nothing that is not a regular file may block the open */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

const struct opal_jit_source opal_jit_source_live = {
	.files = &opal_debuglink_source_live,
	.ns_pid = live_ns_pid,
	.open_mapped = live_open_mapped,
};

/* ---- the table --------------------------------------------------------------- */

void opal_jit_init(struct opal_jit_table *t, const struct opal_jit_source *src,
		   struct opal_counters *ctr)
{
	memset(t, 0, sizeof(*t));
	t->src = src;
	t->ctr = ctr;
	t->next_id = 1;
}

static void close_file(struct opal_jit_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	*f = (struct opal_jit_file){ .fd = -1 };
}

static void close_entry(struct opal_jit_table *t, size_t i)
{
	for (int k = 0; k < OPAL_JIT_KINDS; k++)
		close_file(&t->e[i].f[k]);
	t->e[i] = t->e[--t->n];
}

void opal_jit_destroy(struct opal_jit_table *t)
{
	while (t->n)
		close_entry(t, t->n - 1);
}

/* Keeps descriptor `fd` (dev, ino, shown as `path`) as file `f`, unless
 * it is the file already held. */
static void keep(struct opal_jit_table *t, struct opal_jit_file *f, int fd, uint64_t dev,
		 uint64_t ino, const char *path)
{
	char *copy;

	if (f->fd >= 0 && f->dev == dev && f->ino == ino) {
		close(fd);
		return;
	}
	if (!(copy = strdup(path))) {
		close(fd);
		return;
	}
	close_file(f);
	*f = (struct opal_jit_file){ .fd = fd, .dev = dev, .ino = ino, .path = copy };
	t->ctr->jit_files_opened++;
}

static void find_perf_map(struct opal_jit_table *t, struct opal_jit_proc *e)
{
	struct opal_debuglink_candidate c;
	char name[64], shown[80];
	int ns = t->src->ns_pid(t->src->ctx, e->pid), err;

	if (ns < 0)
		return;
	snprintf(name, sizeof(name), "perf-%d.map", ns);
	err = opal_debuglink_open_as(t->src->files, e->pid, "tmp", name, OPAL_JIT_MAX_FILE_SIZE,
				     &c);
	if (err < 0) {
		if (err != -ENOENT && err != -ESRCH) {
			t->ctr->jit_file_errors++;
			opal_debug("pid %d: perf map /tmp/%s refused: %s", (int)e->pid, name,
				   strerror(-err));
		}
		return;
	}
	snprintf(shown, sizeof(shown), "/tmp/%s", name);
	keep(t, &e->f[OPAL_JIT_PERF_MAP], c.fd, c.dev, c.ino, shown);
}

static void find_jitdump(struct opal_jit_table *t, struct opal_jit_proc *e,
			 const struct opal_proc *p)
{
	struct stat st;

	for (size_t i = 0; i < p->n_maps; i++) {
		const struct opal_map_entry *m = &p->maps[i];
		if (m->inode == 0 || !opal_jit_is_jitdump_path(m->path))
			continue;
		int fd = t->src->open_mapped(t->src->ctx, e->pid, m->start, m->limit);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > OPAL_JIT_MAX_FILE_SIZE) {
			if (fd >= 0)
				close(fd);
			t->ctr->jit_file_errors++;
			continue;
		}
		keep(t, &e->f[OPAL_JIT_JITDUMP], fd, (uint64_t)st.st_dev, (uint64_t)st.st_ino,
		     m->path);
		return;
	}
}

static size_t lru_index(const struct opal_jit_table *t)
{
	size_t k = 0;

	for (size_t i = 1; i < t->n; i++)
		if (t->e[i].used_ns < t->e[k].used_ns)
			k = i;
	return k;
}

uint64_t opal_jit_note(struct opal_jit_table *t, const struct opal_proc *p, uint64_t now_ns)
{
	struct opal_jit_proc *e = NULL;

	for (size_t i = 0; i < t->n && !e; i++)
		if (t->e[i].pid == p->pid && t->e[i].start_ticks == p->id.start_ticks)
			e = &t->e[i];
	if (!e) {
		if (t->n == OPAL_JIT_MAX_PROCS) {
			close_entry(t, lru_index(t));
			t->ctr->jit_procs_dropped++;
		}
		e = &t->e[t->n++];
		*e = (struct opal_jit_proc){ .pid = p->pid, .start_ticks = p->id.start_ticks,
					     .id = t->next_id++ };
		for (int k = 0; k < OPAL_JIT_KINDS; k++)
			e->f[k].fd = -1;
		e->tried_ns = now_ns - OPAL_JIT_RETRY_NS;
	}
	e->used_ns = now_ns;
	if (now_ns - e->tried_ns >= OPAL_JIT_RETRY_NS && !p->gone) {
		e->tried_ns = now_ns;
		find_perf_map(t, e);
		find_jitdump(t, e, p);
	}
	return e->id;
}

struct opal_jit_proc *opal_jit_find(struct opal_jit_table *t, uint64_t id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->e[i].id == id)
			return &t->e[i];
	return NULL;
}

void opal_jit_expire(struct opal_jit_table *t, uint64_t now_ns)
{
	for (size_t i = t->n; i-- > 0;)
		if (now_ns - t->e[i].used_ns >= OPAL_JIT_IDLE_NS)
			close_entry(t, i);
}
