/* libFuzzer target: the upload validator (opal_debuginfo_validate, with
 * the ELF probe, MiniDebugInfo decompression, libdwfl ranking and the
 * sources-archive reader behind it) on arbitrary bytes, as every type of
 * upload, by GNU build ID and by htlhash file ID. The bytes are written to
 * a memfd, as an upload body lands in a file.
 *
 * fuzz-sources: see tests/fuzz/build_debuginfo.sh
 * Seeds: the ELF files of tests/fixtures/debuginfo. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/stat.h>

#include "symbolizer/debuginfo/debuginfo_keep.h"
#include "symbolizer/debuginfo/debuginfo_probe.h"
#include "symbolizer/debuginfo/debuginfo_store.h"
#include "symbolizer/symbolize/sym_dwfl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("upload", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	struct opal_elf_probe p;
	char why[256];
	const char *gnu_id = "00112233445566778899aabbccddeeff00112233";
	if (opal_elf_probe_fd(fd, &p, why, sizeof(why)) == 0 && p.build_id_len) {
		static char hex[OPAL_DI_ID_HEX_MAX + 1];
		opal_hex_encode(p.build_id, p.build_id_len, hex);
		gnu_id = hex;   /* also reach the checks past the ID match */
	}
	for (int t = 0; t < OPAL_DI_N_TYPES; t++) {
		struct opal_di_request r = { .id_type = OPAL_DI_ID_GNU, .type = (enum opal_di_type)t };
		enum opal_debug_quality q;
		snprintf(r.id, sizeof(r.id), "%s", gnu_id);
		why[0] = '\0';
		bool ok = opal_debuginfo_validate(fd, &r, opal_dwfl_rank, &q, why, sizeof(why));
		/* Always a reason; a rank only in range; sources carry none. */
		if (!why[0] || (unsigned)q > OPAL_DEBUG_DWARF_INLINE ||
		    (ok && t == OPAL_DI_SOURCES && q != OPAL_DEBUG_NONE))
			abort();
		r.id_type = OPAL_DI_ID_HTLHASH;
		snprintf(r.id, sizeof(r.id), "00112233445566778899aabbccddeeff");
		(void)opal_debuginfo_validate(fd, &r, opal_dwfl_rank, &q, why, sizeof(why));
	}
	/* The keep-debug writer reads the same untrusted input. */
	int out = memfd_create("keepdebug", MFD_CLOEXEC);
	if (out >= 0) {
		(void)opal_keep_debug_write(fd, out, why, sizeof(why));
		/* its bound: never much larger than what it read */
		struct stat st;
		if (fstat(out, &st) == 0 && (uint64_t)st.st_size > size + (17u << 20))
			abort();
		close(out);
	}
	close(fd);
	return 0;
}
