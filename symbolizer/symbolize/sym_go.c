/* Go frames from .gopclntab (sym_go.h). */
#include "symbolize/sym_go.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct opal_gopclntab *opal_sym_go_open(Elf *elf, enum opal_debug_quality *quality)
{
	struct opal_gopclntab *r;
	struct opal_gopclntab_info info;

	if (!elf || opal_gopclntab_open(elf, &r) < 0)
		return NULL;
	opal_gopclntab_get_info(r, &info);
	*quality = info.inline_trees ? OPAL_DEBUG_DWARF_INLINE : OPAL_DEBUG_DWARF_LINES;
	return r;
}

struct collect {
	struct opal_sym_result *out;
	int err;
};

static int add_frame(void *arg, const struct opal_gopclntab_frame *f)
{
	struct collect *c = arg;
	struct opal_sym_result *out = c->out;
	struct opal_sym_frame *fr;

	if (out->n == OPAL_SYM_MAX_FRAMES)
		return 1;
	fr = &out->frames[out->n];
	fr->function = opal_sym_strdup(f->function);
	fr->file = f->file ? opal_sym_strdup(f->file) : NULL;
	fr->line = f->line;
	fr->inlined = f->is_inline;
	if (!fr->function || (f->file && !fr->file)) {
		free(fr->function);
		free(fr->file);
		c->err = -ENOMEM;
		return 1;
	}
	out->n++;
	return 0;
}

int opal_sym_go_lookup(const struct opal_gopclntab *r, uint64_t vaddr, struct opal_sym_result *out)
{
	struct collect c = { .out = out };

	memset(out, 0, sizeof(*out));
	if (!(out->frames = calloc(OPAL_SYM_MAX_FRAMES, sizeof(*out->frames))))
		return -ENOMEM;
	int rc = opal_gopclntab_lookup(r, vaddr, add_frame, &c);
	if (c.err || out->n == 0 || rc < 0) {
		opal_sym_result_free(out);
		return c.err;
	}
	return 0;
}
