/* Sorted index of a libdwfl module's symbol table, answering the
 * addresses sym_dwfl.c names from symbols (no DWARF function there) the
 * way dwfl_module_addrinfo does, without its scan of every symbol per
 * call (elfutils 0.188: ~300 us per address on libc's 10,000 symbols).
 *
 * dwfl_module_addrinfo's choice (libdwfl/dwfl_module_addrsym.c): global
 * and weak symbols first, locals only when no global fits; among symbols
 * of nonzero size holding the address, the one starting closest below
 * it, preferring a stronger binding and then a smaller size when starts
 * are equal, the first in table order on full ties; without one, the
 * sizeless symbol nearest below the address in its section, unless a
 * symbol starting below the address reaches past that label.
 *
 * Bound: OPAL_SYMTAB_MAX_SYMS symbols (bigger tables, or modules whose
 * symbol values need libdwfl's adjustments, e.g. ET_REL or PPC64
 * function descriptors, are not indexed: the caller asks libdwfl); the
 * index takes 48 bytes per symbol and lives as long as the session. */
#ifndef OPAL_SYM_SYMTAB_H
#define OPAL_SYM_SYMTAB_H

#include <gelf.h>
#include <elfutils/libdwfl.h>

#define OPAL_SYMTAB_MAX_SYMS (1u << 22)
#define OPAL_SYMTAB_MAX_HITS 256   /* symbols holding one address, examined */

struct opal_symtab;

/* Indexes the symbol table of `mod` (borrowed: must outlive the index).
 * Returns 0, -ENOMEM, or -ENOTSUP when the table is not indexable (see
 * above; *out stays NULL). A module without symbols gives an empty
 * index. */
int opal_symtab_new(Dwfl_Module *mod, struct opal_symtab **out);
void opal_symtab_free(struct opal_symtab *t);

/* Symbol at module address `addr`, as dwfl_module_addrinfo would name it
 * (a sizeless one, such as _start, also names the bytes after it up to
 * the next symbol in its section, as in eu-addr2line, llvm-symbolizer
 * and perf): returns its name (owned by
 * libdwfl) and fills *sym and *off (addr minus the symbol's value), or
 * returns NULL. When more than OPAL_SYMTAB_MAX_HITS symbols hold the
 * address, returns NULL with *ask_libdwfl set: the caller asks libdwfl. */
const char *opal_symtab_lookup(const struct opal_symtab *t, GElf_Addr addr, GElf_Sym *sym,
			       GElf_Off *off, bool *ask_libdwfl);

#endif
