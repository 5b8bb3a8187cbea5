/* Unit tests of shared/notify.c (sd_notify protocol) and
 * symbolizer/activation.c (sd_listen_fds protocol): datagrams received on a
 * real socket standing in for systemd's, descriptors passed as fd 3. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shared/notify.h"
#include "symbolizer/activation.h"

/* Binds a datagram socket at `name` (a path, or abstract when it starts
 * with '@') and returns it. */
static int bind_receiver(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	socklen_t sl;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(len < sizeof(sa.sun_path));
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@') {
		sa.sun_path[0] = '\0';
		sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		unlink(name);
		sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	}
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sl), 0);
	return fd;
}

/* Receives one datagram without blocking into buf (NUL-terminated). */
static void recv_msg(int fd, char *buf, size_t cap)
{
	ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);

	assert_true(n >= 0);
	buf[n] = '\0';
}

static void test_notify_path(void **state)
{
	char path[64], buf[1024];
	(void)state;

	snprintf(path, sizeof(path), "/tmp/opal-test-notify-%d", (int)getpid());
	int rx = bind_receiver(path);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(opal_notify_init(), 1);
	assert_null(getenv("NOTIFY_SOCKET"));   /* not passed on to children */

	assert_int_equal(opal_notify("READY=1"), 0);
	recv_msg(rx, buf, sizeof(buf));
	assert_string_equal(buf, "READY=1");

	assert_int_equal(opal_notify_status("%d intervals\nwritten", 3), 0);
	recv_msg(rx, buf, sizeof(buf));
	assert_string_equal(buf, "STATUS=3 intervals written");

	/* Over-long texts are cut to one bounded datagram. */
	char big[2 * OPAL_NOTIFY_MAX];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(opal_notify_status("%s", big), 0);
	recv_msg(rx, buf, sizeof(buf));
	assert_int_equal(strlen(buf), OPAL_NOTIFY_MAX);
	assert_int_equal(opal_notify(big), -EMSGSIZE);

	opal_notify_close();
	assert_int_equal(opal_notify("STOPPING=1"), 0);   /* closed: a no-op */
	assert_int_equal(recv(rx, buf, sizeof(buf), MSG_DONTWAIT), -1);
	close(rx);
	unlink(path);
}

static void test_notify_abstract(void **state)
{
	char name[64], buf[256];
	(void)state;

	snprintf(name, sizeof(name), "@opal-test-notify-%d", (int)getpid());
	int rx = bind_receiver(name);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(opal_notify_init(), 1);
	assert_int_equal(opal_notify("STOPPING=1"), 0);
	recv_msg(rx, buf, sizeof(buf));
	assert_string_equal(buf, "STOPPING=1");
	opal_notify_close();
	close(rx);
}

static void test_notify_disabled_and_bad(void **state)
{
	(void)state;

	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(opal_notify_init(), 0);
	assert_int_equal(opal_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(opal_notify_init(), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
}

/* Puts a listening AF_UNIX stream socket (or, with `kind` 'p', a pipe end;
 * with 'd', an unbound datagram socket) at fd 3 and sets the LISTEN_*
 * variables for process `pid` with `n` descriptors. */
static void pass_fd3(char kind, const char *pid, const char *n)
{
	int fd, p[2];
	char path[64];

	if (kind == 'p') {
		assert_int_equal(pipe(p), 0);
		fd = p[0];
		close(p[1]);
	} else if (kind == 'd') {
		fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(path, sizeof(path), "/tmp/opal-test-listen-%d", (int)getpid());
		unlink(path);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(listen(fd, 1), 0);
		unlink(path);
	}
	assert_true(fd >= 0);
	if (fd != OPAL_LISTEN_FDS_START) {
		assert_int_equal(dup2(fd, OPAL_LISTEN_FDS_START), OPAL_LISTEN_FDS_START);
		close(fd);
	}
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", n, 1);
	setenv("LISTEN_FDNAMES", "collector", 1);
}

static void test_activation(void **state)
{
	char self[32], other[32];
	(void)state;

	snprintf(self, sizeof(self), "%d", (int)getpid());
	snprintf(other, sizeof(other), "%d", (int)getpid() + 1);
	/* fd 3 is where systemd passes sockets: keep whatever the test runner
	 * left there and put it back afterwards. */
	int saved = fcntl(OPAL_LISTEN_FDS_START, F_DUPFD_CLOEXEC, 10);

	unsetenv("LISTEN_PID");
	assert_int_equal(opal_activation_listen_fd(), 0);

	pass_fd3('s', self, "1");
	int fd = opal_activation_listen_fd();
	assert_int_equal(fd, OPAL_LISTEN_FDS_START);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_null(getenv("LISTEN_PID"));
	assert_null(getenv("LISTEN_FDS"));
	assert_null(getenv("LISTEN_FDNAMES"));

	pass_fd3('s', other, "1");      /* meant for another process */
	assert_int_equal(opal_activation_listen_fd(), 0);
	pass_fd3('s', self, "2");
	assert_int_equal(opal_activation_listen_fd(), -EINVAL);
	pass_fd3('s', self, "1x");
	assert_int_equal(opal_activation_listen_fd(), -EINVAL);
	pass_fd3('p', self, "1");
	assert_int_equal(opal_activation_listen_fd(), -ENOTSOCK);
	pass_fd3('d', self, "1");
	assert_int_equal(opal_activation_listen_fd(), -ENOTSOCK);
	close(OPAL_LISTEN_FDS_START);
	if (saved >= 0) {
		dup2(saved, OPAL_LISTEN_FDS_START);
		close(saved);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notify_path),
		cmocka_unit_test(test_notify_abstract),
		cmocka_unit_test(test_notify_disabled_and_bad),
		cmocka_unit_test(test_activation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
