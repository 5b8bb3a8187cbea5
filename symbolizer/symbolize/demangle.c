/* Demangling through libiberty (demangle.h). */
#include <stdlib.h>
#include <string.h>
#include <libiberty/demangle.h>

#include "symbolize/demangle.h"
#include "base/sym_result.h"

char *opal_demangle(const char *name)
{
	if (!name)
		return NULL;
	if (strnlen(name, OPAL_SYM_MAX_NAME + 1) > OPAL_SYM_MAX_NAME ||
	    name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return opal_sym_strdup(name);

	const int opts = DMGL_PARAMS | DMGL_ANSI;
	/* Legacy Rust symbols are valid Itanium names too, so Rust goes first
	 * (it only accepts names ending in a Rust hash; DMGL_VERBOSE would
	 * keep the hash); then plain C++ with c++filt's defaults (binutils
	 * 2.40 cxxfilt.c), DMGL_VERBOSE spelling std::string as the template
	 * it is. */
	char *d = cplus_demangle(name, opts | DMGL_RUST);
	if (!d && name[1] == 'Z')
		d = cplus_demangle(name, opts | DMGL_VERBOSE | DMGL_GNU_V3);
	if (!d)
		return opal_sym_strdup(name);
	char *out = opal_sym_strdup(d);
	free(d);
	return out;
}
