/* A small loopback HTTP/1.1 server for unit tests that stand in for a
 * debuginfod server or a central symbolizer: one accepting thread, one
 * thread per connection, one request per connection (answers say
 * "Connection: close"). The handler sees the method, path and body and
 * fills an answer, which may be delayed to play a slow server. It counts
 * the requests and the most connections served at once. Requests are
 * bounded to FAKE_HTTP_MAX_REQUEST bytes; larger ones get 413. Include
 * after <cmocka.h>. */
#ifndef OPAL_TEST_FAKE_HTTP_H
#define OPAL_TEST_FAKE_HTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#define FAKE_HTTP_MAX_REQUEST (256u << 10)
#define FAKE_HTTP_IO_MS       10000   /* a silent client is dropped after this */

struct fake_http_answer {
	int status;
	char *body;                 /* heap (freed by the server), or NULL */
	size_t len;
	unsigned delay_ms;          /* wait before answering */
};

typedef void (*fake_http_handler)(void *arg, const char *method, const char *path,
				  const char *body, size_t body_len, struct fake_http_answer *a);

struct fake_http {
	int lfd, port;
	fake_http_handler handler;
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned requests, active, max_active;
	bool stop;
};

struct fake_http_conn {
	struct fake_http *h;
	int fd;
};

static bool fake_http_stopping(struct fake_http *h)
{
	pthread_mutex_lock(&h->lock);
	bool stop = h->stop;
	pthread_mutex_unlock(&h->lock);
	return stop;
}

/* Reads one request into buf (NUL-terminated); returns its total length
 * (headers + body) and the header length, or -1. */
static ssize_t fake_http_read(int fd, char *buf, size_t cap, size_t *head_len)
{
	size_t n = 0, want = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (n < cap - 1 && (want == 0 || n < want)) {
		if (poll(&p, 1, FAKE_HTTP_IO_MS) != 1)
			return -1;
		ssize_t got = read(fd, buf + n, cap - 1 - n);
		if (got <= 0)
			return -1;
		n += (size_t)got;
		buf[n] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		if (want == 0 && end) {
			*head_len = (size_t)(end + 4 - buf);
			size_t body = 0;
			for (char *l = strstr(buf, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n"))
				if (!strncasecmp(l + 2, "Content-Length:", 15))
					body = strtoul(l + 17, NULL, 10);
			want = *head_len + body;
		}
	}
	return want && n >= want ? (ssize_t)want : -1;
}

static void fake_http_write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w <= 0)
			return;
		p += w;
		len -= (size_t)w;
	}
}

static void *fake_http_conn_main(void *argp)
{
	struct fake_http_conn *c = argp;
	struct fake_http *h = c->h;
	char *buf = malloc(FAKE_HTTP_MAX_REQUEST);
	size_t head = 0;
	ssize_t n = buf ? fake_http_read(c->fd, buf, FAKE_HTTP_MAX_REQUEST, &head) : -1;
	struct fake_http_answer a = { .status = 413 };
	if (n > 0) {
		char method[16] = "", path[1024] = "";
		if (sscanf(buf, "%15s %1023s", method, path) == 2) {
			pthread_mutex_lock(&h->lock);
			h->requests++;
			pthread_mutex_unlock(&h->lock);
			buf[n] = '\0';
			h->handler(h->arg, method, path, buf + head, (size_t)n - head, &a);
		}
	}
	/* The delay, in steps, so that stopping the server does not wait it out. */
	for (unsigned waited = 0; waited < a.delay_ms && !fake_http_stopping(h); waited += 20)
		usleep(20000);
	char hdr[256];
	int hl = snprintf(hdr, sizeof(hdr),
			  "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nContent-Type: "
			  "application/octet-stream\r\nConnection: close\r\n\r\n",
			  a.status, a.body ? a.len : 0);
	fake_http_write_all(c->fd, hdr, (size_t)hl);
	if (a.body)
		fake_http_write_all(c->fd, a.body, a.len);
	free(a.body);
	free(buf);
	close(c->fd);
	pthread_mutex_lock(&h->lock);
	h->active--;
	pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->lock);
	free(c);
	return NULL;
}

static void *fake_http_accept_main(void *argp)
{
	struct fake_http *h = argp;
	struct pollfd p = { .fd = h->lfd, .events = POLLIN };
	while (!fake_http_stopping(h)) {
		if (poll(&p, 1, 50) != 1)
			continue;
		int fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct fake_http_conn *c = malloc(sizeof(*c));
		pthread_t t;
		if (!c) {
			close(fd);
			continue;
		}
		*c = (struct fake_http_conn){ .h = h, .fd = fd };
		pthread_mutex_lock(&h->lock);
		h->active++;
		if (h->active > h->max_active)
			h->max_active = h->active;
		pthread_mutex_unlock(&h->lock);
		if (pthread_create(&t, NULL, fake_http_conn_main, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&h->lock);
			h->active--;
			pthread_mutex_unlock(&h->lock);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

/* Starts the server on 127.0.0.1 (a free port, in h->port). */
static __attribute__((unused)) void fake_http_start(struct fake_http *h, fake_http_handler fn,
						    void *arg)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	memset(h, 0, sizeof(*h));
	h->handler = fn;
	h->arg = arg;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->idle, NULL);
	h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(h->lfd >= 0);
	assert_int_equal(bind(h->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(h->lfd, 16), 0);
	assert_int_equal(getsockname(h->lfd, (struct sockaddr *)&sa, &len), 0);
	h->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&h->thread, NULL, fake_http_accept_main, h), 0);
}

/* Stops accepting, cuts pending delays short and waits for the
 * connection threads. */
static __attribute__((unused)) void fake_http_stop(struct fake_http *h)
{
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->thread, NULL);
	pthread_mutex_lock(&h->lock);
	while (h->active > 0)
		pthread_cond_wait(&h->idle, &h->lock);
	pthread_mutex_unlock(&h->lock);
	close(h->lfd);
	pthread_cond_destroy(&h->idle);
	pthread_mutex_destroy(&h->lock);
}

static __attribute__((unused)) unsigned fake_http_requests(struct fake_http *h)
{
	pthread_mutex_lock(&h->lock);
	unsigned n = h->requests;
	pthread_mutex_unlock(&h->lock);
	return n;
}

static __attribute__((unused)) unsigned fake_http_max_active(struct fake_http *h)
{
	pthread_mutex_lock(&h->lock);
	unsigned n = h->max_active;
	pthread_mutex_unlock(&h->lock);
	return n;
}

#endif
