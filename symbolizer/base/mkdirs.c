/* mkdir -p (mkdirs.h). */
#include "base/mkdirs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir of one folder; an existing folder is fine. */
static int make_one(const char *path, mode_t mode, bool *made)
{
	struct stat st;

	*made = false;
	if (mkdir(path, mode) == 0) {
		*made = true;
		chmod(path, mode);   /* the mode asked for, whatever the umask */
		return 0;
	}
	int err = errno;
	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	return -err;
}

int opal_mkdirs(const char *path, mode_t mode, bool *created)
{
	char p[PATH_MAX];
	size_t len = path ? strlen(path) : 0;
	unsigned depth = 0;
	bool made = false;

	if (created)
		*created = false;
	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, len + 1);
	while (len > 1 && p[len - 1] == '/')   /* "a/b/" names "a/b" */
		p[--len] = '\0';
	/* The parents end at every '/' after the first character that follows
	 * another character than '/' (a leading '/' is the root). */
	for (const char *s = p + 1; *s; s++)
		if (*s == '/' && s[-1] != '/' && ++depth > OPAL_MKDIRS_MAX_DEPTH)
			return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/' || s[-1] == '/')
			continue;
		*s = '\0';
		int err = make_one(p, 0755, &made);
		*s = '/';
		if (err < 0)
			return err;
	}
	int err = make_one(p, mode, &made);
	if (err == 0 && created)
		*created = made;
	return err;
}
