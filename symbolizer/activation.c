/* Inherited listening socket of systemd socket activation (activation.h). */
#include "activation.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Parses a decimal unsigned number that must fill the whole string. */
static int parse_ulong(const char *s, unsigned long *v)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoul(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

static int check_socket(int fd)
{
	int domain, type, listening;
	socklen_t len = sizeof(int);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
		return errno == ENOTSOCK ? -ENOTSOCK : -errno;
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
		return -errno;
	if (domain != AF_UNIX || type != SOCK_STREAM || !listening)
		return -ENOTSOCK;
	return 0;
}

int opal_activation_listen_fd(void)
{
	const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
	unsigned long pid, n;
	int r, fd = OPAL_LISTEN_FDS_START;

	if (!pid_s) {
		r = 0;
		goto out;
	}
	if (parse_ulong(pid_s, &pid) < 0 || parse_ulong(fds_s, &n) < 0) {
		r = -EINVAL;
		goto out;
	}
	/* The variables may have leaked from a parent that was activated. */
	if (pid != (unsigned long)getpid() || n == 0) {
		r = 0;
		goto out;
	}
	if (n != 1) {
		r = -EINVAL;
		goto out;
	}
	if ((r = check_socket(fd)) < 0)
		goto out;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	r = fd;
out:
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return r;
}
