/* /proc/PID facts for Process messages (procinfo.h). */
#include "proc/procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool is_alnum(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int opal_cgroup_container_id(const char *text, size_t len, char out[OPAL_CONTAINER_ID_LEN + 1])
{
	const char *found = NULL;
	size_t i = 0;

	while (i < len) {
		if (!is_alnum(text[i])) {
			i++;
			continue;
		}
		/* an alphanumeric word [i, j) */
		size_t j = i;
		bool all_hex = true;
		while (j < len && is_alnum(text[j])) {
			all_hex = all_hex && is_lower_hex(text[j]);
			j++;
		}
		if (all_hex && j - i == OPAL_CONTAINER_ID_LEN)
			found = text + i;
		i = j;
	}
	if (!found)
		return -ENOENT;
	memcpy(out, found, OPAL_CONTAINER_ID_LEN);
	out[OPAL_CONTAINER_ID_LEN] = '\0';
	return 0;
}

int opal_cgroup_pod_uid(const char *text, size_t len, char out[OPAL_POD_UID_LEN + 1])
{
	static const int dash[] = { 8, 13, 18, 23 };
	bool found = false;

	for (size_t i = 0; i + 3 + OPAL_POD_UID_LEN <= len; i++) {
		const char *u = text + i + 3;
		size_t k, d = 0;
		if (memcmp(text + i, "pod", 3) != 0)
			continue;
		for (k = 0; k < OPAL_POD_UID_LEN; k++) {
			if (d < 4 && (int)k == dash[d]) {
				if (u[k] != '-' && u[k] != '_')
					break;
				d++;
			} else if (!is_lower_hex(u[k])) {
				break;
			}
		}
		/* a UUID, not the start of a longer word */
		if (k < OPAL_POD_UID_LEN ||
		    (i + 3 + k < len && (is_alnum(u[k]) || u[k] == '-' || u[k] == '_')))
			continue;
		for (k = 0; k < OPAL_POD_UID_LEN; k++)
			out[k] = u[k] == '_' ? '-' : u[k];
		out[OPAL_POD_UID_LEN] = '\0';
		found = true;
	}
	return found ? 0 : -ENOENT;
}

int opal_environ_value(const char *env, size_t len, const char *name, char *out, size_t cap)
{
	size_t nlen = strlen(name);
	size_t i = 0;

	while (i < len) {
		const char *e = env + i;
		const char *nul = memchr(e, '\0', len - i);
		size_t elen = nul ? (size_t)(nul - e) : len - i;
		if (elen > nlen && memcmp(e, name, nlen) == 0 && e[nlen] == '=') {
			size_t vlen = elen - nlen - 1;
			if (vlen > cap - 1)
				vlen = cap - 1;
			memcpy(out, e + nlen + 1, vlen);
			out[vlen] = '\0';
			return (int)vlen;
		}
		i += elen + 1;
	}
	return -ENOENT;
}

bool opal_is_opal_program(const char *comm, const char *exe)
{
	static const char *const names[] = { "opal-collector", "opal-symbolizer", "opal-report" };
	const char *base = NULL;
	size_t blen = 0;
	static const char deleted[] = " (deleted)";

	if (exe && exe[0]) {
		const char *slash = strrchr(exe, '/');
		base = slash ? slash + 1 : exe;
		blen = strlen(base);
		if (blen > sizeof(deleted) - 1 &&
		    strcmp(base + blen - (sizeof(deleted) - 1), deleted) == 0)
			blen -= sizeof(deleted) - 1;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (comm && strcmp(comm, names[i]) == 0)
			return true;
		if (base && blen == strlen(names[i]) && memcmp(base, names[i], blen) == 0)
			return true;
	}
	return false;
}

/* Reads at most `cap` bytes of a /proc file into a new buffer. Returns the
 * length or -errno. */
static ssize_t read_bounded(const char *path, size_t cap, char **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	char *buf;

	if (fd < 0)
		return -errno;
	buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < cap) {
		ssize_t r = read(fd, buf + got, cap - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	*out = buf;
	return (ssize_t)got;
}

int opal_proc_info_read(const char *proc_root, pid_t pid, struct opal_proc_info *out)
{
	char path[PATH_MAX], link[PATH_MAX];
	char svc[OPAL_SERVICE_NAME_MAX];
	char *buf;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	svc[0] = '\0';
	link[0] = '\0';

	snprintf(path, sizeof(path), "%s/%d/comm", proc_root, (int)pid);
	if ((n = read_bounded(path, OPAL_COMM_MAX, &buf)) >= 0) {
		buf[strcspn(buf, "\n")] = '\0';
		snprintf(out->comm, sizeof(out->comm), "%s", buf);
		free(buf);
	} else if (n == -ENOMEM) {
		return -ENOMEM;
	}

	snprintf(path, sizeof(path), "%s/%d/exe", proc_root, (int)pid);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';

	snprintf(path, sizeof(path), "%s/%d/environ", proc_root, (int)pid);
	if ((n = read_bounded(path, OPAL_ENVIRON_MAX, &buf)) >= 0) {
		opal_environ_value(buf, (size_t)n, "OTEL_SERVICE_NAME", svc, sizeof(svc));
		free(buf);
	} else if (n == -ENOMEM) {
		return -ENOMEM;
	}

	snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root, (int)pid);
	if ((n = read_bounded(path, OPAL_CGROUP_MAX, &buf)) >= 0) {
		opal_cgroup_container_id(buf, (size_t)n, out->container_id);
		opal_cgroup_pod_uid(buf, (size_t)n, out->pod_uid);
		free(buf);
	} else if (n == -ENOMEM) {
		return -ENOMEM;
	}

	out->exe = strdup(link);
	out->service_name = strdup(svc);
	if (!out->exe || !out->service_name) {
		opal_proc_info_free(out);
		return -ENOMEM;
	}
	return 0;
}

char *opal_cmdline_join(const char *img, size_t len)
{
	char *out;

	while (len > 0 && img[len - 1] == '\0')
		len--;
	if (len > OPAL_CMDLINE_MAX - 1) {
		len = OPAL_CMDLINE_MAX - 1;
		while (len > 0 && ((unsigned char)img[len] & 0xc0) == 0x80)
			len--;   /* img[len] continues a character: cut before it */
	}
	if (!(out = malloc(len + 1)))
		return NULL;
	for (size_t i = 0; i < len; i++)
		out[i] = img[i] ? img[i] : ' ';
	out[len] = '\0';
	return out;
}

int opal_proc_cmdline_read(const char *proc_root, pid_t pid, char **out)
{
	char path[PATH_MAX];
	char *buf;
	ssize_t n;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/%d/cmdline", proc_root, (int)pid);
	if ((n = read_bounded(path, OPAL_CMDLINE_MAX, &buf)) < 0)
		return (int)n;
	*out = opal_cmdline_join(buf, (size_t)n);
	free(buf);
	return *out ? 0 : -ENOMEM;
}

void opal_proc_info_free(struct opal_proc_info *info)
{
	free(info->exe);
	free(info->service_name);
	free(info->command_line);
	info->exe = NULL;
	info->service_name = NULL;
	info->command_line = NULL;
}
