/* Default SQLite VFS that does not resolve symbolic links in paths. */
#include "base/sqlite_vfs.h"

#include <errno.h>
#include <string.h>
#include <sqlite3.h>

static sqlite3_vfs fdpath_vfs;
static sqlite3_vfs *base_vfs;

static int fdpath_full_pathname(sqlite3_vfs *vfs, const char *name, int n_out, char *out)
{
	(void)vfs;
	if (name[0] != '/')
		return base_vfs->xFullPathname(base_vfs, name, n_out, out);
	if ((int)strlen(name) >= n_out)
		return SQLITE_CANTOPEN;
	strcpy(out, name);
	return SQLITE_OK;
}

int opal_sqlite_vfs_register(void)
{
	if (base_vfs)
		return 0;
	base_vfs = sqlite3_vfs_find(NULL);
	if (!base_vfs)
		return -ENOENT;
	fdpath_vfs = *base_vfs;
	fdpath_vfs.zName = "opal-fdpath";
	fdpath_vfs.pNext = NULL;
	fdpath_vfs.xFullPathname = fdpath_full_pathname;
	return sqlite3_vfs_register(&fdpath_vfs, 1) == SQLITE_OK ? 0 : -EINVAL;
}
