/* Shared between the http_*.c files: the server, the per-request state
 * and the response helpers. Not for use outside the HTTP server. */
#ifndef OPAL_HTTP_INTERNAL_H
#define OPAL_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>

#include "debuginfo_store.h"
#include "http_server.h"

struct opal_http_server {
	struct MHD_Daemon *d;
	char *token;                          /* NULL: write endpoints are open */
	char *cert, *key;
	struct opal_symbolizer *sym;
	struct opal_debuginfo_store *store;
	struct opal_recent *recent;           /* NULL: GET /flamegraph answers 503 */
	pthread_mutex_t flamegraph_lock;      /* one flame graph built at a time */
	uint16_t port;
};

enum opal_http_route {
	OPAL_ROUTE_NOT_FOUND,
	OPAL_ROUTE_BAD_METHOD,
	OPAL_ROUTE_HEALTHZ,
	OPAL_ROUTE_METRICS,
	OPAL_ROUTE_SHOULD_INITIATE,
	OPAL_ROUTE_INITIATE,
	OPAL_ROUTE_UPLOAD,
	OPAL_ROUTE_MARK_FINISHED,
	OPAL_ROUTE_SYMBOLIZE,
	OPAL_ROUTE_BUILDID,
	OPAL_ROUTE_FLAMEGRAPH,
};

/* State of one request, from its headers to its completion. */
struct opal_http_req {
	enum opal_http_route route;
	char *body;                 /* JSON bodies: accumulated, NUL-terminated */
	size_t len, cap, limit;
	bool too_large;             /* body over `limit`: the rest is discarded, 413 at the end */
	uint64_t discarded;
	struct opal_di_upload *upload;   /* PUT: the body being stored */
	int upload_err;             /* first error of the PUT body, 0 if none */
	char upload_id[OPAL_DI_UPLOAD_ID_LEN + 1];
};

/* Responses. Each queues the response and counts the status in /metrics;
 * the MHD_Result is to be returned by the access handler. */
enum MHD_Result opal_http_send_json(struct MHD_Connection *c, unsigned status, json_t *body);
enum MHD_Result opal_http_send_error(struct MHD_Connection *c, unsigned status,
				     const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same {"error":...} answer with one more header (`header`: `value`),
 * e.g. Allow on 405, WWW-Authenticate on 401, Retry-After on 503. */
enum MHD_Result opal_http_send_error_with(struct MHD_Connection *c, unsigned status,
					  const char *header, const char *value,
					  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* `buf` (len bytes) is taken over (freed by libmicrohttpd). */
enum MHD_Result opal_http_send_buffer(struct MHD_Connection *c, unsigned status,
				      const char *content_type, void *buf, size_t len);
/* `resp` is queued and released; `status` is counted. */
enum MHD_Result opal_http_queue(struct MHD_Connection *c, unsigned status,
				struct MHD_Response *resp);

/* Upload flow (http_debuginfo.c). The JSON handlers run when the body is
 * complete; upload_start/upload_data/upload_end drive a PUT. */
enum MHD_Result opal_http_should_initiate(struct opal_http_server *h, struct MHD_Connection *c,
					  struct opal_http_req *r);
enum MHD_Result opal_http_initiate(struct opal_http_server *h, struct MHD_Connection *c,
				   struct opal_http_req *r);
enum MHD_Result opal_http_mark_finished(struct opal_http_server *h, struct MHD_Connection *c,
					struct opal_http_req *r);
/* First call of a PUT: returns MHD_YES with no response queued to go on
 * reading the body, or the result of queuing an error response. */
enum MHD_Result opal_http_upload_start(struct opal_http_server *h, struct MHD_Connection *c,
				       struct opal_http_req *r, const char *url);
void opal_http_upload_data(struct opal_http_req *r, const char *data, size_t size);
enum MHD_Result opal_http_upload_end(struct opal_http_server *h, struct MHD_Connection *c,
				     struct opal_http_req *r);

/* POST /symbolize/v1 (http_symbolize.c). */
enum MHD_Result opal_http_symbolize(struct opal_http_server *h, struct MHD_Connection *c,
				    struct opal_http_req *r);

/* GET/HEAD /buildid/... (http_debuginfod.c). */
enum MHD_Result opal_http_buildid(struct opal_http_server *h, struct MHD_Connection *c,
				  const char *method, const char *url);

/* GET/HEAD /flamegraph?seconds=N[&pid=P] (http_flamegraph.c). */
enum MHD_Result opal_http_flamegraph(struct opal_http_server *h, struct MHD_Connection *c);

#endif
