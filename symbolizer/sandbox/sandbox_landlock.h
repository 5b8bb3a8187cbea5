/* Landlock part of the symbolizer's sandbox: after it, the process can open
 * only its state and output folders (read-write), /usr/lib/debug, the
 * folders of the shared libraries it has loaded, locale and time-zone data,
 * TLS trust (/etc/ssl, /usr/share/ca-certificates), name resolution files
 * (/etc/hosts, /etc/resolv.conf, /etc/nsswitch.conf, /etc/gai.conf,
 * /etc/host.conf, /etc/services), /dev/null, /dev/urandom, CPU topology in
 * /sys/devices/system/cpu, and /proc/self (read-only unless stated).
 * Kernel documentation: Documentation/userspace-api/landlock.rst. */
#ifndef OPAL_SANDBOX_LANDLOCK_H
#define OPAL_SANDBOX_LANDLOCK_H

#include <stddef.h>
#include "sandbox/sandbox.h"

/* Highest Landlock ABI this build knows: Debian 12's linux/landlock.h
 * defines the access rights of ABI 1 and 2 only. */
#define OPAL_LANDLOCK_ABI_MAX 2

/* The kernel's Landlock ABI version (which may exceed what we use), 0 when
 * Landlock is not built in or disabled at boot, -errno otherwise. */
int opal_landlock_kernel_abi(void);

/* Restricts the calling thread and every thread or child it creates
 * afterwards (so call it while single-threaded). cfg->rw_dirs: existing
 * folders (paths, /proc/self/fd/N accepted) granted read, write, create,
 * remove and rename beneath them; a missing one is an error.
 * cfg->ro_dirs: folders (or files) granted read only; a missing one is
 * skipped. cfg->unlink_dir, when set and present, may only have entries
 * removed.
 * Paths of the built-in list that do not exist on this machine are
 * skipped. Requires no_new_privs. Sets *n_rules to the rules added.
 * Returns the ABI used (1 or 2), 0 when the kernel has no Landlock (nothing
 * restricted), or -errno (the process may be unrestricted; callers treat
 * it as fatal). */
int opal_landlock_restrict(const struct opal_sandbox_config *cfg, unsigned *n_rules);

#endif
