/* File identity: the htlhash file ID and the GNU build ID, the OpenTelemetry
 * semantic conventions process.executable.build_id.htlhash and .gnu. The
 * htlhash algorithm is defined by the OpenTelemetry Profiles specification,
 * "Mappings", section "Algorithm for process.executable.build_id.htlhash"
 * (https://opentelemetry.io/docs/specs/otel/profiles/mappings/), as the
 * OpenTelemetry eBPF profiler computes its file ID (opentelemetry-ebpf-profiler,
 * libpf/fileid.go, FileIDFromExecutableReader). */
#ifndef OPAL_FILEID_H
#define OPAL_FILEID_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define OPAL_FILE_ID_LEN   16
#define OPAL_BUILD_ID_MAX  64   /* bytes; longer build-ID notes are rejected */

typedef struct opal_file_id {
	uint8_t b[OPAL_FILE_ID_LEN];
} opal_file_id;

/* htlhash of the file open on `fd`: SHA-256 over bytes [0, min(4096,size)),
 * then the last min(4096,size) bytes, then the size as a big-endian u64;
 * the first 16 bytes of the digest. Reads with pread (the file position is
 * untouched). Returns 0, or -errno (-EIO on a short read). */
int opal_file_id_from_fd(int fd, opal_file_id *out);

/* Writes 32 lowercase hex digits and a NUL into `hex` (33 bytes). */
void opal_file_id_to_hex(const opal_file_id *id, char hex[33]);

/* Parses exactly 32 hex digits (either case). Returns 0 or -EINVAL. */
int opal_file_id_from_hex(const char *hex, opal_file_id *out);

static inline bool opal_file_id_eq(const opal_file_id *a, const opal_file_id *b)
{
	for (int i = 0; i < OPAL_FILE_ID_LEN; i++)
		if (a->b[i] != b->b[i])
			return false;
	return true;
}

/* The value (0-15) of one hex digit of either case, or -1 for any other
 * character. */
int opal_hex_digit(char c);

/* Lowercase hex of `len` bytes into `out`, which must hold 2*len+1 bytes. */
void opal_hex_encode(const uint8_t *bytes, size_t len, char *out);

/* Decodes an even-length lowercase-or-uppercase hex string of at most
 * `cap` bytes into `out`. Returns the byte count or -EINVAL. */
int opal_hex_decode(const char *hex, uint8_t *out, size_t cap);

/* True when `s` is non-empty, at most `max_len` chars, only [0-9a-f]. */
bool opal_is_lower_hex(const char *s, size_t max_len);

#endif
