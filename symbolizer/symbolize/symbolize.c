/* Native and kernel symbolization front end (symbolize.h): the file
 * registry, the LRU of open libdwfl sessions, the in-memory result cache
 * and the SQLite cache, in that lookup order.
 *
 * Bounds: at most OPAL_SYM_MAX_FILES registered descriptors (the least
 * recently used file is forgotten, its descriptor closed: a later lookup
 * answers -ENOENT and the collector sends the file again), at most
 * max_open_files libdwfl sessions holding at most max_debug bytes together
 * (opal_dwfl_memory; both LRU), the in-memory cache's
 * OPAL_SYM_MEMCACHE_MAX_ENTRIES entries / OPAL_SYM_MEMCACHE_MAX_BYTES bytes,
 * and the SQLite write queue's OPAL_SYM_WRITE_ROWS rows /
 * OPAL_SYM_WRITE_BYTES bytes.
 * Every call takes one mutex, so the symbolizer may be shared by threads
 * (lookups are serialized). The SQLite connection is only used under it:
 * the write queue is flushed in one transaction by whichever thread fills
 * it or calls opal_symbolizer_flush.
 *
 * debuginfod downloads happen without that mutex (a server may take up to
 * OPAL_SYM_DEBUGINFOD_MAX_S): libdwfl runs under it, so the sources'
 * callback never uses the network but names the build ID it lacks
 * (opal_sym_sources_ctx.want). ready_session then closes the file's
 * session, marks the file as fetching, drops the mutex, downloads
 * (opal_sym_sources_fetch_debuginfo), retakes it, keeps the answer in the
 * file when the registration is still the same one (registration number
 * `gen`), and reopens the session, which now finds the download where
 * debuginfod stands in the sources' order; only then is the quality
 * recorded and are frames computed, so poorer data is never cached ahead
 * of the download. Lookups of a file being fetched wait for the download
 * (a condition variable, which releases the mutex): they would otherwise
 * compute, cache and report frames that the download is about to replace.
 * Lookups of every other file go on meanwhile. A second file with the
 * same build ID (a build-ID-only registration, /symbolize/v1) shares the
 * download in flight through the sources' transfer slots (at most
 * OPAL_SYM_DEBUGINFOD_MAX_FETCHES transfers at once). A file keeps at
 * most OPAL_SYM_MAX_FETCHED answers (its debug file and dwz's file), so
 * a session opens after at most that many downloads.
 *
 * Latency histogram (metrics.h): a lookup that leaves the in-memory cache
 * is always timed, from the moment the memory cache missed; a memory hit
 * is timed, from the call, one in LATENCY_SAMPLE per thread and then
 * stands for the untimed hits of its thread before it (two clock readings,
 * ~40 ns each on the benchmark machine, cost about as much as a hit).
 *
 * Separate debug info is found by debuginfo_sources.h's callback, which learns
 * which file libdwfl is opening from the file's opal_sym_sources_ctx:
 * every libdwfl call below runs between opal_sym_sources_enter/leave.
 * Files known only by build ID (remote symbolization) are registered
 * under opal_symbolizer_build_id_key with the best ELF the sources have. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#include "base/metrics.h"
#include "base/sym_result.h"
#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_probe.h"
#include "debuginfo/debuginfo_sources.h"
#include "shared/log.h"
#include "symbolize/kallsyms.h"
#include "symbolize/sym_dwfl.h"
#include "symbolize/sym_memcache.h"
#include "symbolize/sym_sqlite.h"
#include "symbolize/symbolize.h"

#define OPAL_SYM_MAX_FILES 4096
#define FILE_BUCKETS       8192   /* power of two, > OPAL_SYM_MAX_FILES */
#define LATENCY_SAMPLE     16     /* power of two */

struct sym_file {
	opal_file_id id;
	int fd;
	size_t build_id_len;
	uint8_t build_id[OPAL_BUILD_ID_MAX];
	char *path;
	struct opal_dwfl_file *session;   /* NULL while closed */
	int quality;                      /* last recorded quality, -1 unknown */
	bool quality_recorded;            /* for the current descriptor */
	bool by_build_id;                 /* registered by opal_symbolizer_ensure_build_id */
	bool fresh;                       /* SQLite had no record of it: its rows are ours */
	int link_fds[OPAL_SYM_MAX_DEBUGLINKS];     /* collector debuglink candidates */
	char *link_paths[OPAL_SYM_MAX_DEBUGLINKS];
	size_t n_links;
	struct opal_sym_sources_ctx src;  /* what the sources found for the session */
	uint64_t gen;                     /* registration number, unique per symbolizer */
	bool fetching;                    /* a debuginfod download for it is under way */
	struct opal_sym_fetched fetched[OPAL_SYM_MAX_FETCHED];   /* debuginfod answers */
	size_t n_fetched;
	size_t debug_bytes;               /* opal_dwfl_memory at the last look, 0 closed */
	struct sym_file *hnext;
	struct sym_file *prev, *next;     /* file LRU, most recent at head */
	struct sym_file *sprev, *snext;   /* session LRU, only while open */
};

struct opal_symbolizer {
	pthread_mutex_t lock;
	pthread_cond_t fetch_done;        /* broadcast when a file's download ends */
	uint64_t next_gen;
	struct opal_cache *cache;         /* borrowed, may be NULL */
	size_t max_open;
	struct sym_file *buckets[FILE_BUCKETS];
	size_t n_files;
	struct sym_file *f_head, *f_tail;
	struct sym_file *s_head, *s_tail;
	size_t n_sessions;
	uint64_t max_debug, debug_bytes;  /* bound (0: none) and sum of f->debug_bytes */
	struct opal_sym_memcache *mem;
	struct opal_cache_frames_row *queue;   /* SQLite rows to write, grown on demand */
	size_t n_queue, cap_queue, queue_bytes;
	struct opal_kallsyms *ksyms;
	struct opal_symbolizer_stats stats;
	struct opal_symbolizer_hooks hooks;
};

static size_t file_bucket(const opal_file_id *id)
{
	/* File IDs are SHA-256 prefixes: any two bytes are well spread. */
	return ((size_t)id->b[0] << 8 | id->b[1]) & (FILE_BUCKETS - 1);
}

static struct sym_file **find_file_slot(struct opal_symbolizer *s, const opal_file_id *id)
{
	struct sym_file **pp = &s->buckets[file_bucket(id)];
	/* memcmp of a constant size compiles to two word compares */
	while (*pp && memcmp((*pp)->id.b, id->b, OPAL_FILE_ID_LEN) != 0)
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
	opal_sym_sources_ctx_reset(&f->src);
	s->debug_bytes -= f->debug_bytes;
	f->debug_bytes = 0;
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

static void drop_debuglinks(struct sym_file *f)
{
	for (size_t i = 0; i < f->n_links; i++) {
		close(f->link_fds[i]);
		free(f->link_paths[i]);
	}
	f->n_links = 0;
}

static void drop_fetched(struct sym_file *f)
{
	for (size_t i = 0; i < f->n_fetched; i++)
		free(f->fetched[i].path);
	f->n_fetched = 0;
}

static void forget_file(struct opal_symbolizer *s, struct sym_file *f)
{
	struct sym_file **slot = find_file_slot(s, &f->id);
	*slot = f->hnext;
	close_session(s, f);
	LRU_UNLINK(s->f_head, s->f_tail, f, prev, next);
	close(f->fd);
	drop_debuglinks(f);
	drop_fetched(f);
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
	pthread_cond_init(&s->fetch_done, NULL);
	s->cache = cache;
	s->max_open = max_open_files ? max_open_files : 1;
	s->max_debug = OPAL_SYM_DEFAULT_DEBUG_MEMORY;
	return s;
}

static int flush_rows(struct opal_symbolizer *s);

void opal_symbolizer_free(struct opal_symbolizer *s)
{
	if (!s)
		return;
	flush_rows(s);
	free(s->queue);
	while (s->f_head)
		forget_file(s, s->f_head);
	opal_sym_memcache_free(s->mem);
	opal_kallsyms_free(s->ksyms);
	pthread_cond_destroy(&s->fetch_done);
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
		drop_debuglinks(f);
		drop_fetched(f);
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
		opal_sym_sources_ctx_init(&f->src);
		struct sym_file **slot = find_file_slot(s, id);
		*slot = f;
		s->n_files++;
	}
	f->fd = fd;
	f->path = path_copy;
	f->gen = ++s->next_gen;
	f->fetching = false;   /* a download of an earlier registration is not kept */
	f->by_build_id = false;
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

/* Writes the queued rows in one transaction and empties the queue. */
static int flush_rows(struct opal_symbolizer *s)
{
	if (s->n_queue == 0)
		return 0;
	int r = opal_cache_put_frames_batch(s->cache, s->queue, s->n_queue);
	if (r < 0)
		opal_warn("symbolize: writing %zu cached frame rows failed: %s", s->n_queue,
			  strerror(-r));
	for (size_t i = 0; i < s->n_queue; i++)
		opal_sym_result_free(&s->queue[i].res);
	s->n_queue = 0;
	s->queue_bytes = 0;
	return r;
}

/* Room for one more queued row (the array doubles up to
 * OPAL_SYM_WRITE_ROWS). */
static bool queue_room(struct opal_symbolizer *s)
{
	if (s->n_queue < s->cap_queue)
		return true;
	size_t cap = s->cap_queue ? s->cap_queue * 2 : 256;
	if (cap > OPAL_SYM_WRITE_ROWS)
		cap = OPAL_SYM_WRITE_ROWS;
	struct opal_cache_frames_row *q = realloc(s->queue, cap * sizeof(*q));
	if (!q)
		return false;
	s->queue = q;
	s->cap_queue = cap;
	return true;
}

/* Queues the SQLite row of `view` (taken over); writes the queue when
 * full. Without memory for the queue the row is written alone. */
static int queue_row(struct opal_symbolizer *s, const opal_file_id *id, uint64_t addr,
		     struct opal_sym_result *view)
{
	if (!queue_room(s)) {
		int r = opal_cache_put_frames(s->cache, id, addr, view);
		opal_sym_result_free(view);
		return r;
	}
	s->queue[s->n_queue++] = (struct opal_cache_frames_row){ .id = *id, .addr = addr,
								  .res = *view };
	s->queue_bytes += sizeof(*s->queue) + opal_sym_result_bytes(view);
	memset(view, 0, sizeof(*view));
	if (s->n_queue == OPAL_SYM_WRITE_ROWS || s->queue_bytes >= OPAL_SYM_WRITE_BYTES)
		return flush_rows(s);
	return 0;
}

/* Forgets queued rows of `id` (their frames are being invalidated). */
static void drop_queued(struct opal_symbolizer *s, const opal_file_id *id)
{
	size_t k = 0;
	for (size_t i = 0; i < s->n_queue; i++) {
		struct opal_cache_frames_row *row = &s->queue[i];
		if (opal_file_id_eq(&row->id, id)) {
			s->queue_bytes -= sizeof(*row) + opal_sym_result_bytes(&row->res);
			opal_sym_result_free(&row->res);
		} else {
			s->queue[k++] = *row;
		}
	}
	s->n_queue = k;
}

/* Stores the frames of (id, addr) in memory and, when `persist`, queues
 * them for SQLite. Returns 0 or -errno of a direct SQLite write. */
static int store(struct opal_symbolizer *s, const opal_file_id *id, uint64_t addr,
		 const struct opal_sym_result *r, bool persist)
{
	struct opal_sym_result view;
	int m = opal_sym_memcache_put_view(s->mem, id, addr, r, &view);
	if (!s->cache || !persist) {
		if (m == 0)
			opal_sym_result_free(&view);
		return 0;
	}
	/* Without memory for the entry, or inside the caller's own
	 * transaction (opal_cache_begin), the row is written at once. */
	if (m < 0 || opal_cache_in_transaction(s->cache)) {
		if (m == 0)
			opal_sym_result_free(&view);
		return opal_cache_put_frames(s->cache, id, addr, r);
	}
	return queue_row(s, id, addr, &view);
}

static int drop_cached(struct opal_symbolizer *s, const opal_file_id *id)
{
	opal_sym_memcache_drop_file(s->mem, id);
	drop_queued(s, id);
	int r = s->cache ? opal_cache_invalidate_file(s->cache, id) : 0;
	if (r < 0)
		opal_warn("symbolize: invalidating cached frames failed: %s", strerror(-r));
	return r;
}

/* The reason recorded with a quality: libdwfl's rank, where separate
 * debug data came from, and what the sources skipped and why. */
static void describe(const struct sym_file *f, const char *rank, enum opal_debug_quality q,
		     char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "%s", rank);
	if (n < len && f->src.source[0])
		n += (size_t)snprintf(out + n, len - n, " from %s", f->src.source);
	if (n < len && q < OPAL_DEBUG_DWARF_LINES) {
		struct opal_elf_probe p;
		if (opal_elf_probe_fd(f->fd, &p, NULL, 0) == 0 && p.debug_unreadable)
			n += (size_t)snprintf(out + n, len - n, "; the file's own DWARF is "
					      "compressed with an unknown type");
	}
	if (n < len && f->src.notes[0])
		snprintf(out + n, len - n, "; skipped: %s", f->src.notes);
}

/* Records the quality of a newly opened descriptor in the files table.
 * Frames cached from poorer debug data than this are dropped; with poorer
 * data than before, the better cached frames and their record are kept. */
static void record_quality(struct opal_symbolizer *s, struct sym_file *f)
{
	const char *rank;
	enum opal_debug_quality q = opal_dwfl_quality(f->session, &rank);
	enum opal_debug_quality old_q;
	int old = f->quality;
	char reason[768];

	describe(f, rank, q, reason, sizeof(reason));
	if (s->hooks.new_file && !f->by_build_id && q >= OPAL_DEBUG_SYMTAB)
		s->hooks.new_file(s->hooks.arg, &f->id, f->build_id, f->build_id_len, f->fd,
				  f->src.debug_fd, q);

	f->quality_recorded = true;
	if (old < 0 && s->cache) {
		int g = opal_cache_get_file_quality(s->cache, &f->id, &old_q);
		if (g == 0)
			old = (int)old_q;
		/* A registration's lookups all come after this record, so
		 * SQLite holds no frames of the file but those this
		 * symbolizer writes and keeps in memory: a memory miss is
		 * recomputed from the descriptor, not read back (a read
		 * outside a transaction costs more than the index lookup). */
		f->fresh = g == -ENOENT;
	}
	char hex[33];
	opal_file_id_to_hex(&f->id, hex);
	if (old >= 0 && (int)q < old) {
		opal_debug("symbolize: %s (%s) now has debug quality %d < %d (%s); keeping cached "
			   "frames", hex, f->path ? f->path : "?", (int)q, old, reason);
		f->quality = old;
		f->fresh = false;   /* the better frames must be read back */
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

/* Describes `f` to the sources before libdwfl opens it. */
static void prepare_sources(struct sym_file *f)
{
	opal_sym_sources_ctx_reset(&f->src);
	f->src.main_fd = f->fd;
	f->src.path = f->path;
	f->src.file_id = f->id;
	f->src.has_file_id = !f->by_build_id;
	f->src.debuglink_fds = f->link_fds;
	f->src.debuglink_paths = (const char *const *)f->link_paths;
	f->src.n_debuglinks = f->n_links;
	f->src.fetched = f->fetched;
	f->src.n_fetched = f->n_fetched;
}

/* Takes the session's current opal_dwfl_memory into the sum, then closes
 * least recently used other sessions while the sum is over the bound. */
static void note_debug_memory(struct opal_symbolizer *s, struct sym_file *f)
{
	size_t now = opal_dwfl_memory(f->session);
	s->debug_bytes = s->debug_bytes - f->debug_bytes + now;
	f->debug_bytes = now;
	while (s->max_debug && s->debug_bytes > s->max_debug && s->s_tail && s->s_tail != f)
		evict_session(s);
}

/* Opens f's session on its descriptor, unless the cache remembers the
 * file as refused before decompression under a budget at least the
 * current one; a new refusal is remembered. Collector files are known by
 * file ID only (their content's hash): a build ID is anyone's to copy,
 * and would let a hostile binary get another file refused. */
static int open_dwfl(struct opal_symbolizer *s, struct sym_file *f)
{
	char why[256], hex[33];
	uint64_t budget = opal_decomp_budget();
	const uint8_t *bid = f->by_build_id ? f->build_id : NULL;
	size_t bid_len = f->by_build_id ? f->build_id_len : 0;
	opal_file_id_to_hex(&f->id, hex);
	if (s->cache &&
	    opal_cache_get_refused(s->cache, &f->id, bid, bid_len, budget, why, sizeof(why)) == 0) {
		opal_metrics_decomp_refused(OPAL_DECOMP_REMEMBERED);
		opal_info("symbolize: %s (%s) is not opened again: %s", hex,
			  f->path ? f->path : "?", why);
		return opal_dwfl_open_refused(why, &f->session);
	}
	int r = opal_dwfl_open(f->fd, f->path, &f->session);
	if (r == 0 && s->cache && opal_dwfl_refused(f->session)) {
		const char *reason;
		opal_dwfl_quality(f->session, &reason);
		int w = opal_cache_put_refused(s->cache, &f->id, bid, bid_len, budget, reason);
		if (w < 0)
			opal_warn("symbolize: remembering the refusal of %s failed: %s", hex,
				  strerror(-w));
	}
	return r;
}

/* Opens f's session (or marks it most recently used). The quality is
 * recorded by ready_session, once no download is wanted. */
static int open_session(struct opal_symbolizer *s, struct sym_file *f)
{
	if (f->session) {
		LRU_UNLINK(s->s_head, s->s_tail, f, sprev, snext);
		LRU_PUSH(s->s_head, s->s_tail, f, sprev, snext);
		return 0;
	}
	while (s->n_sessions >= s->max_open)
		evict_session(s);
	prepare_sources(f);
	opal_sym_sources_enter(&f->src);
	int r = open_dwfl(s, f);
	if ((r == -EMFILE || r == -ENFILE) && s->n_sessions > 0) {
		/* Out of descriptors: give one back and retry once. */
		evict_session(s);
		prepare_sources(f);
		r = open_dwfl(s, f);
	}
	if (r == 0) {
		LRU_PUSH(s->s_head, s->s_tail, f, sprev, snext);
		s->n_sessions++;
		s->stats.files_open = s->n_sessions;
		note_debug_memory(s, f);
	}
	opal_sym_sources_leave();
	return r;
}

/* Keeps the debuginfod answer for build ID `hex` (`path` taken over, NULL
 * when there was none), replacing an older one for that ID. */
static void keep_fetched(struct sym_file *f, const char *hex, char *path)
{
	size_t i = 0;
	while (i < f->n_fetched && strcmp(f->fetched[i].build_id, hex) != 0)
		i++;
	if (i == OPAL_SYM_MAX_FETCHED) {
		free(path);
		return;
	}
	if (i == f->n_fetched)
		f->n_fetched++;
	else
		free(f->fetched[i].path);
	snprintf(f->fetched[i].build_id, sizeof(f->fetched[i].build_id), "%s", hex);
	f->fetched[i].path = path;
}

/* True when the answer f's sources want could be kept. */
static bool fetch_room(const struct sym_file *f)
{
	if (f->n_fetched < OPAL_SYM_MAX_FETCHED)
		return true;
	for (size_t i = 0; i < f->n_fetched; i++)
		if (strcmp(f->fetched[i].build_id, f->src.want) == 0)
			return true;
	return false;
}

/* Makes the download f's sources want with the lock released (the
 * file's comment tells the protocol); f's session is closed. Called and
 * returns with the lock held; *fp becomes the registration of `id` now.
 * Returns 0 when an answer (found or not) was kept, -EAGAIN when the
 * download failed (nothing kept), -ESTALE when `id` was registered again
 * or forgotten meanwhile. */
static int fetch_unlocked(struct opal_symbolizer *s, struct sym_file **fp, const opal_file_id *id)
{
	struct sym_file *f = *fp;
	char want[sizeof(f->src.want)];
	uint64_t gen = f->gen;
	snprintf(want, sizeof(want), "%s", f->src.want);
	close_session(s, f);
	f->fetching = true;
	pthread_mutex_unlock(&s->lock);

	char *path = NULL;
	int r = opal_sym_sources_fetch_debuginfo(want, &path);

	pthread_mutex_lock(&s->lock);
	pthread_cond_broadcast(&s->fetch_done);
	f = *find_file_slot(s, id);
	*fp = f;
	if (!f || f->gen != gen) {
		free(path);
		return -ESTALE;
	}
	f->fetching = false;
	if (r < 0 && r != -ENOENT && r != -ENOSYS)
		return -EAGAIN;
	keep_fetched(f, want, path);
	f->quality_recorded = false;   /* better data may come with it */
	return 0;
}

#define READY_MAX_RESTARTS 2   /* registrations replaced under one lookup */

/* Makes f's session ready for lookups: waits while another thread
 * downloads for the file, opens the session, makes the downloads its
 * sources want (at most OPAL_SYM_MAX_FETCHED, reopening after each; a
 * failed one ends them: the session uses what it found), and records the
 * quality. Lock held; it is released while waiting or downloading, so
 * *fp is re-read: the registration of `id` on return. Returns 0,
 * -ENOENT when `id` is no longer registered, -EAGAIN when it was
 * registered again under this lookup too often, or -errno from
 * opal_dwfl_open. */
static int ready_session(struct opal_symbolizer *s, struct sym_file **fp, const opal_file_id *id)
{
	struct sym_file *f = *fp;
	int fetches = 0, restarts = 0;
	for (;;) {
		while (f && f->fetching) {
			pthread_cond_wait(&s->fetch_done, &s->lock);
			f = *find_file_slot(s, id);
		}
		*fp = f;
		if (!f)
			return -ENOENT;
		int r = open_session(s, f);
		if (r < 0)
			return r;
		if (!f->src.want[0] || fetches == OPAL_SYM_MAX_FETCHED || !fetch_room(f))
			break;
		fetches++;
		r = fetch_unlocked(s, &f, id);
		if (r == -EAGAIN) {
			fetches = OPAL_SYM_MAX_FETCHED;
		} else if (r == -ESTALE) {
			if (++restarts > READY_MAX_RESTARTS) {
				*fp = f;
				return f ? -EAGAIN : -ENOENT;
			}
			fetches = 0;
		}
	}
	/* Whatever is still wanted is not asked for again before the
	 * session next opens (and the negative cache allows). */
	f->src.want[0] = '\0';
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

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int native_locked(struct opal_symbolizer *s, const opal_file_id *id, uint64_t addr,
			 struct opal_sym_result *out, int64_t *t0, bool *mem_hit);

/* Per thread: lookups since the last timed one, memory hits not timed. */
static __thread uint32_t lat_tick, lat_untimed;

int opal_symbolize_native(struct opal_symbolizer *s, const opal_file_id *id, uint64_t vaddr,
			  bool return_address, struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t addr = return_address && vaddr > 0 ? vaddr - 1 : vaddr;
	bool timed = (lat_tick++ & (LATENCY_SAMPLE - 1)) == 0, mem_hit = false;
	int64_t t0 = timed ? mono_ns() : 0;

	pthread_mutex_lock(&s->lock);
	int r = native_locked(s, id, addr, out, &t0, &mem_hit);
	pthread_mutex_unlock(&s->lock);
	if (mem_hit && !timed) {
		lat_untimed++;
		return r;
	}
	uint64_t weight = 1;
	if (mem_hit) {
		weight += lat_untimed;
		lat_untimed = 0;
	}
	opal_metrics_symbolize_latency((uint64_t)(mono_ns() - t0), weight);
	return r;
}

/* The lookup of opal_symbolize_native, with the lock held (released
 * while a debuginfod download runs: ready_session). Sets *mem_hit when
 * the memory cache answered, else *t0 when still 0. */
static int native_locked(struct opal_symbolizer *s, const opal_file_id *id, uint64_t addr,
			 struct opal_sym_result *out, int64_t *t0, bool *mem_hit)
{
	/* A newly registered descriptor is opened before any cache is asked,
	 * so that its debug quality gets recorded and, when better than what
	 * the cached frames came from, those frames get dropped. */
	struct sym_file *f = *find_file_slot(s, id);
	int r;
	if (f) {
		if (s->f_head != f) {
			LRU_UNLINK(s->f_head, s->f_tail, f, prev, next);
			LRU_PUSH(s->f_head, s->f_tail, f, prev, next);
		}
		if (!f->quality_recorded && (r = ready_session(s, &f, id)) < 0 && r != -ENOENT)
			opal_debug("symbolize: opening a session failed: %s", strerror(-r));
	}
	if (opal_sym_memcache_get(s->mem, id, addr, out)) {
		*mem_hit = true;
		account(s, out, &s->stats.mem_hits);
		return 0;
	}
	if (!*t0)
		*t0 = mono_ns();
	if (s->cache && !(f && f->fresh)) {
		r = opal_cache_get_frames(s->cache, id, addr, out);
		if (r == 0) {
			store(s, id, addr, out, false);
			account(s, out, &s->stats.cache_hits);
			return 0;
		}
		if (r != -ENOENT)
			opal_warn("symbolize: cache read failed: %s", strerror(-r));
	}

	if (!f)
		return -ENOENT;
	for (int round = 0;; round++) {
		r = ready_session(s, &f, id);
		if (r < 0)
			return r;
		opal_sym_sources_enter(&f->src);   /* DWARF may be loaded lazily */
		r = opal_dwfl_lookup(f->session, addr, out);
		opal_sym_sources_leave();
		note_debug_memory(s, f);
		/* Lazily loaded DWARF that wanted a download: once more with it. */
		if (r < 0 || !f->src.want[0] || !fetch_room(f) || round == 1)
			break;
		opal_sym_result_free(out);
	}
	if (r == 0) {
		account(s, out, &s->stats.misses);
		int c = store(s, id, addr, out, true);
		if (c < 0)
			opal_warn("symbolize: cache write failed: %s", strerror(-c));
		if (s->hooks.poor_result && (f->quality < OPAL_DEBUG_DWARF_LINES || out->n == 0))
			s->hooks.poor_result(s->hooks.arg, id, f->build_id, f->build_id_len, addr, out);
	}
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
	out->debug_bytes = s->debug_bytes;
	out->rows_pending = s->n_queue;
	pthread_mutex_unlock(&s->lock);
}

void opal_symbolizer_set_max_debug_memory(struct opal_symbolizer *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->lock);
	s->max_debug = bytes;
	while (bytes && s->debug_bytes > bytes && s->s_tail && s->s_tail != s->s_head)
		evict_session(s);
	pthread_mutex_unlock(&s->lock);
}

int opal_symbolizer_flush(struct opal_symbolizer *s)
{
	pthread_mutex_lock(&s->lock);
	int r = flush_rows(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int opal_symbolizer_invalidate_file(struct opal_symbolizer *s, const opal_file_id *id)
{
	pthread_mutex_lock(&s->lock);
	int r = drop_cached(s, id);
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
		r = f->quality_recorded ? 0 : ready_session(s, &f, id);
		if (r == 0)
			*q = (enum opal_debug_quality)f->quality;
	} else if (s->cache) {
		r = opal_cache_get_file_quality(s->cache, id, q);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

int opal_symbolizer_add_debuglink(struct opal_symbolizer *s, const opal_file_id *for_id, int fd,
				  const char *path)
{
	if (fd < 0)
		return -EBADF;
	char *path_copy = NULL;
	if (path && !(path_copy = opal_sym_strdup(path))) {
		close(fd);
		return -ENOMEM;
	}
	pthread_mutex_lock(&s->lock);
	struct sym_file *f = *find_file_slot(s, for_id);
	int r = 0;
	if (!f)
		r = -ENOENT;
	else if (f->n_links >= OPAL_SYM_MAX_DEBUGLINKS)
		r = -ENOSPC;
	if (r < 0) {
		pthread_mutex_unlock(&s->lock);
		free(path_copy);
		close(fd);
		return r;
	}
	f->link_fds[f->n_links] = fd;
	f->link_paths[f->n_links] = path_copy;
	f->n_links++;
	/* Usually the candidate arrives right after the file, before any
	 * session; a session that found no DWARF gets another chance. */
	if (f->session && f->quality < OPAL_DEBUG_DWARF_LINES) {
		close_session(s, f);
		f->quality_recorded = false;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void opal_symbolizer_build_id_key(const uint8_t *build_id, size_t len, opal_file_id *out)
{
	static const char tag[] = "opal-build-id:";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	memset(out, 0, sizeof(*out));
	if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
	    EVP_DigestUpdate(c, tag, sizeof(tag) - 1) == 1 &&
	    EVP_DigestUpdate(c, build_id, len) == 1 && EVP_DigestFinal_ex(c, md, &n) == 1 &&
	    n >= OPAL_FILE_ID_LEN)
		memcpy(out->b, md, OPAL_FILE_ID_LEN);
	EVP_MD_CTX_free(c);
}

/* True when a descriptor is registered for `id`. */
static bool registered(struct opal_symbolizer *s, const opal_file_id *id)
{
	pthread_mutex_lock(&s->lock);
	bool r = *find_file_slot(s, id) != NULL;
	pthread_mutex_unlock(&s->lock);
	return r;
}

static bool cached_file(struct opal_symbolizer *s, const opal_file_id *id)
{
	enum opal_debug_quality q;
	pthread_mutex_lock(&s->lock);
	bool r = s->cache && opal_cache_get_file_quality(s->cache, id, &q) == 0;
	pthread_mutex_unlock(&s->lock);
	return r;
}

int opal_symbolizer_ensure_build_id(struct opal_symbolizer *s, const char *build_id_hex,
				    opal_file_id *key)
{
	uint8_t bid[OPAL_BUILD_ID_MAX];
	if (!opal_is_lower_hex(build_id_hex, 2 * OPAL_BUILD_ID_MAX))
		return -EINVAL;
	int n = opal_hex_decode(build_id_hex, bid, sizeof(bid));
	if (n <= 0)
		return -EINVAL;
	opal_symbolizer_build_id_key(bid, (size_t)n, key);
	if (registered(s, key))
		return 0;
	/* Found outside the lock: a debuginfod download may take a while. */
	char source[200], name[400];
	int fd = opal_sym_sources_open_build_id(build_id_hex, source, sizeof(source));
	if (fd < 0)
		return cached_file(s, key) ? 0 : -ENOENT;
	snprintf(name, sizeof(name), "build-id %.128s (%s)", build_id_hex, source);
	int r = opal_symbolizer_add_file(s, key, fd, bid, (size_t)n, name);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	struct sym_file *f = *find_file_slot(s, key);
	if (f)
		f->by_build_id = true;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int opal_symbolizer_ensure_file_id(struct opal_symbolizer *s, const opal_file_id *id)
{
	if (registered(s, id))
		return 0;
	char hex[33], source[200];
	opal_file_id_to_hex(id, hex);
	int fd = opal_sym_sources_open_file_id(hex, source, sizeof(source));
	if (fd < 0)
		return cached_file(s, id) ? 0 : -ENOENT;
	return opal_symbolizer_add_file(s, id, fd, NULL, 0, source);
}

int opal_symbolizer_debug_data_changed(struct opal_symbolizer *s, const uint8_t *build_id,
				       size_t len, const opal_file_id *file_id,
				       enum opal_debug_quality q)
{
	opal_file_id key;
	int n = 0;
	if (len)
		opal_symbolizer_build_id_key(build_id, len, &key);
	pthread_mutex_lock(&s->lock);
	for (struct sym_file *f = s->f_head, *next; f; f = next) {
		next = f->next;
		bool match = (len && f->build_id_len == len && memcmp(f->build_id, build_id, len) == 0) ||
			     (file_id && opal_file_id_eq(&f->id, file_id));
		if (!match)
			continue;
		n++;
		if (f->by_build_id) {
			/* Its descriptor is the older best file itself: find again. */
			bool worse = f->quality < (int)q;
			opal_file_id id = f->id;
			forget_file(s, f);
			if (worse)
				drop_cached(s, &id);
			continue;
		}
		close_session(s, f);
		f->quality_recorded = false;
	}
	if (len && !*find_file_slot(s, &key) && s->cache) {
		enum opal_debug_quality old;
		if (opal_cache_get_file_quality(s->cache, &key, &old) == 0 && old < q) {
			drop_cached(s, &key);
			n++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

int opal_symbolizer_put_remote(struct opal_symbolizer *s, const opal_file_id *id, uint64_t addr,
			       const struct opal_sym_result *r)
{
	pthread_mutex_lock(&s->lock);
	int err = store(s, id, addr, r, true);
	pthread_mutex_unlock(&s->lock);
	return err;
}

void opal_symbolizer_set_hooks(struct opal_symbolizer *s, const struct opal_symbolizer_hooks *h)
{
	pthread_mutex_lock(&s->lock);
	if (h)
		s->hooks = *h;
	else
		memset(&s->hooks, 0, sizeof(s->hooks));
	pthread_mutex_unlock(&s->lock);
}
