/* CPython code-object copies -> names, file, first line, line table. */
#include "interp/python_code.h"

#include <errno.h>
#include <string.h>

/* Lengths above this are corrupt: CPython's line tables and code-object
 * strings are far shorter, and it keeps conversions below overflow. */
#define MAX_LENGTH INT32_MAX

static bool fits(const struct opal_py_blob *b, size_t off, size_t width)
{
	return b->data && off <= b->len && width <= b->len - off;
}

static uint64_t le(const uint8_t *p, size_t width)
{
	uint64_t v = 0;
	for (size_t i = width; i > 0; i--)
		v = v << 8 | p[i - 1];
	return v;
}

/* Appends code point `cp` as UTF-8 if it fits with the final NUL. */
static bool put_utf8(char *out, size_t cap, size_t *n, uint32_t cp)
{
	uint8_t b[4];
	size_t k;
	if (cp < 0x80) {
		b[0] = (uint8_t)cp;
		k = 1;
	} else if (cp < 0x800) {
		b[0] = (uint8_t)(0xc0 | cp >> 6);
		b[1] = (uint8_t)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		b[0] = (uint8_t)(0xe0 | cp >> 12);
		b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | cp >> 18);
		b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		b[3] = (uint8_t)(0x80 | (cp & 0x3f));
		k = 4;
	}
	if (*n + k >= cap)
		return false;
	memcpy(out + *n, b, k);
	*n += k;
	return true;
}

/* A compact str (v3.12.1 Include/cpython/unicodeobject.h: PyASCIIObject's
 * data follows it when ascii is set, else PyCompactUnicodeObject's). */
static int parse_str(const struct opal_py_code_layout *l, const struct opal_py_blob *b,
		     char *out, size_t cap, bool *cut)
{
	out[0] = '\0';
	*cut = false;
	if (!fits(b, 0, l->unicode_ascii_size))
		return -EINVAL;
	int64_t length = (int64_t)le(b->data + l->unicode_length, 8);
	uint32_t state = (uint32_t)le(b->data + l->unicode_state, 4);
	unsigned kind = state >> l->kind_shift & 7;
	bool compact = state >> l->compact_shift & 1, ascii = state >> l->ascii_shift & 1;
	if (length < 0 || length > MAX_LENGTH || !compact ||
	    (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -EINVAL;
	size_t data = ascii ? l->unicode_ascii_size : l->unicode_compact_size;
	if (data > b->len)
		return -EINVAL;
	size_t avail = (b->len - data) / kind;
	const uint8_t *p = b->data + data;
	/* The data ends with a NUL character (PyUnicode_New). */
	if (avail > (uint64_t)length && le(p + (size_t)length * kind, kind) != 0)
		return -EINVAL;
	size_t n = avail < (uint64_t)length ? avail : (size_t)length;
	size_t used = 0;
	*cut = n < (uint64_t)length;
	for (size_t i = 0; i < n; i++) {
		uint32_t cp = (uint32_t)le(p + i * kind, kind);
		if (ascii && cp >= 0x80)
			return -EINVAL;
		if (cp > 0x10ffff)
			return -EINVAL;
		/* Lone surrogates (surrogateescape file names) and NULs have no
		 * place in UTF-8 text and C strings. */
		if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0)
			cp = 0xfffd;
		if (!put_utf8(out, cap, &used, cp)) {
			*cut = true;
			break;
		}
	}
	out[used] = '\0';
	return 0;
}

/* A bytes object's contents (Include/cpython/bytesobject.h): ob_size
 * bytes at ob_sval, then a NUL. */
static int parse_bytes(const struct opal_py_code_layout *l, const struct opal_py_blob *b,
		       const uint8_t **data, size_t *len, bool *complete)
{
	if (!fits(b, 0, l->bytes_ob_sval))
		return -EINVAL;
	int64_t size = (int64_t)le(b->data + l->bytes_ob_size, 8);
	if (size < 0 || size > MAX_LENGTH)
		return -EINVAL;
	size_t avail = b->len - l->bytes_ob_sval;
	const uint8_t *p = b->data + l->bytes_ob_sval;
	if (avail > (uint64_t)size && p[size] != 0)
		return -EINVAL;
	*complete = avail >= (uint64_t)size;
	*len = *complete ? (size_t)size : avail;
	*data = p;
	return 0;
}

static bool layout_ok(const struct opal_py_code_layout *l)
{
	return l->unicode_length + 8u <= l->unicode_ascii_size &&
	       l->unicode_state + 4u <= l->unicode_ascii_size &&
	       l->unicode_ascii_size <= l->unicode_compact_size && l->kind_shift <= 29 &&
	       l->compact_shift <= 31 && l->ascii_shift <= 31 &&
	       l->bytes_ob_size + 8u <= l->bytes_ob_sval &&
	       (l->qualname == OPAL_PY_CODE_NONE) == (l->minor < 11) &&
	       (l->ob_size == OPAL_PY_CODE_NONE) == (l->minor < 11);
}

int opal_py_code_parse(const struct opal_py_code_layout *l, const struct opal_py_code_raw *raw,
		       struct opal_py_code_info *out)
{
	memset(out, 0, sizeof(*out));
	if (l->major != 3 || l->minor < 8 || l->minor > 13)
		return -ENOTSUP;
	if (!layout_ok(l))
		return -EINVAL;
	const struct opal_py_blob *code = &raw->code;
	if (!fits(code, l->firstlineno, 4) || !fits(code, l->name, 8) ||
	    !fits(code, l->filename, 8) || !fits(code, l->linetable, 8) ||
	    (l->qualname != OPAL_PY_CODE_NONE && !fits(code, l->qualname, 8)) ||
	    (l->ob_size != OPAL_PY_CODE_NONE && !fits(code, l->ob_size, 8)))
		return -EINVAL;
	out->firstlineno = (int32_t)le(code->data + l->firstlineno, 4);
	if (out->firstlineno < 0)
		return -EINVAL;
	if (l->ob_size != OPAL_PY_CODE_NONE) {
		int64_t units = (int64_t)le(code->data + l->ob_size, 8);
		if (units <= 0 || units > MAX_LENGTH)
			return -EINVAL;
		out->n_units = (uint32_t)units;
	}
	int rc = parse_str(l, &raw->name, out->name, sizeof(out->name), &out->name_cut);
	if (rc == 0 && l->qualname != OPAL_PY_CODE_NONE)
		rc = parse_str(l, &raw->qualname, out->qualname, sizeof(out->qualname),
			       &out->qualname_cut);
	if (rc == 0 && l->qualname == OPAL_PY_CODE_NONE) {
		memcpy(out->qualname, out->name, sizeof(out->qualname));
		out->qualname_cut = out->name_cut;
	}
	if (rc == 0)
		rc = parse_str(l, &raw->filename, out->filename, sizeof(out->filename),
			       &out->filename_cut);
	if (rc == 0)
		rc = parse_bytes(l, &raw->linetable, &out->linetable, &out->linetable_len,
				 &out->linetable_complete);
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}
