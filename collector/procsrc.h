/* Where the process and file tables get their facts about processes: the
 * live /proc, or a fake one in tests. */
#ifndef OPAL_COLLECTOR_PROCSRC_H
#define OPAL_COLLECTOR_PROCSRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "procinfo.h"
#include "procmaps.h"

struct opal_proc_source {
	void *ctx;
	/* Same contract as opal_maps_read (sorted entries, opal_maps_free). */
	int (*read_maps)(void *ctx, pid_t pid, struct opal_map_entry **out, size_t *n);
	/* Opens the file mapped at [start, limit) in `pid` read-only with
	 * O_CLOEXEC. Returns a descriptor or -errno. */
	int (*open_mapped)(void *ctx, pid_t pid, uint64_t start, uint64_t limit);
	/* Same contract as opal_proc_info_read. */
	int (*read_info)(void *ctx, pid_t pid, struct opal_proc_info *out);
	/* CLOCK_MONOTONIC ns, for rate limits. */
	uint64_t (*now_ns)(void *ctx);
};

/* The real /proc: opal_maps_read, /proc/PID/map_files/<start>-<limit>,
 * opal_proc_info_read("/proc"), opal_mono_ns. */
extern const struct opal_proc_source opal_proc_source_live;

/* Writes "/proc/PID/map_files/<start>-<limit>" (lowercase hex, no 0x, as
 * the kernel names the links) into `buf` of `cap` bytes. Returns 0 or
 * -ENAMETOOLONG. */
int opal_map_files_path(char *buf, size_t cap, pid_t pid, uint64_t start, uint64_t limit);

#endif
