/* pprof export of a profile (profile.h): perftools.profiles.Profile
 * (proto/pprof/profile.proto), gzip-compressed on disk as pprof expects. */
#ifndef OPAL_PPROF_H
#define OPAL_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct opal_profile;

#define OPAL_PPROF_MAX_BYTES  (1u << 30)   /* encoded profile, before gzip */

/* Encodes `p` as one pprof Profile:
 * - string_table[0] = "";
 * - sample_type [samples/count, cpu/nanoseconds]; each sample's values are
 *   [n, n * period_ns] for a stack sampled n times; period_type
 *   cpu/nanoseconds, period = period_ns; time_nanos / duration_nanos from
 *   opal_profile_time;
 * - mapping/location ids equal the profile's ids; Mapping.build_id is the
 *   GNU build ID, else the htlhash file ID, else "";
 * - Location.line lists the inline chain innermost callee first (pprof:
 *   line[0] is the innermost inlined function); a line without a function
 *   name gets the function "??";
 * - one Sample per (process, tid, stack) with num labels pid and tid and
 *   string labels thread_name (when known) and process (executable name).
 * With `gzip` the bytes are a gzip stream (zlib). On success *buf (free())
 * and *len receive the bytes. Returns 0, -ENOMEM, -E2BIG (over
 * OPAL_PPROF_MAX_BYTES or a table bound), -EIO (zlib error). */
int opal_pprof_encode(const struct opal_profile *p, bool gzip, uint8_t **buf, size_t *len);

/* Writes the gzip'd encoding to `path` atomically (path.tmp, then rename).
 * Returns 0 or -errno. */
int opal_pprof_write(const struct opal_profile *p, const char *path);

#endif
