/* Tests of symbolizer/http/http_guard.c: the accept policy (limits in all
 * and per address, reserved slots only for addresses holding no other
 * connection), the slot a started connection takes, and the header
 * deadline closing a connection that never completes its headers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "symbolizer/base/metrics.h"
#include "symbolizer/http/http_guard.h"

static struct sockaddr_in addr_of(const char *ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(1234) };

	assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	return a;
}

/* Accepts and starts a connection from `ip`; returns its record or NULL
 * when refused. */
static struct opal_http_guard_conn *connect_from(struct opal_http_guard *g, const char *ip)
{
	struct sockaddr_in a = addr_of(ip);

	if (!opal_http_guard_accept(g, (struct sockaddr *)&a, sizeof(a)))
		return NULL;
	struct opal_http_guard_conn *c =
		opal_http_guard_started(g, -1, (struct sockaddr *)&a, sizeof(a));
	assert_non_null(c);
	return c;
}

static void test_per_address(void **state)
{
	(void)state;
	struct opal_http_guard *g = opal_http_guard_new();
	struct opal_http_guard_conn *c[OPAL_HTTP_MAX_PER_ADDR];

	assert_non_null(g);
	for (int i = 0; i < OPAL_HTTP_MAX_PER_ADDR; i++) {
		assert_non_null(c[i] = connect_from(g, "10.0.0.1"));
		assert_true(opal_http_guard_headers_done(g, c[i]));   /* ordinary slot */
	}
	/* the address is at its limit and holds connections: no reserved slot */
	assert_null(connect_from(g, "10.0.0.1"));
	/* another address is not held back */
	struct opal_http_guard_conn *other = connect_from(g, "10.0.0.2");
	assert_non_null(other);
	assert_true(opal_http_guard_headers_done(g, other));
	opal_http_guard_closed(g, c[0]);
	assert_non_null(c[0] = connect_from(g, "10.0.0.1"));   /* room again */
	opal_http_guard_free(g);   /* frees the records still open */
}

static void test_reserved(void **state)
{
	(void)state;
	struct opal_http_guard *g = opal_http_guard_new();
	char ip[32];

	assert_non_null(g);
	for (int i = 0; i < OPAL_HTTP_MAX_CONNS; i++) {
		snprintf(ip, sizeof(ip), "10.%d.%d.1", i / 32 + 1, i % 32);
		assert_non_null(connect_from(g, ip));
	}
	/* full: an address holding a connection gets nothing */
	assert_null(connect_from(g, "10.1.0.1"));
	/* a fresh address gets OPAL_HTTP_RESERVED_PER_ADDR reserved slots, no more */
	struct opal_http_guard_conn *probe = connect_from(g, "192.168.0.9");
	assert_non_null(probe);
	assert_false(opal_http_guard_headers_done(g, probe));
	for (int i = 1; i < OPAL_HTTP_RESERVED_PER_ADDR; i++)
		assert_non_null(connect_from(g, "192.168.0.9"));
	assert_null(connect_from(g, "192.168.0.9"));
	/* OPAL_HTTP_RESERVED in all */
	for (int i = OPAL_HTTP_RESERVED_PER_ADDR; i < OPAL_HTTP_RESERVED; i++) {
		snprintf(ip, sizeof(ip), "192.168.1.%d", i);
		assert_non_null(connect_from(g, ip));
	}
	assert_null(connect_from(g, "192.168.2.1"));
	/* a probe's slot freed is taken again */
	opal_http_guard_closed(g, probe);
	assert_non_null(connect_from(g, "192.168.0.9"));
	opal_http_guard_free(g);
}

static void test_header_deadline(void **state)
{
	(void)state;
	struct opal_http_guard *g;
	struct sockaddr_in a = addr_of("127.0.0.1"), a2 = addr_of("127.0.0.2");
	int sp[2], done[2];
	char b;

	/* fill the ordinary slots so that the next one is reserved: its
	 * deadline is the short one */
	assert_non_null(g = opal_http_guard_new());
	for (int i = 0; i < OPAL_HTTP_MAX_CONNS; i++) {
		char ip[32];
		snprintf(ip, sizeof(ip), "10.%d.%d.1", i / 32 + 1, i % 32);
		assert_non_null(connect_from(g, ip));
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, done), 0);
	assert_true(opal_http_guard_accept(g, (struct sockaddr *)&a, sizeof(a)));
	struct opal_http_guard_conn *slow =
		opal_http_guard_started(g, sp[0], (struct sockaddr *)&a, sizeof(a));
	assert_true(opal_http_guard_accept(g, (struct sockaddr *)&a2, sizeof(a2)));
	struct opal_http_guard_conn *fast =
		opal_http_guard_started(g, done[0], (struct sockaddr *)&a2, sizeof(a2));
	opal_http_guard_headers_done(g, fast);
	/* the slow one is shut down (EOF on its peer) within the deadline */
	struct pollfd p = { .fd = sp[1], .events = POLLIN };
	assert_int_equal(poll(&p, 1, (OPAL_HTTP_RESERVED_HEADER_S + 2) * 1000), 1);
	assert_int_equal(read(sp[1], &b, 1), 0);
	/* the one whose headers completed is left alone */
	p.fd = done[1];
	assert_int_equal(poll(&p, 1, 0), 0);
	opal_http_guard_closed(g, slow);
	opal_http_guard_free(g);
	close(sp[0]);
	close(sp[1]);
	close(done[0]);
	close(done[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_address),
		cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_header_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
