/* The debuginfod protocol (the WEBAPI section of debuginfod(8), elfutils
 * 0.188: https://sourceware.org/elfutils/Debuginfod.html) on the
 * symbolizer's port, so gdb, eu-stack and debuginfod-find can use opal as
 * a DEBUGINFOD_URLS server:
 *   /buildid/ID/debuginfo      uploaded debuginfo, else <debug root>/.build-id
 *   /buildid/ID/executable     uploaded executable
 *   /buildid/ID/source/PATH    member PATH of the uploaded sources archive
 *   /buildid/ID/section/NAME   section NAME (decompressed) of the debuginfo,
 *                              else of the executable
 * GET and HEAD only (others 400); 404 when absent; 406 when the client's
 * X-DEBUGINFOD-MAXSIZE is smaller than the answer. Every answer carries
 * X-DEBUGINFOD-SIZE and X-DEBUGINFOD-FILE. Nothing is fetched from other
 * debuginfod servers here, so two servers pointing at each other cannot
 * loop. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_sources.h"
#include "debuginfo/debuginfo_srctar.h"
#include "http/http_internal.h"

#define MAX_SECTION_BYTES (256u << 20)

/* False when the client accepts `size` bytes; else 406 was queued (*res). */
static bool over_maxsize(struct MHD_Connection *c, uint64_t size, enum MHD_Result *res)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-DEBUGINFOD-MAXSIZE");
	if (!v || !*v)
		return false;
	char *end;
	unsigned long long max = strtoull(v, &end, 10);
	if (*end || max == 0 || size <= max)
		return false;
	*res = opal_http_send_error(c, 406, "%" PRIu64 " bytes exceed X-DEBUGINFOD-MAXSIZE %llu",
				    size, max);
	return true;
}

static enum MHD_Result with_headers(struct MHD_Connection *c, struct MHD_Response *resp,
				    uint64_t size, const char *file)
{
	char sz[32];
	if (!resp)
		return MHD_NO;
	snprintf(sz, sizeof(sz), "%" PRIu64, size);
	MHD_add_response_header(resp, "X-DEBUGINFOD-SIZE", sz);
	MHD_add_response_header(resp, "X-DEBUGINFOD-FILE", file);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	return opal_http_queue(c, 200, resp);
}

/* Sends the whole file open on `fd` (taken over). */
static enum MHD_Result send_file(struct MHD_Connection *c, int fd, const char *name)
{
	struct stat st;
	enum MHD_Result res;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return opal_http_send_error(c, 500, "cannot stat the file");
	}
	if (over_maxsize(c, (uint64_t)st.st_size, &res)) {
		close(fd);
		return res;
	}
	struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
	if (!resp)
		close(fd);
	return with_headers(c, resp, (uint64_t)st.st_size, name);
}

static enum MHD_Result send_bytes(struct MHD_Connection *c, void *buf, size_t len,
				  const char *name)
{
	enum MHD_Result res;
	if (over_maxsize(c, len, &res)) {
		free(buf);
		return res;
	}
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp)
		free(buf);
	return with_headers(c, resp, len, name);
}

/* Bytes of section `name` of the ELF on `fd`: 0, -ENOENT, -EFBIG, -ENOMEM.
 * A compressed section is answered decompressed when the file passes
 * opal_decomp_scan_fd and its ch_size is within MAX_SECTION_BYTES. */
static int read_section(int fd, const char *name, void **buf, size_t *len)
{
	struct opal_decomp_scan scan;
	if (opal_decomp_scan_fd(fd, &scan) == -EFBIG)
		return -EFBIG;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	int r = -ENOENT;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		elf_end(elf);
		return -ENOENT;
	}
	struct stat st;
	uint64_t fsize = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, name) != 0)
			continue;
		if (sh.sh_offset > fsize || sh.sh_size > fsize - sh.sh_offset ||
		    sh.sh_size > MAX_SECTION_BYTES) {
			r = -EFBIG;
			break;
		}
		/* Compressed sections are answered as their contents. */
		GElf_Chdr ch;
		if ((sh.sh_flags & SHF_COMPRESSED) && !gelf_getchdr(scn, &ch))
			break;   /* a type libelf does not know */
		if ((sh.sh_flags & SHF_COMPRESSED) && ch.ch_size > MAX_SECTION_BYTES) {
			r = -EFBIG;
			break;
		}
		if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
			break;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || d->d_size > MAX_SECTION_BYTES) {
			r = d ? -EFBIG : -ENOENT;
			break;
		}
		*buf = malloc(d->d_size ? d->d_size : 1);
		if (!*buf) {
			r = -ENOMEM;
			break;
		}
		if (d->d_size)
			memcpy(*buf, d->d_buf, d->d_size);
		*len = d->d_size;
		r = 0;
		break;
	}
	elf_end(elf);
	return r;
}

static enum MHD_Result section(struct opal_http_server *h, struct MHD_Connection *c,
			       const char *hex, const char *name)
{
	char path[PATH_MAX];
	int fds[2] = { opal_sym_sources_local_debuginfo(hex, path, sizeof(path)),
		       opal_debuginfo_store_open_file(h->store, hex, OPAL_DI_EXECUTABLE, NULL, NULL,
						      0) };
	void *buf = NULL;
	size_t len = 0;
	int r = -ENOENT;
	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0 && r == -ENOENT)
			r = read_section(fds[i], name, &buf, &len);
		if (fds[i] >= 0)
			close(fds[i]);
	}
	if (r == -EFBIG)
		return opal_http_send_error(c, 406, "section %s is over %u bytes", name,
					    MAX_SECTION_BYTES);
	if (r < 0)
		return opal_http_send_error(c, 404, "no section %s for build ID %s", name, hex);
	return send_bytes(c, buf, len, name);
}

static enum MHD_Result source(struct opal_http_server *h, struct MHD_Connection *c,
			      const char *hex, const char *path)
{
	int fd = opal_debuginfo_store_open_file(h->store, hex, OPAL_DI_SOURCES, NULL, NULL, 0);
	if (fd < 0)
		return opal_http_send_error(c, 404, "no sources uploaded for build ID %s", hex);
	void *buf;
	size_t len;
	int r = opal_srctar_read_member(fd, path, &buf, &len);
	close(fd);
	if (r == -EFBIG)
		return opal_http_send_error(c, 406, "source file over %u bytes",
					    OPAL_SRCTAR_MAX_MEMBER);
	if (r < 0)
		return opal_http_send_error(c, 404, "no source %s for build ID %s", path, hex);
	return send_bytes(c, buf, len, path);
}

enum MHD_Result opal_http_buildid(struct opal_http_server *h, struct MHD_Connection *c,
				  const char *method, const char *url)
{
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return opal_http_send_error(c, 400, "debuginfod requests are GET or HEAD");
	char hex[OPAL_DI_ID_HEX_MAX + 1], path[PATH_MAX];
	const char *p = url + strlen("/buildid/");
	size_t n = strcspn(p, "/");
	if (n == 0 || n > OPAL_DI_ID_HEX_MAX || p[n] != '/')
		return opal_http_send_error(c, 400, "want /buildid/BUILDID/{debuginfo,executable,"
					    "source/PATH,section/NAME}");
	memcpy(hex, p, n);
	hex[n] = '\0';
	if (!opal_di_id_valid(hex, OPAL_DI_ID_GNU))
		return opal_http_send_error(c, 400, "the build ID must be lowercase hex");
	const char *what = p + n + 1;
	if (!strcmp(what, "debuginfo")) {
		int fd = opal_sym_sources_local_debuginfo(hex, path, sizeof(path));
		if (fd < 0)
			return opal_http_send_error(c, 404, "no debuginfo for build ID %s", hex);
		return send_file(c, fd, path);
	}
	if (!strcmp(what, "executable")) {
		int fd = opal_debuginfo_store_open_file(h->store, hex, OPAL_DI_EXECUTABLE, NULL,
							NULL, 0);
		if (fd < 0)
			return opal_http_send_error(c, 404, "no executable for build ID %s", hex);
		snprintf(path, sizeof(path), "uploads/executable/%s", hex);
		return send_file(c, fd, path);
	}
	if (!strncmp(what, "source/", 7) && what[7])
		return source(h, c, hex, what + 6);
	if (!strncmp(what, "section/", 8) && what[8] && !strchr(what + 8, '/'))
		return section(h, c, hex, what + 8);
	return opal_http_send_error(c, 404, "unknown debuginfod request %.200s", what);
}
