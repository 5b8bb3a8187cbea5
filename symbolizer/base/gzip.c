/* One-call gzip (gzip.h). */
#include "base/gzip.h"

#include <errno.h>
#include <libdeflate.h>
#include <limits.h>
#include <stdlib.h>

int opal_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	*out = NULL;
	if (len > UINT_MAX / 2)
		return -E2BIG;
	/* A compressor is a few hundred KiB of match-finder state; made per
	 * call, it costs ~2% of compressing a warm interval's pprof. */
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(OPAL_GZIP_LEVEL);
	if (!c)
		return -ENOMEM;
	/* The bound covers the gzip wrapper and incompressible input. */
	size_t cap = libdeflate_gzip_compress_bound(c, len);
	uint8_t *buf = malloc(cap);
	if (!buf) {
		libdeflate_free_compressor(c);
		return -ENOMEM;
	}
	size_t n = libdeflate_gzip_compress(c, in, len, buf, cap);
	libdeflate_free_compressor(c);
	if (n == 0) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*out_len = n;
	return 0;
}
