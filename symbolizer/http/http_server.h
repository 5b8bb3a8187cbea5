/* The symbolizer's HTTP API (docs/http-api.md) on libmicrohttpd: the
 * debuginfo upload flow, the debuginfod protocol, remote symbolization,
 * /healthz, /metrics and the flame graph of recent profiles
 * (/flamegraph, docs/export.md). Requests are served by a pool of
 * OPAL_HTTP_THREADS threads of libmicrohttpd's own (internal polling), so
 * the server must be started after the process sandbox is applied (the
 * sandbox wants a single-threaded process). */
#ifndef OPAL_HTTP_SERVER_H
#define OPAL_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct opal_symbolizer;
struct opal_debuginfo_store;
struct opal_recent;
struct opal_otlp_exporter;

#define OPAL_HTTP_DEFAULT_LISTEN "127.0.0.1:7412"
#define OPAL_HTTP_THREADS        4
#define OPAL_HTTP_TIMEOUT_S      120    /* idle connection timeout; connection limits and
					 * the header deadline: http_guard.h */
#define OPAL_HTTP_MAX_JSON       (4u << 20)   /* bytes of a JSON request body */
/* A body over its bound is read to its end (then 413) for at most this
 * many more bytes, no memory spent on them; then the connection closes. */
#define OPAL_HTTP_MAX_DISCARD    (1ull << 30)
#define OPAL_HTTP_MAX_ADDRESSES  10000  /* per /symbolize/v1 request; more: 413 */
#define OPAL_HTTP_MAX_TOKEN      4096   /* bytes of a bearer token */
#define OPAL_HTTP_FLAMEGRAPH_DEFAULT_S    300    /* GET /flamegraph without seconds= */
#define OPAL_HTTP_FLAMEGRAPH_MAX_PROFILES 4096   /* newest recent profiles read per page */
#define OPAL_HTTP_OTLP_MAX_BYTES (64u << 20)   /* OTLP body bound, compressed and inflated,
						* when --max-upload-bytes is larger */
#define OPAL_HTTP_OTLP_AT_ONCE   2      /* OTLP requests worked on at once; more: 503 */
#define OPAL_HTTP_OTLP_RUN_ID    0x6f746c7072656376ull   /* "otlprecv": recent-profile names */

struct opal_http_config {
	const char *listen;                  /* "HOST:PORT", "[V6]:PORT"; port 0 = any */
	const char *token;                   /* bearer token for write endpoints; NULL = open */
	const char *tls_cert_pem;            /* PEM text (not a path); both or neither */
	const char *tls_key_pem;
	struct opal_symbolizer *sym;         /* borrowed */
	struct opal_debuginfo_store *store;  /* borrowed */
	struct opal_recent *recent;          /* borrowed; NULL: no /flamegraph data */
	struct opal_recent *recent_offcpu;   /* borrowed; off-CPU profiles (kind=offcpu), or NULL */
	/* borrowed; NULL: POST /v1development/profiles answers 404. Received
	 * profiles, symbolized, are pushed to it (from the server's threads). */
	struct opal_otlp_exporter *otlp_forward;
	uint64_t max_upload_bytes;           /* bounds OTLP bodies too; 0: OPAL_HTTP_OTLP_MAX_BYTES */
};

struct opal_http_server;

/* Starts serving (copies the strings it needs). Returns NULL with errno
 * set and a log line on failure (bad address, port in use, TLS without
 * libmicrohttpd TLS support). */
struct opal_http_server *opal_http_start(const struct opal_http_config *c);

/* The port actually bound (useful with port 0). */
uint16_t opal_http_port(const struct opal_http_server *h);

/* Stops the threads and closes every connection. */
void opal_http_stop(struct opal_http_server *h);

/* Reads a secret file (a token or PEM) before the sandbox closes the file
 * system: at most `max` bytes, trailing whitespace removed for tokens
 * (`trim`). Returns a malloc'd string or NULL with errno (EFBIG over
 * `max`, EINVAL for an empty token). */
char *opal_http_read_secret(const char *path, size_t max, bool trim);

#endif
