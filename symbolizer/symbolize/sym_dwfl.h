/* One libdwfl session per ELF file: reports the file at its own ELF
 * virtual addresses, gets separate debug info only through opal's own
 * find_debuginfo callback (opal_sym_sources_find_debuginfo,
 * debuginfo/debuginfo_sources.h: uploads, the build-ID tree under the
 * debug root, .gnu_debuglink candidates the collector opened, debuginfod
 * answers fetched beforehand, in that order; libdwfl never searches paths
 * or the network itself), and resolves an address into an inline chain
 * from DWARF or, without DWARF, into one frame from .symtab/.dynsym. */
#ifndef OPAL_SYM_DWFL_H
#define OPAL_SYM_DWFL_H

#include <stdint.h>
#include <elfutils/libdw.h>
#include "symbolize/symbolize.h"

struct opal_dwfl_file;

/* Opens a session on a duplicate of `fd` (the caller keeps `fd`; the
 * session holds its own descriptor until closed). `name` (may be NULL)
 * is the file's path as the collector saw it; libdwfl uses its directory
 * to look for .gnu_debuglink files. A file libdwfl cannot use (not ELF,
 * ET_REL/ET_CORE, ...) still yields a session of quality OPAL_DEBUG_NONE
 * whose lookups all come back unresolved, so that the reason is recorded;
 * so does a file refused before decompression (opal_decomp_open,
 * debuginfo/debuginfo_bound.h: its compressed sections declare more than
 * the budget, or lie), which libelf and libdw then never open. zstd debug
 * sections are given to libdw decompressed. Returns 0, -ENOMEM, or -errno
 * from dup or the memfd (e.g. -EMFILE). */
int opal_dwfl_open(int fd, const char *name, struct opal_dwfl_file **out);

void opal_dwfl_close(struct opal_dwfl_file *f);

/* Estimated bytes the session's libelf/libdw hold: its DWARF sections as
 * mapped or decompressed, plus the line tables libdw has parsed for the
 * address index (kept until the session closes); libdw's abbreviation
 * tables and unit structures come on top (a few KiB per unit). For
 * callers that bound sessions by memory rather than by count; the index
 * itself is bounded separately (sym_index.h). */
size_t opal_dwfl_memory(const struct opal_dwfl_file *f);

/* A session of quality OPAL_DEBUG_NONE for a file known to be refused
 * before decompression (the SQLite cache remembers it, sym_sqlite.h),
 * with reason `why` (copied): it never touches the file. Returns 0 or
 * -ENOMEM. */
int opal_dwfl_open_refused(const char *why, struct opal_dwfl_file **out);

/* True when the session's file was refused before decompression. */
bool opal_dwfl_refused(const struct opal_dwfl_file *f);

/* What the session found (sym_dwfl.c's comment tells how it is ranked).
 * When `reason` is not NULL, *reason gets a string owned by the session
 * saying why, e.g. "dwarf with inline scopes" or "not usable ELF: ...". */
enum opal_debug_quality opal_dwfl_quality(const struct opal_dwfl_file *f, const char **reason);

/* Opens a session on `fd` (borrowed) only to rank it: *q and its reason
 * (copied into `why`, why_len bytes), as the debug-info store's
 * opal_di_rank_fn. Returns 0 or opal_dwfl_open's -errno. */
int opal_dwfl_rank(int fd, enum opal_debug_quality *q, char *why, size_t why_len);

/* Resolves ELF virtual address `vaddr` (the exact address to look up: the
 * caller has already applied any return-address -1). Fills `out`
 * (zeroed first): an inline chain (innermost first, at most
 * OPAL_SYM_MAX_FRAMES) from DWARF, else the one .symtab/.dynsym symbol
 * whose [st_value, st_value + st_size) holds the address (a sizeless
 * symbol only at its exact address), else n = 0. DWARF is read through
 * the session's address index (sym_index.h); units the index refuses go
 * through opal_dwfl_lookup_scopes's per-address walk. Returns 0 or
 * -ENOMEM. */
int opal_dwfl_lookup(struct opal_dwfl_file *f, uint64_t vaddr, struct opal_sym_result *out);

/* The same answer as opal_dwfl_lookup, computed per address with libdw's
 * scope walk (dwarf_getscopes + dwarf_getscopes_die): slow (a walk of the
 * unit's DIEs per address) but independent of the index, which it is
 * tested against. Returns 0 or -ENOMEM. */
int opal_dwfl_lookup_scopes(struct opal_dwfl_file *f, uint64_t vaddr,
			    struct opal_sym_result *out);

#endif
