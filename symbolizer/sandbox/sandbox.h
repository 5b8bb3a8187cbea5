/* The symbolizer's self-sandbox, applied once it holds everything it opens
 * by privilege (socket, state and output folders) and before it reads any
 * collector input: no capabilities, no_new_privs, a Landlock file-access
 * ruleset where the kernel has Landlock (sandbox_landlock.h), and a
 * seccomp allow-list (sandbox_seccomp.h). It applies the same way whether
 * the symbolizer dropped root itself (--user), was started by an
 * unprivileged user, or runs under systemd's own sandboxing. */
#ifndef OPAL_SANDBOX_H
#define OPAL_SANDBOX_H

#include <stddef.h>

struct opal_sandbox_config {
	const char *prog;                 /* log name; must outlive the process */
	const char *const *rw_dirs;       /* n_rw_dirs folders kept writable */
	size_t n_rw_dirs;
	const char *unlink_dir;           /* folder whose entries may be removed (the
					   * socket's, to remove it at exit), or NULL */
	const char *const *ro_dirs;       /* n_ro_dirs folders kept readable (the config
					   * file's, so SIGHUP can read it again) */
	size_t n_ro_dirs;
};

struct opal_sandbox_result {
	int landlock_kernel_abi;          /* what the kernel offers; 0: no Landlock */
	int landlock_abi;                 /* what was applied; 0: no Landlock */
	unsigned landlock_rules;
};

/* Applies the sandbox to the whole process. It must still be
 * single-threaded (Landlock restricts only the calling thread and its
 * future threads): -EBUSY otherwise. Refuses to run with uid or euid 0
 * (-EPERM): root without capabilities still owns root's files, so the
 * privilege drop comes first. A kernel without Landlock is not an error
 * (result->landlock_abi = 0, logged by the caller). Returns 0 or -errno;
 * after an error the process is partly restricted and must exit. */
int opal_sandbox_apply(const struct opal_sandbox_config *cfg, struct opal_sandbox_result *result);

#endif
