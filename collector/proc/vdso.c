/* The vDSO image as a pinned file (vdso.h). */
#include "proc/vdso.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "proc/procmaps.h"
#include "shared/log.h"

/* Writes all of buf[len] to fd. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

int opal_vdso_register(struct opal_file_table *files, struct opal_file **out)
{
	struct opal_map_entry *maps = NULL;
	const struct opal_map_entry *v = NULL;
	size_t n = 0;
	int fd, err;

	err = opal_maps_read(getpid(), NULL, &maps, &n);
	if (err < 0 && err != -E2BIG)
		return err;
	for (size_t i = 0; i < n && !v; i++)
		if (strcmp(maps[i].path, "[vdso]") == 0 && maps[i].readable)
			v = &maps[i];
	if (!v) {
		opal_maps_free(maps, n);
		return -ENOENT;
	}
	size_t size = v->limit - v->start;
	const uint8_t *image = (const uint8_t *)(uintptr_t)v->start;
	opal_maps_free(maps, n);
	if (size == 0 || size > OPAL_VDSO_MAX_SIZE)
		return -E2BIG;
	if (memcmp(image, "\177ELF", 4) != 0)
		return -ENOEXEC;
	fd = memfd_create("[vdso]", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if ((err = write_all(fd, image, size)) < 0)
		goto fail;
	/* the symbolizer gets this descriptor: it may read, never change it */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = opal_files_add_pinned(files, fd, "[vdso]", out)) < 0)
		goto fail;
	opal_debug("vDSO: %zu bytes registered as a file", size);
	return 0;
fail:
	close(fd);
	return err;
}
