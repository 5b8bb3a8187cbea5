/* Order of the symbolizer's self-sandbox (sandbox.h). */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sandbox/sandbox_landlock.h"
#include "sandbox/sandbox_seccomp.h"
#include "shared/log.h"

/* Threads of this process from /proc/self/status; -errno if unreadable. */
static int thread_count(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int n = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* Clears every capability set a non-root process may still hold (file
 * capabilities, ambient ones from its starter). Without CAP_SETPCAP the
 * bounding set cannot shrink, but with no_new_privs and empty sets nothing
 * can be regained from it. Returns 0 or -errno. */
static int clear_capabilities(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	bool any = false;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	for (int i = 0; i < 2; i++)
		any |= data[i].effective || data[i].permitted || data[i].inheritable;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	if (!any)
		return 0;   /* capset may be filtered by the service manager: skip it */
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
			return -errno;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

int opal_sandbox_apply(const struct opal_sandbox_config *cfg, struct opal_sandbox_result *result)
{
	uid_t ruid, euid, suid;
	int r;

	*result = (struct opal_sandbox_result){ 0 };
	if ((r = thread_count()) != 1) {
		opal_err("sandbox: must start single-threaded (threads: %d)", r);
		return r < 0 ? r : -EBUSY;
	}
	if (getresuid(&ruid, &euid, &suid) < 0)
		return -errno;
	if (ruid == 0 || euid == 0 || suid == 0) {
		opal_err("sandbox: still root; drop privileges first");
		return -EPERM;
	}
	if ((r = clear_capabilities()) < 0) {
		opal_err("sandbox: clearing capabilities failed: %s", strerror(-r));
		return r;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	result->landlock_kernel_abi = opal_landlock_kernel_abi();
	r = opal_landlock_restrict(cfg, &result->landlock_rules);
	if (r < 0) {
		opal_err("sandbox: Landlock failed: %s", strerror(-r));
		return r;
	}
	result->landlock_abi = r;
	if ((r = opal_seccomp_install(cfg->prog)) < 0)
		return r;
	return 0;
}
