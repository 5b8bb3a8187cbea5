/* htlhash file ID (fileid.h: OpenTelemetry Profiles "Mappings") and hex
 * helpers. */
#include "shared/fileid.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#define HTL_CHUNK 4096

static int pread_full(int fd, uint8_t *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		got += (size_t)r;
	}
	return 0;
}

int opal_file_id_from_fd(int fd, opal_file_id *out)
{
	uint8_t head[HTL_CHUNK], tail[HTL_CHUNK], len_be[8];
	uint8_t digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	struct stat st;
	uint64_t size;
	size_t n;
	int err;

	if (fstat(fd, &st) < 0)
		return -errno;
	size = (uint64_t)st.st_size;
	n = size < HTL_CHUNK ? (size_t)size : HTL_CHUNK;
	if ((err = pread_full(fd, head, n, 0)) < 0)
		return err;
	if ((err = pread_full(fd, tail, n, (off_t)(size - n))) < 0)
		return err;
	for (int i = 0; i < 8; i++)
		len_be[i] = (uint8_t)(size >> (56 - 8 * i));

	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, head, n) != 1 || EVP_DigestUpdate(ctx, tail, n) != 1 ||
	    EVP_DigestUpdate(ctx, len_be, sizeof(len_be)) != 1 ||
	    EVP_DigestFinal_ex(ctx, digest, &dlen) != 1 || dlen < OPAL_FILE_ID_LEN) {
		EVP_MD_CTX_free(ctx);
		return -EIO;
	}
	EVP_MD_CTX_free(ctx);
	memcpy(out->b, digest, OPAL_FILE_ID_LEN);
	return 0;
}

void opal_hex_encode(const uint8_t *bytes, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * len] = '\0';
}

int opal_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int opal_hex_decode(const char *hex, uint8_t *out, size_t cap)
{
	size_t len = strlen(hex);

	if (len % 2 || len / 2 > cap)
		return -EINVAL;
	for (size_t i = 0; i < len / 2; i++) {
		int hi = opal_hex_digit(hex[2 * i]), lo = opal_hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (int)(len / 2);
}

void opal_file_id_to_hex(const opal_file_id *id, char hex[33])
{
	opal_hex_encode(id->b, OPAL_FILE_ID_LEN, hex);
}

int opal_file_id_from_hex(const char *hex, opal_file_id *out)
{
	if (strlen(hex) != 2 * OPAL_FILE_ID_LEN)
		return -EINVAL;
	return opal_hex_decode(hex, out->b, OPAL_FILE_ID_LEN) == OPAL_FILE_ID_LEN ? 0 : -EINVAL;
}

bool opal_is_lower_hex(const char *s, size_t max_len)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		if (i >= max_len)
			return false;
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return i > 0;
}
