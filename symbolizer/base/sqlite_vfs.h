/* SQLite VFS for databases reached through /proc/self/fd/<N>/... paths. */
#ifndef OPAL_SQLITE_VFS_H
#define OPAL_SQLITE_VFS_H

/* Registers, as SQLite's default VFS, a thin layer over the platform VFS
 * whose only change is that xFullPathname keeps absolute paths as given.
 * The platform VFS resolves symbolic links, which turns
 * /proc/self/fd/<N>/state.db (a folder opened before the privilege drop)
 * back into a path the dropped user may not be allowed to walk. Call once,
 * before opening any database. Returns 0 or -ENOENT when SQLite has no
 * default VFS. */
int opal_sqlite_vfs_register(void);

#endif
