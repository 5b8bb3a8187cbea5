/* Function names from DWARF, shared by the per-address path (sym_dwfl.c)
 * and the address index (sym_index_names.c), so that both name a function
 * the same way: "ns::Class::name" for a C++/Rust function DIE without a
 * linkage name (GCC omits it for functions with internal linkage), built
 * from the namespaces and classes enclosing its declaration (DWARF 5,
 * section 3.3.8: DW_AT_abstract_origin and DW_AT_specification). */
#ifndef OPAL_DWARF_NAME_H
#define OPAL_DWARF_NAME_H

#include <dwarf.h>
#include <stdbool.h>
#include <stddef.h>
#include <elfutils/libdw.h>

/* Enclosing namespaces/classes named in one qualified name; further
 * (outer) ones are left out. */
#define OPAL_DWARF_MAX_SCOPES 16

/* The part an unnamed namespace contributes (as GDB and c++filt print it). */
#define OPAL_DWARF_ANON_NAMESPACE "(anonymous namespace)"

/* The part an enclosing scope of tag `tag` named `name` (NULL: unnamed)
 * contributes, as the demangler spells it: OPAL_DWARF_ANON_NAMESPACE for
 * a namespace, "{unnamed type}" for a class, structure or union (a
 * lambda's closure type among them; the demangler's "#N" numbering is not
 * in the DWARF). */
static inline const char *opal_dwarf_scope_label(int tag, const char *name)
{
	return name ? name : tag == DW_TAG_namespace ? OPAL_DWARF_ANON_NAMESPACE : "{unnamed type}";
}

/* The DIE that carries a function's name and scope: `die` followed through
 * DW_AT_abstract_origin (inlined and out-of-line instances) and
 * DW_AT_specification (definitions of declared members), into *decl; at
 * most OPAL_DWARF_MAX_ORIGINS hops, so that a reference cycle in a crafted
 * file ends. */
#define OPAL_DWARF_MAX_ORIGINS 8
void opal_dwarf_declaration(Dwarf_Die *die, Dwarf_Die *decl);

/* True when the unit's language scopes names by namespaces and types
 * joined with "::" (C++ of any standard, Rust). */
bool opal_dwarf_scoped_language(Dwarf_Die *cudie);

/* True for the tags that contribute a part to a qualified name. */
bool opal_dwarf_names_scope(int tag);

/* The names of the scopes enclosing `decl`, innermost first, from libdw's
 * walk (dwarf_getscopes_die: reads the unit from its start): at most
 * OPAL_DWARF_MAX_SCOPES into parts[] (libdw's strings, valid while the
 * session is open; opal_dwarf_scope_label for an unnamed one). Stops at
 * the first enclosing scope that is not a namespace or type. Returns the
 * count (0 on error or ENOMEM inside libdw: the name stays unqualified). */
size_t opal_dwarf_scope_names(Dwarf_Die *decl, const char **parts);

/* "parts[np-1]::...::parts[0]::name" as a heap string the caller frees,
 * cut to OPAL_SYM_MAX_NAME bytes and made valid UTF-8 (opal_sym_strdup);
 * each part counts at most OPAL_SYM_MAX_NAME bytes. NULL on ENOMEM. */
char *opal_dwarf_qualify(const char *const *parts, size_t np, const char *name);

#endif
