/* Interval and whole-run output files, with rotation. */
#include "output.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/atomic_file.h"
#include "base/metrics.h"
#include "profile/pprof.h"
#include "shared/log.h"

#define INTERVAL_PREFIX "interval-"
#define OFFCPU_PREFIX "offcpu-"   /* the off-CPU pprof of an interval, same stamp */
#define PPROF_SUFFIX ".pb.gz"
#define OTLP_SUFFIX ".otlp.pb"
#define TMP_SUFFIX ".tmp"    /* opal_outfile_write's temporary name */

static bool has_suffix(const char *name, const char *suffix)
{
	size_t len = strlen(name), sl = strlen(suffix);

	return len > sl && strcmp(name + len - sl, suffix) == 0;
}

static int is_interval_tmp(const struct dirent *d)
{
	return (strncmp(d->d_name, INTERVAL_PREFIX, strlen(INTERVAL_PREFIX)) == 0 ||
		strncmp(d->d_name, OFFCPU_PREFIX, strlen(OFFCPU_PREFIX)) == 0) &&
	       has_suffix(d->d_name, TMP_SUFFIX);
}

/* Deletes the temporary files (opal_outfile_write) a killed symbolizer
 * left in `dir` that `want` selects. Returns how many went. */
static int remove_tmp(const char *dir, int (*want)(const struct dirent *))
{
	struct dirent **names;
	char path[4400];
	int n = scandir(dir, &names, want, alphasort), removed = 0;

	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		removed += unlink(path) == 0;
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	return removed;
}

static int is_whole_tmp(const struct dirent *d)
{
	return strcmp(d->d_name, "profile" PPROF_SUFFIX TMP_SUFFIX) == 0 ||
	       strcmp(d->d_name, "profile" OTLP_SUFFIX TMP_SUFFIX) == 0 ||
	       strcmp(d->d_name, "offcpu" PPROF_SUFFIX TMP_SUFFIX) == 0;
}

static void index_free(struct opal_output *o);

int opal_output_init(struct opal_output *o)
{
	char path[4096];
	int removed;

	snprintf(path, sizeof(path), "%s/intervals", o->dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	index_free(o);
	removed = remove_tmp(path, is_interval_tmp) + remove_tmp(o->dir, is_whole_tmp);
	if (removed)
		opal_info("removed %d unfinished output file(s) of an earlier run from %s", removed,
			  o->dir);
	return 0;
}

static int is_interval_pprof(const struct dirent *d)
{
	return strncmp(d->d_name, INTERVAL_PREFIX, strlen(INTERVAL_PREFIX)) == 0 &&
	       has_suffix(d->d_name, PPROF_SUFFIX);
}

#define STEM_MAX 64   /* "interval-" + 19 + "-" + 6 digits, and room */

/* A FIFO of interval stems ("interval-<start>-<seq>"), oldest at head. */
struct opal_output_index {
	char (*stems)[STEM_MAX];
	size_t head, n, cap;
};

static void index_free(struct opal_output *o)
{
	if (o->index)
		free(o->index->stems);
	free(o->index);
	o->index = NULL;
}

void opal_output_free(struct opal_output *o)
{
	index_free(o);
}

static int index_push(struct opal_output_index *x, const char *stem)
{
	if (strlen(stem) >= STEM_MAX)
		return -ENAMETOOLONG;
	if (x->head + x->n == x->cap) {
		if (x->head) {   /* reuse the room popped at the front */
			memmove(x->stems, x->stems + x->head, x->n * sizeof(*x->stems));
			x->head = 0;
		} else {
			size_t cap = x->cap ? 2 * x->cap : 128;
			void *p = realloc(x->stems, cap * sizeof(*x->stems));
			if (!p)
				return -ENOMEM;
			x->stems = p;
			x->cap = cap;
		}
	}
	snprintf(x->stems[x->head + x->n++], STEM_MAX, "%s", stem);
	return 0;
}

/* The index from the folder: names sort chronologically (zero-padded
 * start time), so alphasort's order is oldest first. */
static int index_load(struct opal_output *o)
{
	char dir[4096];
	struct dirent **names;
	int n, err = 0;

	if (!(o->index = calloc(1, sizeof(*o->index))))
		return -ENOMEM;
	snprintf(dir, sizeof(dir), "%s/intervals", o->dir);
	n = scandir(dir, &names, is_interval_pprof, alphasort);
	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		char *stem = names[i]->d_name;
		stem[strlen(stem) - strlen(PPROF_SUFFIX)] = '\0';
		if (!err && strlen(stem) < STEM_MAX)   /* longer: not a name of ours */
			err = index_push(o->index, stem);
		free(names[i]);
	}
	free(names);
	return err;
}

static void remove_interval(const char *dir, const char *stem)
{
	char path[4400];

	snprintf(path, sizeof(path), "%s/%s%s", dir, stem, PPROF_SUFFIX);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s%s", dir, stem, OTLP_SUFFIX);
	unlink(path);
	snprintf(path, sizeof(path), "%s/" OFFCPU_PREFIX "%s%s", dir,
		 stem + strlen(INTERVAL_PREFIX), PPROF_SUFFIX);
	unlink(path);
}

/* Records the interval `stem` just written (NULL: none was) and deletes
 * the oldest beyond keep_intervals. The folder is listed only when the
 * index is (re)built: at the first rotation, and after keep_intervals was
 * 0 (files put there meanwhile by others are seen then too). */
static void rotate(struct opal_output *o, const char *stem)
{
	char dir[4096];
	struct opal_output_index *x;

	if (!o->keep_intervals) {
		index_free(o);
		return;
	}
	/* a fresh listing holds `stem` already */
	if (o->index ? stem && index_push(o->index, stem) < 0 : index_load(o) < 0) {
		index_free(o);   /* listed again at the next interval */
		return;
	}
	x = o->index;
	snprintf(dir, sizeof(dir), "%s/intervals", o->dir);
	while (x->n > o->keep_intervals) {
		remove_interval(dir, x->stems[x->head]);
		x->head++;
		x->n--;
	}
}

static int write_pair(struct opal_output *o, const struct opal_profile *p, const char *stem)
{
	char path[4400];
	int err;

	snprintf(path, sizeof(path), "%s%s", stem, PPROF_SUFFIX);
	if ((err = opal_pprof_write(p, path)) < 0) {
		opal_err("writing %s: %s", path, strerror(-err));
		return err;
	}
	snprintf(path, sizeof(path), "%s%s", stem, OTLP_SUFFIX);
	if ((err = opal_otlp_write(p, o->otlp, path)) < 0) {
		opal_err("writing %s: %s", path, strerror(-err));
		return err;
	}
	return 0;
}

void opal_output_interval_free(struct opal_output_interval *enc)
{
	free(enc->pprof_gz);
	free(enc->otlp);
	free(enc->pprof_path);
	free(enc->offcpu_gz);
	*enc = (struct opal_output_interval){ 0 };
}

static int write_file(const char *stem, const char *suffix, const uint8_t *buf, size_t len)
{
	char path[4400];
	int err;

	snprintf(path, sizeof(path), "%s%s", stem, suffix);
	if ((err = opal_outfile_write(path, buf, len)) < 0)
		opal_err("writing %s: %s", path, strerror(-err));
	return err;
}

int opal_output_write_interval(struct opal_output *o, const struct opal_profile *p,
			       uint64_t start_unix_ns, uint64_t seq, bool want_otlp,
			       struct opal_output_interval *enc)
{
	char stem[4200], name[STEM_MAX];
	int err;

	*enc = (struct opal_output_interval){ 0 };
	if ((err = opal_pprof_encode(p, true, &enc->pprof_gz, &enc->pprof_len)) < 0 ||
	    (opal_profile_n_samples_of(p, true) &&
	     (err = opal_pprof_encode_of(p, true, true, &enc->offcpu_gz, &enc->offcpu_len)) < 0)) {
		opal_err("interval %" PRIu64 ": pprof encoding failed: %s", seq, strerror(-err));
		opal_metrics_interval_unwritten(OPAL_UNWRITTEN_ENCODE);
		opal_output_interval_free(enc);
		return err;
	}
	if ((want_otlp || o->write_intervals) &&
	    (err = opal_otlp_encode(p, o->otlp, &enc->otlp, &enc->otlp_len)) < 0) {
		opal_err("interval %" PRIu64 ": OTLP encoding failed: %s", seq, strerror(-err));
		opal_metrics_interval_unwritten(OPAL_UNWRITTEN_ENCODE);
		opal_output_interval_free(enc);
		return err;
	}
	if (!o->write_intervals)
		return 0;
	snprintf(name, sizeof(name), INTERVAL_PREFIX "%019" PRIu64 "-%06" PRIu64, start_unix_ns,
		 seq);
	snprintf(stem, sizeof(stem), "%s/intervals/%s", o->dir, name);
	err = write_file(stem, PPROF_SUFFIX, enc->pprof_gz, enc->pprof_len);
	if (!err)
		err = write_file(stem, OTLP_SUFFIX, enc->otlp, enc->otlp_len);
	if (!err && asprintf(&enc->pprof_path, "%s%s", stem, PPROF_SUFFIX) < 0)
		enc->pprof_path = NULL;   /* only a saving is lost: recent.c writes a copy */
	snprintf(stem, sizeof(stem), "%s/intervals/" OFFCPU_PREFIX "%019" PRIu64 "-%06" PRIu64,
		 o->dir, start_unix_ns, seq);
	if (!err && enc->offcpu_gz)
		err = write_file(stem, PPROF_SUFFIX, enc->offcpu_gz, enc->offcpu_len);
	rotate(o, err ? NULL : name);   /* a full disk needs the room too */
	if (err) {
		opal_metrics_interval_unwritten(err == -ENOSPC || err == -EDQUOT
							? OPAL_UNWRITTEN_DISK_FULL : OPAL_UNWRITTEN_IO);
		opal_output_interval_free(enc);
	}
	return err;
}

int opal_output_write_whole(struct opal_output *o, const struct opal_profile *p)
{
	char stem[4200];
	int err;

	snprintf(stem, sizeof(stem), "%s/profile", o->dir);
	err = write_pair(o, p, stem);
	snprintf(stem, sizeof(stem), "%s/offcpu" PPROF_SUFFIX, o->dir);
	if (err || opal_profile_n_samples_of(p, true) == 0)
		return err;
	if ((err = opal_pprof_write_of(p, true, stem)) < 0)
		opal_err("writing %s: %s", stem, strerror(-err));
	return err;
}
