/* libFuzzer target: the JIT name readers (symbolizer/interp/jit_parse.h,
 * jit_table.h) on arbitrary files. Input: one byte (bit 0: a jitdump, else
 * a perf map; bits 1-7: where the file is split), then the file's bytes.
 * The first part is registered as a descriptor (a memfd, as the
 * collector passes it) and looked up, the rest is appended (a growing
 * file) and looked up again one refresh later, then the file is cut
 * (rewritten) and looked up a third time; every name found is split by
 * the runtimes' conventions. Names must be NUL-terminated within their
 * buffer; nothing may crash, leak or read outside the file.
 *
 * fuzz-sources: symbolizer/interp/jit_parse.c symbolizer/interp/jit_table.c
 * Seeds: BUILD_DIR/fixtures/jit (tests/fixtures/jit/build.sh: perf maps of
 * V8, OpenJDK and CPython, a jitdump). */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolizer/interp/jit_parse.h"
#include "symbolizer/interp/jit_table.h"

#define SEC 1000000000ull

static void look(struct opal_jit_table *t, const uint8_t *data, size_t size, uint64_t now)
{
	char name[64], func[32], file[32];
	uint32_t line;

	/* addresses taken from the input, and the ones its ranges start at */
	for (size_t i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
		uint64_t addr;
		memcpy(&addr, data + i, 8);
		for (int k = 0; k < 2; k++, addr = strtoull((const char *)data + i, NULL, 16)) {
			if (opal_jit_table_name(t, 1, 1, addr, now, name, sizeof(name)) != 0)
				continue;
			if (!memchr(name, '\0', sizeof(name)))
				abort();
			opal_jit_name_split(name, strlen(name), func, file, sizeof(func), &line);
			if (!memchr(func, '\0', sizeof(func)) || !memchr(file, '\0', sizeof(file)))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct opal_jit_table *t;
	int fd, fd2;

	if (size < 1)
		return 0;
	enum opal_jit_file_kind kind = data[0] & 1 ? OPAL_JIT_FILE_JITDUMP : OPAL_JIT_FILE_PERF_MAP;
	data++;
	size--;
	size_t split = size * ((data[-1] >> 1) + 1) / 128;
	if (split > size)
		split = size;
	if (!(t = opal_jit_table_new()))
		return 0;
	if ((fd = memfd_create("fuzz", MFD_CLOEXEC)) < 0) {
		opal_jit_table_free(t);
		return 0;
	}
	if (write(fd, data, split) != (ssize_t)split || (fd2 = dup(fd)) < 0) {
		close(fd);
		opal_jit_table_free(t);
		return 0;
	}
	opal_jit_table_put(t, 1, 1, kind, fd);
	look(t, data, size, SEC);
	if (write(fd2, data + split, size - split) == (ssize_t)(size - split))
		look(t, data, size, 3 * SEC);
	if (ftruncate(fd2, (off_t)(size / 3)) == 0)
		look(t, data, size, 5 * SEC);
	close(fd2);
	opal_jit_table_free(t);
	return 0;
}
