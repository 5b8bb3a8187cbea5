/* Fleet mode: a host's symbolizer and a central one (docs/http-api.md,
 * "Fleet").
 *  - Addresses the host resolves poorly (local data below DWARF line
 *    tables, or nothing found) are queued and sent in batches to the
 *    upstream's POST /symbolize/v1; better answers replace the local ones
 *    in the host's caches, so later intervals use them.
 *  - With upload_debuginfo, the debug parts of each newly seen file with
 *    symbols are uploaded to the upstream through the upload flow, a few
 *    at a time; "in progress" answers are retried later.
 *  - An interval in which a file's addresses went upstream for the first
 *    time is held until they are answered (opal_upstream_settle), so that
 *    what is written and exported for it is already resolved; only the
 *    first time per file, at most OPAL_UPSTREAM_FIRST_WAIT_MS, and not
 *    while the upstream fails.
 * Both run in threads of their own, fed through the symbolizer's hooks
 * (opal_symbolizer_set_hooks). */
#ifndef OPAL_UPSTREAM_H
#define OPAL_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

struct opal_symbolizer;

#define OPAL_UPSTREAM_MAX_PENDING   65536   /* addresses waiting; more are dropped */
#define OPAL_UPSTREAM_BATCH         10000   /* addresses per request (the API's limit) */
#define OPAL_UPSTREAM_FLUSH_MS      1000    /* a partial batch waits at most this */
#define OPAL_UPSTREAM_MAX_TRIES     3       /* sends of one batch before it is dropped */
#define OPAL_UPLOAD_QUEUE_MAX       128     /* files waiting for upload; more are dropped */
#define OPAL_UPLOAD_WORKERS         2       /* uploads at once */
#define OPAL_UPLOAD_MAX_TRIES       6       /* "in progress" retries, backing off 30 s each */
#define OPAL_UPLOAD_SEEN_MAX        8192    /* IDs remembered as handled */
#define OPAL_UPSTREAM_FIRST_WAIT_MS 3000    /* an interval held for a new file's answers */
#define OPAL_UPSTREAM_ASKED_MAX     8192    /* files remembered as asked about */

struct opal_upstream_config {
	const char *url;              /* base URL of the central symbolizer */
	const char *token;            /* its bearer token, or NULL */
	const char *ca_pem;           /* PEM CA bundle text to trust for https, or NULL */
	bool upload_debuginfo;
	const char *tmp_dir;          /* where debug parts are written before upload */
};

struct opal_upstream;

/* Starts the threads and installs the symbolizer hooks. Start it after
 * the sandbox (threads). Returns NULL with errno on failure. */
struct opal_upstream *opal_upstream_start(const struct opal_upstream_config *c,
					  struct opal_symbolizer *sym);

/* Called between symbolizing an interval and writing it: when addresses of
 * a file never asked about before (the last OPAL_UPSTREAM_ASKED_MAX files
 * are remembered) were queued since the last call, sends every queued
 * address at once and waits until the upstream has answered them (their
 * better frames are then in the symbolizer's caches), at most
 * `timeout_ms`. Does not wait while the last batch failed (an unreachable
 * upstream would hold every interval). Counts OPAL_UPSTREAM_FIRST_WAITED
 * and, when the bound is reached, OPAL_UPSTREAM_FIRST_WAIT_EXCEEDED.
 * Returns 1 when answers replaced local frames meanwhile (symbolize the
 * interval again), else 0 (nothing to wait for, or no better answer) or
 * -ETIMEDOUT after the bound (later answers serve later intervals). */
int opal_upstream_settle(struct opal_upstream *u, int timeout_ms);

/* Removes the hooks, stops the threads (an upload under way is finished
 * or times out) and drops queued work. */
void opal_upstream_stop(struct opal_upstream *u);

#endif
