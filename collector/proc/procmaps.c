/* /proc/PID/maps reader (format: proc(5)). */
#include "proc/procmaps.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELETED_SUFFIX " (deleted)"

/* Parses a hex number ending at `stop` (a char that must follow it).
 * Rejects signs, "0x" prefixes and values beyond 64 bits. */
static const char *parse_hex(const char *p, char stop, uint64_t *out)
{
	char *end;

	if (!isxdigit((unsigned char)*p))
		return NULL;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 16);
	if (errno == ERANGE || *end != stop || (end - p > 1 && p[1] == 'x'))
		return NULL;
	*out = v;
	return end + 1;
}

static bool perm_ok(const char *p)
{
	return (p[0] == 'r' || p[0] == '-') && (p[1] == 'w' || p[1] == '-') &&
	       (p[2] == 'x' || p[2] == '-') && (p[3] == 'p' || p[3] == 's') && p[4] == ' ';
}

int opal_maps_parse_line(const char *line, struct opal_map_entry *out)
{
	uint64_t start, limit, offset, maj, min, inode;
	const char *p = line;
	char *end;

	memset(out, 0, sizeof(*out));
	if (!(p = parse_hex(p, '-', &start)) || !(p = parse_hex(p, ' ', &limit)))
		return -EINVAL;
	if (limit <= start || !perm_ok(p))
		return -EINVAL;
	out->readable = p[0] == 'r';
	out->writable = p[1] == 'w';
	out->executable = p[2] == 'x';
	out->shared = p[3] == 's';
	p += 5;
	if (!(p = parse_hex(p, ' ', &offset)) || !(p = parse_hex(p, ':', &maj)) ||
	    !(p = parse_hex(p, ' ', &min)) || maj > UINT32_MAX || min > UINT32_MAX)
		return -EINVAL;
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	errno = 0;
	inode = strtoull(p, &end, 10);
	if (errno == ERANGE || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -EINVAL;
	p = end;
	while (*p == ' ')
		p++;
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
	out->dev_major = (uint32_t)maj;
	out->dev_minor = (uint32_t)min;
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
		return errno == ENOENT && path == pbuf ? -ESRCH : -errno;
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
	if (len > 1)
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

bool opal_maps_is_jit(const struct opal_map_entry *m)
{
	return m->executable && m->inode == 0 &&
	       (m->path[0] == '\0' || strncmp(m->path, "[anon:", 6) == 0);
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
