/* Shared between the http_*.c files: the server, the per-request state and
 * the handlers the router calls. Not for use outside the HTTP server. */
#ifndef OPAL_HTTP_INTERNAL_H
#define OPAL_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>

#include "debuginfo/debuginfo_store.h"
#include "http/http_guard.h"
#include "http/http_reply.h"
#include "http/http_server.h"

struct opal_http_server {
	struct MHD_Daemon *d;
	struct opal_http_guard *guard;        /* header deadline, connection limits */
	char *token;                          /* NULL: write endpoints are open */
	char *cert, *key;
	struct opal_symbolizer *sym;
	struct opal_debuginfo_store *store;
	struct opal_recent *recent;           /* NULL: GET /flamegraph answers 503 */
	struct opal_recent *recent_offcpu;    /* off-CPU profiles; NULL: none kept */
	pthread_mutex_t flamegraph_lock;      /* one flame graph built at a time */
	struct opal_otlp_exporter *otlp_forward;   /* NULL: POST /v1development/profiles is off */
	uint64_t otlp_max_bytes;              /* its body, compressed and inflated */
	pthread_mutex_t otlp_lock;            /* guards otlp_busy */
	unsigned otlp_busy;                   /* OTLP requests being worked on */
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
	OPAL_ROUTE_OTLP_PROFILES,
};

/* State of one request, from its headers to its completion. */
struct opal_http_req {
	enum opal_http_route route;
	char *body;                 /* JSON bodies: accumulated, NUL-terminated */
	size_t len, cap, limit;
	bool too_large;             /* body over `limit`: the rest is discarded, 413 at the end */
	bool gzip;                  /* OTLP: Content-Encoding gzip */
	uint64_t discarded;
	struct opal_di_upload *upload;   /* PUT: the body being stored */
	int upload_err;             /* first error of the PUT body, 0 if none */
	char upload_id[OPAL_DI_UPLOAD_ID_LEN + 1];
};

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

/* POST /v1development/profiles (http_otlp.c): the headers (404 when
 * receiving is off, 415 for another Content-Type or Content-Encoding;
 * sets r->limit), then the whole body. */
enum MHD_Result opal_http_otlp_headers(struct opal_http_server *h, struct MHD_Connection *c,
				       struct opal_http_req *r);
enum MHD_Result opal_http_otlp_profiles(struct opal_http_server *h, struct MHD_Connection *c,
					struct opal_http_req *r);
/* The forward exporter's counters into /metrics (a no-op when off). */
void opal_http_publish_forward(struct opal_http_server *h);

/* GET/HEAD /buildid/... (http_debuginfod.c). */
enum MHD_Result opal_http_buildid(struct opal_http_server *h, struct MHD_Connection *c,
				  const char *method, const char *url);

/* GET/HEAD /flamegraph?seconds=N[&pid=P] (http_flamegraph.c). */
enum MHD_Result opal_http_flamegraph(struct opal_http_server *h, struct MHD_Connection *c);

#endif
