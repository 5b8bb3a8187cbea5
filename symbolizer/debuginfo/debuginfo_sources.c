/* Debug-info sources in opal's order (debuginfo_sources.h).
 *
 * Bounds: at most OPAL_SYM_MAX_DEBUGLINKS collector candidates per file;
 * one debuginfod transfer runs at most OPAL_SYM_DEBUGINFOD_MAX_S seconds
 * (then it is cancelled and its miss remembered briefly), at most
 * OPAL_SYM_DEBUGINFOD_MAX_FETCHES at once (one slot each; a caller finding
 * every slot taken waits for one, and a caller whose build ID is in a slot
 * already waits for that transfer's answer instead of asking again);
 * CRC-32 results are kept for CRC_CACHE_SLOTS files (by device, inode,
 * size, mtime) so an evicted session does not re-read its debug file. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <sys/stat.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>

#include "base/metrics.h"
#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_probe.h"
#include "debuginfo/debuginfo_sources.h"
#include "debuginfo/debuginfo_store.h"
#include "shared/log.h"
#include "shared/service.h"

#define CRC_CACHE_SLOTS   256
#define ERROR_TTL_S       60       /* a debuginfod failure (not a 404) is retried after this */
#define PATH_COMPONENT_MAX 255

static struct {
	/* The configuration is written before threads start (init) and read
	 * without the lock; the lock guards the CRC cache and the transfer
	 * slots, whose changes are broadcast on fetch_cond. */
	pthread_mutex_t lock;
	pthread_cond_t fetch_cond;
	struct opal_debuginfo_store *store;
	char debug_root[PATH_MAX / 2];
	bool debuginfod;
	unsigned negative_ttl_s;
	struct crc_slot {
		dev_t dev;
		ino_t ino;
		off_t size;
		struct timespec mtime;
		uint32_t crc;
		bool used;
	} crc[CRC_CACHE_SLOTS];
	unsigned crc_next;
	/* debuginfod transfers in flight, or done and still read by waiters */
	struct fetch_slot {
		char build_id[2 * OPAL_BUILD_ID_MAX + 1];
		const char *kind;             /* "debuginfo" or "executable" (a literal) */
		bool used, done;
		unsigned waiters;             /* callers waiting for this transfer */
		int err;                      /* when done: 0 or -errno */
		char *path;                   /* when done without error: the cached file */
	} fetches[OPAL_SYM_DEBUGINFOD_MAX_FETCHES];
} cfg = { .lock = PTHREAD_MUTEX_INITIALIZER, .fetch_cond = PTHREAD_COND_INITIALIZER };

static __thread struct opal_sym_sources_ctx *current;

int opal_sym_sources_init(const struct opal_sym_sources_config *c)
{
	pthread_mutex_lock(&cfg.lock);
	cfg.store = c->store;
	snprintf(cfg.debug_root, sizeof(cfg.debug_root), "%s", c->debug_root ? c->debug_root : "");
	cfg.negative_ttl_s = c->negative_ttl_s ? c->negative_ttl_s : OPAL_SYM_NEGATIVE_TTL_S;
	cfg.debuginfod = false;
	const char *urls = getenv("DEBUGINFOD_URLS");
	int r = 0;
	if (c->debuginfod_cache && urls && *urls) {
		if (mkdir(c->debuginfod_cache, 0750) != 0 && errno != EEXIST)
			r = -errno;
		else if (setenv("DEBUGINFOD_CACHE_PATH", c->debuginfod_cache, 1) != 0)
			r = -errno;
		else
			cfg.debuginfod = true;
	}
	pthread_mutex_unlock(&cfg.lock);
	if (cfg.debuginfod)
		opal_info("debuginfod: %s (cache %s)", urls, c->debuginfod_cache);
	return r;
}

void opal_sym_sources_reset(void)
{
	pthread_mutex_lock(&cfg.lock);
	cfg.store = NULL;
	cfg.debug_root[0] = '\0';
	cfg.debuginfod = false;
	memset(cfg.crc, 0, sizeof(cfg.crc));
	pthread_mutex_unlock(&cfg.lock);
}

void opal_sym_sources_ctx_init(struct opal_sym_sources_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->main_fd = -1;
	ctx->debug_fd = -1;
}

void opal_sym_sources_ctx_reset(struct opal_sym_sources_ctx *ctx)
{
	if (ctx->debug_fd >= 0)
		close(ctx->debug_fd);
	ctx->debug_fd = -1;
	ctx->source[0] = '\0';
	ctx->notes[0] = '\0';
	ctx->want[0] = '\0';
}

void opal_sym_sources_enter(struct opal_sym_sources_ctx *ctx)
{
	current = ctx;
}

void opal_sym_sources_leave(void)
{
	current = NULL;
}

static void note(struct opal_sym_sources_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Appends "; <text>" to ctx->notes (cut at its size). */
static void note(struct opal_sym_sources_ctx *ctx, const char *fmt, ...)
{
	if (!ctx)
		return;
	size_t used = strlen(ctx->notes);
	if (used + 3 >= sizeof(ctx->notes))
		return;
	if (used) {
		memcpy(ctx->notes + used, "; ", 2);
		used += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx->notes + used, sizeof(ctx->notes) - used, fmt, ap);
	va_end(ap);
}

/* ---- CRC-32 with a small cache ---------------------------------------------- */

static int cached_crc(int fd, uint32_t *crc)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	pthread_mutex_lock(&cfg.lock);
	for (int i = 0; i < CRC_CACHE_SLOTS; i++) {
		struct crc_slot *c = &cfg.crc[i];
		if (c->used && c->dev == st.st_dev && c->ino == st.st_ino && c->size == st.st_size &&
		    c->mtime.tv_sec == st.st_mtim.tv_sec && c->mtime.tv_nsec == st.st_mtim.tv_nsec) {
			*crc = c->crc;
			pthread_mutex_unlock(&cfg.lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&cfg.lock);
	int r = opal_file_crc32(fd, crc);
	if (r < 0)
		return r;
	pthread_mutex_lock(&cfg.lock);
	struct crc_slot *c = &cfg.crc[cfg.crc_next++ % CRC_CACHE_SLOTS];
	*c = (struct crc_slot){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
				.mtime = st.st_mtim, .crc = *crc, .used = true };
	pthread_mutex_unlock(&cfg.lock);
	return 0;
}

/* ---- one search: candidates ranked -------------------------------------------- */

struct search {
	struct opal_sym_sources_ctx *ctx;     /* may be NULL */
	const uint8_t *bid;                   /* build ID the debug file must carry, or NULL */
	size_t bid_len;
	enum opal_debug_quality floor;        /* what the ELF itself offers */
	int best_fd;
	enum opal_debug_quality best_q;
	char best_desc[200];
	bool done;                            /* a DWARF candidate was chosen */
};

/* Weighs candidate `fd` (taken over) described by `desc`. With `crc_of`
 * set, its CRC-32 must equal *crc_of. */
static void consider(struct search *sr, int fd, const char *desc, const uint32_t *crc_of)
{
	struct opal_elf_probe p;
	char why[200];
	if (fd < 0 || sr->done) {
		if (fd >= 0)
			close(fd);
		return;
	}
	int r = opal_elf_probe_fd(fd, &p, why, sizeof(why));
	if (r < 0) {
		note(sr->ctx, "%s: %s", desc, r == -ENOEXEC || r == -EBADMSG ? why : strerror(-r));
		close(fd);
		return;
	}
	if (sr->bid_len && p.build_id_len &&
	    (p.build_id_len != sr->bid_len || memcmp(p.build_id, sr->bid, sr->bid_len) != 0)) {
		note(sr->ctx, "%s: different build ID", desc);
		close(fd);
		return;
	}
	uint32_t crc;
	if (crc_of && (cached_crc(fd, &crc) < 0 || crc != *crc_of)) {
		note(sr->ctx, "%s: CRC-32 does not match .gnu_debuglink", desc);
		close(fd);
		return;
	}
	struct opal_decomp_scan scan;
	if (opal_decomp_scan_fd(fd, &scan) == -EFBIG) {
		note(sr->ctx, "%s: refused before decompression: %s", desc, scan.why);
		close(fd);
		return;
	}
	const char *what;
	enum opal_debug_quality q = opal_elf_probe_quality(&p, &what);
	if (p.debug_unreadable)
		note(sr->ctx, "%s: DWARF compressed with an unknown type", desc);
	if (q >= OPAL_DEBUG_DWARF_LINES) {
		if (sr->best_fd >= 0)
			close(sr->best_fd);
		sr->best_fd = fd;
		sr->best_q = q;
		snprintf(sr->best_desc, sizeof(sr->best_desc), "%s", desc);
		sr->done = true;
		return;
	}
	if (q > sr->floor && q > sr->best_q) {
		if (sr->best_fd >= 0)
			close(sr->best_fd);
		sr->best_fd = fd;
		sr->best_q = q;
		snprintf(sr->best_desc, sizeof(sr->best_desc), "%s", desc);
		return;
	}
	close(fd);
}

static int open_ro(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool have_store(void)
{
	return cfg.store != NULL;
}

/* Uploaded files of `id` (debuginfo, then executable). */
static void try_uploads(struct search *sr, const char *id)
{
	static const enum opal_di_type types[] = { OPAL_DI_DEBUGINFO, OPAL_DI_EXECUTABLE };
	if (!have_store())
		return;
	for (size_t i = 0; i < 2 && !sr->done; i++) {
		char desc[200];
		int fd = opal_debuginfo_store_open_file(cfg.store, id, types[i], NULL, NULL, 0);
		if (fd < 0)
			continue;
		snprintf(desc, sizeof(desc), "uploaded %s %.128s", opal_di_type_name(types[i]), id);
		consider(sr, fd, desc, NULL);
	}
}

static void build_id_path(const char *hex, char *out, size_t len)
{
	snprintf(out, len, "%s/.build-id/%.2s/%.126s.debug", cfg.debug_root, hex, hex + 2);
}

static void try_build_id_dir(struct search *sr, const char *hex)
{
	char p[PATH_MAX];
	if (!cfg.debug_root[0] || sr->done)
		return;
	build_id_path(hex, p, sizeof(p));
	consider(sr, open_ro(p), p, NULL);
}

/* True for an absolute path without "." or ".." components, so that it
 * can be put under the debug root without leaving it. */
static bool clean_abs_path(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) >= PATH_MAX / 2)
		return false;
	for (const char *s = p; *s;) {
		while (*s == '/')
			s++;
		size_t n = strcspn(s, "/");
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.') ||
		    n > PATH_COMPONENT_MAX)
			return false;
		s += n;
	}
	return true;
}

static bool clean_name(const char *n)
{
	return n && *n && !strchr(n, '/') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0 &&
	       strlen(n) <= PATH_COMPONENT_MAX;
}

static void try_debuglinks(struct search *sr, const char *link, uint32_t crc)
{
	struct opal_sym_sources_ctx *ctx = sr->ctx;
	if (!clean_name(link))
		return;
	if (cfg.debug_root[0] && ctx && clean_abs_path(ctx->path) && !sr->done) {
		char dir[PATH_MAX / 2], p[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", ctx->path);
		char *slash = strrchr(dir, '/');
		*slash = '\0';
		snprintf(p, sizeof(p), "%s%s/%s", cfg.debug_root, dir, link);
		consider(sr, open_ro(p), p, &crc);
	}
	for (size_t i = 0; ctx && i < ctx->n_debuglinks && !sr->done; i++) {
		int fd = fcntl(ctx->debuglink_fds[i], F_DUPFD_CLOEXEC, 0);
		char desc[200];
		snprintf(desc, sizeof(desc), "debuglink %.170s (collector)",
			 ctx->debuglink_paths[i] ? ctx->debuglink_paths[i] : "?");
		consider(sr, fd, desc, &crc);
	}
}

struct dfd_deadline {
	time_t until;
};

static int dfd_progress(debuginfod_client *c, long a, long b)
{
	(void)a;
	(void)b;
	struct dfd_deadline *d = debuginfod_get_user_data(c);
	/* Non-zero cancels the transfer: over its time, or the daemon stops
	 * (libdebuginfod calls this at least once a second, bytes or not). */
	return opal_stop_signals || (d && time(NULL) > d->until);
}

/* One debuginfod transfer of `kind` ("debuginfo" or "executable"), made
 * by the caller's thread. Returns 0 and *path (heap) or -errno; records
 * the outcome in the metrics and the negative cache. */
static int debuginfod_transfer(const char *hex, const uint8_t *bid, size_t bid_len,
			       const char *kind, char **path)
{
	debuginfod_client *c = debuginfod_begin();
	if (!c)
		return -ENOMEM;
	struct dfd_deadline d = { .until = time(NULL) + OPAL_SYM_DEBUGINFOD_MAX_S };
	debuginfod_set_user_data(c, &d);
	debuginfod_set_progressfn(c, dfd_progress);
	*path = NULL;
	int fd = strcmp(kind, "executable") == 0 ?
		debuginfod_find_executable(c, bid, (int)bid_len, path) :
		debuginfod_find_debuginfo(c, bid, (int)bid_len, path);
	debuginfod_end(c);
	if (fd >= 0) {
		close(fd);
		if (*path) {
			opal_metrics_debuginfod(OPAL_DEBUGINFOD_FOUND);
			return 0;
		}
		fd = -EIO;   /* libdebuginfod names every file it returns */
	}
	free(*path);
	*path = NULL;
	if (opal_stop_signals)
		return -ECANCELED;   /* not the server's answer: nothing to remember */
	if (fd == -ENOENT) {
		opal_metrics_debuginfod(OPAL_DEBUGINFOD_NOT_FOUND);
		if (have_store())
			opal_debuginfo_store_miss_put(cfg.store, hex, kind, cfg.negative_ttl_s);
	} else {
		opal_metrics_debuginfod(OPAL_DEBUGINFOD_ERROR);
		opal_warn("debuginfod lookup of %s %s failed: %s", kind, hex, strerror(-fd));
		if (have_store())
			opal_debuginfo_store_miss_put(cfg.store, hex, kind, ERROR_TTL_S);
	}
	return fd;
}

static struct fetch_slot *find_slot(const char *hex, const char *kind)
{
	for (size_t i = 0; i < OPAL_SYM_DEBUGINFOD_MAX_FETCHES; i++) {
		struct fetch_slot *f = &cfg.fetches[i];
		if (f->used && strcmp(f->kind, kind) == 0 && strcmp(f->build_id, hex) == 0)
			return f;
	}
	return NULL;
}

/* Copies the answer of a finished transfer; the lock is held. */
static int slot_answer(const struct fetch_slot *f, char **path)
{
	if (f->err < 0)
		return f->err;
	*path = strdup(f->path);
	return *path ? 0 : -ENOMEM;
}

/* Frees a slot nobody reads any more; the lock is held. */
static void slot_release(struct fetch_slot *f)
{
	if (f->waiters > 0 || !f->done)
		return;
	free(f->path);
	memset(f, 0, sizeof(*f));
	pthread_cond_broadcast(&cfg.fetch_cond);   /* a slot is free */
}

/* The debuginfod lookup of `kind` ("debuginfo" or "executable", a
 * string literal) for `hex` (`bid`, `bid_len` bytes), through the
 * negative cache and the transfer slots. Returns 0 and *path (heap) or
 * -errno. */
static int debuginfod_fetch(const char *hex, const uint8_t *bid, size_t bid_len, const char *kind,
			    char **path)
{
	*path = NULL;
	if (!cfg.debuginfod)
		return -ENOSYS;
	if (opal_stop_signals)
		return -ECANCELED;   /* stopping: no new download */
	if (have_store() && opal_debuginfo_store_miss_known(cfg.store, hex, kind)) {
		opal_metrics_debuginfod(OPAL_DEBUGINFOD_NEGATIVE_CACHED);
		return -ENOENT;
	}
	pthread_mutex_lock(&cfg.lock);
	struct fetch_slot *mine = NULL;
	for (;;) {
		struct fetch_slot *f = find_slot(hex, kind);
		if (f) {
			/* Someone is asking already: wait for that answer. */
			f->waiters++;
			while (!f->done)
				pthread_cond_wait(&cfg.fetch_cond, &cfg.lock);
			f->waiters--;
			int r = slot_answer(f, path);
			slot_release(f);
			pthread_mutex_unlock(&cfg.lock);
			return r;
		}
		for (size_t i = 0; i < OPAL_SYM_DEBUGINFOD_MAX_FETCHES && !mine; i++)
			if (!cfg.fetches[i].used)
				mine = &cfg.fetches[i];
		if (mine)
			break;
		pthread_cond_wait(&cfg.fetch_cond, &cfg.lock);
	}
	snprintf(mine->build_id, sizeof(mine->build_id), "%s", hex);
	mine->kind = kind;
	mine->used = true;
	pthread_mutex_unlock(&cfg.lock);

	char *got = NULL;
	int r = debuginfod_transfer(hex, bid, bid_len, kind, &got);

	pthread_mutex_lock(&cfg.lock);
	mine->err = r;
	mine->path = got;
	mine->done = true;
	pthread_cond_broadcast(&cfg.fetch_cond);   /* the waiters' answer */
	r = slot_answer(mine, path);
	slot_release(mine);
	pthread_mutex_unlock(&cfg.lock);
	return r;
}

/* Decodes a GNU build ID given as hex (validated first: it names paths).
 * Returns its length in bytes or -EINVAL. */
static int decode_build_id(const char *hex, uint8_t bid[OPAL_BUILD_ID_MAX])
{
	if (!opal_di_id_valid(hex, OPAL_DI_ID_GNU))
		return -EINVAL;
	int n = opal_hex_decode(hex, bid, OPAL_BUILD_ID_MAX);
	return n > 0 ? n : -EINVAL;
}

int opal_sym_sources_fetch_debuginfo(const char *build_id_hex, char **path)
{
	uint8_t bid[OPAL_BUILD_ID_MAX];
	*path = NULL;
	int n = decode_build_id(build_id_hex, bid);
	if (n < 0)
		return n;
	return debuginfod_fetch(build_id_hex, bid, (size_t)n, "debuginfo", path);
}

/* Weighs the debuginfod file at `path` (kind `kind`) for the search. */
static void consider_fetched(struct search *sr, const char *kind, const char *path)
{
	char desc[200];
	snprintf(desc, sizeof(desc), "debuginfod %s %.160s", kind, path);
	int fd = open_ro(path);
	if (fd < 0) {
		note(sr->ctx, "%s: %s", desc, strerror(errno));
		return;
	}
	consider(sr, fd, desc, NULL);
}

/* The debuginfod step. With a context (a libdwfl callback, under the
 * symbolizer's lock) only answers fetched before are used, and a missing
 * one is named in ctx->want; without one the transfer is made here. */
static void try_debuginfod(struct search *sr, const char *hex, const char *kind)
{
	struct opal_sym_sources_ctx *ctx = sr->ctx;
	if (sr->done || !sr->bid_len || !cfg.debuginfod)
		return;
	if (!ctx) {
		char *path;
		if (debuginfod_fetch(hex, sr->bid, sr->bid_len, kind, &path) == 0) {
			consider_fetched(sr, kind, path);
			free(path);
		}
		return;
	}
	for (size_t i = 0; i < ctx->n_fetched; i++) {
		const struct opal_sym_fetched *f = &ctx->fetched[i];
		if (strcmp(f->build_id, hex) != 0)
			continue;
		if (f->path && access(f->path, R_OK) == 0) {
			consider_fetched(sr, kind, f->path);
			return;
		}
		if (!f->path)
			return;   /* asked already: nothing there */
		break;    /* gone from the cache since: ask again */
	}
	if (have_store() && opal_debuginfo_store_miss_known(cfg.store, hex, kind)) {
		opal_metrics_debuginfod(OPAL_DEBUGINFOD_NEGATIVE_CACHED);
		return;
	}
	if (!ctx->want[0])
		snprintf(ctx->want, sizeof(ctx->want), "%s", hex);
}

/* ---- the libdwfl callback ------------------------------------------------------- */

/* The descriptor libdwfl gets for chosen candidate `fd` (taken over),
 * scanned by consider: its zstd sections decompressed (opal_decomp_open). */
static int for_libdw(int fd)
{
	struct opal_decomp_scan scan;
	int d = opal_decomp_open(fd, &scan);
	close(fd);
	errno = 0;
	return d < 0 ? -1 : d;
}

/* Debian (dh_dwz) records the dwz file by its path under /usr/lib/debug
 * (/usr/lib/debug/.dwz/<triplet>/<package>.debug) and makes no .build-id
 * entry for it: that path, taken under opal's debug root. Its build ID
 * must be the one .gnu_debugaltlink names (consider). */
static void try_altlink_path(struct search *sr, const char *altname)
{
	static const char std_root[] = "/usr/lib/debug/";
	char p[PATH_MAX];
	if (!cfg.debug_root[0] || sr->done || !clean_abs_path(altname) ||
	    strncmp(altname, std_root, sizeof(std_root) - 1) != 0)
		return;
	snprintf(p, sizeof(p), "%s/%s", cfg.debug_root, altname + sizeof(std_root) - 1);
	consider(sr, open_ro(p), p, NULL);
}

/* dwz's shared file named by .gnu_debugaltlink of the file holding the
 * DWARF: found by its build ID in the same sources, or by its path under
 * the debug root. */
static int find_altfile(struct opal_sym_sources_ctx *ctx, const char *altname,
			char **debuginfo_file_name)
{
	struct opal_elf_probe p;
	int holder = ctx->debug_fd >= 0 ? ctx->debug_fd : ctx->main_fd;
	if (holder < 0 || opal_elf_probe_fd(holder, &p, NULL, 0) < 0 || !p.has_altlink)
		return -1;
	char hex[OPAL_DI_ID_HEX_MAX + 1];
	opal_hex_encode(p.altlink_build_id, p.altlink_build_id_len, hex);
	struct search sr = { .ctx = ctx, .bid = p.altlink_build_id,
			     .bid_len = p.altlink_build_id_len, .floor = OPAL_DEBUG_NONE,
			     .best_fd = -1, .best_q = OPAL_DEBUG_NONE };
	try_uploads(&sr, hex);
	try_build_id_dir(&sr, hex);
	try_altlink_path(&sr, altname);
	try_debuginfod(&sr, hex, "debuginfo");
	if (sr.best_fd < 0) {
		if (strcmp(ctx->want, hex) != 0)   /* else asked again after the download */
			note(ctx, "dwz file %s (build ID %s) not found", altname ? altname : "?",
			     hex);
		errno = 0;
		return -1;
	}
	*debuginfo_file_name = strdup(sr.best_desc);
	return for_libdw(sr.best_fd);
}

int opal_sym_sources_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
				    GElf_Addr base, const char *file_name,
				    const char *debuglink_file, GElf_Word debuglink_crc,
				    char **debuginfo_file_name)
{
	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	struct opal_sym_sources_ctx *ctx = current;
	errno = 0;   /* libdwfl reads errno after a -1: 0 means "not found" */
	if (!ctx || ctx->main_fd < 0)
		return -1;

	struct opal_elf_probe self;
	if (opal_elf_probe_fd(ctx->main_fd, &self, NULL, 0) < 0)
		return -1;
	/* libdwfl asks for the dwz file with the altlink name and CRC 0;
	 * for the main debug file with the ELF's own .gnu_debuglink. */
	bool alt = debuglink_file &&
		   !(self.has_debuglink && strcmp(self.debuglink, debuglink_file) == 0 &&
		     self.debuglink_crc == debuglink_crc);
	if (alt)
		return find_altfile(ctx, debuglink_file, debuginfo_file_name);

	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	int bid_len = dwfl_module_build_id(mod, &bits, &vaddr);
	const char *what;
	struct search sr = { .ctx = ctx, .floor = opal_elf_probe_quality(&self, &what),
			     .best_fd = -1, .best_q = OPAL_DEBUG_NONE };
	char hex[OPAL_DI_ID_HEX_MAX + 1] = "";
	if (bid_len > 0 && bid_len <= OPAL_BUILD_ID_MAX) {
		sr.bid = bits;
		sr.bid_len = (size_t)bid_len;
		opal_hex_encode(bits, (size_t)bid_len, hex);
	}
	if (hex[0])
		try_uploads(&sr, hex);
	if (ctx->has_file_id && !sr.done) {
		char fhex[33];
		opal_file_id_to_hex(&ctx->file_id, fhex);
		try_uploads(&sr, fhex);
	}
	if (hex[0])
		try_build_id_dir(&sr, hex);
	if (debuglink_file)
		try_debuglinks(&sr, debuglink_file, debuglink_crc);
	if (hex[0])
		try_debuginfod(&sr, hex, "debuginfo");

	if (sr.best_fd < 0)
		return -1;
	snprintf(ctx->source, sizeof(ctx->source), "%s", sr.best_desc);
	if (ctx->debug_fd >= 0)
		close(ctx->debug_fd);
	ctx->debug_fd = fcntl(sr.best_fd, F_DUPFD_CLOEXEC, 0);
	*debuginfo_file_name = strdup(sr.best_desc);
	return for_libdw(sr.best_fd);
}

/* ---- lookups without a collector descriptor ----------------------------------------- */

int opal_sym_sources_open_build_id(const char *build_id_hex, char *source, size_t len)
{
	uint8_t bid[OPAL_BUILD_ID_MAX];
	int n = decode_build_id(build_id_hex, bid);
	if (n < 0)
		return n;
	struct search sr = { .bid = bid, .bid_len = (size_t)n, .floor = OPAL_DEBUG_NONE,
			     .best_fd = -1, .best_q = OPAL_DEBUG_NONE };
	try_uploads(&sr, build_id_hex);
	try_build_id_dir(&sr, build_id_hex);
	try_debuginfod(&sr, build_id_hex, "debuginfo");
	try_debuginfod(&sr, build_id_hex, "executable");
	if (sr.best_fd < 0)
		return -ENOENT;
	snprintf(source, len, "%s", sr.best_desc);
	return sr.best_fd;
}

int opal_sym_sources_open_file_id(const char *file_id_hex, char *source, size_t len)
{
	if (!opal_di_id_valid(file_id_hex, OPAL_DI_ID_HTLHASH))
		return -EINVAL;
	struct search sr = { .floor = OPAL_DEBUG_NONE, .best_fd = -1, .best_q = OPAL_DEBUG_NONE };
	try_uploads(&sr, file_id_hex);
	if (sr.best_fd < 0)
		return -ENOENT;
	snprintf(source, len, "%s", sr.best_desc);
	return sr.best_fd;
}

int opal_sym_sources_local_debuginfo(const char *build_id_hex, char *path, size_t len)
{
	if (!opal_di_id_valid(build_id_hex, OPAL_DI_ID_GNU))
		return -EINVAL;
	if (have_store()) {
		int fd = opal_debuginfo_store_open_file(cfg.store, build_id_hex, OPAL_DI_DEBUGINFO,
							NULL, NULL, 0);
		if (fd >= 0) {
			snprintf(path, len, "uploads/debuginfo/%s", build_id_hex);
			return fd;
		}
	}
	if (!cfg.debug_root[0])
		return -ENOENT;
	char p[PATH_MAX];
	build_id_path(build_id_hex, p, sizeof(p));
	int fd = open_ro(p);
	if (fd < 0)
		return -ENOENT;
	snprintf(path, len, "%s", p);
	return fd;
}

bool opal_sym_sources_elsewhere(void *arg, const char *build_id, char *where, size_t len)
{
	(void)arg;
	uint8_t bid[OPAL_BUILD_ID_MAX];
	int n = opal_hex_decode(build_id, bid, sizeof(bid));
	if (n <= 0)
		return false;
	/* Uploads are the caller's business: only the other sources count. */
	struct search sr = { .bid = bid, .bid_len = (size_t)n, .floor = OPAL_DEBUG_SYMTAB,
			     .best_fd = -1, .best_q = OPAL_DEBUG_NONE };
	try_build_id_dir(&sr, build_id);
	try_debuginfod(&sr, build_id, "debuginfo");
	if (sr.best_fd >= 0)
		close(sr.best_fd);
	if (!sr.done)
		return false;
	snprintf(where, len, "%s", sr.best_desc);
	return true;
}
