/* libFuzzer target: the decompression bound (debuginfo_bound.h) and the
 * MiniDebugInfo decoder (debuginfo_minidebug.h) on arbitrary bytes. An
 * ELF input is scanned and opened as libdw would get it (zstd sections
 * decompressed into a memfd), whose sections libelf then reads and
 * decompresses: the scan's budget must hold them. Any other input is
 * taken as an xz stream: its index, then a decode bounded by it.
 * The budget is 8 MiB, so that a bomb the scan lets through would show
 * as libFuzzer's out-of-memory or timeout.
 * Seeds: tests/fixtures/bombs (4 MiB bombs of every kind) and the
 * compressed variants of tests/fixtures/debuginfo. */
#include <gelf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolizer/debuginfo/debuginfo_bound.h"
#include "symbolizer/debuginfo/debuginfo_minidebug.h"

#define BUDGET (8u << 20)

/* Reads every section of the image through libelf, decompressing the
 * compressed ones as libdw does. */
static void read_sections(int fd)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	while (elf && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		if (sh.sh_flags & SHF_COMPRESSED)
			elf_compress(scn, 0, 0);
		(void)elf_getdata(scn, NULL);
	}
	elf_end(elf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		once = 1;
		elf_version(EV_CURRENT);
		opal_decomp_set_budget(BUDGET);
	}
	if (size >= 4 && memcmp(data, ELFMAG, SELFMAG) == 0) {
		int fd = memfd_create("fuzz", MFD_CLOEXEC);
		if (fd < 0)
			return 0;
		if (write(fd, data, size) == (ssize_t)size) {
			struct opal_decomp_scan s;
			int img = opal_decomp_open(fd, &s);
			if (img >= 0) {
				read_sections(img);
				close(img);
			}
		}
		close(fd);
		return 0;
	}
	uint64_t declared;
	void *buf;
	size_t len;
	if (opal_minidebug_declared(data, size, &declared) == 0 && declared <= BUDGET &&
	    opal_minidebug_decompress(data, size, (size_t)declared, &buf, &len) == 0)
		free(buf);
	return 0;
}
