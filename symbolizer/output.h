/* Files the symbolizer writes under --out-dir:
 *   intervals/interval-<start_unix_ns>-<seq>.pb.gz     pprof of one interval
 *   intervals/interval-<start_unix_ns>-<seq>.otlp.pb   OTLP request of it
 *   profile.pb.gz, profile.otlp.pb                     whole run (--whole-run)
 * Every file is written to a temporary name and renamed, so a reader never
 * sees a partial file. */
#ifndef OPAL_OUTPUT_H
#define OPAL_OUTPUT_H

#include <stdint.h>
#include "otlp.h"
#include "profile.h"

struct opal_output {
	const char *dir;            /* borrowed */
	unsigned keep_intervals;    /* interval file pairs kept; older ones deleted */
	const struct opal_otlp_options *otlp;   /* borrowed */
};

/* Creates <dir>/intervals if needed. Returns 0 or -errno. */
int opal_output_init(struct opal_output *o);

/* Writes one interval's pprof and OTLP files, then deletes the oldest
 * interval files beyond keep_intervals. Returns 0 or -errno. */
int opal_output_write_interval(struct opal_output *o, const struct opal_profile *p,
			       uint64_t start_unix_ns, uint64_t seq);

/* Writes profile.pb.gz and profile.otlp.pb of the whole run. */
int opal_output_write_whole(struct opal_output *o, const struct opal_profile *p);

#endif
