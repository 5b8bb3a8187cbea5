/* Userspace counters of the collector, cumulative since start; they feed
 * CollectorCounters (proto/opal/wire.proto) together with the BPF per-CPU
 * counters (bpf/sampler.h). */
#ifndef OPAL_COLLECTOR_COUNTERS_H
#define OPAL_COLLECTOR_COUNTERS_H

#include <stdint.h>

struct opal_counters {
	uint64_t samples_self;       /* dropped in userspace: opal's own pid seen before BPF knew it */
	uint64_t samples_dropped;    /* over an interval's aggregation bound */
	uint64_t frames_no_mapping;  /* user address in no mapping of its process */
	uint64_t maps_reads;         /* /proc/PID/maps reads */
	uint64_t files_opened;       /* successful opens through /proc/PID/map_files */
	uint64_t file_open_errors;   /* mapped files that could not be opened or parsed */
	uint64_t intervals_dropped;  /* unacknowledged intervals pushed out of the send buffer */
	uint64_t stack_errors;       /* bpf_get_stack failures on a user stack */
};

#endif
