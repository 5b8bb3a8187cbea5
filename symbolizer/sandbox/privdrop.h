/* Dropping root: to an unprivileged user, with no capabilities left. */
#ifndef OPAL_PRIVDROP_H
#define OPAL_PRIVDROP_H

#include <sys/types.h>

/* Looks up `user` (name or numeric uid) into uid and gid. Returns 0 or
 * -ENOENT. */
int opal_lookup_user(const char *user, uid_t *uid, gid_t *gid);

/* Irreversibly becomes uid/gid: empties the capability bounding set,
 * supplementary groups, then setresgid/setresuid; clears every capability
 * set and sets no_new_privs. Keeps the process dumpable so that
 * /proc/self/fd/<N> paths to descriptors opened before the drop stay usable.
 * Returns 0 or -errno (the caller must exit on error). */
int opal_drop_privileges(uid_t uid, gid_t gid);

#endif
