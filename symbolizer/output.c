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

int opal_output_init(struct opal_output *o)
{
	char path[4096];
	int removed;

	snprintf(path, sizeof(path), "%s/intervals", o->dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
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

/* Names sort chronologically (zero-padded start time), so the first entries
 * of alphasort are the oldest. */
static void rotate(struct opal_output *o)
{
	char dir[4096], path[4400];
	struct dirent **names;
	int n;

	snprintf(dir, sizeof(dir), "%s/intervals", o->dir);
	n = scandir(dir, &names, is_interval_pprof, alphasort);
	if (n < 0)
		return;
	for (int i = 0; i < n; i++) {
		if ((uint64_t)(n - i) > o->keep_intervals) {
			char *stem = names[i]->d_name;
			stem[strlen(stem) - strlen(PPROF_SUFFIX)] = '\0';
			snprintf(path, sizeof(path), "%s/%s%s", dir, stem, PPROF_SUFFIX);
			unlink(path);
			snprintf(path, sizeof(path), "%s/%s%s", dir, stem, OTLP_SUFFIX);
			unlink(path);
			snprintf(path, sizeof(path), "%s/" OFFCPU_PREFIX "%s%s", dir,
				 stem + strlen(INTERVAL_PREFIX), PPROF_SUFFIX);
			unlink(path);
		}
		free(names[i]);
	}
	free(names);
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
	char stem[4200];
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
	snprintf(stem, sizeof(stem), "%s/intervals/" INTERVAL_PREFIX "%019" PRIu64 "-%06" PRIu64,
		 o->dir, start_unix_ns, seq);
	err = write_file(stem, PPROF_SUFFIX, enc->pprof_gz, enc->pprof_len);
	if (!err)
		err = write_file(stem, OTLP_SUFFIX, enc->otlp, enc->otlp_len);
	if (!err && asprintf(&enc->pprof_path, "%s%s", stem, PPROF_SUFFIX) < 0)
		enc->pprof_path = NULL;   /* only a saving is lost: recent.c writes a copy */
	snprintf(stem, sizeof(stem), "%s/intervals/" OFFCPU_PREFIX "%019" PRIu64 "-%06" PRIu64,
		 o->dir, start_unix_ns, seq);
	if (!err && enc->offcpu_gz)
		err = write_file(stem, PPROF_SUFFIX, enc->offcpu_gz, enc->offcpu_len);
	if (o->keep_intervals)
		rotate(o);
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
