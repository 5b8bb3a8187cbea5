/* MiniDebugInfo decompression (debuginfo_minidebug.h) with liblzma: the
 * size is read from the stream's index first, then the stream is decoded
 * into one buffer of that size, so nothing grows past what was checked. */
#include <errno.h>
#include <gelf.h>
#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo_bound.h"
#include "debuginfo/debuginfo_minidebug.h"

/* liblzma's own memory limit for the decoder's dictionary. */
#define XZ_MEMLIMIT (128u << 20)
/* Bytes an index may hold or cost to decode (a MiniDebugInfo stream has
 * one block: its index is a few bytes). */
#define XZ_INDEX_MAX (1u << 20)
#define XZ_INDEX_MEMLIMIT (16u << 20)

int opal_minidebug_declared(const void *in, size_t in_len, uint64_t *size)
{
	const uint8_t *b = in;
	lzma_stream_flags footer;
	if (in_len < 2 * LZMA_STREAM_HEADER_SIZE ||
	    lzma_stream_footer_decode(&footer, b + in_len - LZMA_STREAM_HEADER_SIZE) != LZMA_OK)
		return -EBADMSG;
	uint64_t isize = footer.backward_size;
	if (isize > XZ_INDEX_MAX || isize > in_len - 2 * LZMA_STREAM_HEADER_SIZE)
		return -EBADMSG;
	lzma_index *idx = NULL;
	uint64_t memlimit = XZ_INDEX_MEMLIMIT;
	size_t pos = 0;
	const uint8_t *ib = b + in_len - LZMA_STREAM_HEADER_SIZE - isize;
	if (lzma_index_buffer_decode(&idx, &memlimit, NULL, ib, &pos, (size_t)isize) != LZMA_OK)
		return -EBADMSG;
	/* One stream filling the section: libdwfl decodes from its start, so
	 * an index describing only a last stream would not describe that. */
	bool whole = lzma_index_file_size(idx) == in_len;
	*size = lzma_index_uncompressed_size(idx);
	lzma_index_end(idx, NULL);
	return whole ? 0 : -EBADMSG;
}

int opal_minidebug_decompress(const void *in, size_t in_len, size_t max_out, void **buf,
			      size_t *len)
{
	*buf = NULL;
	*len = 0;
	if (in_len > OPAL_MINIDEBUG_MAX_IN)
		return -EFBIG;
	lzma_stream strm = LZMA_STREAM_INIT;
	if (lzma_stream_decoder(&strm, XZ_MEMLIMIT, 0) != LZMA_OK)
		return -ENOMEM;
	/* One byte more than allowed, to see the data go past the bound. */
	uint8_t *out = malloc(max_out + 1);
	if (!out) {
		lzma_end(&strm);
		return -ENOMEM;
	}
	strm.next_in = in;
	strm.avail_in = in_len;
	strm.next_out = out;
	strm.avail_out = max_out + 1;
	int err = 0;
	for (;;) {
		lzma_ret r = lzma_code(&strm, LZMA_FINISH);
		if (r == LZMA_STREAM_END)
			break;
		if (r == LZMA_OK && strm.avail_out > 0)
			continue;
		if (r == LZMA_MEM_ERROR)
			err = -ENOMEM;
		else if (r == LZMA_MEMLIMIT_ERROR || strm.avail_out == 0)
			err = -EFBIG;
		else
			err = -EBADMSG;   /* damaged, or the input ended early */
		break;
	}
	size_t produced = max_out + 1 - strm.avail_out;
	lzma_end(&strm);
	if (err == 0 && produced > max_out)
		err = -EFBIG;
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
		uint64_t declared;
		if (opal_minidebug_declared(d->d_buf, d->d_size, &declared) < 0)
			return -EBADMSG;
		if (declared > OPAL_MINIDEBUG_MAX_OUT || declared > opal_decomp_budget())
			return -EFBIG;
		int r = opal_minidebug_decompress(d->d_buf, d->d_size, (size_t)declared, buf, len);
		if (r == 0 && *len != declared) {
			free(*buf);
			*buf = NULL;
			*len = 0;
			return -EBADMSG;
		}
		return r;
	}
	return -ENOENT;
}
