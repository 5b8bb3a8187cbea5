/* Creating a folder and its missing parents, as `mkdir -p` does, for the
 * daemon's --state-dir and --out-dir. */
#ifndef OPAL_MKDIRS_H
#define OPAL_MKDIRS_H

#include <stdbool.h>
#include <sys/types.h>

#define OPAL_MKDIRS_MAX_DEPTH 64   /* path components created at most */

/* Creates folder `path` with mode `mode` and each of its missing parents
 * with mode 0755 (exactly: the umask does not apply), parents first. An existing
 * folder at `path` is no error and keeps its mode; *created (may be NULL)
 * tells whether `path` itself was made. Returns 0, -ENOTDIR when `path` or
 * a parent exists as something else, -ENAMETOOLONG beyond PATH_MAX bytes
 * or OPAL_MKDIRS_MAX_DEPTH components, -EINVAL for an empty path, or the
 * -errno of mkdir(2). */
int opal_mkdirs(const char *path, mode_t mode, bool *created);

#endif
