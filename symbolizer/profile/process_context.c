/* OTEP 4719 process context payloads (process_context.h). */
#include "profile/process_context.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/processcontext/v1development/process_context.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

bool opal_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		unsigned c = p[i], n;
		uint32_t cp;
		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i <= n)
			return false;
		for (unsigned k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		/* overlong forms, surrogates, beyond U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

/* A copy of string `s` when it is within the bounds and valid UTF-8. */
static char *good_string(const char *s)
{
	size_t len;

	if (!s || (len = strnlen(s, OPAL_PCTX_MAX_STRLEN + 1)) > OPAL_PCTX_MAX_STRLEN ||
	    !opal_utf8_valid(s, len))
		return NULL;
	return strdup(s);
}

/* The text of a scalar value, or NULL (arrays, maps, bytes, empty). */
static char *value_text(const AnyValue *v)
{
	char buf[64];

	if (!v)
		return NULL;
	switch (v->value_case) {
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
		return good_string(v->string_value);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
		return strdup(v->bool_value ? "true" : "false");
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
		snprintf(buf, sizeof(buf), "%" PRId64, v->int_value);
		return strdup(buf);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
		snprintf(buf, sizeof(buf), "%.17g", v->double_value);
		return strdup(buf);
	default:
		return NULL;
	}
}

static int add_resource(struct opal_process_context *c, const KeyValue *kv)
{
	char *key, *value;

	if (c->n_resource == OPAL_PCTX_MAX_ATTRS || !kv || !(key = good_string(kv->key)))
		return 0;
	if (!*key) {
		free(key);
		return 0;
	}
	for (size_t i = 0; i < c->n_resource; i++)
		if (strcmp(c->resource[i].key, key) == 0) {
			free(key);
			return 0;
		}
	if (!(value = value_text(kv->value))) {
		free(key);
		return 0;
	}
	c->resource[c->n_resource++] = (struct opal_profile_attr){ .key = key, .value = value };
	return 0;
}

static int add_key_map(struct opal_process_context *c, const AnyValue *v)
{
	const Opentelemetry__Proto__Common__V1__ArrayValue *a;

	if (!v || v->value_case != OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE ||
	    !(a = v->array_value) || c->keys)
		return 0;
	size_t n = a->n_values < OPAL_PCTX_MAX_KEYS ? a->n_values : OPAL_PCTX_MAX_KEYS;
	if (!(c->keys = calloc(n ? n : 1, sizeof(*c->keys))))
		return -ENOMEM;
	c->n_keys = n;
	for (size_t i = 0; i < n; i++) {
		const AnyValue *e = a->values[i];
		if (e && e->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
			c->keys[i] = good_string(e->string_value);
	}
	return 0;
}

size_t opal_thread_attrs_parse(const uint8_t *data, size_t len,
			       const struct opal_process_context *c, char *buf,
			       struct opal_profile_attr *out, size_t cap)
{
	size_t n = 0, used = 0;

	for (size_t at = 0; at + 2 <= len && at + 2 + data[at + 1] <= len;
	     at += 2 + (size_t)data[at + 1]) {
		unsigned key = data[at], vlen = data[at + 1];
		const char *value = (const char *)data + at + 2;
		size_t i;
		if (key >= c->n_keys || !c->keys[key] || !opal_utf8_valid(value, vlen))
			continue;
		for (i = 0; i < n && out[i].key != c->keys[key]; i++)
			;
		if (i == n && n == cap)
			continue;
		memcpy(buf + used, value, vlen);
		buf[used + vlen] = '\0';
		out[i] = (struct opal_profile_attr){ .key = c->keys[key], .value = buf + used };
		used += vlen + 1;
		if (i == n)
			n++;
	}
	return n;
}

int opal_process_context_parse(const uint8_t *data, size_t len, struct opal_process_context *out)
{
	Opentelemetry__Proto__Processcontext__V1development__ProcessContext *m;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (len > OPAL_PCTX_MAX_BYTES)
		return -E2BIG;
	/* protobuf-c allocates in proportion to the input: bounded above */
	m = opentelemetry__proto__processcontext__v1development__process_context__unpack(NULL, len,
											   data);
	if (!m)
		return -EINVAL;
	if (!(out->resource = calloc(OPAL_PCTX_MAX_ATTRS, sizeof(*out->resource)))) {
		err = -ENOMEM;
		goto done;
	}
	if (m->resource)
		for (size_t i = 0; i < m->resource->n_attributes && !err; i++)
			err = add_resource(out, m->resource->attributes[i]);
	for (size_t i = 0; i < m->n_attributes && !err; i++) {
		const KeyValue *kv = m->attributes[i];
		if (!kv || !kv->key)
			continue;
		if (strcmp(kv->key, "threadlocal.attribute_key_map") == 0)
			err = add_key_map(out, kv->value);
		else if (strcmp(kv->key, "threadlocal.schema_version") == 0 && !out->schema_version)
			out->schema_version = value_text(kv->value);
	}
done:
	opentelemetry__proto__processcontext__v1development__process_context__free_unpacked(m,
											    NULL);
	if (err)
		opal_process_context_free(out);
	return err;
}

void opal_process_context_free(struct opal_process_context *c)
{
	for (size_t i = 0; i < c->n_resource; i++) {
		free((char *)c->resource[i].key);
		free((char *)c->resource[i].value);
	}
	free(c->resource);
	for (size_t i = 0; i < c->n_keys; i++)
		free(c->keys[i]);
	free(c->keys);
	free(c->schema_version);
	memset(c, 0, sizeof(*c));
}
