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
 * - one Sample per (process, tid, thread name, stack) with num labels pid
 *   and tid and string labels thread_name (the comm at sample time, when
 *   known) and process (executable name).
 * With `gzip` the bytes are a gzip stream (zlib). On success *buf (free())
 * and *len receive the bytes. Returns 0, -ENOMEM, -E2BIG (over
 * OPAL_PPROF_MAX_BYTES or a table bound), -EIO (zlib error). */
int opal_pprof_encode(const struct opal_profile *p, bool gzip, uint8_t **buf, size_t *len);

/* The same for the off-CPU samples (`off_cpu`, docs/offcpu.md) or the CPU
 * ones: an off-CPU profile has sample_type [samples/count,
 * off_cpu/nanoseconds], values [n, the sum of the n times off CPU],
 * period_type off_cpu/nanoseconds and period 0. opal_pprof_encode is the
 * CPU one. */
int opal_pprof_encode_of(const struct opal_profile *p, bool off_cpu, bool gzip, uint8_t **buf,
			 size_t *len);
int opal_pprof_write_of(const struct opal_profile *p, bool off_cpu, const char *path);

/* Writes the gzip'd encoding of the CPU samples to `path` atomically (path.tmp, then rename).
 * Returns 0 or -errno. */
int opal_pprof_write(const struct opal_profile *p, const char *path);

#endif
