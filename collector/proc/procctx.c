/* Copies of OTEP 4719 process contexts (procctx.h). */
#include "proc/procctx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

static const char *const names[] = { "[anon_shmem:OTEL_CTX]", "[anon:OTEL_CTX]",
				     "/memfd:OTEL_CTX" };

uint64_t opal_procctx_find(const struct opal_map_entry *maps, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!maps[i].readable || !maps[i].path ||
		    maps[i].limit - maps[i].start < OPAL_PROCCTX_HEADER_SIZE)
			continue;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (strncmp(maps[i].path, names[k], strlen(names[k])) == 0)
				return maps[i].start;
	}
	return 0;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));   /* native endian, as the OTEP says */
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

int opal_procctx_parse_header(const uint8_t *h, uint64_t *published_ns, uint64_t *payload,
			      uint32_t *size)
{
	if (memcmp(h, "OTEL_CTX", 8) != 0 || get32(h + 8) != OPAL_PROCCTX_VERSION)
		return -ENOENT;
	*size = get32(h + 12);
	*published_ns = get64(h + 16);
	*payload = get64(h + 24);
	if (*published_ns == 0)
		return -EAGAIN;
	if (*size > OPAL_PROCCTX_MAX_PAYLOAD)
		return -E2BIG;
	return 0;
}

int opal_proc_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (len == 0)
		return 0;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int opal_procctx_read(pid_t pid, struct opal_procctx *c)
{
	uint8_t h[OPAL_PROCCTX_HEADER_SIZE];
	uint64_t published, again, addr;
	uint32_t size;
	int err = -EAGAIN;

	if (!c->header)
		return -ENOENT;
	for (int t = 0; t < OPAL_PROCCTX_TRIES; t++) {
		if ((err = opal_proc_read_mem(pid, c->header, h, sizeof(h))) < 0)
			return err;
		err = opal_procctx_parse_header(h, &published, &addr, &size);
		if (err == -EAGAIN)
			continue;
		if (err < 0)
			return err;
		if (published == c->published_ns && c->payload)
			return 0;   /* the OTEP's cache key: nothing changed */
		uint8_t *buf = malloc(size ? size : 1);
		if (!buf)
			return -ENOMEM;
		if ((err = opal_proc_read_mem(pid, addr, buf, size)) < 0 ||
		    (err = opal_proc_read_mem(pid, c->header + 16, &again, sizeof(again))) < 0) {
			free(buf);
			return err;
		}
		if (again != published) {   /* raced an update: read it again */
			free(buf);
			err = -EAGAIN;
			continue;
		}
		free(c->payload);
		c->payload = buf;
		c->len = size;
		c->published_ns = published;
		return 1;
	}
	return err;
}

void opal_procctx_clear(struct opal_procctx *c)
{
	free(c->payload);
	memset(c, 0, sizeof(*c));
}
