/* Recent profiles folder (recent.h). */
#include "recent.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "outfile.h"

#define PREFIX "recent-"
#define SUFFIX ".pb.gz"
#define TMP_SUFFIX ".tmp"

struct opal_recent {
	char dir[PATH_MAX - 128];   /* room for a name below it */
	uint64_t max_files, max_bytes, max_age_s;   /* atomics: read by HTTP threads */
};

static uint64_t load_u64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void store_u64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Parses "recent-S-E-RUN-SEQ.pb.gz"; false for any other name. */
static bool parse_name(const char *name, uint64_t *start, uint64_t *end)
{
	unsigned long long s, e, run, seq;
	int used = 0;
	size_t len = strlen(name), sl = strlen(SUFFIX);

	if (strncmp(name, PREFIX, strlen(PREFIX)) != 0 || len <= sl ||
	    strcmp(name + len - sl, SUFFIX) != 0)
		return false;
	if (sscanf(name, PREFIX "%19llu-%19llu-%16llx-%llu%n", &s, &e, &run, &seq, &used) != 4 ||
	    (size_t)used != len - sl || e < s)
		return false;
	*start = s;
	*end = e;
	return true;
}

static int is_profile(const struct dirent *d)
{
	uint64_t s, e;

	return parse_name(d->d_name, &s, &e);
}

static int is_tmp(const struct dirent *d)
{
	size_t len = strlen(d->d_name), tl = strlen(TMP_SUFFIX);

	return strncmp(d->d_name, PREFIX, strlen(PREFIX)) == 0 && len > tl &&
	       strcmp(d->d_name + len - tl, TMP_SUFFIX) == 0;
}

static void free_names(struct dirent **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Deletes, oldest first, what exceeds the limits: ended more than
 * max_age_s before `now_ns`, beyond max_files, or beyond max_bytes
 * counted from the newest. */
static void rotate(struct opal_recent *r, uint64_t now_ns)
{
	struct dirent **names;
	int n = scandir(r->dir, &names, is_profile, alphasort);
	uint64_t max_files = load_u64(&r->max_files), max_bytes = load_u64(&r->max_bytes);
	uint64_t age_ns = load_u64(&r->max_age_s) * 1000000000ull;
	uint64_t bytes = 0, deleted = 0;
	char path[PATH_MAX + 256];

	if (n < 0) {
		opal_warn("recent profiles: cannot list %s: %s", r->dir, strerror(errno));
		return;
	}
	/* From the newest down: once a bound is crossed, everything older goes. */
	bool over = false;
	for (int i = n - 1; i >= 0; i--) {
		uint64_t start, end;
		struct stat st;

		parse_name(names[i]->d_name, &start, &end);
		snprintf(path, sizeof(path), "%s/%s", r->dir, names[i]->d_name);
		if (!over && stat(path, &st) == 0)
			bytes += (uint64_t)st.st_size;
		if (!over && ((uint64_t)(n - i) > max_files || bytes > max_bytes ||
			      (now_ns > age_ns && end < now_ns - age_ns)))
			over = true;
		if (over && unlink(path) == 0)
			deleted++;
	}
	free_names(names, n);
	if (deleted)
		opal_debug("recent profiles: %" PRIu64 " old ones deleted", deleted);
}

static uint64_t now_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int opal_recent_open(const char *dir, const struct opal_recent_limits *l,
		     struct opal_recent **out)
{
	struct opal_recent *r;
	struct dirent **names;
	char path[PATH_MAX + 256];
	int n;

	if (strlen(dir) >= sizeof(r->dir))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	strcpy(r->dir, dir);
	n = scandir(dir, &names, is_tmp, alphasort);
	if (n < 0) {
		int err = -errno;
		free(r);
		return err;
	}
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		unlink(path);
	}
	free_names(names, n);
	opal_recent_set_limits(r, l);
	*out = r;
	return 0;
}

void opal_recent_close(struct opal_recent *r)
{
	free(r);
}

void opal_recent_set_limits(struct opal_recent *r, const struct opal_recent_limits *l)
{
	store_u64(&r->max_files, l->max_files);
	store_u64(&r->max_bytes, l->max_bytes);
	store_u64(&r->max_age_s, l->max_age_s);
	rotate(r, now_unix_ns());
}

const char *opal_recent_dir(const struct opal_recent *r)
{
	return r->dir;
}

uint64_t opal_recent_max_age_s(const struct opal_recent *r)
{
	return load_u64(&r->max_age_s);
}

int opal_recent_add(struct opal_recent *r, const uint8_t *pprof_gz, size_t len,
		    uint64_t start_unix_ns, uint64_t end_unix_ns, uint64_t run_id, uint64_t seq,
		    uint64_t now_unix_ns)
{
	char path[PATH_MAX + 256];
	int err = 0;

	if (end_unix_ns < start_unix_ns)
		end_unix_ns = start_unix_ns;
	if (load_u64(&r->max_files) > 0 && len <= load_u64(&r->max_bytes)) {
		snprintf(path, sizeof(path), "%s/" PREFIX "%019" PRIu64 "-%019" PRIu64 "-%016" PRIx64
			 "-%06" PRIu64 SUFFIX, r->dir, start_unix_ns, end_unix_ns, run_id, seq);
		err = opal_outfile_write(path, pprof_gz, len);
	}
	rotate(r, now_unix_ns);
	return err;
}

int opal_recent_list(struct opal_recent *r, uint64_t from_unix_ns, uint64_t to_unix_ns,
		     size_t max, struct opal_recent_entry **out, size_t *n_out)
{
	struct dirent **names;
	struct opal_recent_entry *e = NULL;
	size_t k = 0;
	int n = scandir(r->dir, &names, is_profile, alphasort);

	*out = NULL;
	*n_out = 0;
	if (n < 0)
		return -errno;
	/* Newest first, so that `max` keeps the newest; reversed below. */
	for (int i = n - 1; i >= 0 && k < max; i--) {
		uint64_t start, end;
		struct stat st;

		parse_name(names[i]->d_name, &start, &end);
		if (end < from_unix_ns || (to_unix_ns && start > to_unix_ns))
			continue;
		if (!e && !(e = calloc(max < (size_t)n ? max : (size_t)n, sizeof(*e)))) {
			free_names(names, n);
			return -ENOMEM;
		}
		char path[PATH_MAX + 256];
		snprintf(path, sizeof(path), "%s/%s", r->dir, names[i]->d_name);
		if (strlen(names[i]->d_name) >= sizeof(e[k].name) || stat(path, &st) < 0)
			continue;   /* rotated away meanwhile */
		strcpy(e[k].name, names[i]->d_name);
		e[k].start_unix_ns = start;
		e[k].end_unix_ns = end;
		e[k].bytes = (uint64_t)st.st_size;
		k++;
	}
	free_names(names, n);
	for (size_t i = 0; i < k / 2; i++) {
		struct opal_recent_entry t = e[i];
		e[i] = e[k - 1 - i];
		e[k - 1 - i] = t;
	}
	*out = e;
	*n_out = k;
	return 0;
}
