/* For unit tests: an SQLite database path in a fresh folder under /tmp,
 * and its removal with the files SQLite and the cache put next to it. */
#ifndef OPAL_TEST_TMP_DB_H
#define OPAL_TEST_TMP_DB_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `path` (len bytes) becomes /tmp/opal-test-db-XXXXXX/state.db. */
static __attribute__((unused)) void tmp_db(char *path, size_t len)
{
	snprintf(path, len, "/tmp/opal-test-db-XXXXXX");
	assert_non_null(mkdtemp(path));
	strncat(path, "/state.db", len - strlen(path) - 1);
}

/* Removes the database, its -wal/-shm files, a ".corrupt" copy the cache
 * moved aside, and the folder. */
static __attribute__((unused)) void rm_db(const char *path)
{
	char p[PATH_MAX];
	static const char *const sfx[] = { "", "-wal", "-shm", ".corrupt" };
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s", path);
	*strrchr(p, '/') = '\0';
	rmdir(p);
}

#endif
