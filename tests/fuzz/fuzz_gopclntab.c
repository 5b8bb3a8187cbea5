/* libFuzzer target for the Go pclntab reader (symbolizer/symbolize/
 * gopclntab.h): arbitrary bytes are opened as an ELF file (libelf's
 * elf_memory on a copy); when a table is found, every function's entry
 * and a few PCs inside and around it are looked up and the functions are
 * walked. Answers must be well formed; corrupted tables may only give
 * -ENOENT / -EINVAL. Seeded with tests/fixtures/go's small re-encoded
 * tables of each format. Built and run by tests/fuzz/run_gopclntab.sh. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gelf.h>

#include "symbolizer/symbolize/gopclntab.h"

/* Functions whose PCs are looked up, at most, per input. */
#define MAX_FUNCS 256

static void require(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_gopclntab: %s\n", what);
		abort();
	}
}

struct frames {
	unsigned n;
	uint64_t entry;
};

static int on_frame(void *arg, const struct opal_gopclntab_frame *f)
{
	struct frames *fr = arg;
	require(f->function != NULL, "frame without a function");
	require(fr->n < OPAL_GOPCLNTAB_MAX_FRAMES, "too many frames");
	if (fr->n > 0)
		require(f->entry == fr->entry, "frames of one lookup disagree on the entry");
	fr->entry = f->entry;
	/* strings are NUL-terminated inside the input */
	(void)strlen(f->function);
	if (f->file)
		(void)strlen(f->file);
	fr->n++;
	return 0;
}

static void check_lookup(const struct opal_gopclntab *r, uint64_t pc)
{
	struct frames fr = { 0 };
	int rc = opal_gopclntab_lookup(r, pc, on_frame, &fr);
	require(rc == 0 || rc == -ENOENT || rc == -EINVAL, "lookup result");
	require(rc == 0 ? fr.n >= 1 : fr.n == 0, "frames reported with an error");
}

struct funcs {
	unsigned n;
	uint64_t start[MAX_FUNCS], end[MAX_FUNCS];
};

static int on_func(void *arg, const char *name, uint64_t start, uint64_t end)
{
	struct funcs *fs = arg;
	require(name != NULL, "function without a name");
	(void)strlen(name);
	if (fs->n < MAX_FUNCS) {
		fs->start[fs->n] = start;
		fs->end[fs->n++] = end;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	if (!init) {
		elf_version(EV_CURRENT);
		init = 1;
	}
	char *copy = malloc(size ? size : 1);
	require(copy != NULL, "malloc");
	memcpy(copy, data, size);
	Elf *elf = elf_memory(copy, size);
	if (elf) {
		struct opal_gopclntab *r = NULL;
		int rc = opal_gopclntab_open(elf, &r);
		require(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -EPROTONOSUPPORT ||
				rc == -ENOTSUP,
			"open result");
		require((rc == 0) == (r != NULL), "reader set on error");
		if (r) {
			struct funcs fs = { 0 };
			rc = opal_gopclntab_foreach_func(r, on_func, &fs);
			require(rc == 0 || rc == -EINVAL, "walk result");
			for (unsigned i = 0; i < fs.n; i++) {
				uint64_t s = fs.start[i], e = fs.end[i];
				check_lookup(r, s);
				check_lookup(r, s + (e - s) / 2);
				check_lookup(r, e - 1);
				check_lookup(r, s - 1);
			}
			struct opal_gopclntab_info info;
			opal_gopclntab_get_info(r, &info);
			check_lookup(r, info.text_start);
			check_lookup(r, info.table_vaddr);
			opal_gopclntab_free(r);
		}
		elf_end(elf);
	}
	free(copy);
	return 0;
}
