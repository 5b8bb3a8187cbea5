/* Clocks: bpf_ktime_get_ns() reads CLOCK_MONOTONIC, intervals and wire
 * timestamps are Unix (CLOCK_REALTIME) nanoseconds. */
#ifndef OPAL_COLLECTOR_CLOCK_H
#define OPAL_COLLECTOR_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC now, in ns. */
uint64_t opal_mono_ns(void);

/* CLOCK_REALTIME - CLOCK_MONOTONIC in ns, i.e. the Unix time of ktime 0
 * ("boot time" in the Hello message): Unix ns = ktime + offset. Taken from
 * the tightest of several bracketed readings, once at start (a later
 * settimeofday is not followed). */
uint64_t opal_mono_to_real_offset_ns(void);

#endif
