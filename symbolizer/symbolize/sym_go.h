/* Go functions from the binary's own table (.gopclntab, gopclntab.h) as
 * symbolization results: for Go binaries without DWARF (`-ldflags=-s -w`,
 * the default of release builds), and with it (DWARF names generic and
 * array types otherwise, and misses some code: docs/go.md) for any
 * address. Used for every Go binary, stripped or not, so that both give
 * the names Go prints; inlined calls become inline frames
 * with their call-site lines, as DWARF inline chains do. docs/go.md. */
#ifndef OPAL_SYM_GO_H
#define OPAL_SYM_GO_H

#include <stdint.h>
#include <libelf.h>
#include "base/sym_result.h"
#include "symbolize/gopclntab.h"

/* The Go table of `elf` (borrowed for the reader's life), or NULL when
 * the file has none or it cannot be read (not Go, an old or corrupt
 * table). *quality gets what it gives: DWARF_INLINE with inline trees,
 * else DWARF_LINES. */
struct opal_gopclntab *opal_sym_go_open(Elf *elf, enum opal_debug_quality *quality);

/* Fills `out` (empty first) with the frames at ELF virtual address `vaddr`
 * (already the address to look up), innermost first. Returns 0 (out->n 0
 * when the address is in no Go function) or -ENOMEM. */
int opal_sym_go_lookup(const struct opal_gopclntab *r, uint64_t vaddr, struct opal_sym_result *out);

#endif
