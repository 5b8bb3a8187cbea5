/* Reader of Go's function table (.gopclntab, the "pclntab") in an ELF
 * file: function names, file and line of any PC, and Go's inline tree, as
 * the Go runtime reads them for its own tracebacks. Stripped Go binaries
 * (-ldflags='-s -w') keep this table, which is how they can be named
 * without .symtab or DWARF.
 *
 * Formats (the header's magic, little-endian): 0xfffffffa Go 1.16/1.17,
 * 0xfffffff0 Go 1.18/1.19, 0xfffffff1 Go 1.20 and later. Go 1.2-1.15
 * tables (0xfffffffb) are refused with -EPROTONOSUPPORT. Followed: Go 1.19
 * src/runtime/symtab.go (pcHeader, moduledata, funcdata, pcvalue, step),
 * src/runtime/runtime2.go (_func), src/debug/gosym/pclntab.go,
 * src/cmd/internal/objabi/funcdata.go (PCDATA_InlTreeIndex = 2,
 * FUNCDATA_InlTree = 3); for 1.20+, Go 1.21+ src/runtime/symtabinl.go
 * (inlinedCall, inlineUnwinder) and runtime2.go (_func.startLine); for
 * 1.16/1.17 the _func with a pointer-sized entry and funcdata pointers
 * aligned to the pointer size. docs/go.md tells how it was verified.
 *
 * Every read is bounded by the file's bytes; the reader allocates one
 * fixed-size structure whatever the table says, and a lookup uses a
 * bounded stack array. A corrupted table gives -EINVAL, never a read
 * outside the file. Little-endian files only (x86-64, arm64, 386, ...). */
#ifndef OPAL_GOPCLNTAB_H
#define OPAL_GOPCLNTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <libelf.h>

/* Frames one lookup reports at most (inlined calls + the function); a
 * deeper chain is taken as a corrupted (cyclic) inline tree. */
#define OPAL_GOPCLNTAB_MAX_FRAMES 64

struct opal_gopclntab;

enum opal_gopclntab_format {
	OPAL_GOPCLNTAB_GO116 = 116,   /* 0xfffffffa: Go 1.16, 1.17 */
	OPAL_GOPCLNTAB_GO118 = 118,   /* 0xfffffff0: Go 1.18, 1.19 */
	OPAL_GOPCLNTAB_GO120 = 120,   /* 0xfffffff1: Go 1.20 and later */
};

/* How the table was found. */
enum opal_gopclntab_found {
	OPAL_GOPCLNTAB_BY_SECTION = 1,   /* .gopclntab or .data.rel.ro.gopclntab */
	OPAL_GOPCLNTAB_BY_MODULEDATA,    /* runtime.firstmoduledata's pcHeader */
	OPAL_GOPCLNTAB_BY_MAGIC,         /* header magic in a non-executable PT_LOAD */
};

struct opal_gopclntab_info {
	enum opal_gopclntab_format format;
	enum opal_gopclntab_found found;
	uint32_t ptr_size;      /* 4 or 8 */
	uint32_t quantum;       /* PC quantum (minLC): 1 on x86, 4 on arm64 */
	uint64_t nfunc;         /* functions in the table */
	uint64_t table_vaddr;   /* ELF virtual address of the header */
	uint64_t text_start;    /* base of entry offsets (1.18+), else 0 */
	/* Inline trees can be read: always for 1.16 (absolute pointers);
	 * for 1.18+ when the moduledata giving go:func.* was found. */
	bool inline_trees;
};

/* One frame of a lookup. Strings point into the file's bytes (valid as
 * long as the Elf the reader was opened on) and are NUL-terminated. */
struct opal_gopclntab_frame {
	const char *function;   /* as Go prints it: "main.(*T).m", "main.main.func1" */
	const char *file;       /* NULL when the table gives no file here */
	uint32_t line;          /* 0 when the table gives no line here */
	uint32_t start_line;    /* line of the func keyword (1.20+ tables), else 0 */
	uint64_t entry;         /* entry address of the physical (outermost) function */
	bool is_inline;         /* an inlined call (every frame but the last) */
};

/* Called once per frame, innermost first; a non-zero return stops the
 * lookup, which returns that value. */
typedef int (*opal_gopclntab_frame_fn)(void *arg, const struct opal_gopclntab_frame *f);

/* Called once per function, in table (address) order: its name and
 * [start, end) (end is the next function's entry, so it includes the
 * padding after the function). Non-zero stops the walk. */
typedef int (*opal_gopclntab_func_fn)(void *arg, const char *name, uint64_t start, uint64_t end);

/* Finds the table of `elf` (borrowed: it and its raw bytes, elf_rawfile,
 * must outlive the reader): by section name, else through the runtime's
 * moduledata (a pointer to the header in a writable PT_LOAD, checked
 * against the header's table offsets), else by the header magic in a
 * non-executable PT_LOAD with a plausibility check (pad bytes, minLC for
 * the machine, pointer size for the ELF class, ordered offsets in range,
 * the first functions sorted and matching their entries). The moduledata
 * also gives go:func.*, where 1.18+ keep the inline trees.
 * Returns 0 (*out set), -ENOENT (no Go table), -EPROTONOSUPPORT (Go
 * 1.2-1.15 table), -ENOTSUP (big-endian file), -EINVAL (a table that is
 * corrupted, or not a usable ELF), -ENOMEM. */
int opal_gopclntab_open(Elf *elf, struct opal_gopclntab **out);

void opal_gopclntab_free(struct opal_gopclntab *r);

void opal_gopclntab_get_info(const struct opal_gopclntab *r, struct opal_gopclntab_info *info);

/* Resolves ELF virtual address `vaddr` (exact: a caller holding a return
 * address subtracts 1 first, as for DWARF) into the function holding it,
 * with its inlined calls as inline frames innermost first, each with the
 * file and line of the PC in it (for an outer frame, its call site of the
 * inner one), then the physical function. Returns 0 after the frames,
 * -ENOENT (vaddr outside the table's functions), -EINVAL (corrupted
 * entry: no frame was reported), or the callback's non-zero value. */
int opal_gopclntab_lookup(const struct opal_gopclntab *r, uint64_t vaddr,
			  opal_gopclntab_frame_fn fn, void *arg);

/* Walks every function of the table. Returns 0, -EINVAL at the first
 * corrupted entry (those before it were reported), or the callback's
 * non-zero value. */
int opal_gopclntab_foreach_func(const struct opal_gopclntab *r, opal_gopclntab_func_fn fn,
				void *arg);

#endif
