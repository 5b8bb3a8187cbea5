/* Host facts for Hello (hostinfo.h). */
#include "proc/hostinfo.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "shared/log.h"

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));   /* notes are in the host's byte order */
	return v;
}

static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

int opal_notes_build_id(const uint8_t *notes, size_t len, uint8_t *out, size_t cap)
{
	size_t off = 0;

	while (len - off >= 12) {
		uint32_t namesz = get_u32(notes + off), descsz = get_u32(notes + off + 4);
		uint32_t type = get_u32(notes + off + 8);
		size_t name_off = off + 12;
		if (namesz > len - name_off)
			return -EINVAL;
		size_t desc_off = name_off + pad4(namesz);
		if (desc_off > len || descsz > len - desc_off)
			return -EINVAL;
		if (type == NT_GNU_BUILD_ID && namesz == 4 &&
		    memcmp(notes + name_off, "GNU", 4) == 0) {
			if (descsz > cap)
				return -E2BIG;
			memcpy(out, notes + desc_off, descsz);
			return (int)descsz;
		}
		off = desc_off + pad4(descsz);
		if (off > len)
			break;
	}
	return -ENOENT;
}

static int read_kernel_build_id(uint8_t *out, size_t cap)
{
	uint8_t *buf = malloc(OPAL_KERNEL_NOTES_MAX);
	size_t got = 0;
	int fd, r;

	if (!buf)
		return -ENOMEM;
	fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		free(buf);
		return r;
	}
	while (got < OPAL_KERNEL_NOTES_MAX) {
		ssize_t n = read(fd, buf + got, OPAL_KERNEL_NOTES_MAX - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	r = opal_notes_build_id(buf, got, out, cap);
	free(buf);
	return r;
}

int opal_machine_id_parse(const char *text, size_t len, char out[33])
{
	if (len > 32 && text[32] == '\n')
		len--;
	if (len != 32)
		return -EINVAL;
	for (size_t i = 0; i < 32; i++)
		if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f')))
			return -EINVAL;
	memcpy(out, text, 32);
	out[32] = '\0';
	return 0;
}

static void read_machine_id(char out[33])
{
	char buf[40];
	int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	out[0] = '\0';
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n > 0 && opal_machine_id_parse(buf, (size_t)n, out) < 0)
		out[0] = '\0';
}

int opal_host_info_read(struct opal_host_info *h)
{
	struct utsname u;
	int r;

	memset(h, 0, sizeof(*h));
	if (uname(&u) < 0)
		return -errno;
	snprintf(h->hostname, sizeof(h->hostname), "%s", u.nodename);
	snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", u.release);
	r = read_kernel_build_id(h->kernel_build_id, sizeof(h->kernel_build_id));
	if (r < 0)
		opal_warn("kernel build ID unavailable from /sys/kernel/notes: %s", strerror(-r));
	else
		h->kernel_build_id_len = (size_t)r;
	read_machine_id(h->machine_id);
	return 0;
}
