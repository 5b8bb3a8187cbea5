/* Frame blob codec (sym_codec.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/sym_codec.h"
#include "base/sym_result.h"

#define VARINT_MAX 10

struct wbuf {
	uint8_t *p;
	size_t len, cap;
};

/* Strings reach the codec through opal_sym_strdup, so they are valid
 * UTF-8; the cut at the bound still respects character boundaries. */
static size_t str_len(const char *s)
{
	size_t len = strnlen(s, OPAL_SYM_MAX_NAME + 1);
	if (len > OPAL_SYM_MAX_NAME) {
		len = OPAL_SYM_MAX_NAME;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	return len;
}

static void put_u8(struct wbuf *w, uint8_t v)
{
	w->p[w->len++] = v;
}

static void put_varint(struct wbuf *w, uint64_t v)
{
	while (v >= 0x80) {
		put_u8(w, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	put_u8(w, (uint8_t)v);
}

static void put_str(struct wbuf *w, const char *s)
{
	size_t len = str_len(s);
	put_varint(w, len);
	memcpy(w->p + w->len, s, len);
	w->len += len;
}

int opal_sym_encode(const struct opal_sym_result *r, uint8_t **buf, size_t *len)
{
	size_t n = r->n < OPAL_SYM_MAX_FRAMES ? r->n : OPAL_SYM_MAX_FRAMES;
	/* Upper bound of the encoded size, so that writes need no checks. */
	size_t cap = 2 + VARINT_MAX + (r->module ? VARINT_MAX + str_len(r->module) : 0);
	for (size_t i = 0; i < n; i++) {
		const struct opal_sym_frame *f = &r->frames[i];
		cap += 1 + VARINT_MAX;
		if (f->function)
			cap += VARINT_MAX + str_len(f->function);
		if (f->file)
			cap += VARINT_MAX + str_len(f->file);
	}
	struct wbuf w = { .p = malloc(cap), .cap = cap };
	if (!w.p)
		return -ENOMEM;
	put_u8(&w, OPAL_SYM_CODEC_VERSION);
	put_u8(&w, r->module ? 1 : 0);
	if (r->module)
		put_str(&w, r->module);
	put_varint(&w, n);
	for (size_t i = 0; i < n; i++) {
		const struct opal_sym_frame *f = &r->frames[i];
		put_u8(&w, (uint8_t)((f->inlined ? 1 : 0) | (f->function ? 2 : 0) |
				     (f->file ? 4 : 0)));
		put_varint(&w, f->line);
		if (f->function)
			put_str(&w, f->function);
		if (f->file)
			put_str(&w, f->file);
	}
	*buf = w.p;
	*len = w.len;
	return 0;
}

struct rbuf {
	const uint8_t *p;
	size_t len, off;
};

static bool get_u8(struct rbuf *r, uint8_t *v)
{
	if (r->off >= r->len)
		return false;
	*v = r->p[r->off++];
	return true;
}

static bool get_varint(struct rbuf *r, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t b;
		if (!get_u8(r, &b))
			return false;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* 0, -EBADMSG or -ENOMEM. */
static int get_str(struct rbuf *r, char **out)
{
	uint64_t len;
	if (!get_varint(r, &len) || len > OPAL_SYM_MAX_NAME || len > r->len - r->off)
		return -EBADMSG;
	if (memchr(r->p + r->off, '\0', len) ||
	    !opal_sym_utf8_valid((const char *)r->p + r->off, len))
		return -EBADMSG;
	char *s = malloc(len + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, r->p + r->off, len);
	s[len] = '\0';
	r->off += len;
	*out = s;
	return 0;
}

int opal_sym_decode(const uint8_t *buf, size_t len, struct opal_sym_result *out)
{
	struct rbuf r = { .p = buf, .len = len };
	uint8_t version, flags;
	uint64_t n;
	int ret = -EBADMSG;

	memset(out, 0, sizeof(*out));
	if (!get_u8(&r, &version) || version != OPAL_SYM_CODEC_VERSION ||
	    !get_u8(&r, &flags) || (flags & ~1u))
		return -EBADMSG;
	if ((flags & 1) && (ret = get_str(&r, &out->module)) < 0)
		goto fail;
	ret = -EBADMSG;
	if (!get_varint(&r, &n) || n > OPAL_SYM_MAX_FRAMES)
		goto fail;
	if (n > 0 && !(out->frames = calloc(n, sizeof(*out->frames)))) {
		ret = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		struct opal_sym_frame *f = &out->frames[i];
		uint64_t line;
		out->n = i + 1;
		ret = -EBADMSG;
		if (!get_u8(&r, &flags) || (flags & ~7u) || !get_varint(&r, &line) ||
		    line > UINT32_MAX)
			goto fail;
		f->inlined = flags & 1;
		f->line = (uint32_t)line;
		if ((flags & 2) && (ret = get_str(&r, &f->function)) < 0)
			goto fail;
		if ((flags & 4) && (ret = get_str(&r, &f->file)) < 0)
			goto fail;
	}
	if (r.off != r.len) {
		ret = -EBADMSG;
		goto fail;
	}
	return 0;
fail:
	opal_sym_result_free(out);
	return ret;
}
