/* The live /proc as a process source (procsrc.h). */
#include "proc/procsrc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/clock.h"

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

static int live_read_command_line(void *ctx, pid_t pid, char **out)
{
	return opal_proc_cmdline_read("/proc", pid, out);
}

static uint64_t live_now(void *ctx)
{
	return opal_mono_ns();
}

int opal_proc_stat_start(const char *text, size_t len, uint64_t *start_ticks)
{
	const char *end = text + len, *p = memrchr(text, ')', len);
	uint64_t v = 0;
	int digits = 0;

	if (!p)
		return -EINVAL;
	p++;
	/* fields from 3 (state) on are separated by spaces */
	for (int field = 3; field <= 22; field++) {
		while (p < end && *p == ' ')
			p++;
		if (field == 22)
			break;
		while (p < end && *p != ' ')
			p++;
	}
	for (; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (!digits)
		return -EINVAL;
	*start_ticks = v;
	return 0;
}

static int live_identity(void *ctx, pid_t pid, struct opal_proc_identity *out)
{
	char path[48], text[1024];
	struct stat st;
	ssize_t n;
	int fd;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n <= 0)
		return n == 0 ? -ESRCH : -errno;
	if (opal_proc_stat_start(text, (size_t)n, &out->start_ticks) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st) == 0) {
		out->exe_dev = st.st_dev;
		out->exe_ino = st.st_ino;
	}
	return 0;
}

const struct opal_proc_source opal_proc_source_live = {
	.ctx = NULL,
	.read_maps = live_read_maps,
	.open_mapped = live_open_mapped,
	.read_info = live_read_info,
	.now_ns = live_now,
	.identity = live_identity,
	.read_command_line = live_read_command_line,
};
