/* sd_notify protocol over a plain AF_UNIX datagram socket (notify.h). */
#include "shared/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Filled once by opal_notify_init and only read afterwards, so a signal
 * handler may use them. */
static int notify_fd = -1;
static struct sockaddr_un notify_addr;
static socklen_t notify_addr_len;

int opal_notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len;
	int fd;

	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(notify_addr.sun_path))
		return -EINVAL;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&notify_addr, 0, sizeof(notify_addr));
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, path, len);
	/* An abstract address starts with a NUL byte and its length counts
	 * exactly the name's bytes; a path's length includes the terminator. */
	if (path[0] == '@') {
		notify_addr.sun_path[0] = '\0';
		notify_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		notify_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	}
	unsetenv("NOTIFY_SOCKET");
	notify_fd = fd;
	return 1;
}

int opal_notify(const char *msg)
{
	size_t len = strlen(msg);

	if (notify_fd < 0)
		return 0;
	if (len > OPAL_NOTIFY_MAX)
		return -EMSGSIZE;
	/* Each call names the address (no connect()): the manager may re-create
	 * its socket (daemon-reexec), which would orphan a connected one. */
	if (sendto(notify_fd, msg, len, MSG_NOSIGNAL, (const struct sockaddr *)&notify_addr,
		   notify_addr_len) < 0)
		return -errno;
	return 0;
}

int opal_notify_status(const char *fmt, ...)
{
	char msg[OPAL_NOTIFY_MAX + 1] = "STATUS=";
	const size_t prefix = strlen("STATUS=");
	va_list ap;

	if (notify_fd < 0)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg + prefix, sizeof(msg) - prefix, fmt, ap);
	va_end(ap);
	for (char *p = msg + prefix; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return opal_notify(msg);
}

void opal_notify_close(void)
{
	if (notify_fd >= 0)
		close(notify_fd);
	notify_fd = -1;
}
