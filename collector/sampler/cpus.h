/* Online CPU list (/sys/devices/system/cpu/online, format "cpulist" of
 * Documentation/admin-guide/cputopology.rst: "0-3,5,7-8"). */
#ifndef OPAL_COLLECTOR_CPUS_H
#define OPAL_COLLECTOR_CPUS_H

#include <stddef.h>

#define OPAL_MAX_CPUS 8192   /* CPU numbers at or above are rejected */

/* Parses a cpulist (a trailing newline is allowed) into ascending,
 * de-duplicated CPU numbers: `cpus` has room for `cap` entries, `*n` gets
 * the count. Returns 0, -EINVAL for malformed or empty text, a range going
 * down or a CPU >= OPAL_MAX_CPUS, or -E2BIG when more than `cap` CPUs are
 * listed. */
int opal_cpulist_parse(const char *s, int *cpus, size_t cap, size_t *n);

/* Reads and parses /sys/devices/system/cpu/online (same returns, plus
 * -errno from reading). */
int opal_online_cpus(int *cpus, size_t cap, size_t *n);

#endif
