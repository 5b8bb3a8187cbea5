/* Recent profiles folder (recent.h). */
#include "profile/recent.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "base/atomic_file.h"
#include "shared/log.h"

#define PREFIX "recent-"
#define SUFFIX ".pb.gz"
#define TMP_SUFFIX ".tmp"

/* The folder's profiles, oldest first (names sort by start time): read
 * once at open and kept up to date by add and rotate, so that neither
 * lists the folder or stats its files per interval (720 stats per interval
 * at the default bound). Guarded by `lock`: HTTP threads list it. */
struct index {
	struct opal_recent_entry *e;
	size_t n, cap;
};

struct opal_recent {
	char dir[PATH_MAX - 128];   /* room for a name below it */
	uint64_t max_files, max_bytes, max_age_s;   /* atomics: read by HTTP threads */
	pthread_mutex_t lock;
	struct index ix;
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
 * counted from the newest. Caller holds the lock. */
static void rotate(struct opal_recent *r, uint64_t now_ns)
{
	uint64_t max_files = load_u64(&r->max_files), max_bytes = load_u64(&r->max_bytes);
	uint64_t age_ns = load_u64(&r->max_age_s) * 1000000000ull;
	uint64_t bytes = 0;
	size_t keep = 0;   /* the newest `keep` entries stay */
	char path[PATH_MAX + 256];

	for (size_t i = r->ix.n; i-- > 0;) {
		const struct opal_recent_entry *e = &r->ix.e[i];
		bytes += e->bytes;
		if ((uint64_t)keep + 1 > max_files || bytes > max_bytes ||
		    (now_ns > age_ns && e->end_unix_ns < now_ns - age_ns))
			break;
		keep++;
	}
	size_t drop = r->ix.n - keep;
	for (size_t i = 0; i < drop; i++) {
		snprintf(path, sizeof(path), "%s/%s", r->dir, r->ix.e[i].name);
		unlink(path);
	}
	memmove(r->ix.e, r->ix.e + drop, keep * sizeof(*r->ix.e));
	r->ix.n = keep;
	if (drop)
		opal_debug("recent profiles: %zu old ones deleted", drop);
}

/* Inserts an entry at its place by name (a second collector's intervals
 * may interleave). Caller holds the lock. Returns 0 or -ENOMEM. */
static int index_insert(struct index *ix, const struct opal_recent_entry *e)
{
	if (ix->n == ix->cap) {
		size_t cap = ix->cap ? ix->cap * 2 : 64;
		struct opal_recent_entry *n = realloc(ix->e, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ix->e = n;
		ix->cap = cap;
	}
	size_t at = ix->n;
	while (at > 0 && strcmp(ix->e[at - 1].name, e->name) > 0)
		at--;
	memmove(ix->e + at + 1, ix->e + at, (ix->n - at) * sizeof(*ix->e));
	ix->e[at] = *e;
	ix->n++;
	return 0;
}

/* Reads the folder's profiles into the index (at open). */
static int index_load(struct opal_recent *r)
{
	struct dirent **names;
	char path[PATH_MAX + 256];
	int n = scandir(r->dir, &names, is_profile, alphasort), err = 0;

	if (n < 0)
		return -errno;
	for (int i = 0; i < n && !err; i++) {
		struct opal_recent_entry e = { 0 };
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", r->dir, names[i]->d_name);
		if (strlen(names[i]->d_name) >= sizeof(e.name) || stat(path, &st) < 0)
			continue;
		parse_name(names[i]->d_name, &e.start_unix_ns, &e.end_unix_ns);
		strcpy(e.name, names[i]->d_name);
		e.bytes = (uint64_t)st.st_size;
		err = index_insert(&r->ix, &e);
	}
	free_names(names, n);
	return err;
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
	pthread_mutex_init(&r->lock, NULL);
	int err = index_load(r);
	if (err < 0) {
		opal_recent_close(r);
		return err;
	}
	opal_recent_set_limits(r, l);
	*out = r;
	return 0;
}

void opal_recent_close(struct opal_recent *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r->ix.e);
	free(r);
}

void opal_recent_set_limits(struct opal_recent *r, const struct opal_recent_limits *l)
{
	store_u64(&r->max_files, l->max_files);
	store_u64(&r->max_bytes, l->max_bytes);
	store_u64(&r->max_age_s, l->max_age_s);
	pthread_mutex_lock(&r->lock);
	rotate(r, now_unix_ns());
	pthread_mutex_unlock(&r->lock);
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
		    const char *same_file, uint64_t start_unix_ns, uint64_t end_unix_ns,
		    uint64_t run_id, uint64_t seq, uint64_t now_unix_ns)
{
	char path[PATH_MAX + 256];
	struct opal_recent_entry e = { .start_unix_ns = start_unix_ns, .bytes = len };
	int err = 0;

	if (end_unix_ns < start_unix_ns)
		end_unix_ns = start_unix_ns;
	e.end_unix_ns = end_unix_ns;
	pthread_mutex_lock(&r->lock);
	if (load_u64(&r->max_files) > 0 && len <= load_u64(&r->max_bytes)) {
		snprintf(e.name, sizeof(e.name), PREFIX "%019" PRIu64 "-%019" PRIu64 "-%016" PRIx64
			 "-%06" PRIu64 SUFFIX, start_unix_ns, end_unix_ns, run_id, seq);
		snprintf(path, sizeof(path), "%s/%s", r->dir, e.name);
		if (!same_file || link(same_file, path) < 0)
			err = opal_outfile_write_unsynced(path, pprof_gz, len);
		if (!err && (err = index_insert(&r->ix, &e)) < 0)
			unlink(path);
	}
	rotate(r, now_unix_ns);
	pthread_mutex_unlock(&r->lock);
	return err;
}

int opal_recent_list(struct opal_recent *r, uint64_t from_unix_ns, uint64_t to_unix_ns,
		     size_t max, struct opal_recent_entry **out, size_t *n_out)
{
	int err = 0;
	size_t k = 0, first = 0;

	*out = NULL;
	*n_out = 0;
	pthread_mutex_lock(&r->lock);
	/* Newest first, so that `max` keeps the newest; copied oldest first. */
	size_t i = r->ix.n;
	for (; i-- > 0 && k < max;) {
		const struct opal_recent_entry *e = &r->ix.e[i];
		if (e->end_unix_ns >= from_unix_ns && !(to_unix_ns && e->start_unix_ns > to_unix_ns))
			k++;
		first = i;
	}
	struct opal_recent_entry *e = k ? calloc(k, sizeof(*e)) : NULL;
	if (k && !e) {
		err = -ENOMEM;
		k = 0;
	}
	size_t j = 0;
	for (i = first; i < r->ix.n && j < k; i++) {
		const struct opal_recent_entry *x = &r->ix.e[i];
		if (x->end_unix_ns >= from_unix_ns && !(to_unix_ns && x->start_unix_ns > to_unix_ns))
			e[j++] = *x;
	}
	pthread_mutex_unlock(&r->lock);
	*out = e;
	*n_out = j;
	return err;
}
