/* Native and kernel symbolization front end (symbolize.h): the file
 * registry, the LRU of open libdwfl sessions, the in-memory result cache
 * and the SQLite cache, in that lookup order.
 *
 * Bounds: at most OPAL_SYM_MAX_FILES registered descriptors (the least
 * recently used file is forgotten, its descriptor closed: a later lookup
 * answers -ENOENT and the collector sends the file again), at most
 * max_open_files libdwfl sessions, and the in-memory cache's
 * OPAL_SYM_MEMCACHE_MAX_ENTRIES entries / OPAL_SYM_MEMCACHE_MAX_BYTES bytes.
 * Every call takes one mutex, so the symbolizer may be shared by threads
 * (lookups are serialized). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cache.h"
#include "kallsyms.h"
#include "log.h"
#include "sym_dwfl.h"
#include "sym_memcache.h"
#include "sym_result.h"
#include "symbolize.h"

#define OPAL_SYM_MAX_FILES 4096
#define FILE_BUCKETS       8192   /* power of two, > OPAL_SYM_MAX_FILES */

struct sym_file {
	opal_file_id id;
	int fd;
	size_t build_id_len;
	uint8_t build_id[OPAL_BUILD_ID_MAX];
	char *path;
	struct opal_dwfl_file *session;   /* NULL while closed */
	int quality;                      /* last recorded quality, -1 unknown */
	bool quality_recorded;            /* for the current descriptor */
	struct sym_file *hnext;
	struct sym_file *prev, *next;     /* file LRU, most recent at head */
	struct sym_file *sprev, *snext;   /* session LRU, only while open */
};

struct opal_symbolizer {
	pthread_mutex_t lock;
	struct opal_cache *cache;         /* borrowed, may be NULL */
	size_t max_open;
	struct sym_file *buckets[FILE_BUCKETS];
	size_t n_files;
	struct sym_file *f_head, *f_tail;
	struct sym_file *s_head, *s_tail;
	size_t n_sessions;
	struct opal_sym_memcache *mem;
	struct opal_kallsyms *ksyms;
	struct opal_symbolizer_stats stats;
};

static size_t file_bucket(const opal_file_id *id)
{
	/* File IDs are SHA-256 prefixes: any two bytes are well spread. */
	return ((size_t)id->b[0] << 8 | id->b[1]) & (FILE_BUCKETS - 1);
}

static struct sym_file **find_file_slot(struct opal_symbolizer *s, const opal_file_id *id)
{
	struct sym_file **pp = &s->buckets[file_bucket(id)];
	while (*pp && !opal_file_id_eq(&(*pp)->id, id))
		pp = &(*pp)->hnext;
	return pp;
}

/* Doubly linked LRU lists, generic over the link fields used. */
#define LRU_UNLINK(head, tail, e, PREV, NEXT)                \
	do {                                                 \
		if ((e)->PREV)                               \
			(e)->PREV->NEXT = (e)->NEXT;         \
		else                                         \
			(head) = (e)->NEXT;                  \
		if ((e)->NEXT)                               \
			(e)->NEXT->PREV = (e)->PREV;         \
		else                                         \
			(tail) = (e)->PREV;                  \
		(e)->PREV = (e)->NEXT = NULL;                \
	} while (0)

#define LRU_PUSH(head, tail, e, PREV, NEXT)                  \
	do {                                                 \
		(e)->PREV = NULL;                            \
		(e)->NEXT = (head);                          \
		if (head)                                    \
			(head)->PREV = (e);                  \
		(head) = (e);                                \
		if (!(tail))                                 \
			(tail) = (e);                        \
	} while (0)

static void close_session(struct opal_symbolizer *s, struct sym_file *f)
{
	if (!f->session)
		return;
	LRU_UNLINK(s->s_head, s->s_tail, f, sprev, snext);
	opal_dwfl_close(f->session);
	f->session = NULL;
	s->n_sessions--;
	s->stats.files_open = s->n_sessions;
}

static void evict_session(struct opal_symbolizer *s)
{
	if (!s->s_tail)
		return;
	close_session(s, s->s_tail);
	s->stats.files_evicted++;
}

static void forget_file(struct opal_symbolizer *s, struct sym_file *f)
{
	struct sym_file **slot = find_file_slot(s, &f->id);
	*slot = f->hnext;
	close_session(s, f);
	LRU_UNLINK(s->f_head, s->f_tail, f, prev, next);
	close(f->fd);
	free(f->path);
	free(f);
	s->n_files--;
}

struct opal_symbolizer *opal_symbolizer_new(struct opal_cache *cache, size_t max_open_files)
{
	struct opal_symbolizer *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->mem = opal_sym_memcache_new(0, 0);
	if (!s->mem) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->cache = cache;
	s->max_open = max_open_files ? max_open_files : 1;
	return s;
}

void opal_symbolizer_free(struct opal_symbolizer *s)
{
	if (!s)
		return;
	while (s->f_head)
		forget_file(s, s->f_head);
	opal_sym_memcache_free(s->mem);
	opal_kallsyms_free(s->ksyms);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int opal_symbolizer_add_file(struct opal_symbolizer *s, const opal_file_id *id, int fd,
			     const uint8_t *build_id, size_t build_id_len, const char *path)
{
	struct stat st;
	if (fd < 0)
		return -EBADF;
	if (build_id_len > OPAL_BUILD_ID_MAX) {
		close(fd);
		return -EINVAL;
	}
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	char *path_copy = NULL;
	if (path && !(path_copy = opal_sym_strdup(path))) {
		close(fd);
		return -ENOMEM;
	}

	pthread_mutex_lock(&s->lock);
	struct sym_file *f = *find_file_slot(s, id);
	if (f) {
		close_session(s, f);
		close(f->fd);
		free(f->path);
		LRU_UNLINK(s->f_head, s->f_tail, f, prev, next);
	} else {
		if (s->n_files >= OPAL_SYM_MAX_FILES)
			forget_file(s, s->f_tail);
		f = calloc(1, sizeof(*f));
		if (!f) {
			pthread_mutex_unlock(&s->lock);
			free(path_copy);
			close(fd);
			return -ENOMEM;
		}
		f->id = *id;
		f->quality = -1;
		struct sym_file **slot = find_file_slot(s, id);
		*slot = f;
		s->n_files++;
	}
	f->fd = fd;
	f->path = path_copy;
	f->build_id_len = build_id_len;
	if (build_id_len)
		memcpy(f->build_id, build_id, build_id_len);
	f->quality_recorded = false;
	LRU_PUSH(s->f_head, s->f_tail, f, prev, next);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

bool opal_symbolizer_has_file(struct opal_symbolizer *s, const opal_file_id *id)
{
	enum opal_debug_quality q;
	pthread_mutex_lock(&s->lock);
	bool known = *find_file_slot(s, id) != NULL ||
		     (s->cache && opal_cache_get_file_quality(s->cache, id, &q) == 0);
	pthread_mutex_unlock(&s->lock);
	return known;
}

static void drop_cached(struct opal_symbolizer *s, const opal_file_id *id)
{
	opal_sym_memcache_drop_file(s->mem, id);
	if (s->cache) {
		int r = opal_cache_invalidate_file(s->cache, id);
		if (r < 0)
			opal_warn("symbolize: invalidating cached frames failed: %s", strerror(-r));
	}
}

/* Records the quality of a newly opened descriptor in the files table.
 * Frames cached from poorer debug data than this are dropped; with poorer
 * data than before, the better cached frames and their record are kept. */
static void record_quality(struct opal_symbolizer *s, struct sym_file *f)
{
	const char *reason;
	enum opal_debug_quality q = opal_dwfl_quality(f->session, &reason);
	enum opal_debug_quality old_q;
	int old = f->quality;

	f->quality_recorded = true;
	if (old < 0 && s->cache && opal_cache_get_file_quality(s->cache, &f->id, &old_q) == 0)
		old = (int)old_q;
	char hex[33];
	opal_file_id_to_hex(&f->id, hex);
	if (old >= 0 && (int)q < old) {
		opal_debug("symbolize: %s (%s) now has debug quality %d < %d (%s); keeping cached "
			   "frames", hex, f->path ? f->path : "?", (int)q, old, reason);
		f->quality = old;
		return;
	}
	if (old >= 0 && (int)q > old) {
		opal_info("symbolize: %s (%s): better debug data (%s), dropping cached frames",
			  hex, f->path ? f->path : "?", reason);
		drop_cached(s, &f->id);
	}
	f->quality = (int)q;
	if (s->cache) {
		int r = opal_cache_put_file(s->cache, &f->id, f->build_id, f->build_id_len,
					    f->path, q, reason);
		if (r < 0)
			opal_warn("symbolize: recording file %s failed: %s", hex, strerror(-r));
	}
}

static int open_session(struct opal_symbolizer *s, struct sym_file *f)
{
	if (f->session) {
		LRU_UNLINK(s->s_head, s->s_tail, f, sprev, snext);
		LRU_PUSH(s->s_head, s->s_tail, f, sprev, snext);
		return 0;
	}
	while (s->n_sessions >= s->max_open)
		evict_session(s);
	int r = opal_dwfl_open(f->fd, f->path, &f->session);
	if ((r == -EMFILE || r == -ENFILE) && s->n_sessions > 0) {
		/* Out of descriptors: give one back and retry once. */
		evict_session(s);
		r = opal_dwfl_open(f->fd, f->path, &f->session);
	}
	if (r < 0)
		return r;
	LRU_PUSH(s->s_head, s->s_tail, f, sprev, snext);
	s->n_sessions++;
	s->stats.files_open = s->n_sessions;
	if (!f->quality_recorded)
		record_quality(s, f);
	return 0;
}

/* Counts one answered lookup in `counter` and in the unresolved total. */
static void account(struct opal_symbolizer *s, const struct opal_sym_result *r, uint64_t *counter)
{
	(*counter)++;
	if (r->n == 0)
		s->stats.unresolved++;
}

int opal_symbolize_native(struct opal_symbolizer *s, const opal_file_id *id, uint64_t vaddr,
			  bool return_address, struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t addr = return_address && vaddr > 0 ? vaddr - 1 : vaddr;

	pthread_mutex_lock(&s->lock);
	/* A newly registered descriptor is opened before any cache is asked,
	 * so that its debug quality gets recorded and, when better than what
	 * the cached frames came from, those frames get dropped. */
	struct sym_file *f = *find_file_slot(s, id);
	int r;
	if (f) {
		LRU_UNLINK(s->f_head, s->f_tail, f, prev, next);
		LRU_PUSH(s->f_head, s->f_tail, f, prev, next);
		if (!f->quality_recorded && (r = open_session(s, f)) < 0)
			opal_debug("symbolize: opening a session failed: %s", strerror(-r));
	}
	r = opal_sym_memcache_get(s->mem, id, addr, out);
	if (r != 0) {
		if (r > 0)
			account(s, out, &s->stats.mem_hits);
		pthread_mutex_unlock(&s->lock);
		return r > 0 ? 0 : r;
	}
	if (s->cache) {
		r = opal_cache_get_frames(s->cache, id, addr, out);
		if (r == 0) {
			opal_sym_memcache_put(s->mem, id, addr, out);
			account(s, out, &s->stats.cache_hits);
			pthread_mutex_unlock(&s->lock);
			return 0;
		}
		if (r != -ENOENT)
			opal_warn("symbolize: cache read failed: %s", strerror(-r));
	}

	if (!f) {
		pthread_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	r = open_session(s, f);
	if (r == 0)
		r = opal_dwfl_lookup(f->session, addr, out);
	if (r == 0) {
		account(s, out, &s->stats.misses);
		opal_sym_memcache_put(s->mem, id, addr, out);
		if (s->cache) {
			int c = opal_cache_put_frames(s->cache, id, addr, out);
			if (c < 0)
				opal_warn("symbolize: cache write failed: %s", strerror(-c));
		}
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

int opal_symbolizer_set_kallsyms(struct opal_symbolizer *s, int fd)
{
	struct opal_kallsyms *k = NULL;
	if (fd < 0)
		return -EBADF;
	int r = opal_kallsyms_load(fd, &k);
	close(fd);
	if (r < 0)
		return r;
	size_t n = opal_kallsyms_count(k);
	pthread_mutex_lock(&s->lock);
	struct opal_kallsyms *old = s->ksyms;
	s->ksyms = k;
	pthread_mutex_unlock(&s->lock);
	opal_kallsyms_free(old);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int opal_symbolize_kernel(struct opal_symbolizer *s, uint64_t addr, bool return_address,
			  struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t a = return_address && addr > 0 ? addr - 1 : addr;
	pthread_mutex_lock(&s->lock);
	int r = s->ksyms ? opal_kallsyms_lookup(s->ksyms, a, out) : 0;
	pthread_mutex_unlock(&s->lock);
	return r;
}

void opal_symbolizer_stats(struct opal_symbolizer *s, struct opal_symbolizer_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	pthread_mutex_unlock(&s->lock);
}

int opal_symbolizer_invalidate_file(struct opal_symbolizer *s, const opal_file_id *id)
{
	pthread_mutex_lock(&s->lock);
	opal_sym_memcache_drop_file(s->mem, id);
	int r = s->cache ? opal_cache_invalidate_file(s->cache, id) : 0;
	pthread_mutex_unlock(&s->lock);
	return r;
}

int opal_symbolizer_file_quality(struct opal_symbolizer *s, const opal_file_id *id,
				 enum opal_debug_quality *q)
{
	pthread_mutex_lock(&s->lock);
	struct sym_file *f = *find_file_slot(s, id);
	int r = -ENOENT;
	if (f) {
		/* A descriptor not opened yet is opened now to know. */
		r = f->quality_recorded ? 0 : open_session(s, f);
		if (r == 0)
			*q = (enum opal_debug_quality)f->quality;
	} else if (s->cache) {
		r = opal_cache_get_file_quality(s->cache, id, q);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}
