/* Answers of the HTTP server's handlers (libmicrohttpd 0.9.75). Each
 * queues the response on the connection and counts its status in
 * /metrics (base/metrics.h); the MHD_Result is the access handler's to
 * return. Below the router and every handler, so both use it. */
#ifndef OPAL_HTTP_REPLY_H
#define OPAL_HTTP_REPLY_H

#include <stddef.h>
#include <jansson.h>
#include <microhttpd.h>

/* `body` (a reference, taken over) as compact JSON. */
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

#endif
