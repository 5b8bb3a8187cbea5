/* The live /proc as a process source (procsrc.h). */
#include "procsrc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>
#include "clock.h"

int opal_map_files_path(char *buf, size_t cap, pid_t pid, uint64_t start, uint64_t limit)
{
	int n = snprintf(buf, cap, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start,
			 limit);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int live_read_maps(void *ctx, pid_t pid, struct opal_map_entry **out, size_t *n)
{
	return opal_maps_read(pid, NULL, out, n);
}

static int live_open_mapped(void *ctx, pid_t pid, uint64_t start, uint64_t limit)
{
	char path[96];
	int fd, err = opal_map_files_path(path, sizeof(path), pid, start, limit);

	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int live_read_info(void *ctx, pid_t pid, struct opal_proc_info *out)
{
	return opal_proc_info_read("/proc", pid, out);
}

static uint64_t live_now(void *ctx)
{
	return opal_mono_ns();
}

const struct opal_proc_source opal_proc_source_live = {
	.ctx = NULL,
	.read_maps = live_read_maps,
	.open_mapped = live_open_mapped,
	.read_info = live_read_info,
	.now_ns = live_now,
};
