/* Bounded decoding and index checks of a received OTLP profiles request
 * (otlp_rewrite.h). protobuf-c neither bounds recursion nor memory: the
 * nesting is scanned on the wire first, with the messages' own
 * descriptors, and protobuf-c decodes through an allocator that refuses to
 * go over the request's budget. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/otlp_rx_impl.h"

/* ---- the budgeted allocator -------------------------------------------------- */

/* Each block carries its size in front, so that free gives it back. */
struct block {
	size_t size;
	size_t pad;   /* keeps the payload 16-byte aligned */
};

static void *rx_alloc(void *data, size_t size)
{
	struct opal_otlp_rx *rx = data;

	if (size > rx->budget - rx->used || sizeof(struct block) > rx->budget - rx->used - size) {
		rx->over_budget = true;
		return NULL;
	}
	struct block *b = malloc(sizeof(*b) + size);
	if (!b)
		return NULL;
	b->size = size;
	rx->used += sizeof(*b) + size;
	return b + 1;
}

static void rx_free(void *data, void *p)
{
	struct opal_otlp_rx *rx = data;

	if (!p)
		return;
	struct block *b = (struct block *)p - 1;
	rx->used -= sizeof(*b) + b->size;
	free(b);
}

void *opal_otlp_rx_alloc(struct opal_otlp_rx *rx, size_t size)
{
	return rx_alloc(rx, size);
}

void opal_otlp_rx_dealloc(struct opal_otlp_rx *rx, void *p)
{
	rx_free(rx, p);
}

/* ---- nesting, on the wire ----------------------------------------------------- */

static int varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && *i < len; shift += 7) {
		uint8_t b = p[(*i)++];
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -EINVAL;
}

/* Walks one message of type `d`: sub-messages (fields of message type, as
 * the descriptor says) are entered, at most OPAL_OTLP_RX_MAX_DEPTH deep.
 * Returns 0, -EINVAL (truncated or malformed wire data) or -E2BIG. */
static int scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, unsigned depth)
{
	size_t i = 0;
	uint64_t key, v;

	if (depth > OPAL_OTLP_RX_MAX_DEPTH)
		return -E2BIG;
	while (i < len) {
		/* Field number 0 and numbers past 2^29 - 1 do not exist; protobuf-c
		 * takes 0 in a multi-byte key and would forward what it cannot
		 * read back. */
		if (varint(p, len, &i, &key) < 0 || key >> 3 == 0 || key >> 3 > (1u << 29) - 1)
			return -EINVAL;
		switch (key & 7) {
		case 0:
			if (varint(p, len, &i, &v) < 0)
				return -EINVAL;
			break;
		case 1:
		case 5: {
			size_t n = (key & 7) == 1 ? 8 : 4;
			if (len - i < n)
				return -EINVAL;
			i += n;
			break;
		}
		case 2: {
			if (varint(p, len, &i, &v) < 0 || v > len - i)
				return -EINVAL;
			const ProtobufCFieldDescriptor *f =
				protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				int err = scan(f->descriptor, p + i, (size_t)v, depth + 1);
				if (err < 0)
					return err;
			}
			i += (size_t)v;
			break;
		}
		default:   /* groups (3, 4) are not proto3; 6 and 7 do not exist */
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- index checks ---------------------------------------------------------------- */

struct check {
	const Dict *d;
	char *why;
	size_t why_len;
};

static bool in(int32_t i, size_t n)
{
	return i == 0 || (i > 0 && (size_t)i < n);
}

static int bad(struct check *c, const char *what, size_t at, int64_t idx)
{
	snprintf(c->why, c->why_len, "%s %zu: index %lld out of range", what, at, (long long)idx);
	return -EINVAL;
}

static int check_list(struct check *c, const char *what, size_t at, const int32_t *v, size_t n,
		      size_t limit)
{
	for (size_t k = 0; k < n; k++)
		if (!in(v[k], limit))
			return bad(c, what, at, v[k]);
	return 0;
}

static int check_value(struct check *c, const char *what, size_t at, const AnyValue *v)
{
	if (v && v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX &&
	    !in(v->string_value_strindex, c->d->n_string_table))
		return bad(c, what, at, v->string_value_strindex);
	return 0;
}

static int check_dictionary(struct check *c)
{
	const Dict *d = c->d;
	size_t ns = d->n_string_table, na = d->n_attribute_table;
	int err = 0;

	for (size_t i = 0; !err && i < d->n_mapping_table; i++) {
		const Mapping *m = d->mapping_table[i];
		err = !in(m->filename_strindex, ns) ? bad(c, "mapping", i, m->filename_strindex) :
		      check_list(c, "mapping", i, m->attribute_indices, m->n_attribute_indices, na);
	}
	for (size_t i = 0; !err && i < d->n_location_table; i++) {
		const Location *l = d->location_table[i];
		err = !in(l->mapping_index, d->n_mapping_table) ?
			      bad(c, "location", i, l->mapping_index) :
			      check_list(c, "location", i, l->attribute_indices,
					 l->n_attribute_indices, na);
		for (size_t k = 0; !err && k < l->n_lines; k++)
			if (!in(l->lines[k]->function_index, d->n_function_table))
				err = bad(c, "location", i, l->lines[k]->function_index);
	}
	for (size_t i = 0; !err && i < d->n_function_table; i++) {
		const Function *f = d->function_table[i];
		if (!in(f->name_strindex, ns) || !in(f->system_name_strindex, ns) ||
		    !in(f->filename_strindex, ns))
			err = bad(c, "function", i, 0);
	}
	for (size_t i = 0; !err && i < na; i++) {
		const KVU *a = d->attribute_table[i];
		err = !in(a->key_strindex, ns) || !in(a->unit_strindex, ns) ?
			      bad(c, "attribute", i, a->key_strindex) :
			      check_value(c, "attribute", i, a->value);
	}
	for (size_t i = 0; !err && i < d->n_stack_table; i++)
		err = check_list(c, "stack", i, d->stack_table[i]->location_indices,
				 d->stack_table[i]->n_location_indices, d->n_location_table);
	return err;
}

static int check_value_type(struct check *c, size_t at, const ValueType *v)
{
	if (v && (!in(v->type_strindex, c->d->n_string_table) ||
		  !in(v->unit_strindex, c->d->n_string_table)))
		return bad(c, "profile value type", at, v->type_strindex);
	return 0;
}

static int check_profile(struct check *c, size_t at, const Prof *p)
{
	const Dict *d = c->d;
	int err = check_value_type(c, at, p->sample_type);

	if (!err)
		err = check_value_type(c, at, p->period_type);
	if (!err)
		err = check_list(c, "profile", at, p->attribute_indices, p->n_attribute_indices,
				 d->n_attribute_table);
	for (size_t i = 0; !err && i < p->n_samples; i++) {
		const Sample *s = p->samples[i];
		if (!in(s->stack_index, d->n_stack_table))
			err = bad(c, "sample", i, s->stack_index);
		else if (!in(s->link_index, d->n_link_table))
			err = bad(c, "sample", i, s->link_index);
		else
			err = check_list(c, "sample", i, s->attribute_indices,
					 s->n_attribute_indices, d->n_attribute_table);
	}
	return err;
}

static int check_request(const Req *q, char *why, size_t why_len)
{
	static const Dict empty = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	struct check c = { .d = q->dictionary ? q->dictionary : &empty, .why = why,
			   .why_len = why_len };
	int err = check_dictionary(&c);

	for (size_t i = 0; !err && i < q->n_resource_profiles; i++) {
		const ResourceProfiles *rp = q->resource_profiles[i];
		for (size_t j = 0; !err && j < rp->n_scope_profiles; j++) {
			const ScopeProfiles *sp = rp->scope_profiles[j];
			for (size_t k = 0; !err && k < sp->n_profiles; k++)
				err = check_profile(&c, k, sp->profiles[k]);
		}
	}
	return err;
}

/* ---- decode ---------------------------------------------------------------------- */

int opal_otlp_rx_decode(const uint8_t *buf, size_t len, size_t max_memory,
			struct opal_otlp_rx **out, char *why, size_t why_len)
{
	const ProtobufCMessageDescriptor *desc =
		&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor;
	struct opal_otlp_rx *rx;
	int err;

	*out = NULL;
	if ((err = scan(desc, buf, len, 0)) < 0) {
		snprintf(why, why_len, err == -E2BIG ? "messages nested over %d deep" :
				       "malformed protobuf", OPAL_OTLP_RX_MAX_DEPTH);
		return err;
	}
	if (!(rx = calloc(1, sizeof(*rx)))) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	rx->budget = max_memory ? max_memory : OPAL_OTLP_RX_MAX_MEMORY;
	rx->pa = (ProtobufCAllocator){ .alloc = rx_alloc, .free = rx_free, .allocator_data = rx };
	rx->req = (Req *)protobuf_c_message_unpack(desc, &rx->pa, len, buf);
	if (!rx->req) {
		err = rx->over_budget ? -E2BIG : -EINVAL;
		snprintf(why, why_len, rx->over_budget ? "decoded request over %zu bytes" :
				       "malformed protobuf", rx->budget);
		opal_otlp_rx_free(rx);
		return err;
	}
	if (rx->req->dictionary &&
	    rx->req->dictionary->n_location_table > OPAL_OTLP_RX_MAX_LOCATIONS) {
		snprintf(why, why_len, "%zu locations; at most %u",
			 rx->req->dictionary->n_location_table, OPAL_OTLP_RX_MAX_LOCATIONS);
		opal_otlp_rx_free(rx);
		return -E2BIG;
	}
	if ((err = check_request(rx->req, why, why_len)) < 0) {
		opal_otlp_rx_free(rx);
		return err;
	}
	*out = rx;
	return 0;
}

const void *opal_otlp_rx_request(const struct opal_otlp_rx *rx)
{
	return rx->req;
}

int opal_otlp_rx_encode(const struct opal_otlp_rx *rx, uint8_t **out, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(&rx->req->base);
	uint8_t *buf = malloc(n ? n : 1);

	if (!buf)
		return -ENOMEM;
	*len = protobuf_c_message_pack(&rx->req->base, buf);
	*out = buf;
	return 0;
}

void opal_otlp_rx_free(struct opal_otlp_rx *rx)
{
	if (!rx)
		return;
	if (rx->req)
		protobuf_c_message_free_unpacked(&rx->req->base, &rx->pa);
	free(rx);
}
