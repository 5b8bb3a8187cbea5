/* Where the process and file tables get their facts about processes: the
 * live /proc, or a fake one in tests. */
#ifndef OPAL_COLLECTOR_PROCSRC_H
#define OPAL_COLLECTOR_PROCSRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "proc/procinfo.h"
#include "proc/procmaps.h"

/* What tells a process apart from another with the same pid (pid reuse)
 * or from its own earlier image (exec of another executable). */
struct opal_proc_identity {
	uint64_t start_ticks;       /* /proc/PID/stat field 22 (starttime), clock ticks */
	uint64_t exe_dev, exe_ino;  /* the executable's file (0 when none: kernel thread) */
};

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
	/* Reads the identity of `pid`. Returns 0, -ESRCH when the process is
	 * gone, or another -errno. May be NULL (then nothing can be checked). */
	int (*identity)(void *ctx, pid_t pid, struct opal_proc_identity *out);
	/* Same contract as opal_proc_cmdline_read. May be NULL. */
	int (*read_command_line)(void *ctx, pid_t pid, char **out);
};

/* Parses /proc/PID/stat text (`len` bytes, need not be NUL-terminated) for
 * its starttime (field 22, counted after the comm's closing parenthesis,
 * since a comm may hold spaces and parentheses). Returns 0 or -EINVAL. */
int opal_proc_stat_start(const char *text, size_t len, uint64_t *start_ticks);

/* The real /proc: opal_maps_read, /proc/PID/map_files/<start>-<limit>,
 * opal_proc_info_read("/proc"), opal_mono_ns, /proc/PID/stat and the
 * file /proc/PID/exe names. */
extern const struct opal_proc_source opal_proc_source_live;

/* Writes "/proc/PID/map_files/<start>-<limit>" (lowercase hex, no 0x, as
 * the kernel names the links) into `buf` of `cap` bytes. Returns 0 or
 * -ENAMETOOLONG. */
int opal_map_files_path(char *buf, size_t cap, pid_t pid, uint64_t start, uint64_t limit);

#endif
