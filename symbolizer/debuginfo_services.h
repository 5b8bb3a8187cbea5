/* The symbolizer's debug-info services, assembled for the daemon: the
 * upload store, the debug-info sources, the HTTP API and the fleet mode
 * (debuginfo_store.h, debuginfo_sources.h, http_server.h, upstream.h), and the
 * glue between them (an upload of better data invalidates what the
 * symbolizer cached from worse data).
 *
 * Three phases because of the privilege drop and the sandbox:
 * opal_services_new reads the secret files (which may be readable by root
 * only) before the drop; opal_services_open opens the store as the
 * dropped user (so it owns what it creates), while the file system is
 * still open and the process single-threaded; opal_services_start starts
 * the threads (HTTP, upstream) once the sandbox is applied. */
#ifndef OPAL_SERVICES_H
#define OPAL_SERVICES_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "http/http_server.h"   /* OPAL_HTTP_DEFAULT_LISTEN */

struct opal_symbolizer;
struct opal_recent;
struct opal_otlp_exporter;

struct opal_services_config {
	const char *debug_root;           /* "/usr/lib/debug" */
	const char *http_listen;          /* HOST:PORT; NULL, "" or "none": no HTTP API */
	bool http_required;               /* given explicitly: failing to listen is fatal */
	const char *token_file;           /* bearer token of the write endpoints, or NULL */
	const char *tls_cert, *tls_key;   /* PEM files for HTTPS, or NULL */
	uint64_t max_upload_bytes;        /* 0: the store's default (1 GiB) */
	uint64_t upload_expiry_s;         /* 0: the store's default (900) */
	const char *upstream;             /* central symbolizer URL, or NULL */
	const char *upstream_token_file;
	const char *upstream_ca;          /* CA bundle file for an https upstream, or NULL */
	bool upload_debuginfo;            /* upload new files' debug data upstream */
};

struct opal_services;

/* Copies the configuration and reads the secret files. Returns NULL with
 * a logged reason on error. */
struct opal_services *opal_services_new(const struct opal_services_config *c);

/* Opens the store under <state_dir>/debuginfo and sets the process-wide
 * debug-info sources for `sym` (borrowed). `state_dir` and `db_path` may
 * differ from the configuration's (the folder held open across the
 * privilege drop). Returns 0 or -errno (logged). */
int opal_services_open(struct opal_services *s, struct opal_symbolizer *sym,
		       const char *state_dir, const char *db_path);

/* Starts the HTTP server and the upstream threads; `recent` and
 * `recent_offcpu` (borrowed, may be NULL) feed GET /flamegraph (its CPU
 * and off-CPU views); `otlp_forward` (borrowed, may be NULL: off)
 * receives the symbolized OTLP profiles of POST /v1development/profiles,
 * and must outlive opal_services_stop. Failing to listen on the default
 * address (not http_required) is logged and the daemon goes on without
 * the API. Returns 0 or -errno. */
int opal_services_start(struct opal_services *s, struct opal_recent *recent,
			struct opal_recent *recent_offcpu, struct opal_otlp_exporter *otlp_forward);

/* Between symbolizing an interval and writing it: with an upstream, waits
 * (opal_upstream_settle, at most OPAL_UPSTREAM_FIRST_WAIT_MS) for the
 * answers about the files first seen in it. Returns 1 when answers came
 * (symbolize the interval again), else 0 or -ETIMEDOUT. */
int opal_services_settle(struct opal_services *s);

/* The HTTP API's bound port, 0 when it does not run. */
uint16_t opal_services_http_port(const struct opal_services *s);

/* Called from the main loop's tick (`now`: time(NULL)): at most once every
 * OPAL_SERVICES_EXPIRE_PERIOD_S, forgets uploads left unfinished past
 * --upload-expiry and deletes their partial files, which otherwise wait
 * for the next upload request. NULL or a store not open is accepted. */
#define OPAL_SERVICES_EXPIRE_PERIOD_S 60
void opal_services_tick(struct opal_services *s, time_t now);

/* Stops the threads and closes the store. NULL is accepted. */
void opal_services_stop(struct opal_services *s);

#endif
