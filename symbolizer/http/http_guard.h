/* Connection bounds of the HTTP server (docs/http-api.md, "Limits") that
 * libmicrohttpd 0.9.75 lacks or applies too early: a deadline for a
 * request's headers, separate from the idle timeout (a client sending a
 * header byte every few seconds is never idle); connection limits in all
 * and per client address; and reserved slots that serve only /healthz
 * and /metrics once those limits are reached, given to addresses that hold
 * no other connection, so that probes still get answers. Wired into libmicrohttpd through its accept policy callback
 * and connection notifications (http_server.c); a reaper thread shuts
 * down the socket of a connection past its header deadline, which makes
 * libmicrohttpd close it. */
#ifndef OPAL_HTTP_GUARD_H
#define OPAL_HTTP_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define OPAL_HTTP_MAX_CONNS      2048   /* ordinary connections at once */
#define OPAL_HTTP_MAX_PER_ADDR   64     /* ... from one client address */
#define OPAL_HTTP_RESERVED       32     /* more, only for /healthz and /metrics */
/* ... and only to an address with no other: a monitoring host probes
 * /healthz and scrapes /metrics at once, and a closed connection counts
 * until libmicrohttpd's next pass over its connections cleans it up */
#define OPAL_HTTP_RESERVED_PER_ADDR 4
#define OPAL_HTTP_HEADER_S       10     /* a request's headers complete within this */
#define OPAL_HTTP_RESERVED_HEADER_S 2   /* ... on a reserved slot */
/* The next request on a kept-alive connection: its headers complete within
 * this after the previous one (waiting for it is not slowness). */
#define OPAL_HTTP_KEEPALIVE_HEADER_S 120

struct opal_http_guard;
struct opal_http_guard_conn;

/* A guard with its reaper thread; NULL with errno on failure. */
struct opal_http_guard *opal_http_guard_new(void);

/* Stops the reaper and frees the guard; every connection must be closed
 * (libmicrohttpd stopped) before. */
void opal_http_guard_free(struct opal_http_guard *g);

/* Accept policy for a new connection from `addr`: true to accept. Counts
 * and logs (rate-limited) a refusal. The decision is taken over by the
 * opal_http_guard_started call that follows on the same thread. */
bool opal_http_guard_accept(struct opal_http_guard *g, const struct sockaddr *addr,
			    socklen_t len);

/* A connection libmicrohttpd accepted (socket `fd`, peer `addr`): its
 * record, or NULL without memory (the connection then goes unguarded). */
struct opal_http_guard_conn *opal_http_guard_started(struct opal_http_guard *g, int fd,
						     const struct sockaddr *addr, socklen_t len);

/* The connection closed: its record is freed. NULL is ignored. */
void opal_http_guard_closed(struct opal_http_guard *g, struct opal_http_guard_conn *c);

/* The headers of a request on `c` are complete (its deadline stops).
 * Returns false when `c` holds a reserved slot (the request may only be
 * /healthz or /metrics). */
bool opal_http_guard_headers_done(struct opal_http_guard *g, struct opal_http_guard_conn *c);

/* A request on `c` completed: the next one's header deadline
 * (OPAL_HTTP_KEEPALIVE_HEADER_S) starts. */
void opal_http_guard_request_done(struct opal_http_guard *g, struct opal_http_guard_conn *c);

#endif
