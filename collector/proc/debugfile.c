/* Separate debug files by build ID (debugfile.h). */
#include "proc/debugfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "proc/elfinfo.h"

int opal_debugfile_open(int fd, const char *root)
{
	struct opal_elf_info main_info, dbg_info;
	char path[PATH_MAX], hex[2 * OPAL_BUILD_ID_MAX + 1], reopen[64];
	struct stat st;
	int err;

	if ((err = opal_elf_info_from_fd(fd, &main_info)) < 0)
		return err;
	if (main_info.build_id_len < 2)
		return -ENODATA;
	for (size_t i = 0; i < main_info.build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", main_info.build_id[i]);
	if (snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", root, hex, hex + 2) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	int pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) < 0) {
		err = -errno;
		close(pfd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > OPAL_DEBUGFILE_MAX_SIZE) {
		close(pfd);
		return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
	}
	/* the very file looked at, not whatever the path names by now */
	snprintf(reopen, sizeof(reopen), "/proc/self/fd/%d", pfd);
	int dfd = open(reopen, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	err = dfd < 0 ? -errno : 0;
	close(pfd);
	if (err < 0)
		return err;
	if ((err = opal_elf_info_from_fd(dfd, &dbg_info)) < 0 ||
	    dbg_info.build_id_len != main_info.build_id_len ||
	    memcmp(dbg_info.build_id, main_info.build_id, main_info.build_id_len) != 0) {
		close(dfd);
		return err < 0 ? err : -ESTALE;
	}
	return dfd;
}
