/* MiniDebugInfo decompression (minidebug.h) with liblzma's stream decoder,
 * growing the output buffer geometrically up to OPAL_MINIDEBUG_MAX_OUT. */
#include <errno.h>
#include <gelf.h>
#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "minidebug.h"

/* liblzma's own memory limit for the decoder's dictionary. */
#define XZ_MEMLIMIT (128u << 20)

int opal_minidebug_decompress(const void *in, size_t in_len, void **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	if (in_len > OPAL_MINIDEBUG_MAX_IN)
		return -EFBIG;
	lzma_stream strm = LZMA_STREAM_INIT;
	if (lzma_stream_decoder(&strm, XZ_MEMLIMIT, 0) != LZMA_OK)
		return -ENOMEM;
	size_t cap = in_len * 4 < 65536 ? 65536 : in_len * 4;
	if (cap > OPAL_MINIDEBUG_MAX_OUT)
		cap = OPAL_MINIDEBUG_MAX_OUT;
	uint8_t *out = malloc(cap);
	if (!out) {
		lzma_end(&strm);
		return -ENOMEM;
	}
	strm.next_in = in;
	strm.avail_in = in_len;
	strm.next_out = out;
	strm.avail_out = cap;
	int err = 0;
	for (;;) {
		lzma_ret r = lzma_code(&strm, LZMA_FINISH);
		if (r == LZMA_STREAM_END)
			break;
		if (r == LZMA_MEM_ERROR || r == LZMA_MEMLIMIT_ERROR) {
			err = r == LZMA_MEM_ERROR ? -ENOMEM : -EFBIG;
			break;
		}
		if (r != LZMA_OK && r != LZMA_BUF_ERROR) {
			err = -EBADMSG;
			break;
		}
		if (strm.avail_out > 0) {
			/* No progress possible with output room left: input ended early. */
			err = -EBADMSG;
			break;
		}
		if (cap >= OPAL_MINIDEBUG_MAX_OUT) {
			err = -EFBIG;
			break;
		}
		size_t ncap = cap * 2 > OPAL_MINIDEBUG_MAX_OUT ? OPAL_MINIDEBUG_MAX_OUT : cap * 2;
		uint8_t *n = realloc(out, ncap);
		if (!n) {
			err = -ENOMEM;
			break;
		}
		out = n;
		strm.next_out = out + cap;
		strm.avail_out = ncap - cap;
		cap = ncap;
	}
	size_t produced = cap - strm.avail_out;
	lzma_end(&strm);
	if (err < 0) {
		free(out);
		return err;
	}
	*buf = out;
	*len = produced;
	return 0;
}

int opal_minidebug_extract(Elf *elf, void **buf, size_t *len)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	*buf = NULL;
	*len = 0;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".gnu_debugdata") != 0)
			continue;
		if (sh.sh_size > OPAL_MINIDEBUG_MAX_IN)
			return -EFBIG;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size == 0)
			return -EBADMSG;
		return opal_minidebug_decompress(d->d_buf, d->d_size, buf, len);
	}
	return -ENOENT;
}
