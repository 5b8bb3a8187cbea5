/* Interval ledger in SQLite. */
#include "ledger.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <sqlite3.h>
#include "shared/log.h"

#define LEDGER_KEEP_S (7 * 24 * 3600)

struct opal_ledger {
	sqlite3 *db;
	sqlite3_stmt *seen, *record, *prune;
};

struct opal_ledger *opal_ledger_open(const char *db_path)
{
	struct opal_ledger *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	if (sqlite3_open_v2(db_path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(l->db, 5000);
	if (sqlite3_exec(l->db,
			 /* NORMAL: no fsync per interval. A power loss can lose the
			  * newest rows, but the collector's unacknowledged intervals are
			  * lost with it, and its next run has a new run_id. */
			 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
			 "CREATE TABLE IF NOT EXISTS intervals_written ("
			 " run_id INTEGER NOT NULL, seq INTEGER NOT NULL, written_at INTEGER NOT NULL,"
			 " PRIMARY KEY (run_id, seq)) WITHOUT ROWID;",
			 NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	if (sqlite3_prepare_v2(l->db,
			       "SELECT 1 FROM intervals_written WHERE run_id = ?1 AND seq = ?2",
			       -1, &l->seen, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(l->db,
			       "INSERT OR IGNORE INTO intervals_written VALUES (?1, ?2, ?3)", -1,
			       &l->record, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(l->db, "DELETE FROM intervals_written WHERE written_at < ?1", -1,
			       &l->prune, NULL) != SQLITE_OK)
		goto fail;
	return l;
fail:
	opal_err("ledger %s: %s", db_path, l->db ? sqlite3_errmsg(l->db) : "cannot open");
	opal_ledger_close(l);
	return NULL;
}

void opal_ledger_close(struct opal_ledger *l)
{
	if (!l)
		return;
	sqlite3_finalize(l->seen);
	sqlite3_finalize(l->record);
	sqlite3_finalize(l->prune);
	sqlite3_close(l->db);
	free(l);
}

bool opal_ledger_seen(struct opal_ledger *l, uint64_t run_id, uint64_t seq)
{
	bool seen;

	sqlite3_bind_int64(l->seen, 1, (sqlite3_int64)run_id);
	sqlite3_bind_int64(l->seen, 2, (sqlite3_int64)seq);
	seen = sqlite3_step(l->seen) == SQLITE_ROW;
	sqlite3_reset(l->seen);
	return seen;
}

int opal_ledger_record(struct opal_ledger *l, uint64_t run_id, uint64_t seq)
{
	sqlite3_int64 now = (sqlite3_int64)time(NULL);
	int rc;

	sqlite3_bind_int64(l->record, 1, (sqlite3_int64)run_id);
	sqlite3_bind_int64(l->record, 2, (sqlite3_int64)seq);
	sqlite3_bind_int64(l->record, 3, now);
	rc = sqlite3_step(l->record);
	sqlite3_reset(l->record);
	if (rc != SQLITE_DONE) {
		opal_err("ledger: %s", sqlite3_errmsg(l->db));
		return -EIO;
	}
	sqlite3_bind_int64(l->prune, 1, now - LEDGER_KEEP_S);
	sqlite3_step(l->prune);
	sqlite3_reset(l->prune);
	return 0;
}
