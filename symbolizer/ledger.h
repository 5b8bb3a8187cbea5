/* Which intervals (collector run ID, sequence number) have been written,
 * so that a re-sent interval is acknowledged but never written twice. */
#ifndef OPAL_LEDGER_H
#define OPAL_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

struct opal_ledger;

/* Opens the ledger table in the SQLite database at `db_path` (shared with
 * the symbol cache; WAL mode allows both connections). NULL on error. */
struct opal_ledger *opal_ledger_open(const char *db_path);
void opal_ledger_close(struct opal_ledger *l);

/* True when (run_id, seq) was recorded. Errors read as false. */
bool opal_ledger_seen(struct opal_ledger *l, uint64_t run_id, uint64_t seq);

/* Records (run_id, seq) with the current time. Returns 0 or -EIO. Rows
 * older than 7 days are pruned on each call to bound the table. */
int opal_ledger_record(struct opal_ledger *l, uint64_t run_id, uint64_t seq);

#endif
