/* Fleet mode: a host's symbolizer and a central one (docs/http-api.md,
 * "Fleet").
 *  - Addresses the host resolves poorly (local data below DWARF line
 *    tables, or nothing found) are queued and sent in batches to the
 *    upstream's POST /symbolize/v1; better answers replace the local ones
 *    in the host's caches, so later intervals use them.
 *  - With upload_debuginfo, the debug parts of each newly seen file with
 *    symbols are uploaded to the upstream through the upload flow, a few
 *    at a time; "in progress" answers are retried later.
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

/* Removes the hooks, stops the threads (an upload under way is finished
 * or times out) and drops queued work. */
void opal_upstream_stop(struct opal_upstream *u);

#endif
