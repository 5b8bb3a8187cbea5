/* struct opal_sym_result ownership helpers (sym_result.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/sym_result.h"

/* Length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
 * surrogates, at most U+10FFFF) at `p` of at most `avail` bytes, or 0. */
static size_t utf8_seq_len(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	size_t n;
	uint32_t min, cp;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		n = 2, min = 0x80, cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3, min = 0x800, cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4, min = 0x10000, cp = c & 0x07;
	} else {
		return 0;
	}
	if (n > avail)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *opal_sym_strdup(const char *s)
{
	if (!s)
		return NULL;
	size_t len = strnlen(s, OPAL_SYM_MAX_NAME + 4);
	char *d = malloc((len < OPAL_SYM_MAX_NAME ? len : OPAL_SYM_MAX_NAME) + 1);
	if (!d)
		return NULL;
	/* Copy whole characters while they fit; bytes that are not valid
	 * UTF-8 (names come from arbitrary files) become '?', because the
	 * exported profiles' strings must be UTF-8. */
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, w = 0;
	while (i < len) {
		size_t n = utf8_seq_len(p + i, len - i);
		size_t out = n ? n : 1;
		if (w + out > OPAL_SYM_MAX_NAME)
			break;
		if (n)
			memcpy(d + w, p + i, n);
		else
			d[w] = '?';
		w += out;
		i += n ? n : 1;
	}
	d[w] = '\0';
	return d;
}

bool opal_sym_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len(p + i, len - i);
		if (!n)
			return false;
		i += n;
	}
	return true;
}

void opal_sym_shared_unref(struct opal_sym_shared *sh)
{
	if (__atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(sh);
}

void opal_sym_result_free(struct opal_sym_result *r)
{
	if (!r)
		return;
	if (r->shared) {
		opal_sym_shared_unref(r->shared);
		memset(r, 0, sizeof(*r));
		return;
	}
	for (size_t i = 0; i < r->n; i++) {
		free(r->frames[i].function);
		free(r->frames[i].file);
	}
	free(r->frames);
	free(r->module);
	r->frames = NULL;
	r->module = NULL;
	r->n = 0;
}

size_t opal_sym_result_bytes(const struct opal_sym_result *r)
{
	size_t b = r->n * sizeof(*r->frames);
	for (size_t i = 0; i < r->n; i++) {
		if (r->frames[i].function)
			b += strlen(r->frames[i].function) + 1;
		if (r->frames[i].file)
			b += strlen(r->frames[i].file) + 1;
	}
	if (r->module)
		b += strlen(r->module) + 1;
	return b;
}
