/* Privilege drop for the symbolizer when started as root (--user). */
#include "sandbox/privdrop.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int opal_lookup_user(const char *user, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(user);
	char *end;

	if (!pw) {
		unsigned long v = strtoul(user, &end, 10);
		if (*user && !*end)
			pw = getpwuid((uid_t)v);
	}
	if (!pw)
		return -ENOENT;
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

int opal_drop_privileges(uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };

	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	if (setgroups(0, NULL) < 0)
		return -errno;
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* A credential change clears dumpable, which would make /proc/self/fd
	 * (our way to reach folders opened before the drop) root-owned. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return -errno;
	if (setuid(0) == 0)
		return -EPERM;
	return 0;
}
