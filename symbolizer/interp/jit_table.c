/* JIT names per process (jit_table.h). */
#include "interp/jit_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shared/log.h"

#define CHUNK          (64u << 10)   /* perf map bytes read at once */
#define REC_READ       (OPAL_JITDUMP_REC_HEAD + OPAL_JITDUMP_LOAD_FIXED + OPAL_JIT_MAX_NAME + 1)
#define RECS_PER_READ  (1u << 20)    /* jitdump records per refresh (the rest: next time) */
#define BACK_SCAN      64            /* overlapping ranges looked at per lookup */

struct range {
	uint64_t start, end;
	uint32_t seq;        /* order read: a later range wins */
	uint32_t name_len;
	size_t name_off;     /* in names */
};

struct jfile {
	int fd;              /* -1: none */
	uint64_t off;        /* bytes consumed */
	bool header_read;    /* jitdump */
	bool skipping;       /* perf map: inside a line too long to keep */
	bool done;           /* corrupt, or CODE_CLOSE: nothing more is read */
};

struct jproc {
	uint64_t conn, id, used;
	struct jfile f[OPAL_JIT_FILES];
	struct range *r;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	uint32_t seq;
	bool sorted;
	bool full;           /* a bound stopped its reads */
	uint64_t refreshed_ns;
	bool refreshed;
};

struct opal_jit_table {
	pthread_mutex_t lock;
	struct jproc *p[OPAL_JIT_TABLE_MAX_PROCS];
	size_t n;
	uint64_t clock, bytes;
	struct opal_jit_table_stats st;
};

struct opal_jit_table *opal_jit_table_new(void)
{
	struct opal_jit_table *t = calloc(1, sizeof(*t));

	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

static size_t proc_bytes(const struct jproc *p)
{
	return p->cap * sizeof(*p->r) + p->names_cap;
}

static void clear_ranges(struct opal_jit_table *t, struct jproc *p)
{
	t->bytes -= proc_bytes(p);
	free(p->r);
	free(p->names);
	p->r = NULL;
	p->names = NULL;
	p->n = p->cap = p->names_len = p->names_cap = 0;
	p->seq = 0;
	p->sorted = true;
	p->full = false;
	for (int k = 0; k < OPAL_JIT_FILES; k++)
		p->f[k] = (struct jfile){ .fd = p->f[k].fd };
}

static void free_proc(struct opal_jit_table *t, size_t i)
{
	struct jproc *p = t->p[i];

	clear_ranges(t, p);
	for (int k = 0; k < OPAL_JIT_FILES; k++)
		if (p->f[k].fd >= 0) {
			close(p->f[k].fd);
			t->st.files--;
		}
	free(p);
	t->p[i] = t->p[--t->n];
}

void opal_jit_table_free(struct opal_jit_table *t)
{
	if (!t)
		return;
	while (t->n)
		free_proc(t, t->n - 1);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct jproc *find(struct opal_jit_table *t, uint64_t conn, uint64_t id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->p[i]->conn == conn && t->p[i]->id == id)
			return t->p[i];
	return NULL;
}

/* Drops the least recently used process other than `keep`; false when
 * there is none. */
static bool evict_one(struct opal_jit_table *t, const struct jproc *keep)
{
	size_t k = t->n;

	for (size_t i = 0; i < t->n; i++)
		if (t->p[i] != keep && (k == t->n || t->p[i]->used < t->p[k]->used))
			k = i;
	if (k == t->n)
		return false;
	free_proc(t, k);
	t->st.evicted++;
	return true;
}

int opal_jit_table_put(struct opal_jit_table *t, uint64_t conn, uint64_t jit_id,
		       enum opal_jit_file_kind kind, int fd)
{
	struct jproc *p;

	if (jit_id == 0 || (unsigned)kind >= OPAL_JIT_FILES) {
		close(fd);
		return -EINVAL;
	}
	pthread_mutex_lock(&t->lock);
	if (!(p = find(t, conn, jit_id))) {
		if (t->n == OPAL_JIT_TABLE_MAX_PROCS)
			evict_one(t, NULL);
		if (!(p = calloc(1, sizeof(*p)))) {
			pthread_mutex_unlock(&t->lock);
			close(fd);
			return -ENOMEM;
		}
		*p = (struct jproc){ .conn = conn, .id = jit_id, .sorted = true };
		for (int k = 0; k < OPAL_JIT_FILES; k++)
			p->f[k].fd = -1;
		t->p[t->n++] = p;
	}
	if (p->f[kind].fd >= 0) {
		close(p->f[kind].fd);
		t->st.files--;
	}
	p->f[kind].fd = fd;
	t->st.files++;
	clear_ranges(t, p);      /* read every file again, in order */
	p->refreshed = false;
	p->used = ++t->clock;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* Adds [start, start + size) named name[0..len). False when a bound
 * refuses it (the process's reads stop until its files change). */
static bool add_range(struct opal_jit_table *t, struct jproc *p, uint64_t start, uint64_t size,
		      const char *name, size_t len)
{
	if (len > OPAL_JIT_MAX_NAME)
		len = OPAL_JIT_MAX_NAME;
	if (p->n == OPAL_JIT_MAX_RANGES)
		goto full;
	if (p->n == p->cap || p->names_len + len > p->names_cap) {
		size_t ncap = p->n == p->cap ? (p->cap ? p->cap * 2 : 256) : p->cap;
		size_t nncap = p->names_len + len > p->names_cap
				       ? (p->names_cap ? p->names_cap * 2 : 16384) : p->names_cap;
		while (nncap < p->names_len + len)
			nncap *= 2;
		size_t grow = (ncap - p->cap) * sizeof(*p->r) + (nncap - p->names_cap);
		while (t->bytes + grow > OPAL_JIT_TABLE_MAX_BYTES)
			if (!evict_one(t, p))
				goto full;
		struct range *r = ncap != p->cap ? realloc(p->r, ncap * sizeof(*r)) : p->r;
		if (!r)
			goto full;
		p->r = r;
		t->bytes += (ncap - p->cap) * sizeof(*r);
		p->cap = ncap;
		char *nm = nncap != p->names_cap ? realloc(p->names, nncap) : p->names;
		if (!nm)
			goto full;
		p->names = nm;
		t->bytes += nncap - p->names_cap;
		p->names_cap = nncap;
	}
	memcpy(p->names + p->names_len, name, len);
	p->r[p->n++] = (struct range){ .start = start, .end = start + size, .seq = p->seq++,
				       .name_len = (uint32_t)len, .name_off = p->names_len };
	p->names_len += len;
	p->sorted = false;
	t->st.ranges++;
	return true;
full:
	p->full = true;
	t->st.cut++;
	return false;
}

/* True when the file was rewritten since it was read: it shrank below
 * what was read, or (a perf map) the byte before where reading goes on is
 * no longer the newline that ended the last line read (jcmd
 * Compiler.perfmap rewrites its file whole, possibly longer). */
static bool rewritten(const struct jfile *f, enum opal_jit_file_kind kind, uint64_t *size)
{
	struct stat st;
	char last;

	if (fstat(f->fd, &st) < 0)
		return false;
	*size = (uint64_t)st.st_size;
	if (*size < f->off)
		return true;
	return kind == OPAL_JIT_FILE_PERF_MAP && f->off > 0 && !f->skipping &&
	       *size > f->off && (pread(f->fd, &last, 1, (off_t)f->off - 1) != 1 || last != '\n');
}

/* True (counted) when `f` was read up to OPAL_JIT_MAX_READ. */
static bool read_bound(struct opal_jit_table *t, struct jproc *p, const struct jfile *f)
{
	if (f->off < OPAL_JIT_MAX_READ)
		return false;
	p->full = true;
	t->st.cut++;
	return true;
}

static void read_perf_map(struct opal_jit_table *t, struct jproc *p, struct jfile *f,
			  uint64_t size, char *buf)
{
	while (f->off < size && !p->full) {
		if (read_bound(t, p, f))
			return;
		ssize_t n = pread(f->fd, buf, CHUNK, (off_t)f->off);
		size_t i = 0;
		if (n <= 0)
			return;
		while (i < (size_t)n) {
			char *nl = memchr(buf + i, '\n', (size_t)n - i);
			if (!nl) {
				/* a line longer than the chunk: skipped to its end */
				if (i == 0 && (f->skipping || (size_t)n == CHUNK)) {
					f->skipping = true;
					i = (size_t)n;
				}
				break;
			}
			size_t len = (size_t)(nl - (buf + i));
			uint64_t start, sz;
			size_t off, nlen;
			if (f->skipping) {
				f->skipping = false;
				t->st.bad_lines++;
			} else if (len == 0) {
				/* blank line */
			} else if (opal_perfmap_parse_line(buf + i, len, &start, &sz, &off, &nlen) < 0) {
				t->st.bad_lines++;
			} else if (!add_range(t, p, start, sz, buf + i + off, nlen)) {
				return;   /* nothing consumed past the last kept line */
			}
			i += len + 1;
			f->off += len + 1;
		}
		if (f->skipping && i == (size_t)n)
			f->off += (uint64_t)n;
		else if (i == 0)
			return;   /* a partial last line: wait for the rest */
	}
}

/* A jitdump parser's result `r`: true when usable; false to stop reading
 * for now (-EAGAIN: the rest is being written) or for good (refused,
 * counted). */
static bool parsed(struct opal_jit_table *t, struct jfile *f, int r)
{
	if (r >= 0)
		return true;
	if (r != -EAGAIN) {
		f->done = true;
		t->st.bad_records++;
	}
	return false;
}

static void read_jitdump(struct opal_jit_table *t, struct jproc *p, struct jfile *f,
			 uint64_t size, char *buf)
{
	uint8_t *b = (uint8_t *)buf;
	ssize_t n;
	int r;

	if (!f->header_read) {
		n = pread(f->fd, b, OPAL_JITDUMP_HEADER_MIN, 0);
		r = n < 0 ? -EAGAIN : opal_jitdump_parse_header(b, (size_t)n);
		if (!parsed(t, f, r))
			return;
		f->off = (uint64_t)r;
		f->header_read = true;
	}
	for (unsigned k = 0; k < RECS_PER_READ && f->off < size && !p->full && !f->done; k++) {
		struct opal_jitdump_rec rec;
		if (read_bound(t, p, f))
			return;
		n = pread(f->fd, b, REC_READ, (off_t)f->off);
		if (n <= 0)
			return;
		r = opal_jitdump_parse_record(b, (size_t)n, &rec);
		if (!parsed(t, f, r))
			return;
		if (rec.id == OPAL_JITDUMP_CODE_CLOSE)
			f->done = true;
		else if (rec.id == OPAL_JITDUMP_CODE_LOAD &&
			 !add_range(t, p, rec.code_addr, rec.code_size, rec.name, rec.name_len))
			return;
		f->off += rec.total_size;
	}
}

/* Reads on in every file of `p` (at most every OPAL_JIT_REFRESH_NS). */
static void refresh(struct opal_jit_table *t, struct jproc *p, uint64_t now_ns)
{
	uint64_t size[OPAL_JIT_FILES] = { 0 };
	char *buf;

	if (p->refreshed && now_ns - p->refreshed_ns < OPAL_JIT_REFRESH_NS)
		return;
	p->refreshed = true;
	p->refreshed_ns = now_ns;
	for (int k = 0; k < OPAL_JIT_FILES; k++)
		if (p->f[k].fd >= 0 && rewritten(&p->f[k], (enum opal_jit_file_kind)k, &size[k])) {
			clear_ranges(t, p);   /* rewritten: read everything again */
			k = -1;
		}
	if (!(buf = malloc(CHUNK > REC_READ ? CHUNK : REC_READ)))
		return;
	if (p->f[OPAL_JIT_FILE_PERF_MAP].fd >= 0 && !p->full)
		read_perf_map(t, p, &p->f[OPAL_JIT_FILE_PERF_MAP], size[OPAL_JIT_FILE_PERF_MAP], buf);
	if (p->f[OPAL_JIT_FILE_JITDUMP].fd >= 0 && !p->full)
		read_jitdump(t, p, &p->f[OPAL_JIT_FILE_JITDUMP], size[OPAL_JIT_FILE_JITDUMP], buf);
	free(buf);
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The range naming `addr`: of those holding it among the BACK_SCAN
 * starting last at or below it, the one read last. */
static const struct range *lookup(struct jproc *p, uint64_t addr)
{
	const struct range *best = NULL;
	size_t lo = 0, hi = p->n;

	if (!p->sorted) {
		qsort(p->r, p->n, sizeof(*p->r), cmp_range);
		p->sorted = true;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->r[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i-- > 0 && k < BACK_SCAN; k++)
		if (addr < p->r[i].end && (!best || p->r[i].seq > best->seq))
			best = &p->r[i];
	return best;
}

int opal_jit_table_name(struct opal_jit_table *t, uint64_t conn, uint64_t jit_id, uint64_t addr,
			uint64_t now_ns, char *buf, size_t cap)
{
	const struct range *r = NULL;
	struct jproc *p;

	pthread_mutex_lock(&t->lock);
	if ((p = find(t, conn, jit_id))) {
		p->used = ++t->clock;
		refresh(t, p, now_ns);
		r = lookup(p, addr);
	}
	if (r && cap) {
		size_t n = r->name_len < cap - 1 ? r->name_len : cap - 1;
		memcpy(buf, p->names + r->name_off, n);
		buf[n] = '\0';
	}
	if (r)
		t->st.named++;
	else
		t->st.unnamed++;
	pthread_mutex_unlock(&t->lock);
	return r ? 0 : -ENOENT;
}

void opal_jit_table_drop_conn(struct opal_jit_table *t, uint64_t conn)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = t->n; i-- > 0;)
		if (t->p[i]->conn == conn)
			free_proc(t, i);
	pthread_mutex_unlock(&t->lock);
}

void opal_jit_table_stats(struct opal_jit_table *t, struct opal_jit_table_stats *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	out->procs = t->n;
	out->bytes = t->bytes;
	pthread_mutex_unlock(&t->lock);
}
