/* Upload store (debuginfo_store.h).
 *
 * Layout under cfg->dir: files/<type>/<id> (stored files, named only from
 * validated lowercase hex), tmp/<upload id> (bodies being received).
 * Tables in cfg->db_path (state.db, shared with sym_sqlite.c's tables):
 *   debuginfo_files(id, type, id_type, hash, size, quality, reason,
 *                   upload_id, stored_at)             PRIMARY KEY(id, type)
 *   debuginfo_uploads(upload_id PRIMARY KEY, id, type, id_type, hash, size,
 *                     force, state, reason, started_at, finished_at)
 *   debuginfo_invalid(id, type, hash, reason, at)     PRIMARY KEY(id, type, hash)
 *   debuginfod_misses(build_id, kind, until)          PRIMARY KEY(build_id, kind)
 * Times are Unix seconds. Bounds: OPAL_DI_MAX_ENTRIES stored files (then
 * 507), finished upload rows kept 7 days, OPAL_DI_MAX_INVALID invalid
 * hashes and OPAL_DI_MAX_MISSES misses (oldest dropped), OPAL_DI_MAX_ACTIVE
 * bodies received at once. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>
#include <sys/stat.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sqlite3.h>

#include "debuginfo/debuginfo_store.h"
#include "base/metrics.h"
#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_probe.h"
#include "debuginfo/debuginfo_srctar.h"
#include "shared/log.h"

#define OPAL_DI_MAX_INVALID   100000
#define FINISHED_KEEP_S       (7 * 86400)
#define BUSY_TIMEOUT_MS       5000
#define DIR_MAX               (PATH_MAX - 512)   /* leaves room for /files/<type>/<id> */

static const char *const type_names[OPAL_DI_N_TYPES] = { "debuginfo", "executable", "sources" };

struct opal_debuginfo_store {
	pthread_mutex_t lock;
	sqlite3 *db;
	char dir[DIR_MAX];
	uint64_t max_upload, expiry_s;
	char active[OPAL_DI_MAX_ACTIVE][OPAL_DI_UPLOAD_ID_LEN + 1];   /* "" = free */
	opal_di_rank_fn rank;
	opal_di_stored_fn stored;
	opal_di_elsewhere_fn elsewhere;
	void *hook_arg;
};

struct opal_di_upload {
	struct opal_debuginfo_store *s;
	char upload_id[OPAL_DI_UPLOAD_ID_LEN + 1];
	struct opal_di_request req;
	int fd;
	char tmp[PATH_MAX];
	uint64_t received;
	EVP_MD_CTX *sha;
	int slot;
};

const char *opal_di_type_name(enum opal_di_type t)
{
	return (unsigned)t < OPAL_DI_N_TYPES ? type_names[t] : "?";
}

const char *opal_di_id_type_name(enum opal_di_id_type t)
{
	return t == OPAL_DI_ID_HTLHASH ? "htlhash" : "gnu";
}

const char *opal_di_quality_name(enum opal_debug_quality q)
{
	switch (q) {
	case OPAL_DEBUG_DWARF_INLINE: return "dwarf_inline";
	case OPAL_DEBUG_DWARF_LINES: return "dwarf_lines";
	case OPAL_DEBUG_SYMTAB: return "symtab";
	case OPAL_DEBUG_DYNSYM: return "dynsym";
	default: return "none";
	}
}

bool opal_di_id_valid(const char *id, enum opal_di_id_type t)
{
	size_t n = strnlen(id, OPAL_DI_ID_HEX_MAX + 1);
	if (!opal_is_lower_hex(id, OPAL_DI_ID_HEX_MAX))
		return false;
	if (t == OPAL_DI_ID_HTLHASH)
		return n == 2 * OPAL_FILE_ID_LEN;
	return n >= 2 && n % 2 == 0;
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS debuginfo_files(id TEXT NOT NULL, type TEXT NOT NULL, "
	"id_type TEXT NOT NULL, hash TEXT NOT NULL, size INTEGER NOT NULL, "
	"quality INTEGER NOT NULL, reason TEXT, upload_id TEXT, stored_at INTEGER NOT NULL, "
	"PRIMARY KEY(id, type));"
	"CREATE TABLE IF NOT EXISTS debuginfo_uploads(upload_id TEXT PRIMARY KEY, "
	"id TEXT NOT NULL, type TEXT NOT NULL, id_type TEXT NOT NULL, hash TEXT NOT NULL, "
	"size INTEGER NOT NULL, force INTEGER NOT NULL, state TEXT NOT NULL, reason TEXT, "
	"started_at INTEGER NOT NULL, finished_at INTEGER);"
	"CREATE INDEX IF NOT EXISTS debuginfo_uploads_by_id ON debuginfo_uploads(id, type, state);"
	"CREATE TABLE IF NOT EXISTS debuginfo_invalid(id TEXT NOT NULL, type TEXT NOT NULL, "
	"hash TEXT NOT NULL, reason TEXT, at INTEGER NOT NULL, PRIMARY KEY(id, type, hash));"
	"CREATE TABLE IF NOT EXISTS debuginfod_misses(build_id TEXT NOT NULL, kind TEXT NOT NULL, "
	"until INTEGER NOT NULL, PRIMARY KEY(build_id, kind));";

/* ---- small SQLite helpers (called with the lock held) ---------------------- */

/* Logs the connection's last error; returns -ENOSPC for a full disk
 * (SQLITE_FULL), else -EIO. */
static int db_err(struct opal_debuginfo_store *s, const char *what)
{
	opal_warn("debuginfo store: %s: %s", what, sqlite3_errmsg(s->db));
	return sqlite3_errcode(s->db) == SQLITE_FULL ? -ENOSPC : -EIO;
}

/* Prepares `sql` and binds the text/int64 arguments described by `fmt`
 * ('t' text, 'i' int64, 'b' blob pointer + int length). */
static sqlite3_stmt *prep(struct opal_debuginfo_store *s, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
		db_err(s, "prepare");
		return NULL;
	}
	va_list ap;
	va_start(ap, fmt);
	for (int i = 1; fmt && *fmt; fmt++, i++) {
		int rc;
		if (*fmt == 't') {
			rc = sqlite3_bind_text(st, i, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
		} else if (*fmt == 'i') {
			rc = sqlite3_bind_int64(st, i, va_arg(ap, int64_t));
		} else {
			const void *p = va_arg(ap, const void *);
			int n = va_arg(ap, int);
			rc = sqlite3_bind_blob(st, i, p, n, SQLITE_TRANSIENT);
		}
		if (rc != SQLITE_OK) {
			va_end(ap);
			sqlite3_finalize(st);
			db_err(s, "bind");
			return NULL;
		}
	}
	va_end(ap);
	return st;
}

/* Runs a statement to completion. Returns 0, -ENOSPC or -EIO. */
static int exec_st(struct opal_debuginfo_store *s, sqlite3_stmt *st)
{
	if (!st)
		return -EIO;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_err(s, "step");
}

static void copy_col(sqlite3_stmt *st, int col, char *out, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	snprintf(out, len, "%s", t ? (const char *)t : "");
}

/* ---- paths ------------------------------------------------------------------ */

static void file_path(const struct opal_debuginfo_store *s, const char *id, enum opal_di_type t,
		      char *out, size_t len)
{
	snprintf(out, len, "%s/files/%s/%.128s", s->dir, type_names[t], id);
}

static void tmp_path(const struct opal_debuginfo_store *s, const char *upload_id, char *out,
		     size_t len)
{
	snprintf(out, len, "%s/tmp/%.32s", s->dir, upload_id);
}

static int make_dir(const char *p)
{
	if (mkdir(p, 0750) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void purge_tmp(const struct opal_debuginfo_store *s)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/tmp", s->dir);
	DIR *d = opendir(p);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static int recover_index(struct opal_debuginfo_store *s);

/* ---- open / close ------------------------------------------------------------- */

struct opal_debuginfo_store *opal_debuginfo_store_open(const struct opal_debuginfo_store_config *c)
{
	struct opal_debuginfo_store *s = calloc(1, sizeof(*s));
	char p[PATH_MAX] = "";
	int r;
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	if (strlen(c->dir) >= DIR_MAX) {
		free(s);
		errno = ENAMETOOLONG;
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->dir, sizeof(s->dir), "%s", c->dir);
	s->max_upload = c->max_upload_bytes ? c->max_upload_bytes : OPAL_DI_DEFAULT_MAX_UPLOAD;
	s->expiry_s = c->expiry_s ? c->expiry_s : OPAL_DI_DEFAULT_EXPIRY_S;
	s->rank = c->rank;
	if ((r = make_dir(s->dir)) < 0)
		goto fail_errno;
	snprintf(p, sizeof(p), "%s/tmp", s->dir);
	if ((r = make_dir(p)) < 0)
		goto fail_errno;
	snprintf(p, sizeof(p), "%s/files", s->dir);
	if ((r = make_dir(p)) < 0)
		goto fail_errno;
	for (int t = 0; t < OPAL_DI_N_TYPES; t++) {
		snprintf(p, sizeof(p), "%s/files/%s", s->dir, type_names[t]);
		if ((r = make_dir(p)) < 0)
			goto fail_errno;
	}
	purge_tmp(s);
	if (sqlite3_open_v2(c->db_path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		opal_err("debuginfo store: cannot open %s: %s", c->db_path,
			 s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sqlite3_close(s->db);
		free(s);
		errno = EIO;
		return NULL;
	}
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	char *msg = NULL;
	if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL,
			 NULL) != SQLITE_OK ||
	    sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		opal_err("debuginfo store: schema of %s: %s", c->db_path,
			 msg ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		sqlite3_close(s->db);
		free(s);
		errno = EIO;
		return NULL;
	}
	/* Bodies of an earlier run are gone (tmp was purged): their uploads
	 * may be PUT again until they expire. */
	int n = recover_index(s);
	if (n > 0)
		opal_warn("debuginfo store: its index in %s was empty but %d stored files were "
			  "on disk (state.db recreated?): validated and indexed again", c->db_path, n);
	return s;
fail_errno:
	opal_err("debuginfo store: cannot create %s: %s", p[0] ? p : s->dir, strerror(-r));
	free(s);
	errno = -r;
	return NULL;
}

void opal_debuginfo_store_close(struct opal_debuginfo_store *s)
{
	if (!s)
		return;
	sqlite3_close(s->db);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

uint64_t opal_debuginfo_store_max_upload(const struct opal_debuginfo_store *s)
{
	return s->max_upload;
}

void opal_debuginfo_store_set_hooks(struct opal_debuginfo_store *s, opal_di_stored_fn stored,
				    opal_di_elsewhere_fn elsewhere, void *arg)
{
	pthread_mutex_lock(&s->lock);
	s->stored = stored;
	s->elsewhere = elsewhere;
	s->hook_arg = arg;
	pthread_mutex_unlock(&s->lock);
}

/* ---- queries (lock held) -------------------------------------------------------- */

static bool is_active(const struct opal_debuginfo_store *s, const char *upload_id)
{
	for (int i = 0; i < OPAL_DI_MAX_ACTIVE; i++)
		if (strcmp(s->active[i], upload_id) == 0)
			return true;
	return false;
}

static int expire_locked(struct opal_debuginfo_store *s)
{
	int64_t cutoff = now_s() - (int64_t)s->expiry_s;
	sqlite3_stmt *st = prep(s, "SELECT upload_id FROM debuginfo_uploads WHERE "
				"state = 'uploading' AND started_at < ?1", "i", cutoff);
	if (!st)
		return -EIO;
	int n = 0;
	char ids[64][OPAL_DI_UPLOAD_ID_LEN + 1];
	while (n < 64 && sqlite3_step(st) == SQLITE_ROW) {
		copy_col(st, 0, ids[n], sizeof(ids[n]));
		if (!is_active(s, ids[n]))   /* a body still arriving is not stale */
			n++;
	}
	sqlite3_finalize(st);
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX];
		tmp_path(s, ids[i], p, sizeof(p));
		unlink(p);
		exec_st(s, prep(s, "DELETE FROM debuginfo_uploads WHERE upload_id = ?1", "t", ids[i]));
		opal_metrics_upload(OPAL_UPLOAD_EXPIRED);
		opal_info("debuginfo: upload %s expired unfinished", ids[i]);
	}
	exec_st(s, prep(s, "DELETE FROM debuginfo_uploads WHERE state != 'uploading' AND "
			"finished_at < ?1", "i", now_s() - FINISHED_KEEP_S));
	exec_st(s, prep(s, "DELETE FROM debuginfod_misses WHERE until < ?1", "i", now_s()));
	return n;
}

int opal_debuginfo_store_expire(struct opal_debuginfo_store *s)
{
	pthread_mutex_lock(&s->lock);
	int n = expire_locked(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Reason recorded for bytes (id, type, hash) found invalid; false if none. */
static bool known_invalid(struct opal_debuginfo_store *s, const struct opal_di_request *r,
			  char *reason, size_t len)
{
	sqlite3_stmt *st = prep(s, "SELECT reason FROM debuginfo_invalid WHERE id = ?1 AND "
				"type = ?2 AND hash = ?3", "ttt", r->id, type_names[r->type],
				r->hash);
	bool found = st && sqlite3_step(st) == SQLITE_ROW;
	if (found)
		copy_col(st, 0, reason, len);
	sqlite3_finalize(st);
	return found;
}

/* Seconds since the running upload of (id, type) started, or -1. */
static int64_t in_progress(struct opal_debuginfo_store *s, const char *id, enum opal_di_type t)
{
	sqlite3_stmt *st = prep(s, "SELECT max(started_at) FROM debuginfo_uploads WHERE id = ?1 "
				"AND type = ?2 AND state = 'uploading'", "tt", id, type_names[t]);
	int64_t age = -1;
	if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		age = now_s() - sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return age;
}

struct stored {
	bool exists;
	char hash[65];
	int quality;
};

static int get_stored(struct opal_debuginfo_store *s, const char *id, enum opal_di_type t,
		      struct stored *out)
{
	memset(out, 0, sizeof(*out));
	sqlite3_stmt *st = prep(s, "SELECT hash, quality FROM debuginfo_files WHERE id = ?1 AND "
				"type = ?2", "tt", id, type_names[t]);
	if (!st)
		return -EIO;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->exists = true;
		copy_col(st, 0, out->hash, sizeof(out->hash));
		out->quality = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}

static int64_t count_files(struct opal_debuginfo_store *s)
{
	sqlite3_stmt *st = prep(s, "SELECT count(*) FROM debuginfo_files", NULL);
	int64_t n = st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	return n;
}

static const char *quality_name(int q)
{
	switch (q) {
	case OPAL_DEBUG_DWARF_INLINE: return "dwarf with inline info";
	case OPAL_DEBUG_DWARF_LINES: return "dwarf line tables";
	case OPAL_DEBUG_SYMTAB: return ".symtab";
	case OPAL_DEBUG_DYNSYM: return ".dynsym only";
	default: return "no symbols";
	}
}

static void answer(struct opal_di_answer *a, int status, bool yes, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void answer(struct opal_di_answer *a, int status, bool yes, const char *fmt, ...)
{
	va_list ap;
	a->status = status;
	a->yes = yes;
	va_start(ap, fmt);
	vsnprintf(a->reason, sizeof(a->reason), fmt, ap);
	va_end(ap);
}

/* Shared rules of should-initiate and initiate. Returns true when an
 * upload may start; otherwise `a` holds the refusal (status for
 * initiate). */
static bool may_upload(struct opal_debuginfo_store *s, const struct opal_di_request *r,
		       struct opal_di_answer *a, const struct stored *cur)
{
	char why[200];
	if (known_invalid(s, r, why, sizeof(why))) {
		answer(a, 409, false, "these bytes were already found invalid: %s", why);
		return false;
	}
	int64_t age = in_progress(s, r->id, r->type);
	if (age >= 0) {
		answer(a, 412, false, "an upload is in progress (started %" PRId64 " s ago)", age);
		return false;
	}
	if (cur->exists && strcmp(cur->hash, r->hash) == 0) {
		answer(a, 412, false, "these bytes are already stored");
		return false;
	}
	if (cur->exists && cur->quality >= OPAL_DEBUG_DWARF_INLINE && !r->force) {
		answer(a, 412, false, "better data exists: the stored file has %s",
		       quality_name(cur->quality));
		return false;
	}
	return true;
}

int opal_debuginfo_should_initiate(struct opal_debuginfo_store *s, const struct opal_di_request *r,
				   struct opal_di_answer *a)
{
	struct stored cur;
	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&s->lock);
	expire_locked(s);
	int err = get_stored(s, r->id, r->type, &cur);
	bool ok = err == 0 && may_upload(s, r, a, &cur);
	opal_di_elsewhere_fn elsewhere = s->elsewhere;
	void *arg = s->hook_arg;
	pthread_mutex_unlock(&s->lock);
	if (err < 0)
		return err;
	if (!ok) {
		a->status = 200;   /* should-initiate answers every decision with 200 */
		return 0;
	}
	if (cur.exists) {
		answer(a, 200, true, "the stored file has %s: better data replaces it",
		       quality_name(cur.quality));
		return 0;
	}
	char where[200];
	if (elsewhere && r->type == OPAL_DI_DEBUGINFO && r->id_type == OPAL_DI_ID_GNU &&
	    !r->force && elsewhere(arg, r->id, where, sizeof(where))) {
		answer(a, 200, false, "debug info is available from %s", where);
		return 0;
	}
	answer(a, 200, true, "no %s stored for this ID", type_names[r->type]);
	return 0;
}

int opal_debuginfo_initiate(struct opal_debuginfo_store *s, const struct opal_di_request *r,
			    struct opal_di_answer *a)
{
	struct stored cur;
	memset(a, 0, sizeof(*a));
	if (r->size > s->max_upload) {
		answer(a, 413, false, "size %" PRIu64 " is over the limit of %" PRIu64 " bytes",
		       r->size, s->max_upload);
		opal_metrics_upload(OPAL_UPLOAD_TOO_LARGE);
		return 0;
	}
	if (r->size == 0) {
		answer(a, 400, false, "size must be given and above 0");
		return 0;
	}
	uint8_t rnd[OPAL_DI_UPLOAD_ID_LEN / 2];
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	pthread_mutex_lock(&s->lock);
	expire_locked(s);
	int err = get_stored(s, r->id, r->type, &cur);
	if (err < 0)
		goto out;
	if (!may_upload(s, r, a, &cur)) {
		opal_metrics_upload(OPAL_UPLOAD_REFUSED);
		goto out;
	}
	if (!cur.exists && count_files(s) >= OPAL_DI_MAX_ENTRIES) {
		answer(a, 507, false, "the store holds %d files, its limit", OPAL_DI_MAX_ENTRIES);
		goto out;
	}
	opal_hex_encode(rnd, sizeof(rnd), a->upload_id);
	err = exec_st(s, prep(s, "INSERT INTO debuginfo_uploads(upload_id, id, type, id_type, hash, "
			      "size, force, state, started_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, "
			      "'uploading', ?8)", "tttttiii", a->upload_id, r->id,
			      type_names[r->type], opal_di_id_type_name(r->id_type), r->hash,
			      (int64_t)r->size, (int64_t)r->force, now_s()));
	if (err == 0)
		answer(a, 200, true, "upload the file with PUT");
out:
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* ---- receiving a body ------------------------------------------------------------ */

int opal_debuginfo_upload_begin(struct opal_debuginfo_store *s, const char *upload_id,
				struct opal_di_upload **out)
{
	*out = NULL;
	if (strlen(upload_id) != OPAL_DI_UPLOAD_ID_LEN ||
	    !opal_is_lower_hex(upload_id, OPAL_DI_UPLOAD_ID_LEN))
		return -ENOENT;
	struct opal_di_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->s = s;
	u->fd = -1;
	u->slot = -1;
	snprintf(u->upload_id, sizeof(u->upload_id), "%s", upload_id);

	int err = 0;
	pthread_mutex_lock(&s->lock);
	expire_locked(s);
	sqlite3_stmt *st = prep(s, "SELECT id, type, id_type, hash, size, force, state FROM "
				"debuginfo_uploads WHERE upload_id = ?1", "t", upload_id);
	if (!st) {
		err = -EIO;
		goto out;
	}
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		err = -ENOENT;
		goto out;
	}
	char type[16], id_type[16], state[16];
	copy_col(st, 0, u->req.id, sizeof(u->req.id));
	copy_col(st, 1, type, sizeof(type));
	copy_col(st, 2, id_type, sizeof(id_type));
	copy_col(st, 3, u->req.hash, sizeof(u->req.hash));
	u->req.size = (uint64_t)sqlite3_column_int64(st, 4);
	u->req.force = sqlite3_column_int(st, 5) != 0;
	copy_col(st, 6, state, sizeof(state));
	sqlite3_finalize(st);
	u->req.id_type = strcmp(id_type, "htlhash") == 0 ? OPAL_DI_ID_HTLHASH : OPAL_DI_ID_GNU;
	u->req.type = OPAL_DI_DEBUGINFO;
	for (int t = 0; t < OPAL_DI_N_TYPES; t++)
		if (strcmp(type, type_names[t]) == 0)
			u->req.type = (enum opal_di_type)t;
	if (strcmp(state, "uploading") != 0) {
		err = -EALREADY;
		goto out;
	}
	/* IDs come from the database, where only validated IDs are written;
	 * checked again since they become file names. */
	if (!opal_di_id_valid(u->req.id, u->req.id_type)) {
		err = -ENOENT;
		goto out;
	}
	if (is_active(s, upload_id)) {
		err = -EBUSY;
		goto out;
	}
	for (int i = 0; i < OPAL_DI_MAX_ACTIVE && u->slot < 0; i++)
		if (!s->active[i][0])
			u->slot = i;
	if (u->slot < 0) {
		err = -EBUSY;
		goto out;
	}
	tmp_path(s, upload_id, u->tmp, sizeof(u->tmp));
	unlink(u->tmp);   /* a body of an aborted earlier PUT */
	u->fd = open(u->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (u->fd < 0) {
		err = -errno;
		u->slot = -1;
		goto out;
	}
	u->sha = EVP_MD_CTX_new();
	if (!u->sha || EVP_DigestInit_ex(u->sha, EVP_sha256(), NULL) != 1) {
		err = -ENOMEM;
		close(u->fd);
		unlink(u->tmp);
		u->slot = -1;
		goto out;
	}
	snprintf(s->active[u->slot], sizeof(s->active[u->slot]), "%s", upload_id);
out:
	pthread_mutex_unlock(&s->lock);
	if (err < 0) {
		EVP_MD_CTX_free(u->sha);
		free(u);
		return err;
	}
	*out = u;
	return 0;
}

uint64_t opal_debuginfo_upload_expected(const struct opal_di_upload *u)
{
	return u->req.size;
}

int opal_debuginfo_upload_write(struct opal_di_upload *u, const void *buf, size_t len)
{
	if (len > u->req.size - u->received || u->received + len > u->s->max_upload)
		return -EFBIG;
	const char *p = buf;
	size_t left = len;
	while (left > 0) {
		ssize_t n = write(u->fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		left -= (size_t)n;
	}
	if (EVP_DigestUpdate(u->sha, buf, len) != 1)
		return -EIO;
	u->received += len;
	return 0;
}

static void release(struct opal_di_upload *u, bool keep_file)
{
	if (u->fd >= 0)
		close(u->fd);
	if (!keep_file)
		unlink(u->tmp);
	pthread_mutex_lock(&u->s->lock);
	if (u->slot >= 0)
		u->s->active[u->slot][0] = '\0';
	pthread_mutex_unlock(&u->s->lock);
	EVP_MD_CTX_free(u->sha);
	free(u);
}

void opal_debuginfo_upload_abort(struct opal_di_upload *u)
{
	if (u)
		release(u, false);
}

/* Checks an ELF body against its announced ID and type and ranks it.
 * Returns true when valid; `why` holds the reason either way. */
static bool validate_elf(int fd, const struct opal_di_request *req, opal_di_rank_fn rank,
			 enum opal_debug_quality *q,
			 char *why, size_t len)
{
	struct opal_elf_probe p;
	struct opal_decomp_scan scan;
	char pwhy[200];
	if (opal_decomp_scan_fd(fd, &scan) == -EFBIG) {
		snprintf(why, len, "refused before decompression: %s", scan.why);
		return false;
	}
	int r = opal_elf_probe_fd(fd, &p, pwhy, sizeof(pwhy));
	if (r < 0) {
		snprintf(why, len, "%s", r == -ENOEXEC || r == -EBADMSG ? pwhy : strerror(-r));
		return false;
	}
	/* dwz's shared file (.gnu_debugaltlink target) is ET_REL with DWARF
	 * and nothing allocated. */
	bool dwz_shared = p.e_type == ET_REL && !p.has_alloc && p.has_debug_info &&
			  req->type == OPAL_DI_DEBUGINFO;
	if (p.e_type != ET_EXEC && p.e_type != ET_DYN && !dwz_shared) {
		snprintf(why, len, "ELF type %u is not an executable, library or debug file",
			 (unsigned)p.e_type);
		return false;
	}
	char bid[OPAL_DI_ID_HEX_MAX + 1] = "";
	if (p.build_id_len)
		opal_hex_encode(p.build_id, p.build_id_len, bid);
	const char *note = "";
	if (req->id_type == OPAL_DI_ID_GNU) {
		if (!p.build_id_len) {
			snprintf(why, len, "build ID mismatch: the file has no GNU build ID");
			return false;
		}
		if (strcmp(bid, req->id) != 0) {
			snprintf(why, len, "build ID mismatch: the file's build ID is %s", bid);
			return false;
		}
	} else {
		opal_file_id fid;
		char fhex[33];
		if (opal_file_id_from_fd(fd, &fid) < 0) {
			snprintf(why, len, "cannot compute the file ID");
			return false;
		}
		opal_file_id_to_hex(&fid, fhex);
		if (strcmp(fhex, req->id) != 0) {
			if (p.build_id_len) {
				snprintf(why, len, "file ID mismatch: the file has GNU build ID %s: "
					 "upload it by build ID", bid);
				return false;
			}
			if (req->type != OPAL_DI_DEBUGINFO) {
				snprintf(why, len, "file ID mismatch: the file's ID is %s", fhex);
				return false;
			}
			/* A separate debug file of a file without build ID has its own
			 * htlhash: nothing in it can name the file it belongs to. */
			note = "; separate debug file, file ID not verifiable";
		}
	}
	if (req->type == OPAL_DI_EXECUTABLE && !p.has_text) {
		snprintf(why, len, "an executable upload must contain .text code");
		return false;
	}
	char reason[160];
	*q = OPAL_DEBUG_NONE;
	if (dwz_shared) {
		const char *what;
		*q = opal_elf_probe_quality(&p, &what);
		snprintf(why, len, "dwz shared DWARF (%s)%s", what, note);
	} else if (rank && rank(fd, q, reason, sizeof(reason)) == 0) {
		snprintf(why, len, "%s%s%s", reason,
			 p.debug_unreadable ? " (dwarf compressed with an unknown type)" : "", note);
	} else {
		const char *what;
		*q = opal_elf_probe_quality(&p, &what);
		snprintf(why, len, "%s%s", what, note);
	}
	return true;
}

bool opal_debuginfo_validate(int fd, const struct opal_di_request *r, opal_di_rank_fn rank,
			     enum opal_debug_quality *q, char *why, size_t why_len)
{
	*q = OPAL_DEBUG_NONE;
	if (r->type != OPAL_DI_SOURCES)
		return validate_elf(fd, r, rank, q, why, why_len);
	int n = opal_srctar_validate(fd, why, why_len);
	if (n <= 0)
		return false;
	snprintf(why, why_len, "source archive with %d files", n);
	return true;
}

static void sha_hex(EVP_MD_CTX *ctx, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_DigestFinal_ex(ctx, md, &n);
	opal_hex_encode(md, n > 32 ? 32 : n, out);
}

/* SHA-256 of the whole file on `fd` into hex `out`. Returns its size, or
 * -errno. */
static int64_t file_sha(int fd, char out[65])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	static __thread uint8_t buf[1 << 16];
	int64_t total = 0;
	ssize_t n;

	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	while ((n = pread(fd, buf, sizeof(buf), total)) > 0) {
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		total += n;
	}
	if (n < 0) {
		EVP_MD_CTX_free(ctx);
		return -errno;
	}
	sha_hex(ctx, out);
	EVP_MD_CTX_free(ctx);
	return total;
}

/* Indexes one stored file found on disk as files/<type>/<name>: validated
 * as an upload of that ID would be (build ID first, then file ID).
 * Returns 1 when indexed, 0 when not (the file is left alone). */
static int recover_file(struct opal_debuginfo_store *s, enum opal_di_type t, const char *name)
{
	char path[PATH_MAX], why[256] = "", hash[65];
	struct opal_di_request req = { .type = t };
	enum opal_debug_quality q = OPAL_DEBUG_NONE;
	bool ok = false;
	int64_t size;

	if (strlen(name) > OPAL_DI_ID_HEX_MAX)
		return 0;
	snprintf(req.id, sizeof(req.id), "%s", name);
	file_path(s, name, t, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	for (int it = 0; it < 2 && !ok; it++) {
		req.id_type = it == 0 ? OPAL_DI_ID_GNU : OPAL_DI_ID_HTLHASH;
		ok = opal_di_id_valid(name, req.id_type) &&
		     opal_debuginfo_validate(fd, &req, s->rank, &q, why, sizeof(why));
	}
	if (ok && (size = file_sha(fd, hash)) >= 0)
		ok = exec_st(s, prep(s, "INSERT OR IGNORE INTO debuginfo_files(id, type, id_type, "
				     "hash, size, quality, reason, upload_id, stored_at) "
				     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 'recovered', ?8)", "ttttiiti",
				     name, type_names[t], opal_di_id_type_name(req.id_type), hash,
				     size, (int64_t)q, why, now_s())) == 0;
	else
		ok = false;
	close(fd);
	if (!ok)
		opal_warn("debuginfo store: %s not indexed again: %s", path,
			  why[0] ? why : "unreadable");
	return ok;
}

/* After state.db was lost (moved aside as corrupt, deleted), its
 * debuginfo_files index is empty while stored files remain on disk:
 * index them again, at most OPAL_DI_MAX_ENTRIES. Returns how many. */
static int recover_index(struct opal_debuginfo_store *s)
{
	int n = 0;

	if (count_files(s) != 0)
		return 0;
	for (int t = 0; t < OPAL_DI_N_TYPES; t++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/files/%s", s->dir, type_names[t]);
		DIR *d = opendir(p);
		struct dirent *e;
		if (!d)
			continue;
		while ((e = readdir(d)) != NULL && n < OPAL_DI_MAX_ENTRIES)
			if (e->d_name[0] != '.')
				n += recover_file(s, (enum opal_di_type)t, e->d_name);
		closedir(d);
	}
	return n;
}

int opal_debuginfo_upload_finish(struct opal_di_upload *u, struct opal_di_answer *a)
{
	struct opal_debuginfo_store *s = u->s;
	char why[256] = "", hash[65];
	bool valid = false, hash_ok;
	enum opal_debug_quality q = OPAL_DEBUG_NONE;

	const struct opal_di_request req = u->req;   /* u is freed before the hook runs */
	memset(a, 0, sizeof(*a));
	sha_hex(u->sha, hash);
	hash_ok = strcmp(hash, u->req.hash) == 0;
	if (u->received != u->req.size) {
		snprintf(why, sizeof(why), "received %" PRIu64 " bytes, announced %" PRIu64,
			 u->received, u->req.size);
		hash_ok = false;   /* not the announced bytes: nothing to remember */
	} else if (!hash_ok) {
		snprintf(why, sizeof(why), "SHA-256 mismatch: the body hashes to %s", hash);
	} else {
		valid = opal_debuginfo_validate(u->fd, &u->req, u->s->rank, &q, why, sizeof(why));
	}

	char final[PATH_MAX];
	bool replaced = false, keep_tmp = false;
	int err = 0;
	file_path(s, u->req.id, u->req.type, final, sizeof(final));
	pthread_mutex_lock(&s->lock);
	sqlite3_stmt *st = prep(s, "SELECT state FROM debuginfo_uploads WHERE upload_id = ?1", "t",
				u->upload_id);
	bool current = st && sqlite3_step(st) == SQLITE_ROW &&
		       strcmp((const char *)sqlite3_column_text(st, 0), "uploading") == 0;
	sqlite3_finalize(st);
	if (!current) {
		answer(a, 400, false, "upload %s expired or was finished meanwhile", u->upload_id);
		pthread_mutex_unlock(&s->lock);
		release(u, false);
		return 0;
	}
	if (valid) {
		struct stored cur;
		err = get_stored(s, u->req.id, u->req.type, &cur);
		bool better = err == 0 && (!cur.exists || (int)q > cur.quality ||
					   (u->req.force && (int)q >= cur.quality));
		if (better) {
			if (rename(u->tmp, final) != 0) {
				err = -errno;
			} else {
				keep_tmp = true;   /* now the stored file */
				replaced = true;
				err = exec_st(s, prep(s, "INSERT OR REPLACE INTO debuginfo_files(id, type, "
						      "id_type, hash, size, quality, reason, upload_id, "
						      "stored_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
						      "ttttiitti", u->req.id, type_names[u->req.type],
						      opal_di_id_type_name(u->req.id_type), hash,
						      (int64_t)u->received, (int64_t)q, why, u->upload_id,
						      now_s()));
			}
		} else if (err == 0) {
			char full[256];
			snprintf(full, sizeof(full), "valid (%s) but not better than the stored %s",
				 quality_name(q), quality_name(cur.quality));
			snprintf(why, sizeof(why), "%s", full);
		}
		if (err == 0)
			err = exec_st(s, prep(s, "UPDATE debuginfo_uploads SET state = 'uploaded', "
					      "reason = ?2, finished_at = ?3 WHERE upload_id = ?1",
					      "tti", u->upload_id, why, now_s()));
	} else {
		if (hash_ok)
			err = exec_st(s, prep(s, "INSERT OR REPLACE INTO debuginfo_invalid(id, type, hash, "
					      "reason, at) VALUES(?1, ?2, ?3, ?4, ?5)", "tttti",
					      u->req.id, type_names[u->req.type], hash, why, now_s()));
		exec_st(s, prep(s, "DELETE FROM debuginfo_invalid WHERE rowid IN (SELECT rowid FROM "
				"debuginfo_invalid ORDER BY at LIMIT max(0, (SELECT count(*) FROM "
				"debuginfo_invalid) - ?1))", "i", (int64_t)OPAL_DI_MAX_INVALID));
		/* Wrong size or hash may be a broken transfer: the upload stays
		 * open for another PUT; bad bytes end it. */
		if (hash_ok)
			exec_st(s, prep(s, "UPDATE debuginfo_uploads SET state = 'invalid', reason = ?2, "
					"finished_at = ?3 WHERE upload_id = ?1", "tti", u->upload_id,
					why, now_s()));
	}
	opal_di_stored_fn hook = s->stored;
	void *arg = s->hook_arg;
	pthread_mutex_unlock(&s->lock);
	if (keep_tmp) {
		close(u->fd);
		u->fd = -1;
	}
	release(u, keep_tmp);
	if (err < 0)
		return err;
	a->quality = q;
	a->replaced = replaced;
	if (!valid) {
		answer(a, 400, false, "%s", why);
		opal_metrics_upload(OPAL_UPLOAD_INVALID);
		opal_info("debuginfo: upload for %s rejected: %s", final, why);
		return 0;
	}
	answer(a, 200, true, "%s", why);
	opal_metrics_upload(replaced ? OPAL_UPLOAD_STORED : OPAL_UPLOAD_NOT_BETTER);
	opal_info("debuginfo: %s %s of %s %s: %s", replaced ? "stored" : "kept the older",
		  type_names[req.type], opal_di_id_type_name(req.id_type), req.id, why);
	if (replaced && hook)
		hook(arg, req.id, req.id_type, req.type, q);
	return 0;
}

int opal_debuginfo_mark_finished(struct opal_debuginfo_store *s, const char *id,
				 enum opal_di_type type, const char *upload_id,
				 struct opal_di_answer *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&s->lock);
	sqlite3_stmt *st = prep(s, "SELECT id, type, state, reason FROM debuginfo_uploads WHERE "
				"upload_id = ?1", "t", upload_id);
	if (!st) {
		pthread_mutex_unlock(&s->lock);
		return -EIO;
	}
	if (sqlite3_step(st) != SQLITE_ROW) {
		answer(a, 404, false, "unknown or expired upload %s", upload_id);
	} else {
		char rid[OPAL_DI_ID_HEX_MAX + 1], rtype[16], state[16], reason[200];
		copy_col(st, 0, rid, sizeof(rid));
		copy_col(st, 1, rtype, sizeof(rtype));
		copy_col(st, 2, state, sizeof(state));
		copy_col(st, 3, reason, sizeof(reason));
		if (strcmp(rid, id) != 0 || strcmp(rtype, type_names[type]) != 0)
			answer(a, 400, false, "upload %s belongs to %s %s", upload_id, rtype, rid);
		else if (strcmp(state, "uploading") == 0)
			answer(a, 409, false, "the file of upload %s has not been received", upload_id);
		else if (strcmp(state, "invalid") == 0)
			answer(a, 400, false, "the upload was invalid: %s", reason);
		else
			answer(a, 200, true, "%s", reason);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int opal_debuginfo_store_open_file(struct opal_debuginfo_store *s, const char *id,
				   enum opal_di_type type, enum opal_debug_quality *q,
				   char *path, size_t len)
{
	if ((unsigned)type >= OPAL_DI_N_TYPES ||
	    (!opal_di_id_valid(id, OPAL_DI_ID_GNU) && !opal_di_id_valid(id, OPAL_DI_ID_HTLHASH)))
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	sqlite3_stmt *st = prep(s, "SELECT quality FROM debuginfo_files WHERE id = ?1 AND type = ?2",
				"tt", id, type_names[type]);
	int r = -EIO;
	if (st) {
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			if (q)
				*q = (enum opal_debug_quality)sqlite3_column_int(st, 0);
			r = 0;
		} else {
			r = rc == SQLITE_DONE ? -ENOENT : -EIO;
		}
	}
	sqlite3_finalize(st);
	char p[PATH_MAX];
	file_path(s, id, type, p, sizeof(p));
	/* Opened under the lock: a replacing rename cannot slip in between. */
	if (r == 0) {
		r = open(p, O_RDONLY | O_CLOEXEC);
		if (r < 0)
			r = -errno;
	}
	pthread_mutex_unlock(&s->lock);
	if (r >= 0 && path)
		snprintf(path, len, "%s", p);
	return r;
}

bool opal_debuginfo_store_miss_known(struct opal_debuginfo_store *s, const char *build_id,
				     const char *kind)
{
	pthread_mutex_lock(&s->lock);
	sqlite3_stmt *st = prep(s, "SELECT 1 FROM debuginfod_misses WHERE build_id = ?1 AND "
				"kind = ?2 AND until >= ?3", "tti", build_id, kind, now_s());
	bool known = st && sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return known;
}

void opal_debuginfo_store_miss_put(struct opal_debuginfo_store *s, const char *build_id,
				   const char *kind, unsigned ttl_s)
{
	pthread_mutex_lock(&s->lock);
	exec_st(s, prep(s, "INSERT OR REPLACE INTO debuginfod_misses(build_id, kind, until) "
			"VALUES(?1, ?2, ?3)", "tti", build_id, kind, now_s() + (int64_t)ttl_s));
	exec_st(s, prep(s, "DELETE FROM debuginfod_misses WHERE rowid IN (SELECT rowid FROM "
			"debuginfod_misses ORDER BY until LIMIT max(0, (SELECT count(*) FROM "
			"debuginfod_misses) - ?1))", "i", (int64_t)OPAL_DI_MAX_MISSES));
	pthread_mutex_unlock(&s->lock);
}

int opal_debuginfo_store_files_below(struct opal_debuginfo_store *s, const uint8_t *build_id,
				     size_t len, enum opal_debug_quality q, opal_file_id *ids,
				     size_t max)
{
	pthread_mutex_lock(&s->lock);
	sqlite3_stmt *st;
	/* The files table belongs to sym_sqlite.c; absent when no cache uses this
	 * database, which means no cached frames to drop. */
	if (sqlite3_prepare_v2(s->db, "SELECT file_id FROM files WHERE build_id = ?1 AND "
			       "quality < ?2 LIMIT ?3", -1, &st, NULL) != SQLITE_OK) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	sqlite3_bind_blob(st, 1, build_id, (int)len, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, (int)q);
	sqlite3_bind_int64(st, 3, (int64_t)max);
	size_t n = 0;
	while (n < max && sqlite3_step(st) == SQLITE_ROW) {
		if (sqlite3_column_bytes(st, 0) != OPAL_FILE_ID_LEN)
			continue;
		memcpy(ids[n].b, sqlite3_column_blob(st, 0), OPAL_FILE_ID_LEN);
		n++;
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->lock);
	return (int)n;
}
