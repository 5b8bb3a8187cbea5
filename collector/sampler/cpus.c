/* cpulist parsing (cpus.h). */
#include "sampler/cpus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static int parse_num(const char **p, int *out)
{
	long v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (*s - '0');
		if (v >= OPAL_MAX_CPUS)
			return -EINVAL;
		s++;
	}
	*p = s;
	*out = (int)v;
	return 0;
}

int opal_cpulist_parse(const char *s, int *cpus, size_t cap, size_t *n)
{
	bool mark[OPAL_MAX_CPUS];
	size_t count = 0;

	memset(mark, 0, sizeof(mark));
	*n = 0;
	if (*s == '\n' || *s == '\0')
		return -EINVAL;   /* the online list always holds the boot CPU */
	for (;;) {
		int lo, hi;
		if (parse_num(&s, &lo))
			return -EINVAL;
		hi = lo;
		if (*s == '-') {
			s++;
			if (parse_num(&s, &hi) || hi < lo)
				return -EINVAL;
		}
		for (int c = lo; c <= hi; c++)
			mark[c] = true;
		if (*s != ',')
			break;
		s++;
	}
	if (*s == '\n')
		s++;
	if (*s)
		return -EINVAL;
	for (int c = 0; c < OPAL_MAX_CPUS; c++) {
		if (!mark[c])
			continue;
		if (count == cap)
			return -E2BIG;
		cpus[count++] = c;
	}
	*n = count;
	return 0;
}

int opal_online_cpus(int *cpus, size_t cap, size_t *n)
{
	char buf[4096];
	ssize_t r;
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	r = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (r < 0)
		return -e;
	buf[r] = '\0';
	return opal_cpulist_parse(buf, cpus, cap, n);
}
