/* Atomic output file replacement (atomic_file.h). */
#include "base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

static int write_replace(const char *path, const uint8_t *buf, size_t len, bool sync)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int err = 0;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, buf + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		done += (size_t)n;
	}
	/* fsync before rename: after a crash the new name must not point at a
	 * file whose data never reached the disk. */
	if (sync && !err && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int opal_outfile_write(const char *path, const uint8_t *buf, size_t len)
{
	return write_replace(path, buf, len, true);
}

int opal_outfile_write_unsynced(const char *path, const uint8_t *buf, size_t len)
{
	return write_replace(path, buf, len, false);
}
