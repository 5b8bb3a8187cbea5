/* HTTP connection bounds (http_guard.h). */
#include "http/http_guard.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/metrics.h"
#include "shared/log.h"

#define REAP_MS 250
#define LOG_EVERY_S 10   /* refusals are logged at most this often */

struct opal_http_guard_conn {
	struct opal_http_guard_conn *prev, *next;
	int fd;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	bool reserved;
	uint64_t header_since_ms;   /* 0: headers complete (or shut down already) */
	uint64_t header_limit_ms;   /* the deadline from header_since_ms */
};

struct opal_http_guard {
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* CLOCK_MONOTONIC: the reaper's sleep */
	pthread_t reaper;
	bool stop;
	struct opal_http_guard_conn *conns;
	unsigned n_conns, n_reserved;
	time_t logged[OPAL_HTTP_REFUSAL_N];
};

/* The decision of opal_http_guard_accept for the opal_http_guard_started
 * call that follows it on the same thread. */
static _Thread_local bool pending_reserved;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Same client address (the port aside). */
static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (b->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
	return true;
}

static void *reap(void *arg)
{
	struct opal_http_guard *g = arg;

	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		uint64_t now = mono_ms(), at = now + REAP_MS;
		struct timespec ts = { .tv_sec = (time_t)(at / 1000),
				       .tv_nsec = (long)(at % 1000) * 1000000 };
		for (struct opal_http_guard_conn *c = g->conns; c; c = c->next) {
			if (!c->header_since_ms || now - c->header_since_ms < c->header_limit_ms)
				continue;
			/* under the lock: libmicrohttpd closes the descriptor only
			 * after opal_http_guard_closed, so it is still this one */
			shutdown(c->fd, SHUT_RDWR);
			c->header_since_ms = 0;
			opal_metrics_http_refusal(OPAL_HTTP_HEADER_TIMEOUT);
		}
		pthread_cond_timedwait(&g->cond, &g->lock, &ts);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

struct opal_http_guard *opal_http_guard_new(void)
{
	struct opal_http_guard *g = calloc(1, sizeof(*g));
	pthread_condattr_t ca;
	int err;

	if (!g)
		return NULL;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);
	if ((err = pthread_create(&g->reaper, NULL, reap, g)) != 0) {
		pthread_cond_destroy(&g->cond);
		pthread_mutex_destroy(&g->lock);
		free(g);
		errno = err;
		return NULL;
	}
	return g;
}

void opal_http_guard_free(struct opal_http_guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = true;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->reaper, NULL);
	while (g->conns)
		opal_http_guard_closed(g, g->conns);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* Counts refusal `why`; logs it at most every LOG_EVERY_S. Lock held. */
static void refuse(struct opal_http_guard *g, enum opal_metric_http_refusal why, const char *what)
{
	time_t now = time(NULL);

	opal_metrics_http_refusal(why);
	if (now - g->logged[why] < LOG_EVERY_S)
		return;
	g->logged[why] = now;
	opal_warn("http: connection refused: %s (%u connections, %u of them on reserved slots; "
		  "counted in opal_http_refusals_total, logged at most every %d s)", what,
		  g->n_conns, g->n_reserved, LOG_EVERY_S);
}

bool opal_http_guard_accept(struct opal_http_guard *g, const struct sockaddr *addr,
			    socklen_t len)
{
	unsigned from_addr = 0, reserved_from_addr = 0;
	bool ok = true;

	(void)len;
	pthread_mutex_lock(&g->lock);
	for (struct opal_http_guard_conn *c = g->conns; c; c = c->next) {
		if (!same_addr(&c->addr, addr))
			continue;
		from_addr++;
		reserved_from_addr += c->reserved;
	}
	pending_reserved = g->n_conns - g->n_reserved >= OPAL_HTTP_MAX_CONNS ||
			   from_addr - reserved_from_addr >= OPAL_HTTP_MAX_PER_ADDR;
	/* a reserved slot only for an address holding no ordinary connection:
	 * a client that filled its share cannot take the probes' slots too */
	if (pending_reserved && (g->n_reserved >= OPAL_HTTP_RESERVED ||
				 from_addr > reserved_from_addr ||
				 reserved_from_addr >= OPAL_HTTP_RESERVED_PER_ADDR)) {
		ok = false;
		if (g->n_conns - g->n_reserved >= OPAL_HTTP_MAX_CONNS)
			refuse(g, OPAL_HTTP_REFUSED_CONN_LIMIT, "connection limit reached");
		else
			refuse(g, OPAL_HTTP_REFUSED_ADDR_LIMIT, "limit of connections per client "
							       "address reached");
	}
	pthread_mutex_unlock(&g->lock);
	return ok;
}

struct opal_http_guard_conn *opal_http_guard_started(struct opal_http_guard *g, int fd,
						     const struct sockaddr *addr, socklen_t len)
{
	struct opal_http_guard_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	if (addr && len <= sizeof(c->addr)) {
		memcpy(&c->addr, addr, len);
		c->addr_len = len;
	}
	c->reserved = pending_reserved;
	pending_reserved = false;
	c->header_since_ms = mono_ms();
	c->header_limit_ms = (c->reserved ? OPAL_HTTP_RESERVED_HEADER_S : OPAL_HTTP_HEADER_S) * 1000ull;
	pthread_mutex_lock(&g->lock);
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	g->n_conns++;
	g->n_reserved += c->reserved;
	pthread_mutex_unlock(&g->lock);
	return c;
}

void opal_http_guard_closed(struct opal_http_guard *g, struct opal_http_guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->n_conns--;
	g->n_reserved -= c->reserved;
	pthread_mutex_unlock(&g->lock);
	free(c);
}

bool opal_http_guard_headers_done(struct opal_http_guard *g, struct opal_http_guard_conn *c)
{
	if (!c)
		return true;
	pthread_mutex_lock(&g->lock);
	c->header_since_ms = 0;
	pthread_mutex_unlock(&g->lock);
	return !c->reserved;
}

void opal_http_guard_request_done(struct opal_http_guard *g, struct opal_http_guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	c->header_since_ms = mono_ms();
	c->header_limit_ms = OPAL_HTTP_KEEPALIVE_HEADER_S * 1000ull;
	pthread_mutex_unlock(&g->lock);
}
