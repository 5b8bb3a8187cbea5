/* /proc/PID/maps reader (format: proc(5)). */
#include "procmaps.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELETED_SUFFIX " (deleted)"

int opal_maps_parse_line(const char *line, struct opal_map_entry *out)
{
	uint64_t start, limit, offset, inode;
	unsigned int maj, min;
	char perms[5];
	int path_at = -1;

	memset(out, 0, sizeof(*out));
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
		   &start, &limit, perms, &offset, &maj, &min, &inode, &path_at) < 7)
		return -EINVAL;
	if (limit <= start || strlen(perms) != 4)
		return -EINVAL;
	if (path_at < 0) {
		/* %n is not reached when nothing but whitespace trails the inode */
		path_at = (int)strlen(line);
	}
	const char *p = line + path_at;
	size_t len = strcspn(p, "\n");
	out->path = strndup(p, len);
	if (!out->path)
		return -ENOMEM;
	size_t sl = strlen(DELETED_SUFFIX);
	if (len > sl && strcmp(out->path + len - sl, DELETED_SUFFIX) == 0) {
		out->path[len - sl] = '\0';
		out->deleted = true;
	}
	out->start = start;
	out->limit = limit;
	out->offset = offset;
	out->inode = inode;
	out->dev_major = maj;
	out->dev_minor = min;
	out->readable = perms[0] == 'r';
	out->writable = perms[1] == 'w';
	out->executable = perms[2] == 'x';
	out->shared = perms[3] == 's';
	return 0;
}

static int cmp_start(const void *a, const void *b)
{
	const struct opal_map_entry *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int opal_maps_read(pid_t pid, const char *path, struct opal_map_entry **out, size_t *n)
{
	char pbuf[64];
	struct opal_map_entry *v = NULL;
	size_t len = 0, cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	int err = 0;

	if (!path) {
		snprintf(pbuf, sizeof(pbuf), "/proc/%d/maps", (int)pid);
		path = pbuf;
	}
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &lcap, f) > 0) {
		if (len == OPAL_MAPS_MAX_ENTRIES) {
			err = -E2BIG;
			break;
		}
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct opal_map_entry *nv = realloc(v, ncap * sizeof(*v));
			if (!nv) {
				err = -ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		int r = opal_maps_parse_line(line, &v[len]);
		if (r == -ENOMEM) {
			err = r;
			break;
		}
		if (r == 0)
			len++;
	}
	if (ferror(f) && !err)
		err = -EIO;
	free(line);
	fclose(f);
	if (err && err != -E2BIG) {
		opal_maps_free(v, len);
		return err;
	}
	qsort(v, len, sizeof(*v), cmp_start);
	*out = v;
	*n = len;
	return err;
}

void opal_maps_free(struct opal_map_entry *entries, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(entries[i].path);
	free(entries);
}

const struct opal_map_entry *opal_maps_find(const struct opal_map_entry *e, size_t n,
					    uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < e[mid].start)
			hi = mid;
		else if (addr >= e[mid].limit)
			lo = mid + 1;
		else
			return &e[mid];
	}
	return NULL;
}
