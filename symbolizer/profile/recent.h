/* Recent interval profiles kept for the served flame graph
 * (GET /flamegraph): each interval's gzip'd pprof (the bytes of the
 * interval file, pprof.h) in its own file under one folder (the daemon uses
 * <state-dir>/recent), named
 *   recent-<start_unix_ns, 19 digits>-<end_unix_ns, 19 digits>-<run_id, 16 hex>-<seq, 6+ digits>.pb.gz
 * so that names sort by start time and a time window is chosen without
 * opening files. Bounded by count, bytes and age; the oldest go first.
 * The main thread adds the collectors' profiles and changes the limits;
 * HTTP threads add received OTLP profiles, list and read concurrently
 * (files appear by rename and may vanish at any time, which readers skip).
 * The folder is read once at open; after that an index in memory answers
 * lists and rotation, so files put there by others are not seen until the
 * next open. */
#ifndef OPAL_RECENT_H
#define OPAL_RECENT_H

#include <stddef.h>
#include <stdint.h>

struct opal_recent_limits {
	uint64_t max_files;   /* 0: keep nothing (adding is a no-op) */
	uint64_t max_bytes;   /* sum of file sizes */
	uint64_t max_age_s;   /* a profile that ended longer ago is deleted */
};

/* A profile file: open it as opal_recent_dir(r) + "/" + name. */
struct opal_recent_entry {
	char name[128];
	uint64_t start_unix_ns, end_unix_ns;
	uint64_t bytes;
};

struct opal_recent;

/* Opens (creating) `dir`, removes temporary files a crash left, reads
 * the profiles there, applies the limits. Returns 0 and *out, or -errno. */
int opal_recent_open(const char *dir, const struct opal_recent_limits *l,
		     struct opal_recent **out);

/* Closes (the files stay). NULL is a no-op. */
void opal_recent_close(struct opal_recent *r);

/* New limits (SIGHUP); files beyond them are deleted now. Main thread. */
void opal_recent_set_limits(struct opal_recent *r, const struct opal_recent_limits *l);

/* The folder (as given to open). */
const char *opal_recent_dir(const struct opal_recent *r);

/* The age limit in seconds, readable from any thread. */
uint64_t opal_recent_max_age_s(const struct opal_recent *r);

/* Keeps one profile (`len` bytes of gzip'd pprof) and deletes what exceeds
 * the limits, measured against `now_unix_ns`. `same_file`, when not NULL,
 * is a file holding exactly those bytes (the interval file): it is
 * hard-linked instead of written when the file system allows (no new
 * inode, no write: creating files was the largest cost of a warm
 * interval); else the bytes are written atomically. start/end: the
 * interval's time range in Unix ns (end >= start). Returns 0 (also when
 * max_files is 0: nothing kept) or -errno. Any thread, for names that
 * differ (run_id, seq). */
int opal_recent_add(struct opal_recent *r, const uint8_t *pprof_gz, size_t len,
		    const char *same_file, uint64_t start_unix_ns, uint64_t end_unix_ns,
		    uint64_t run_id, uint64_t seq, uint64_t now_unix_ns);

/* The profiles whose [start, end] overlaps [from_unix_ns, to_unix_ns]
 * (to 0: open), oldest first, at most `max` of the newest. *out
 * (free()) holds *n entries (NULL when 0). Any thread. Returns 0 or
 * -ENOMEM. */
int opal_recent_list(struct opal_recent *r, uint64_t from_unix_ns, uint64_t to_unix_ns,
		     size_t max, struct opal_recent_entry **out, size_t *n);

#endif
