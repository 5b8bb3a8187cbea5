/* Source tarballs through libarchive (debuginfo_srctar.h). The archive is read from
 * a duplicate descriptor rewound to 0, so the caller's offset is kept. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/metrics.h"
#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_srctar.h"

static struct archive *open_archive(int fd, int *dfd)
{
	*dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (*dfd < 0)
		return NULL;
	if (lseek(*dfd, 0, SEEK_SET) != 0) {
		close(*dfd);
		return NULL;
	}
	struct archive *a = archive_read_new();
	if (!a) {
		close(*dfd);
		return NULL;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (archive_read_open_fd(a, *dfd, 65536) != ARCHIVE_OK) {
		archive_read_free(a);
		close(*dfd);
		return NULL;
	}
	return a;
}

/* Adds entry `e`'s declared size to *total; false (counted) once the sum
 * is over the budget: the bytes to decompress to get past it. */
static bool within_budget(struct archive_entry *e, uint64_t *total)
{
	int64_t size = archive_entry_size(e);
	uint64_t budget = opal_decomp_budget();
	if (size > 0)
		*total += (uint64_t)size;
	if (size >= 0 && *total <= budget)
		return true;
	opal_metrics_decomp_refused(OPAL_DECOMP_OVER_BUDGET);
	return false;
}

static const char *strip_prefix(const char *p)
{
	for (;;) {
		if (p[0] == '/')
			p++;
		else if (p[0] == '.' && p[1] == '/')
			p += 2;
		else
			return p;
	}
}

int opal_srctar_validate(int fd, char *why, size_t why_len)
{
	int dfd;
	struct archive *a = open_archive(fd, &dfd);
	if (!a) {
		snprintf(why, why_len, "not a readable archive");
		return -EBADMSG;
	}
	struct archive_entry *e;
	int files = 0, r, entries = 0;
	uint64_t total = 0;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (++entries > OPAL_SRCTAR_MAX_ENTRIES) {
			snprintf(why, why_len, "more than %d archive members", OPAL_SRCTAR_MAX_ENTRIES);
			files = -E2BIG;
			break;
		}
		if (!within_budget(e, &total)) {
			snprintf(why, why_len, "refused before decompression: the archive members "
				 "declare more than the budget of %llu bytes",
				 (unsigned long long)opal_decomp_budget());
			files = -EFBIG;
			break;
		}
		if (archive_entry_filetype(e) == AE_IFREG)
			files++;
		archive_read_data_skip(a);
	}
	if (files >= 0 && r != ARCHIVE_EOF) {
		snprintf(why, why_len, "damaged archive: %s", archive_error_string(a) ?
			 archive_error_string(a) : "read error");
		files = -EBADMSG;
	} else if (files == 0) {
		snprintf(why, why_len, "archive holds no regular file");
		files = -EBADMSG;
	}
	archive_read_free(a);
	close(dfd);
	return files;
}

int opal_srctar_read_member(int fd, const char *path, void **buf, size_t *len)
{
	int dfd;
	*buf = NULL;
	*len = 0;
	struct archive *a = open_archive(fd, &dfd);
	if (!a)
		return -EBADMSG;
	const char *want = strip_prefix(path);
	struct archive_entry *e;
	int r, entries = 0, err = -ENOENT;
	uint64_t total = 0;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK &&
	       ++entries <= OPAL_SRCTAR_MAX_ENTRIES) {
		if (!within_budget(e, &total)) {
			err = -EFBIG;
			break;
		}
		const char *name = archive_entry_pathname(e);
		if (archive_entry_filetype(e) != AE_IFREG || !name ||
		    strcmp(strip_prefix(name), want) != 0) {
			archive_read_data_skip(a);
			continue;
		}
		int64_t size = archive_entry_size(e);
		if (size < 0 || size > OPAL_SRCTAR_MAX_MEMBER) {
			err = -EFBIG;
			break;
		}
		char *b = malloc(size ? (size_t)size : 1);
		if (!b) {
			err = -ENOMEM;
			break;
		}
		la_ssize_t got = size ? archive_read_data(a, b, (size_t)size) : 0;
		if (got != size) {
			free(b);
			err = -EBADMSG;
			break;
		}
		*buf = b;
		*len = (size_t)size;
		err = 0;
		break;
	}
	if (err == -ENOENT && r != ARCHIVE_EOF && r != ARCHIVE_OK)
		err = -EBADMSG;
	archive_read_free(a);
	close(dfd);
	return err;
}
