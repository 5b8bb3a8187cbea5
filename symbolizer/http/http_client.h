/* Client side of the HTTP API with libcurl: JSON requests to another
 * symbolizer and the debuginfo upload flow (docs/http-api.md), used by the
 * fleet mode (upstream.c) and by opal-debuginfo. curl_global_init must
 * have run (opal_http_client_global_init) before threads use it. */
#ifndef OPAL_HTTP_CLIENT_H
#define OPAL_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "debuginfo/debuginfo_store.h"

#define OPAL_CLIENT_MAX_ANSWER (64u << 20)   /* bytes of a JSON answer kept */
#define OPAL_CLIENT_TIMEOUT_S  60            /* per JSON request */
#define OPAL_CLIENT_UPLOAD_LOW_SPEED_S 60    /* an upload below 1 KiB/s this long fails */

struct opal_http_client {
	const char *base;    /* "http://host:port" or "https://...", no trailing path */
	const char *token;   /* bearer token, or NULL */
	const char *ca_pem;  /* PEM CA bundle text to trust for https (e.g. a self-signed
	                      * server), or NULL for the system's; text, not a path, so
	                      * that a sandboxed process need not open it later */
};

/* Initialises libcurl (once per process, before threads). Returns 0 or -EIO. */
int opal_http_client_global_init(void);

/* POSTs `body` (borrowed) as JSON to base+`path`. On a completed exchange
 * returns 0 with *status (HTTP status) and *answer (parsed JSON, or NULL
 * when the answer is not JSON; caller decrefs). Returns -EIO (transport
 * failure: `why` says which) or -ENOMEM. */
int opal_http_client_post_json(const struct opal_http_client *c, const char *path,
			       json_t *body, long *status, json_t **answer, char *why,
			       size_t why_len);

enum opal_upload_outcome {
	OPAL_UPLOAD_OUT_DONE,         /* uploaded and accepted */
	OPAL_UPLOAD_OUT_NOT_NEEDED,   /* the server has it (or better), or wants none */
	OPAL_UPLOAD_OUT_IN_PROGRESS,  /* another upload of this ID runs: try later */
	OPAL_UPLOAD_OUT_REJECTED,     /* the server refused the bytes (invalid, too large) */
	OPAL_UPLOAD_OUT_ERROR,        /* transport or local failure */
};

/* Runs should-initiate-upload, initiate-upload, PUT and
 * mark-upload-finished for the bytes of the file open on `fd` (read from
 * offset 0; its SHA-256 and size are computed first). `why` gets the
 * server's reason or the error. */
enum opal_upload_outcome opal_http_client_upload(const struct opal_http_client *c, int fd,
						 const char *id, enum opal_di_id_type id_type,
						 enum opal_di_type type, bool force, char *why,
						 size_t why_len);

/* Uploads the debug parts of ELF `elf_fd` (debuginfo_keep.h; written to an
 * unlinked temporary file in `tmp_dir`) as debuginfo for `id`. */
enum opal_upload_outcome opal_http_client_upload_debug(const struct opal_http_client *c,
						       int elf_fd, const char *id,
						       enum opal_di_id_type id_type,
						       const char *tmp_dir, bool force, char *why,
						       size_t why_len);

#endif
