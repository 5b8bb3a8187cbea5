/* Landlock file-access ruleset of the symbolizer (sandbox_landlock.h).
 * glibc 2.36 has no wrappers: the three system calls are made directly. */
#include "sandbox/sandbox_landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <linux/landlock.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "shared/log.h"

/* Distinct folders of loaded shared objects we grant; more is unusual
 * enough (each library from its own folder) to be reported and cut. */
#define MAX_LIB_DIRS 32

#define RIGHTS_ABI1                                                                          \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                        \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                        \
	 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                    \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                        \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                        \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                      \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)
#define RIGHTS_ABI2 (RIGHTS_ABI1 | LANDLOCK_ACCESS_FS_REFER)

/* Rights a rule on a non-directory may carry (the kernel rejects others). */
#define FILE_RIGHTS \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE)

#define RO (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define RW                                                                                   \
	(RO | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |                      \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_REFER)

struct fixed_rule {
	const char *path;
	uint64_t rights;
};

/* What the symbolizer reads besides its own folders, and why. */
static const struct fixed_rule fixed_rules[] = {
	{ "/usr/lib/debug", RO },                    /* separate debug info by build ID */
	{ "/etc/ld.so.cache", RO },                  /* dlopen of NSS modules */
	{ "/usr/lib/locale", RO },                   /* locale data for strerror etc. */
	{ "/usr/share/locale", RO },
	{ "/etc/localtime", RO },                    /* local time zone */
	{ "/usr/share/zoneinfo", RO },
	{ "/etc/ssl", RO },                          /* OpenSSL configuration and CA store */
	{ "/usr/share/ca-certificates", RO },        /* targets of /etc/ssl/certs links */
	{ "/etc/hosts", RO },                        /* name resolution */
	{ "/etc/resolv.conf", RO },
	{ "/etc/nsswitch.conf", RO },
	{ "/etc/gai.conf", RO },
	{ "/etc/host.conf", RO },
	{ "/etc/services", RO },
	{ "/sys/devices/system/cpu", RO },           /* glibc's CPU count */
	{ "/dev/urandom", RO },                      /* SQLite's seed */
	{ "/dev/null", RO | LANDLOCK_ACCESS_FS_WRITE_FILE },
	/* Our own process: thread names, fd links to the folders held open. */
	{ "/proc/self", RO | LANDLOCK_ACCESS_FS_WRITE_FILE },
};

static int ll_create_ruleset(const struct landlock_ruleset_attr *attr, size_t size,
			     uint32_t flags)
{
	return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

static int ll_add_rule(int ruleset, const struct landlock_path_beneath_attr *rule)
{
	return (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0);
}

static int ll_restrict_self(int ruleset)
{
	return (int)syscall(SYS_landlock_restrict_self, ruleset, 0);
}

int opal_landlock_kernel_abi(void)
{
	int abi = ll_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	if (abi >= 0)
		return abi;
	return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -errno;
}

struct ruleset {
	int fd;
	uint64_t handled;
	unsigned n_rules;
};

/* Adds a rule for `path` (following symlinks) with `rights` limited to what
 * the ruleset handles and to what the file type allows. A missing path is
 * skipped unless `required`. Returns 0 or -errno. */
static int add_path(struct ruleset *rs, const char *path, uint64_t rights, bool required)
{
	struct landlock_path_beneath_attr rule = { 0 };
	struct stat st;
	int fd, r = 0;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (!required && (r == -ENOENT || r == -EACCES || r == -ENOTDIR)) {
			opal_debug("landlock: %s skipped: %s", path, strerror(-r));
			return 0;
		}
		opal_err("landlock: cannot open %s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISDIR(st.st_mode))
		rights &= FILE_RIGHTS;
	rule.allowed_access = rights & rs->handled;
	if (!rule.allowed_access)
		goto out;   /* nothing grantable on this file type */
	rule.parent_fd = fd;
	if (ll_add_rule(rs->fd, &rule) < 0) {
		r = -errno;
		opal_err("landlock: rule for %s refused: %s", path, strerror(-r));
		goto out;
	}
	rs->n_rules++;
out:
	close(fd);
	return r;
}

struct lib_dirs {
	char dirs[MAX_LIB_DIRS][PATH_MAX];
	size_t n;
	bool truncated;
};

/* dl_iterate_phdr callback: records the folder of each loaded object that
 * has a path (the main program has "" and the vDSO a bare name). */
static int collect_lib_dir(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lib_dirs *ld = arg;
	char buf[PATH_MAX], *dir;

	(void)size;
	if (!info->dlpi_name || !strchr(info->dlpi_name, '/'))
		return 0;
	if (snprintf(buf, sizeof(buf), "%s", info->dlpi_name) >= (int)sizeof(buf))
		return 0;
	dir = dirname(buf);
	for (size_t i = 0; i < ld->n; i++)
		if (!strcmp(ld->dirs[i], dir))
			return 0;
	if (ld->n == MAX_LIB_DIRS) {
		ld->truncated = true;
		return 0;
	}
	snprintf(ld->dirs[ld->n++], PATH_MAX, "%s", dir);
	return 0;
}

/* /etc/resolv.conf is often a link into a folder whose file a resolver
 * daemon replaces (e.g. /run/systemd/resolve): grant that folder so that a
 * replaced file stays readable. Returns 0 or -errno. */
static int add_resolv_conf_dir(struct ruleset *rs)
{
	char real[PATH_MAX];

	if (!realpath("/etc/resolv.conf", real))
		return 0;
	char *dir = dirname(real);
	if (!strcmp(dir, "/etc"))
		return 0;
	return add_path(rs, dir, RO, false);
}

int opal_landlock_restrict(const struct opal_sandbox_config *cfg, unsigned *n_rules)
{
	struct landlock_ruleset_attr attr = { 0 };
	struct ruleset rs = { .fd = -1 };
	struct lib_dirs *libs;
	int abi, r = 0;

	*n_rules = 0;
	abi = opal_landlock_kernel_abi();
	if (abi <= 0)
		return abi;
	if (abi > OPAL_LANDLOCK_ABI_MAX)
		abi = OPAL_LANDLOCK_ABI_MAX;
	rs.handled = abi >= 2 ? RIGHTS_ABI2 : RIGHTS_ABI1;
	attr.handled_access_fs = rs.handled;
	rs.fd = ll_create_ruleset(&attr, sizeof(attr), 0);
	if (rs.fd < 0)
		return -errno;
	libs = calloc(1, sizeof(*libs));
	if (!libs) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < cfg->n_rw_dirs && r == 0; i++)
		r = add_path(&rs, cfg->rw_dirs[i], RW, true);
	for (size_t i = 0; i < cfg->n_ro_dirs && r == 0; i++)
		r = add_path(&rs, cfg->ro_dirs[i], RO, false);
	if (r == 0 && cfg->unlink_dir)
		r = add_path(&rs, cfg->unlink_dir, LANDLOCK_ACCESS_FS_REMOVE_FILE, false);
	for (size_t i = 0; i < sizeof(fixed_rules) / sizeof(fixed_rules[0]) && r == 0; i++)
		r = add_path(&rs, fixed_rules[i].path, fixed_rules[i].rights, false);
	if (r == 0)
		r = add_resolv_conf_dir(&rs);
	dl_iterate_phdr(collect_lib_dir, libs);
	if (libs->truncated)
		opal_warn("landlock: more than %d library folders; later ones not granted",
			  MAX_LIB_DIRS);
	for (size_t i = 0; i < libs->n && r == 0; i++)
		r = add_path(&rs, libs->dirs[i], RO, false);
	if (r == 0 && ll_restrict_self(rs.fd) < 0)
		r = -errno;
	free(libs);
out:
	close(rs.fd);
	*n_rules = rs.n_rules;
	return r < 0 ? r : abi;
}
