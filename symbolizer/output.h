/* Files the symbolizer writes under --out-dir:
 *   intervals/interval-<start_unix_ns>-<seq>.pb.gz     pprof of one interval
 *   intervals/interval-<start_unix_ns>-<seq>.otlp.pb   OTLP request of it
 *   intervals/offcpu-<start_unix_ns>-<seq>.pb.gz       its off-CPU pprof, when it has
 *                                                      off-CPU samples (docs/offcpu.md)
 *   profile.pb.gz, profile.otlp.pb                     whole run (--whole-run)
 *   offcpu.pb.gz                                       its off-CPU pprof (--whole-run)
 * Every file is written to a temporary name and renamed, so a reader never
 * sees a partial file. Each interval is encoded once; the encodings are
 * handed back for the recent profiles and the exporters. */
#ifndef OPAL_OUTPUT_H
#define OPAL_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "profile/otlp.h"
#include "profile/profile.h"

struct opal_output_index;

struct opal_output {
	const char *dir;            /* borrowed */
	uint64_t keep_intervals;    /* interval file pairs kept (0: all); older ones deleted */
	bool write_intervals;       /* interval files (--export pprof); else encodings only */
	const struct opal_otlp_options *otlp;   /* borrowed */
	/* The interval stems in intervals/, oldest first, for rotation: read
	 * from the folder once (when rotation starts), then kept as files are
	 * written and deleted; at most keep_intervals + 1 names, none while
	 * keep_intervals is 0. Owned (opal_output_free). */
	struct opal_output_index *index;
};

/* The encodings of one interval, malloc'd (opal_output_interval_free). */
struct opal_output_interval {
	uint8_t *pprof_gz;          /* gzip'd pprof (pprof.h), always */
	size_t pprof_len;
	uint8_t *otlp;              /* ExportProfilesServiceRequest (otlp.h), or NULL */
	size_t otlp_len;
	char *pprof_path;           /* the interval's pprof file, or NULL (none written) */
	uint8_t *offcpu_gz;         /* gzip'd off-CPU pprof, when it has off-CPU samples */
	size_t offcpu_len;
};

/* Creates <dir>/intervals if needed and deletes the temporary files a
 * killed run left (interval-*.tmp there, profile.pb.gz.tmp and
 * profile.otlp.pb.tmp in <dir>; nothing else). Returns 0 or -errno. */
int opal_output_init(struct opal_output *o);

/* Encodes one interval: gzip'd pprof always (and its off-CPU pprof when
 * it has off-CPU samples), OTLP when `want_otlp` or
 * when files are written. With write_intervals it writes the pair of
 * interval files, then deletes the oldest pairs beyond keep_intervals.
 * On success `enc` holds the encodings (the caller frees them); on error
 * it holds nothing. Returns 0 or -errno (logged). */
int opal_output_write_interval(struct opal_output *o, const struct opal_profile *p,
			       uint64_t start_unix_ns, uint64_t seq, bool want_otlp,
			       struct opal_output_interval *enc);

/* Frees what `o` holds (its index); `o` may be initialised again. */
void opal_output_free(struct opal_output *o);

/* Frees the encodings and empties `enc`. */
void opal_output_interval_free(struct opal_output_interval *enc);

/* Writes profile.pb.gz and profile.otlp.pb of the whole run. */
int opal_output_write_whole(struct opal_output *o, const struct opal_profile *p);

#endif
