/* HTTP server: listening, routing, authentication, body limits and
 * the /healthz and /metrics answers (http_server.h). Handlers live in http_debuginfo.c,
 * http_debuginfod.c, http_symbolize.c and http_flamegraph.c; they answer
 * through http_reply.h.
 *
 * Bodies: JSON requests are accumulated up to their route's limit; a
 * declared Content-Length over it is refused at once with 413, a chunked
 * body that grows over it is read to its end, discarded and answered 413
 * (libmicrohttpd 0.9.75 cannot answer in the middle of a body), or, past
 * OPAL_HTTP_MAX_DISCARD bytes, its connection is closed; both counted;
 * OTLP profiles bodies (http_otlp.c) likewise, under their own bound.
 * Connections: http_guard.h. PUT bodies stream to
 * the upload store. Authentication happens on the headers, before any
 * body byte is read. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <openssl/crypto.h>

#include "base/metrics.h"
#include "http/http_internal.h"
#include "http/http_json.h"
#include "http/http_reply.h"
#include "sandbox/sandbox_seccomp.h"
#include "shared/log.h"
#include "symbolize/symbolize.h"

#define MAX_SMALL_JSON (64u << 10)   /* upload-flow request bodies */

/* ---- routing and authentication ---------------------------------------------------- */

static bool is_get(const char *m)
{
	return !strcmp(m, MHD_HTTP_METHOD_GET) || !strcmp(m, MHD_HTTP_METHOD_HEAD);
}

static const struct {
	const char *path, *method;   /* method NULL: GET and HEAD */
	enum opal_http_route route;
} routes[] = {
	{ "/healthz", NULL, OPAL_ROUTE_HEALTHZ },
	{ "/metrics", NULL, OPAL_ROUTE_METRICS },
	{ "/flamegraph", NULL, OPAL_ROUTE_FLAMEGRAPH },
	{ "/debuginfo/v1/should-initiate-upload", "POST", OPAL_ROUTE_SHOULD_INITIATE },
	{ "/debuginfo/v1/initiate-upload", "POST", OPAL_ROUTE_INITIATE },
	{ "/debuginfo/v1/mark-upload-finished", "POST", OPAL_ROUTE_MARK_FINISHED },
	{ "/symbolize/v1", "POST", OPAL_ROUTE_SYMBOLIZE },
	{ "/v1development/profiles", "POST", OPAL_ROUTE_OTLP_PROFILES },
};

/* The Allow header of a 405 for `url` (RFC 9110, section 15.5.6). */
static const char *allowed_methods(const char *url)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (!strcmp(url, routes[i].path))
			return routes[i].method ? routes[i].method : "GET, HEAD";
	return "PUT";   /* the upload URLs, the only other 405 */
}

static enum opal_http_route route_of(const char *method, const char *url)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (strcmp(url, routes[i].path) != 0)
			continue;
		bool ok = routes[i].method ? !strcmp(method, routes[i].method) : is_get(method);
		return ok ? routes[i].route : OPAL_ROUTE_BAD_METHOD;
	}
	if (!strncmp(url, "/debuginfo/v1/upload/", 21))
		return !strcmp(method, "PUT") ? OPAL_ROUTE_UPLOAD : OPAL_ROUTE_BAD_METHOD;
	if (!strncmp(url, "/buildid/", 9))
		return OPAL_ROUTE_BUILDID;   /* the debuginfod handler answers other methods 400 */
	return OPAL_ROUTE_NOT_FOUND;
}

static bool is_write(enum opal_http_route r)
{
	return r == OPAL_ROUTE_SHOULD_INITIATE || r == OPAL_ROUTE_INITIATE ||
	       r == OPAL_ROUTE_MARK_FINISHED || r == OPAL_ROUTE_UPLOAD ||
	       r == OPAL_ROUTE_SYMBOLIZE || r == OPAL_ROUTE_OTLP_PROFILES;
}

/* 0 when allowed, else the status to answer (401 no token, 403 wrong). */
static unsigned check_token(const struct opal_http_server *h, struct MHD_Connection *c)
{
	if (!h->token)
		return 0;
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_AUTHORIZATION);
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return 401;
	const char *tok = auth + 7;
	size_t n = strlen(tok), m = strlen(h->token);
	/* Constant time in the token's contents. */
	if (n != m || CRYPTO_memcmp(tok, h->token, m) != 0)
		return 403;
	return 0;
}

static enum MHD_Result refuse_auth(struct MHD_Connection *c, unsigned status)
{
	opal_metrics_upload(OPAL_UPLOAD_UNAUTHORIZED);
	if (status == 401)
		return opal_http_send_error_with(c, 401, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer",
						 "missing bearer token (Authorization: Bearer "
						 "<token>)");
	return opal_http_send_error(c, status, "wrong bearer token");
}

/* Declared body length, or -1 when none (chunked) or unparsable. */
static int64_t content_length(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!v || !*v)
		return -1;
	char *end;
	unsigned long long n = strtoull(v, &end, 10);
	return *end || n > INT64_MAX ? -1 : (int64_t)n;
}

static void append_body(struct opal_http_req *r, const char *data, size_t size)
{
	if (r->too_large || size > r->limit - r->len) {
		r->too_large = true;
		r->discarded += size;
		return;
	}
	if (r->len + size + 1 > r->cap) {
		size_t ncap = r->cap ? r->cap : 4096;
		while (ncap < r->len + size + 1)
			ncap *= 2;
		char *n = realloc(r->body, ncap);
		if (!n) {
			r->too_large = true;   /* answered 413: the body cannot be held */
			return;
		}
		r->body = n;
		r->cap = ncap;
	}
	memcpy(r->body + r->len, data, size);
	r->len += size;
	r->body[r->len] = '\0';
}

static enum MHD_Result metrics(struct opal_http_server *h, struct MHD_Connection *c)
{
	struct opal_symbolizer_stats st;
	struct opal_process_stats ps = { .seccomp_denials = opal_seccomp_denials() };
	char *text;
	size_t len;

	if (h->sym)
		opal_symbolizer_stats(h->sym, &st);
	opal_http_publish_forward(h);
	if (opal_metrics_render(h->sym ? &st : NULL, &ps, &text, &len) < 0)
		return opal_http_send_error(c, 500, "out of memory");
	return opal_http_send_buffer(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

/* First call of a request: headers are complete, no body byte read. */
static enum MHD_Result on_headers(struct opal_http_server *h, struct MHD_Connection *c,
				  struct opal_http_req *r, const char *url, const char *method)
{
	switch (r->route) {
	case OPAL_ROUTE_NOT_FOUND:
		return opal_http_send_error(c, 404, "no such endpoint: %.200s", url);
	case OPAL_ROUTE_BAD_METHOD:
		return opal_http_send_error_with(c, 405, MHD_HTTP_HEADER_ALLOW, allowed_methods(url),
						 "method %.16s not allowed on %.200s", method, url);
	case OPAL_ROUTE_HEALTHZ:
		return opal_http_send_json(c, 200, json_pack("{s:s}", "status", "ok"));
	case OPAL_ROUTE_METRICS:
		return metrics(h, c);
	case OPAL_ROUTE_BUILDID:
		return opal_http_buildid(h, c, method, url);
	case OPAL_ROUTE_FLAMEGRAPH:
		return opal_http_flamegraph(h, c);
	default:
		break;
	}
	unsigned auth = is_write(r->route) ? check_token(h, c) : 0;
	if (auth)
		return refuse_auth(c, auth);
	if (r->route == OPAL_ROUTE_UPLOAD)
		return opal_http_upload_start(h, c, r, url);
	r->limit = r->route == OPAL_ROUTE_SYMBOLIZE ? OPAL_HTTP_MAX_JSON : MAX_SMALL_JSON;
	if (r->route == OPAL_ROUTE_OTLP_PROFILES) {
		r->limit = 0;   /* set by the handler when it goes on to the body */
		enum MHD_Result ret = opal_http_otlp_headers(h, c, r);
		if (!r->limit)
			return ret;   /* answered already */
	}
	int64_t cl = content_length(c);
	if (cl > (int64_t)r->limit && r->route == OPAL_ROUTE_OTLP_PROFILES)
		opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_TOO_LARGE);
	if (cl > (int64_t)r->limit) {
		opal_metrics_http_refusal(OPAL_HTTP_BODY_TOO_LARGE);
		return opal_http_send_error(c, 413, "request body of %lld bytes; at most %zu",
					    (long long)cl, r->limit);
	}
	return MHD_YES;
}

static enum MHD_Result on_body_end(struct opal_http_server *h, struct MHD_Connection *c,
				   struct opal_http_req *r)
{
	if (r->route == OPAL_ROUTE_UPLOAD)
		return opal_http_upload_end(h, c, r);
	if (r->too_large && r->route == OPAL_ROUTE_OTLP_PROFILES)
		opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_TOO_LARGE);
	if (r->too_large) {
		opal_metrics_http_refusal(OPAL_HTTP_BODY_TOO_LARGE);
		return opal_http_send_error(c, 413, "request body over %zu bytes", r->limit);
	}
	if (!r->body) {
		append_body(r, "", 0);
		if (!r->body)
			return opal_http_send_error(c, 500, "out of memory");
	}
	switch (r->route) {
	case OPAL_ROUTE_SHOULD_INITIATE:
		return opal_http_should_initiate(h, c, r);
	case OPAL_ROUTE_INITIATE:
		return opal_http_initiate(h, c, r);
	case OPAL_ROUTE_MARK_FINISHED:
		return opal_http_mark_finished(h, c, r);
	case OPAL_ROUTE_SYMBOLIZE:
		return opal_http_symbolize(h, c, r);
	case OPAL_ROUTE_OTLP_PROFILES:
		return opal_http_otlp_profiles(h, c, r);
	default:
		return opal_http_send_error(c, 500, "unrouted request");
	}
}

/* The guard's record of connection `c` (NULL when it has none). */
static struct opal_http_guard_conn *guard_conn(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct opal_http_server *h = cls;

	return opal_http_guard_accept(h->guard, addr, len) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct opal_http_server *h = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *addr =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		const struct sockaddr *sa = addr ? addr->client_addr : NULL;
		socklen_t len = !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					  sizeof(struct sockaddr_in);
		*socket_context = fd ? opal_http_guard_started(h->guard, fd->connect_fd, sa, len) :
				       NULL;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		opal_http_guard_closed(h->guard, *socket_context);
		*socket_context = NULL;
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **con_cls)
{
	struct opal_http_server *h = cls;
	struct opal_http_req *r = *con_cls;
	(void)version;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		*con_cls = r;
		r->route = route_of(method, url);
		if (!opal_http_guard_headers_done(h->guard, guard_conn(c)) &&
		    r->route != OPAL_ROUTE_HEALTHZ && r->route != OPAL_ROUTE_METRICS) {
			opal_metrics_http_refusal(OPAL_HTTP_REFUSED_RESERVED_ONLY);
			return opal_http_send_error_with(c, 503, MHD_HTTP_HEADER_CONNECTION, "close",
							 "connection limit reached: this connection "
							 "serves only /healthz and /metrics");
		}
		return on_headers(h, c, r, url, method);
	}
	if (*size) {
		if (r->route == OPAL_ROUTE_UPLOAD)
			opal_http_upload_data(r, data, *size);
		else
			append_body(r, data, *size);
		*size = 0;
		/* A refused body is read to its end (413 then) only so far:
		 * libmicrohttpd cannot answer before the body has ended. */
		if ((r->too_large || r->upload_err) && r->discarded > OPAL_HTTP_MAX_DISCARD) {
			if (r->too_large)
				opal_metrics_http_refusal(OPAL_HTTP_BODY_TOO_LARGE);
			return MHD_NO;
		}
		return MHD_YES;
	}
	return on_body_end(h, c, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct opal_http_server *h = cls;
	(void)toe;
	opal_http_guard_request_done(h->guard, guard_conn(c));
	struct opal_http_req *r = *con_cls;
	if (!r)
		return;
	opal_debuginfo_upload_abort(r->upload);
	free(r->body);
	free(r);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	opal_warn("http: %s", msg);
}

/* ---- start / stop ---------------------------------------------------------------------- */

static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256], port[16];
	const char *colon = strrchr(listen, ':');
	if (!colon || colon == listen || strlen(colon + 1) >= sizeof(port) || !colon[1])
		return -EINVAL;
	size_t hl = (size_t)(colon - listen);
	if (listen[0] == '[' && hl >= 2 && listen[hl - 1] == ']') {
		listen++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, listen, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE }, *res;
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

struct opal_http_server *opal_http_start(const struct opal_http_config *cfg)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	const char *listen = cfg->listen ? cfg->listen : OPAL_HTTP_DEFAULT_LISTEN;
	if (resolve_listen(listen, &ss, &sl) < 0) {
		opal_err("http: bad listen address '%s' (want HOST:PORT)", listen);
		errno = EINVAL;
		return NULL;
	}
	bool tls = cfg->tls_cert_pem && cfg->tls_key_pem;
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		opal_err("http: this libmicrohttpd has no TLS support");
		errno = ENOTSUP;
		return NULL;
	}
	struct opal_http_server *h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	h->sym = cfg->sym;
	h->store = cfg->store;
	h->recent = cfg->recent;
	h->recent_offcpu = cfg->recent_offcpu;
	pthread_mutex_init(&h->flamegraph_lock, NULL);
	pthread_mutex_init(&h->otlp_lock, NULL);
	h->otlp_forward = cfg->otlp_forward;
	h->otlp_max_bytes = cfg->max_upload_bytes && cfg->max_upload_bytes < OPAL_HTTP_OTLP_MAX_BYTES ?
				    cfg->max_upload_bytes : OPAL_HTTP_OTLP_MAX_BYTES;
	if ((cfg->token && !(h->token = strdup(cfg->token))) ||
	    (tls && (!(h->cert = strdup(cfg->tls_cert_pem)) || !(h->key = strdup(cfg->tls_key_pem))))) {
		opal_http_stop(h);
		errno = ENOMEM;
		return NULL;
	}
	/* MHD_USE_ITC: MHD_stop_daemon wakes every worker through its
	 * inter-thread channel; without it a worker in epoll_wait sees the stop
	 * only at its next event or timeout (up to the idle timeout). */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
			 MHD_USE_ITC;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (tls)
		flags |= MHD_USE_TLS;
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_SOCK_ADDR, 0, &ss },
		{ MHD_OPTION_THREAD_POOL_SIZE, OPAL_HTTP_THREADS, NULL },
		/* the guard applies the limits (per address, reserved slots) */
		{ MHD_OPTION_CONNECTION_LIMIT, OPAL_HTTP_MAX_CONNS + OPAL_HTTP_RESERVED, NULL },
		{ MHD_OPTION_CONNECTION_TIMEOUT, OPAL_HTTP_TIMEOUT_S, NULL },
		{ MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL },
		{ MHD_OPTION_END, 0, NULL },   /* TLS key, when given */
		{ MHD_OPTION_END, 0, NULL },   /* TLS certificate */
		{ MHD_OPTION_END, 0, NULL },
	};
	if (tls) {
		opts[5] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, h->key };
		opts[6] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, h->cert };
	}
	if (!(h->guard = opal_http_guard_new())) {
		int e = errno;
		opal_err("http: cannot start the connection guard: %s", strerror(e));
		opal_http_stop(h);
		errno = e;
		return NULL;
	}
	h->d = MHD_start_daemon(flags, 0, on_accept, h, on_request, h,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!h->d) {
		int e = errno ? errno : EADDRINUSE;
		opal_err("http: cannot listen on %s: %s", listen, strerror(e));
		opal_http_stop(h);
		errno = e;
		return NULL;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : 0;
	opal_info("http: listening on %s (port %u, %s%s)", listen, (unsigned)h->port,
		  tls ? "TLS" : "plain HTTP", h->token ? ", bearer token required to write" : "");
	if (!tls && h->token && ss.ss_family == AF_INET &&
	    ((struct sockaddr_in *)&ss)->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		opal_warn("http: the bearer token travels in clear text: give --tls-cert/--tls-key");
	return h;
}

uint16_t opal_http_port(const struct opal_http_server *h)
{
	return h->port;
}

void opal_http_stop(struct opal_http_server *h)
{
	if (!h)
		return;
	if (h->d)
		MHD_stop_daemon(h->d);
	opal_http_guard_free(h->guard);
	pthread_mutex_destroy(&h->flamegraph_lock);
	pthread_mutex_destroy(&h->otlp_lock);
	free(h->token);
	free(h->cert);
	free(h->key);
	free(h);
}

char *opal_http_read_secret(const char *path, size_t max, bool trim)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	size_t n = fread(buf, 1, max + 1, f);
	int err = ferror(f) ? EIO : 0;
	fclose(f);
	if (!err && n > max)
		err = EFBIG;
	if (err) {
		free(buf);
		errno = err;
		return NULL;
	}
	buf[n] = '\0';
	if (trim) {
		while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			     buf[n - 1] == '\t'))
			buf[--n] = '\0';
		if (n == 0 || strlen(buf) != n || strpbrk(buf, " \t\r\n")) {
			free(buf);
			errno = EINVAL;   /* empty, or whitespace/NUL inside: not one token */
			return NULL;
		}
	}
	return buf;
}
