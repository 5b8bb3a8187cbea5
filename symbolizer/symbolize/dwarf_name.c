/* Function names from DWARF (dwarf_name.h). */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "base/sym_result.h"
#include "symbolize/dwarf_name.h"

void opal_dwarf_declaration(Dwarf_Die *die, Dwarf_Die *decl)
{
	Dwarf_Die next;
	Dwarf_Attribute a;

	*decl = *die;
	for (int hop = 0; hop < OPAL_DWARF_MAX_ORIGINS; hop++) {
		if (dwarf_attr(decl, DW_AT_abstract_origin, &a) == NULL &&
		    dwarf_attr(decl, DW_AT_specification, &a) == NULL)
			break;
		if (!dwarf_formref_die(&a, &next))
			break;
		*decl = next;
	}
}

bool opal_dwarf_scoped_language(Dwarf_Die *cudie)
{
	int lang = dwarf_srclang(cudie);
	return lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
	       lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14 ||
	       lang == DW_LANG_Rust;
}

bool opal_dwarf_names_scope(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
	       tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

size_t opal_dwarf_scope_names(Dwarf_Die *decl, const char **parts)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes_die(decl, &scopes);
	size_t np = 0;
	/* scopes[0] is decl itself. */
	for (int i = 1; i < n && np < OPAL_DWARF_MAX_SCOPES; i++) {
		if (!opal_dwarf_names_scope(dwarf_tag(&scopes[i])))
			break;
		parts[np++] = opal_dwarf_scope_label(dwarf_tag(&scopes[i]), dwarf_diename(&scopes[i]));
	}
	free(scopes);
	return np;
}

char *opal_dwarf_qualify(const char *const *parts, size_t np, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < np; i++)
		len += strnlen(parts[i], OPAL_SYM_MAX_NAME) + 2;
	char *buf = malloc(len + 1), *w = buf;
	if (!buf)
		return NULL;
	while (np > 0) {
		np--;
		size_t l = strnlen(parts[np], OPAL_SYM_MAX_NAME);
		memcpy(w, parts[np], l);
		memcpy(w + l, "::", 2);
		w += l + 2;
	}
	strcpy(w, name);
	char *out = opal_sym_strdup(buf);
	free(buf);
	return out;
}
