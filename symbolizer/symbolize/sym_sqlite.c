/* SQLite cache of files and symbolized frames (sym_sqlite.h).
 *
 * Schema (PRAGMA user_version 4; 2 since sizeless symbols name the bytes
 * after them, 3 since C++ functions are named in c++filt's form with
 * their clone suffixes and DWARF tombstones of discarded code are
 * ignored, 4 since frames is a WITHOUT ROWID table; the tables of an
 * earlier version are dropped):
 *   files(file_id BLOB PRIMARY KEY, build_id BLOB, path TEXT,
 *         quality INTEGER, reason TEXT, updated_at INTEGER unix seconds)
 *   frames(file_id BLOB, addr INTEGER, frames BLOB, PRIMARY KEY(file_id, addr))
 *         WITHOUT ROWID: one B-tree, where a rowid table kept the rows and
 *         an index of the key, and wrote twice the pages per row
 *   refused(file_id BLOB PRIMARY KEY, build_id BLOB, budget INTEGER bytes,
 *           reason TEXT, updated_at INTEGER): files refused before
 *           decompression (debuginfo/debuginfo_bound.h) under that budget
 * addr holds the u64 address's bit pattern as SQLite's signed INTEGER;
 * frames holds sym_codec.h's encoding. WAL journal, synchronous=NORMAL:
 * a crash may lose the last transactions, which only costs re-symbolizing.
 * Page cache at most 16 MiB. The WAL is checkpointed every 8192 pages
 * (32 MiB) rather than SQLite's default 1000: each checkpoint fsyncs both
 * files, which on a slow disk costs more than the inserts; the WAL file
 * is cut back to 32 MiB after a larger transaction. Writers batch rows
 * (opal_cache_put_frames_batch): a transaction per row cost ~200 us.
 *
 * Bounds: at most OPAL_CACHE_MAX_FRAMES frame rows (when over, an eighth
 * of them is dropped, first in key order: the frames of the files whose
 * file IDs sort first, and file IDs are hashes, so files drawn at random
 * as a whole) and at most
 * OPAL_CACHE_MAX_FILES file rows (the least recently updated eighth is
 * dropped with their frames), at most OPAL_CACHE_MAX_REFUSED refused rows
 * (the oldest eighth dropped). A database that is not SQLite or is corrupt
 * is moved aside to "<path>.corrupt" and recreated: it is only a cache.
 * Calls are serialized by a mutex, so one cache may be shared by threads. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "symbolize/sym_sqlite.h"
#include "base/metrics.h"
#include "shared/log.h"
#include "symbolize/sym_codec.h"

#define OPAL_CACHE_MAX_FRAMES  (4ll << 20)
#define OPAL_CACHE_MAX_FILES   (256ll << 10)
#define OPAL_CACHE_MAX_REFUSED (64ll << 10)
#define SCHEMA_VERSION         4
#define BUSY_TIMEOUT_MS        5000
#define OPAL_STR_(x) #x
#define OPAL_STR(x) OPAL_STR_(x)

enum stmt_id {
	ST_PUT_FILE,
	ST_GET_QUALITY,
	ST_GET_FRAMES,
	ST_PUT_FRAMES,
	ST_DEL_FRAMES,
	ST_COUNT_FRAMES,
	ST_COUNT_FILES,
	ST_EVICT_FRAMES,
	ST_EVICT_FILE_FRAMES,
	ST_EVICT_FILES,
	ST_PUT_REFUSED,
	ST_GET_REFUSED,
	ST_COUNT_REFUSED,
	ST_EVICT_REFUSED,
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_N,
};

static const char *const stmt_sql[ST_N] = {
	[ST_PUT_FILE] =
		"INSERT INTO files(file_id, build_id, path, quality, reason, updated_at) "
		"VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(file_id) DO UPDATE SET "
		"build_id = excluded.build_id, path = excluded.path, quality = excluded.quality, "
		"reason = excluded.reason, updated_at = excluded.updated_at",
	[ST_GET_QUALITY] = "SELECT quality FROM files WHERE file_id = ?1",
	[ST_GET_FRAMES] = "SELECT frames FROM frames WHERE file_id = ?1 AND addr = ?2",
	[ST_PUT_FRAMES] = "INSERT OR REPLACE INTO frames(file_id, addr, frames) VALUES(?1, ?2, ?3)",
	[ST_DEL_FRAMES] = "DELETE FROM frames WHERE file_id = ?1",
	[ST_COUNT_FRAMES] = "SELECT count(*) FROM frames",
	[ST_COUNT_FILES] = "SELECT count(*) FROM files",
	[ST_EVICT_FRAMES] =
		"DELETE FROM frames WHERE (file_id, addr) IN "
		"(SELECT file_id, addr FROM frames ORDER BY file_id, addr LIMIT ?1)",
	[ST_EVICT_FILE_FRAMES] =
		"DELETE FROM frames WHERE file_id IN "
		"(SELECT file_id FROM files ORDER BY updated_at LIMIT ?1)",
	[ST_EVICT_FILES] =
		"DELETE FROM files WHERE file_id IN "
		"(SELECT file_id FROM files ORDER BY updated_at LIMIT ?1)",
	[ST_PUT_REFUSED] =
		"INSERT OR REPLACE INTO refused(file_id, build_id, budget, reason, updated_at) "
		"VALUES(?1, ?2, ?3, ?4, ?5)",
	/* A refusal under a budget at least the current one still holds. */
	[ST_GET_REFUSED] =
		"SELECT reason FROM refused WHERE (file_id = ?1 OR (?2 IS NOT NULL AND "
		"build_id = ?2)) AND budget >= ?3 LIMIT 1",
	[ST_COUNT_REFUSED] = "SELECT count(*) FROM refused",
	[ST_EVICT_REFUSED] =
		"DELETE FROM refused WHERE file_id IN "
		"(SELECT file_id FROM refused ORDER BY updated_at LIMIT ?1)",
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
};

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS files(file_id BLOB PRIMARY KEY, build_id BLOB, path TEXT, "
	"quality INTEGER NOT NULL, reason TEXT, updated_at INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS files_by_age ON files(updated_at);"
	"CREATE TABLE IF NOT EXISTS frames(file_id BLOB NOT NULL, addr INTEGER NOT NULL, "
	"frames BLOB NOT NULL, PRIMARY KEY(file_id, addr)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS refused(file_id BLOB PRIMARY KEY, build_id BLOB, "
	"budget INTEGER NOT NULL, reason TEXT, updated_at INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS refused_by_build_id ON refused(build_id);";

struct opal_cache {
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	pthread_mutex_t lock;
	int64_t n_frames, n_files;   /* row counts, exact after open/eviction */
	int64_t max_frames;          /* OPAL_CACHE_MAX_FRAMES unless lowered */
	bool in_tx;
};

static int sqlite_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	default:
		return -EIO;
	}
}

static int fail(struct opal_cache *c, const char *what, int rc)
{
	opal_warn("cache: %s: %s", what, sqlite3_errmsg(c->db));
	return sqlite_errno(rc);
}

/* Runs a statement that returns nothing (or whose rows are ignored). */
static int run(struct opal_cache *c, enum stmt_id id, const char *what)
{
	sqlite3_stmt *st = c->st[id];
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : fail(c, what, rc);
}

static int64_t count_rows(struct opal_cache *c, enum stmt_id id)
{
	sqlite3_stmt *st = c->st[id];
	int64_t n = 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return n;
}

static void close_db(struct opal_cache *c)
{
	for (int i = 0; i < ST_N; i++) {
		sqlite3_finalize(c->st[i]);
		c->st[i] = NULL;
	}
	sqlite3_close(c->db);
	c->db = NULL;
}

/* Opens `path` and prepares everything. Returns an SQLite result code. */
static int open_db(struct opal_cache *c, const char *path)
{
	int rc = sqlite3_open_v2(path, &c->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
				 NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(c->db, 0);

	sqlite3_stmt *st;
	int version = 0;
	if ((rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL)) != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return rc;
	if (version != 0 && version != SCHEMA_VERSION) {
		/* Another layout (other opal version): rebuild, it is a cache. */
		opal_warn("cache: %s has schema version %d, recreating it", path, version);
		rc = sqlite3_exec(c->db, "DROP TABLE IF EXISTS frames; DROP TABLE IF EXISTS files; "
				  "DROP TABLE IF EXISTS refused;",
				  NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			return rc;
	}
	char *err = NULL;
	rc = sqlite3_exec(c->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
			  "PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=8192; "
			  "PRAGMA journal_size_limit=33554432;", NULL,
			  NULL, &err);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(c->db, schema_sql, NULL, NULL, &err);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(c->db, "PRAGMA user_version = " OPAL_STR(SCHEMA_VERSION), NULL,
				  NULL, &err);
	sqlite3_free(err);
	if (rc != SQLITE_OK)
		return rc;
	for (int i = 0; i < ST_N; i++) {
		rc = sqlite3_prepare_v3(c->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&c->st[i], NULL);
		if (rc != SQLITE_OK)
			return rc;
	}
	c->n_frames = count_rows(c, ST_COUNT_FRAMES);
	c->n_files = count_rows(c, ST_COUNT_FILES);
	return SQLITE_OK;
}

static void move_aside(const char *path)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s.corrupt", path) >= (int)sizeof(buf))
		return;
	if (rename(path, buf) != 0)
		opal_warn("cache: cannot move %s aside: %s", path, strerror(errno));
	static const char *const sfx[] = { "-wal", "-shm" };
	for (size_t i = 0; i < 2; i++)
		if (snprintf(buf, sizeof(buf), "%s%s", path, sfx[i]) < (int)sizeof(buf))
			unlink(buf);
}

struct opal_cache *opal_cache_open(const char *path)
{
	struct opal_cache *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->max_frames = OPAL_CACHE_MAX_FRAMES;
	int rc = open_db(c, path);
	if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) {
		opal_warn("cache: %s is not a usable database (%s), starting a new one", path,
			  c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		close_db(c);
		move_aside(path);
		rc = open_db(c, path);
	}
	if (rc != SQLITE_OK) {
		opal_err("cache: cannot open %s: %s", path,
			 c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		int e = -sqlite_errno(rc);
		close_db(c);
		pthread_mutex_destroy(&c->lock);
		free(c);
		errno = e ? e : EIO;
		return NULL;
	}
	return c;
}

void opal_cache_close(struct opal_cache *c)
{
	if (!c)
		return;
	if (c->in_tx)
		sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
	close_db(c);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void opal_cache_set_max_frames(struct opal_cache *c, int64_t max_frames)
{
	pthread_mutex_lock(&c->lock);
	c->max_frames = max_frames < 8 ? 8 : max_frames;
	pthread_mutex_unlock(&c->lock);
}

static int bind_id(sqlite3_stmt *st, int idx, const opal_file_id *id)
{
	return sqlite3_bind_blob(st, idx, id->b, OPAL_FILE_ID_LEN, SQLITE_STATIC);
}

/* Drops the oldest eighth of the files or frames rows when over bound. */
static int enforce_bounds(struct opal_cache *c)
{
	int r = 0;
	if (c->n_files > OPAL_CACHE_MAX_FILES) {
		int64_t drop = OPAL_CACHE_MAX_FILES / 8;
		sqlite3_bind_int64(c->st[ST_EVICT_FILE_FRAMES], 1, drop);
		sqlite3_bind_int64(c->st[ST_EVICT_FILES], 1, drop);
		if ((r = run(c, ST_EVICT_FILE_FRAMES, "evict file frames")) == 0) {
			opal_metrics_cache_evicted(OPAL_CACHE_TABLE_FRAMES,
						   (uint64_t)sqlite3_changes(c->db));
			if ((r = run(c, ST_EVICT_FILES, "evict files")) == 0)
				opal_metrics_cache_evicted(OPAL_CACHE_TABLE_FILES,
							   (uint64_t)sqlite3_changes(c->db));
		}
		c->n_files = count_rows(c, ST_COUNT_FILES);
		c->n_frames = count_rows(c, ST_COUNT_FRAMES);
		opal_info("cache: over %lld files, dropped the oldest", OPAL_CACHE_MAX_FILES);
	}
	if (r == 0 && c->n_frames > c->max_frames) {
		sqlite3_bind_int64(c->st[ST_EVICT_FRAMES], 1, c->max_frames / 8 + 1);
		if ((r = run(c, ST_EVICT_FRAMES, "evict frames")) == 0)
			opal_metrics_cache_evicted(OPAL_CACHE_TABLE_FRAMES,
						   (uint64_t)sqlite3_changes(c->db));
		c->n_frames = count_rows(c, ST_COUNT_FRAMES);
		opal_info("cache: over %lld frame rows, dropped an eighth", (long long)c->max_frames);
	}
	return r;
}

int opal_cache_put_file(struct opal_cache *c, const opal_file_id *id, const uint8_t *build_id,
			size_t build_id_len, const char *path, enum opal_debug_quality q,
			const char *reason)
{
	if (build_id_len > OPAL_BUILD_ID_MAX)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	sqlite3_stmt *st = c->st[ST_PUT_FILE];
	bind_id(st, 1, id);
	if (build_id_len)
		sqlite3_bind_blob(st, 2, build_id, (int)build_id_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 2);
	if (path)
		sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 3);
	sqlite3_bind_int(st, 4, (int)q);
	if (reason)
		sqlite3_bind_text(st, 5, reason, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 5);
	sqlite3_bind_int64(st, 6, (int64_t)time(NULL));
	int r = run(c, ST_PUT_FILE, "put file");
	if (r == 0) {
		c->n_files = count_rows(c, ST_COUNT_FILES);
		r = enforce_bounds(c);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_get_file_quality(struct opal_cache *c, const opal_file_id *id,
				enum opal_debug_quality *q)
{
	pthread_mutex_lock(&c->lock);
	sqlite3_stmt *st = c->st[ST_GET_QUALITY];
	bind_id(st, 1, id);
	int rc = sqlite3_step(st), r;
	if (rc == SQLITE_ROW) {
		int v = sqlite3_column_int(st, 0);
		if (v >= OPAL_DEBUG_NONE && v <= OPAL_DEBUG_DWARF_INLINE) {
			*q = (enum opal_debug_quality)v;
			r = 0;
		} else {
			r = -EBADMSG;
		}
	} else {
		r = rc == SQLITE_DONE ? -ENOENT : fail(c, "get file", rc);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static void bind_build_id(sqlite3_stmt *st, int idx, const uint8_t *build_id, size_t len)
{
	if (len)
		sqlite3_bind_blob(st, idx, build_id, (int)len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, idx);
}

int opal_cache_put_refused(struct opal_cache *c, const opal_file_id *id, const uint8_t *build_id,
			   size_t build_id_len, uint64_t budget, const char *reason)
{
	if (build_id_len > OPAL_BUILD_ID_MAX || budget > INT64_MAX)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	sqlite3_stmt *st = c->st[ST_PUT_REFUSED];
	bind_id(st, 1, id);
	bind_build_id(st, 2, build_id, build_id_len);
	sqlite3_bind_int64(st, 3, (int64_t)budget);
	sqlite3_bind_text(st, 4, reason ? reason : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
	int r = run(c, ST_PUT_REFUSED, "put refused");
	if (r == 0 && count_rows(c, ST_COUNT_REFUSED) > OPAL_CACHE_MAX_REFUSED) {
		sqlite3_bind_int64(c->st[ST_EVICT_REFUSED], 1, OPAL_CACHE_MAX_REFUSED / 8);
		if ((r = run(c, ST_EVICT_REFUSED, "evict refused")) == 0)
			opal_metrics_cache_evicted(OPAL_CACHE_TABLE_REFUSED,
						   (uint64_t)sqlite3_changes(c->db));
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_get_refused(struct opal_cache *c, const opal_file_id *id, const uint8_t *build_id,
			   size_t build_id_len, uint64_t budget, char *reason, size_t len)
{
	if (build_id_len > OPAL_BUILD_ID_MAX || budget > INT64_MAX)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	sqlite3_stmt *st = c->st[ST_GET_REFUSED];
	bind_id(st, 1, id);
	bind_build_id(st, 2, build_id, build_id_len);
	sqlite3_bind_int64(st, 3, (int64_t)budget);
	int rc = sqlite3_step(st), r;
	if (rc == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		snprintf(reason, len, "%s", t ? (const char *)t : "");
		r = 0;
	} else {
		r = rc == SQLITE_DONE ? -ENOENT : fail(c, "get refused", rc);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_get_frames(struct opal_cache *c, const opal_file_id *id, uint64_t addr,
			  struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->lock);
	sqlite3_stmt *st = c->st[ST_GET_FRAMES];
	bind_id(st, 1, id);
	sqlite3_bind_int64(st, 2, (int64_t)addr);
	int rc = sqlite3_step(st), r;
	if (rc == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(st, 0);
		int len = sqlite3_column_bytes(st, 0);
		r = opal_sym_decode(blob, (size_t)(len > 0 ? len : 0), out);
		if (r == -EBADMSG)
			r = -ENOENT;   /* unreadable row: a miss, rewritten later */
	} else {
		r = rc == SQLITE_DONE ? -ENOENT : fail(c, "get frames", rc);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Inserts or replaces one row, with the lock held; bounds not enforced. */
static int put_frames_locked(struct opal_cache *c, const opal_file_id *id, uint64_t addr,
			     const struct opal_sym_result *res)
{
	uint8_t *blob;
	size_t len;
	int r = opal_sym_encode(res, &blob, &len);
	if (r < 0)
		return r;
	sqlite3_stmt *st = c->st[ST_PUT_FRAMES];
	bind_id(st, 1, id);
	sqlite3_bind_int64(st, 2, (int64_t)addr);
	sqlite3_bind_blob(st, 3, blob, (int)len, SQLITE_STATIC);
	r = run(c, ST_PUT_FRAMES, "put frames");
	free(blob);
	if (r == 0)
		c->n_frames++;   /* counts replacements too: eviction recounts exactly */
	return r;
}

int opal_cache_put_frames(struct opal_cache *c, const opal_file_id *id, uint64_t addr,
			  const struct opal_sym_result *res)
{
	pthread_mutex_lock(&c->lock);
	int r = put_frames_locked(c, id, addr, res);
	if (r == 0)
		r = enforce_bounds(c);
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_put_frames_batch(struct opal_cache *c, const struct opal_cache_frames_row *rows,
				size_t n)
{
	if (n == 0)
		return 0;
	pthread_mutex_lock(&c->lock);
	bool own = !c->in_tx;
	int r = own ? run(c, ST_BEGIN, "begin") : 0;
	if (own && r < 0) {
		pthread_mutex_unlock(&c->lock);
		return r;
	}
	for (size_t i = 0; r == 0 && i < n; i++)
		r = put_frames_locked(c, &rows[i].id, rows[i].addr, &rows[i].res);
	if (r == 0)
		r = enforce_bounds(c);
	if (own && r == 0)
		r = run(c, ST_COMMIT, "commit");
	if (own && r < 0) {
		/* A failed COMMIT leaves the transaction open: end it here. */
		if (!sqlite3_get_autocommit(c->db))
			run(c, ST_ROLLBACK, "rollback");
		c->n_frames = count_rows(c, ST_COUNT_FRAMES);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_invalidate_file(struct opal_cache *c, const opal_file_id *id)
{
	pthread_mutex_lock(&c->lock);
	bind_id(c->st[ST_DEL_FRAMES], 1, id);
	int r = run(c, ST_DEL_FRAMES, "invalidate file");
	if (r == 0)
		c->n_frames -= sqlite3_changes(c->db);
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_begin(struct opal_cache *c)
{
	pthread_mutex_lock(&c->lock);
	int r = -EBUSY;
	if (!c->in_tx && (r = run(c, ST_BEGIN, "begin")) == 0)
		c->in_tx = true;
	pthread_mutex_unlock(&c->lock);
	return r;
}

int opal_cache_commit(struct opal_cache *c)
{
	pthread_mutex_lock(&c->lock);
	int r = -EINVAL;
	if (c->in_tx) {
		r = run(c, ST_COMMIT, "commit");
		if (r == 0)
			c->in_tx = false;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

bool opal_cache_in_transaction(struct opal_cache *c)
{
	pthread_mutex_lock(&c->lock);
	bool r = c->in_tx;
	pthread_mutex_unlock(&c->lock);
	return r;
}
