/* Symbol name demangling for C++ (Itanium ABI, "_Z...") and Rust (legacy
 * "_ZN...17h<hash>E" and v0 "_R..."), via libiberty's cplus_demangle. */
#ifndef OPAL_DEMANGLE_H
#define OPAL_DEMANGLE_H

/* Returns a new heap string (at most OPAL_SYM_MAX_NAME bytes, sym_result.h)
 * with the demangled form of `name` as c++filt prints it (parameters,
 * cv-qualifiers and GCC clone suffixes as "[clone .isra.0]" included,
 * std::string as std::basic_string<char, ...>; the Rust hash dropped), or
 * a copy of `name` itself when it is
 * not a mangled C++/Rust name or does not demangle (C names are never
 * touched: only "_Z"/"_R" prefixes are tried, so libiberty's Ada and D
 * heuristics cannot rewrite them). NULL for name == NULL or ENOMEM. Names
 * longer than OPAL_SYM_MAX_NAME are not demangled (libiberty's recursion
 * limit stays on as well). */
char *opal_demangle(const char *name);

#endif
