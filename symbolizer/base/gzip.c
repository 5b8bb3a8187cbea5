/* One-call gzip (gzip.h). */
#include "base/gzip.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

int opal_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	z_stream zs = { 0 };

	*out = NULL;
	if (len > UINT_MAX / 2)
		return -E2BIG;
	/* windowBits 15 + 16: a gzip header and trailer instead of zlib's. */
	if (deflateInit2(&zs, OPAL_GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	/* deflateBound covers the gzip wrapper: one Z_FINISH call suffices. */
	uLong cap = deflateBound(&zs, (uLong)len);
	uint8_t *buf = malloc(cap);
	if (!buf) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	zs.next_out = buf;
	zs.avail_out = (uInt)cap;
	int rc = deflate(&zs, Z_FINISH);
	*out_len = zs.total_out;
	deflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	return 0;
}
