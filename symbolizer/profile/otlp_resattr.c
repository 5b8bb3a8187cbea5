/* OTEL_RESOURCE_ATTRIBUTES parsing (otlp.h): the OpenTelemetry SDK
 * environment syntax "k1=v1,k2=v2" with percent-encoded keys and values. */
#include "profile/otlp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shared/fileid.h"

/* Percent-decodes s[0, len) after trimming spaces and tabs. Returns a new
 * string in *out or -errno. */
static int decode(const char *s, size_t len, char **out)
{
	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	char *d = malloc(len + 1);
	size_t n = 0;
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '%') {
			d[n++] = s[i];
			continue;
		}
		int hi = i + 1 < len ? opal_hex_digit(s[i + 1]) : -1;
		int lo = i + 2 < len ? opal_hex_digit(s[i + 2]) : -1;
		/* %00 would cut the C string short: reject it like a bad escape. */
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(d);
			return -EINVAL;
		}
		d[n++] = (char)(hi << 4 | lo);
		i += 2;
	}
	d[n] = '\0';
	if (n > OPAL_OTLP_MAX_RES_ATTR_LEN) {
		free(d);
		return -E2BIG;
	}
	*out = d;
	return 0;
}

void opal_otlp_kv_free(struct opal_otlp_kv *kv, size_t n)
{
	if (!kv)
		return;
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

int opal_otlp_parse_resource_attributes(const char *s, struct opal_otlp_kv **out, size_t *n)
{
	struct opal_otlp_kv *kv = NULL;
	size_t count = 0;
	int err = 0;

	*out = NULL;
	*n = 0;
	if (!s)
		return 0;
	char *key = NULL, *value = NULL;
	while (*s) {
		const char *end = strchr(s, ',');
		size_t mlen = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', mlen);
		size_t blank = strspn(s, " \t");
		if (blank >= mlen)
			goto next;   /* empty member */
		if (!eq) {
			err = -EINVAL;
			break;
		}
		if ((err = decode(s, (size_t)(eq - s), &key)) ||
		    (err = decode(eq + 1, mlen - (size_t)(eq - s) - 1, &value)))
			break;
		if (!*key) {
			err = -EINVAL;
			break;
		}
		size_t i;
		for (i = 0; i < count && strcmp(kv[i].key, key) != 0; i++)
			;
		if (i < count) {
			/* Last value wins, first position stays. */
			free(kv[i].value);
			kv[i].value = value;
			free(key);
			key = value = NULL;
			goto next;
		}
		if (count == OPAL_OTLP_MAX_RES_ATTRS) {
			err = -E2BIG;
			break;
		}
		struct opal_otlp_kv *grown = realloc(kv, (count + 1) * sizeof(*kv));
		if (!grown) {
			err = -ENOMEM;
			break;
		}
		kv = grown;
		kv[count++] = (struct opal_otlp_kv){ .key = key, .value = value };
		key = value = NULL;
next:
		if (!end)
			break;
		s = end + 1;
	}
	if (err) {
		free(key);
		free(value);
		opal_otlp_kv_free(kv, count);
		return err;
	}
	*out = kv;
	*n = count;
	return 0;
}
