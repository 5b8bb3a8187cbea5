/* Wire code objects into parsed ones (python_wire.h). */
#include "interp/python_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "interp/python_code.h"

static uint16_t off16(uint32_t v)
{
	return v > UINT16_MAX ? OPAL_PY_CODE_NONE : (uint16_t)v;
}

static struct opal_py_blob blob(const ProtobufCBinaryData *b)
{
	return (struct opal_py_blob){ .data = b->data, .len = b->len };
}

int opal_py_code_from_wire(const Opal__Wire__V1__CodeObject *msg, struct opal_py_code *out)
{
	const Opal__Wire__V1__CPythonLayout *l = msg->cpython;
	struct opal_py_code_info *info;
	int fmt, err;

	memset(out, 0, sizeof(*out));
	if (!l || l->major > UINT8_MAX || l->minor > UINT8_MAX || l->kind_shift > 31 ||
	    l->compact_shift > 31 || l->ascii_shift > 31)
		return -EINVAL;
	if ((fmt = opal_py_lines_format(l->major, l->minor)) < 0)
		return fmt;
	const struct opal_py_code_layout layout = {
		.major = (uint8_t)l->major, .minor = (uint8_t)l->minor,
		.firstlineno = off16(l->firstlineno), .name = off16(l->name),
		.qualname = off16(l->qualname), .filename = off16(l->filename),
		.linetable = off16(l->linetable), .ob_size = off16(l->ob_size),
		.unicode_length = off16(l->unicode_length), .unicode_state = off16(l->unicode_state),
		.unicode_ascii_size = off16(l->unicode_ascii_size),
		.unicode_compact_size = off16(l->unicode_compact_size),
		.kind_shift = (uint8_t)l->kind_shift, .compact_shift = (uint8_t)l->compact_shift,
		.ascii_shift = (uint8_t)l->ascii_shift,
		.bytes_ob_size = off16(l->bytes_ob_size), .bytes_ob_sval = off16(l->bytes_ob_sval),
	};
	const struct opal_py_code_raw raw = {
		.code = blob(&msg->code), .name = blob(&msg->name), .qualname = blob(&msg->qualname),
		.filename = blob(&msg->filename), .linetable = blob(&msg->line_table),
	};
	if (!(info = malloc(sizeof(*info))))
		return -ENOMEM;
	if ((err = opal_py_code_parse(&layout, &raw, info)) < 0) {
		free(info);
		return err;
	}
	out->qualname = strdup(info->qualname[0] ? info->qualname : info->name);
	out->filename = strdup(info->filename);
	out->first_line = info->firstlineno > 0 ? (uint32_t)info->firstlineno : 0;
	out->fmt = (enum opal_py_lines_format)fmt;
	out->linetable_len = info->linetable_len;
	out->linetable_complete = info->linetable_complete;
	out->linetable = malloc(info->linetable_len ? info->linetable_len : 1);
	if (out->linetable && info->linetable_len)
		memcpy(out->linetable, info->linetable, info->linetable_len);
	free(info);
	if (!out->qualname || !out->filename || !out->linetable) {
		opal_py_code_free(out);
		return -ENOMEM;
	}
	return 0;
}

void opal_py_code_free(struct opal_py_code *c)
{
	free(c->qualname);
	free(c->filename);
	free(c->linetable);
	memset(c, 0, sizeof(*c));
}

size_t opal_py_code_bytes(const struct opal_py_code *c)
{
	return strlen(c->qualname) + strlen(c->filename) + 2 + c->linetable_len;
}

uint32_t opal_py_code_line(const struct opal_py_code *c, uint32_t unit)
{
	int32_t line;

	if (opal_py_line_at(c->fmt, c->linetable, c->linetable_len, c->linetable_complete,
			    (int32_t)c->first_line, unit, &line) == 0 && line > 0)
		return (uint32_t)line;
	return c->first_line;
}
