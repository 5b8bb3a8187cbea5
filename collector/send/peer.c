/* The collector's peer and socket-folder checks (peer.h). */
#include "send/peer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool opal_peer_uid_trusted(const struct opal_peer_policy *p, uid_t uid)
{
	return uid == 0 || (p->symbolizer_uid != 0 && uid == p->symbolizer_uid);
}

/* One folder: `own` says whether it is the socket's own (no sticky
 * exception there: anyone could create the socket's name first). */
static int check_one(const struct opal_peer_policy *p, const char *dir, bool own, char *why,
		     size_t why_len)
{
	struct stat st;

	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "%s is not a folder", dir);
		return -EPERM;
	}
	if (!opal_peer_uid_trusted(p, st.st_uid)) {
		snprintf(why, why_len, "%s belongs to uid %u, neither root nor the symbolizer's user",
			 dir, (unsigned)st.st_uid);
		return -EPERM;
	}
	if (!(st.st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	if (!own && (st.st_mode & S_ISVTX) && st.st_uid == 0)
		return 0;
	snprintf(why, why_len, "%s (mode %04o) is writable by users other than root and the "
		 "symbolizer's: another user could put a listener of their own on the socket path",
		 dir, (unsigned)(st.st_mode & 07777));
	return -EPERM;
}

int opal_socket_dir_check(const struct opal_peer_policy *p, const char *sock_path, char *why,
			  size_t why_len)
{
	char dir[PATH_MAX], real[PATH_MAX];
	char *slash;
	int err;

	snprintf(why, why_len, "%s", "");
	if (strlen(sock_path) >= sizeof(dir))
		return -ENAMETOOLONG;
	strcpy(dir, sock_path);
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (!realpath(dir, real))
		return -errno;
	for (bool own = true;; own = false) {
		if ((err = check_one(p, real, own, why, why_len)) < 0)
			return err;
		if (!strcmp(real, "/"))
			return 0;
		slash = strrchr(real, '/');
		if (slash == real)
			real[1] = '\0';
		else
			*slash = '\0';
	}
}
