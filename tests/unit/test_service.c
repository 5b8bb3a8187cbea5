/* Unit tests of shared/service.c: the daemons' signal dispositions (with
 * the STOPPING=1 notification a stop sends) and the descriptor limit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shared/notify.h"
#include "shared/service.h"

/* SIGTERM and SIGINT count stops and notify STOPPING=1, SIGHUP sets the
 * reload flag, SIGPIPE is ignored; only SIGHUP restarts system calls. */
static void test_signals(void **state)
{
	(void)state;
	char path[64], buf[64];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sigaction cur;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(path, sizeof(path), "/tmp/opal-test-service-%d", (int)getpid());
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(opal_notify_init(), 1);

	opal_service_signals();
	assert_int_equal(raise(SIGTERM), 0);
	assert_int_equal(opal_stop_signals, 1);
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	assert_int_equal(n, 10);
	buf[n] = '\0';
	assert_string_equal(buf, "STOPPING=1");
	assert_int_equal(raise(SIGINT), 0);
	assert_int_equal(opal_stop_signals, 2);
	assert_int_equal(opal_reload_signal, 0);
	assert_int_equal(raise(SIGHUP), 0);
	assert_int_equal(opal_reload_signal, 1);
	assert_int_equal(raise(SIGPIPE), 0);   /* still alive: ignored */

	assert_int_equal(sigaction(SIGTERM, NULL, &cur), 0);
	assert_int_equal(cur.sa_flags & SA_RESTART, 0);
	assert_int_equal(sigaction(SIGHUP, NULL, &cur), 0);
	assert_int_not_equal(cur.sa_flags & SA_RESTART, 0);
	assert_int_equal(sigaction(SIGPIPE, NULL, &cur), 0);
	assert_true(cur.sa_handler == SIG_IGN);

	opal_notify_close();
	close(fd);
	unlink(path);
}

/* A lowered soft limit comes back up to the hard one, and the call says
 * what is in force. */
static void test_raise_nofile(void **state)
{
	(void)state;
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max > 64) {
		rl.rlim_cur = 64;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	rlim_t got = opal_raise_nofile();
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_true(rl.rlim_cur == rl.rlim_max);
	assert_true(got == rl.rlim_cur);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signals),
		cmocka_unit_test(test_raise_nofile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
