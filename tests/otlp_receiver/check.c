/* Request checks of the test OTLP receiver (receiver.h). Written from the
 * OTLP profiles rules (docs/formats.md), independently of the encoder:
 * - every dictionary table starts with its zero value (Link: empty or all
 *   zero ids) and string_table[0] is "";
 * - no table holds two equal entries; every non-zero entry is referenced;
 * - every index is in range; attribute_indices lists have unique keys and
 *   so does every Resource;
 * - a Sample has values or timestamps (equal lengths when both);
 * - sample_type samples/count, period_type cpu/nanoseconds, period > 0;
 *   or an off-CPU Profile: sample_type off_cpu/nanoseconds, no period,
 *   one value per timestamp;
 *   resources carry service.name and process.pid.
 * Logs requests carry one gzip'd pprof, base64-encoded, per LogRecord with
 * the attribute contract of docs/export.md. */
#include "receiver.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pprof/profile.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	PReq;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Prof;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location Location;
typedef Opentelemetry__Proto__Profiles__V1development__Function Function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KVU;
typedef Opentelemetry__Proto__Profiles__V1development__Stack Stack;
typedef Opentelemetry__Proto__Profiles__V1development__Link Link;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

#define ANY(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

struct ck {
	char *why;
	size_t why_len;
	bool bad;
};

static bool failf(struct ck *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the first failure; returns false so callers can `return failf()`. */
static bool failf(struct ck *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->bad && c->why && c->why_len) {
		va_start(ap, fmt);
		vsnprintf(c->why, c->why_len, fmt, ap);
		va_end(ap);
	}
	c->bad = true;
	return false;
}

void rcv_summary_free(struct rcv_summary *s)
{
	for (size_t i = 0; i < s->n_names; i++)
		free(s->names[i]);
	free(s->names);
	s->names = NULL;
	s->n_names = s->cap_names = 0;
}

/* Names come from deduplicated tables, so a repeat is rare; a linear check
 * only against the last few keeps this O(n). */
static void add_name(struct rcv_summary *s, const char *n)
{
	for (size_t i = s->n_names > 8 ? s->n_names - 8 : 0; i < s->n_names; i++)
		if (strcmp(s->names[i], n) == 0)
			return;
	if (s->n_names == RCV_MAX_NAMES)
		return;
	if (s->n_names == s->cap_names) {
		size_t cap = s->cap_names ? s->cap_names * 2 : 64;
		char **v = realloc(s->names, cap * sizeof(*v));
		if (!v)
			return;
		s->names = v;
		s->cap_names = cap;
	}
	if ((s->names[s->n_names] = strdup(n)))
		s->n_names++;
}

static void add_pid(struct rcv_summary *s, int64_t pid)
{
	if (s->n_pids < RCV_MAX_PIDS)
		s->pids[s->n_pids++] = (uint32_t)pid;
}

/* ---- tables: zero entry, duplicates ---------------------------------------- */

struct blob {
	uint8_t *b;
	size_t n;
	size_t idx;
};

static int cmp_blob(const void *x, const void *y)
{
	const struct blob *a = x, *b = y;
	size_t n = a->n < b->n ? a->n : b->n;
	int c = memcmp(a->b, b->b, n);
	return c ? c : (a->n > b->n) - (a->n < b->n);
}

/* Packs every entry, checks entry 0 packs to nothing (unless `zero_ok`
 * accepts it), and finds duplicates by sorting the packed bytes. */
static bool check_table(struct ck *c, const char *name, ProtobufCMessage **items, size_t n,
			bool (*zero_ok)(const ProtobufCMessage *))
{
	struct blob *bl;
	bool ok = true;

	if (n == 0)
		return failf(c, "%s is empty: index 0 must hold the zero value", name);
	bl = calloc(n, sizeof(*bl));
	if (!bl)
		return failf(c, "out of memory");
	for (size_t i = 0; i < n; i++) {
		bl[i].n = protobuf_c_message_get_packed_size(items[i]);
		bl[i].b = malloc(bl[i].n ? bl[i].n : 1);
		bl[i].idx = i;
		if (bl[i].b)
			protobuf_c_message_pack(items[i], bl[i].b);
		else
			ok = failf(c, "out of memory");
	}
	if (ok && bl[0].n != 0 && !(zero_ok && zero_ok(items[0])))
		ok = failf(c, "%s[0] is not the zero value (%zu bytes)", name, bl[0].n);
	if (ok) {
		qsort(bl, n, sizeof(*bl), cmp_blob);
		for (size_t i = 1; i < n && ok; i++)
			if (cmp_blob(&bl[i - 1], &bl[i]) == 0)
				ok = failf(c, "%s[%zu] and %s[%zu] are equal", name, bl[i - 1].idx,
					   name, bl[i].idx);
	}
	for (size_t i = 0; i < n; i++)
		free(bl[i].b);
	free(bl);
	return ok;
}

static bool link_zero_ok(const ProtobufCMessage *m)
{
	const Link *l = (const Link *)m;
	for (size_t i = 0; i < l->trace_id.len; i++)
		if (l->trace_id.data[i])
			return false;
	for (size_t i = 0; i < l->span_id.len; i++)
		if (l->span_id.data[i])
			return false;
	return (l->trace_id.len == 0 || l->trace_id.len == 16) &&
	       (l->span_id.len == 0 || l->span_id.len == 8);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(**(char *const *const *)x, **(char *const *const *)y);
}

static bool check_strings(struct ck *c, const Dict *d)
{
	char ***p;
	bool ok = true;

	if (d->n_string_table == 0 || strcmp(d->string_table[0], "") != 0)
		return failf(c, "string_table[0] is not \"\"");
	p = malloc(d->n_string_table * sizeof(*p));
	if (!p)
		return failf(c, "out of memory");
	for (size_t i = 0; i < d->n_string_table; i++)
		p[i] = &d->string_table[i];
	qsort(p, d->n_string_table, sizeof(*p), cmp_str);
	for (size_t i = 1; i < d->n_string_table && ok; i++)
		if (strcmp(*p[i - 1], *p[i]) == 0)
			ok = failf(c, "string_table holds \"%s\" twice (indices %td, %td)", *p[i],
				   p[i - 1] - d->string_table, p[i] - d->string_table);
	free(p);
	return ok;
}

/* ---- references ----------------------------------------------------------- */

struct refs {
	uint8_t *str, *map, *loc, *fn, *link, *attr, *stack;
};

static bool idx_ok(struct ck *c, const char *what, int32_t i, size_t n, uint8_t *mark)
{
	if (i < 0 || (size_t)i >= n)
		return failf(c, "%s %d out of range (table has %zu)", what, i, n);
	if (mark)
		mark[i] = 1;
	return true;
}

static bool attr_list(struct ck *c, const Dict *d, struct refs *r, const char *what,
		      const int32_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!idx_ok(c, what, idx[i], d->n_attribute_table, r->attr))
			return false;
		if (idx[i] == 0)
			return failf(c, "%s lists attribute 0 (the zero entry)", what);
		for (size_t j = 0; j < i; j++)
			if (d->attribute_table[idx[j]]->key_strindex ==
			    d->attribute_table[idx[i]]->key_strindex)
				return failf(c, "%s has key \"%s\" twice", what,
					     d->string_table[d->attribute_table[idx[i]]->key_strindex]);
	}
	return true;
}

static bool check_dictionary_refs(struct ck *c, const Dict *d, struct refs *r,
				  struct rcv_summary *s)
{
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		const Mapping *m = d->mapping_table[i];
		if (!idx_ok(c, "Mapping.filename_strindex", m->filename_strindex,
			    d->n_string_table, r->str) ||
		    !attr_list(c, d, r, "Mapping.attribute_indices", m->attribute_indices,
			       m->n_attribute_indices))
			return false;
		/* Semantic conventions: "should" carry a build ID; a file the
		 * collector could not open has none, so this is counted, not
		 * failed. */
		if (m->n_attribute_indices == 0)
			s->mappings_without_id++;
	}
	for (size_t i = 1; i < d->n_location_table; i++) {
		const Location *l = d->location_table[i];
		if (!idx_ok(c, "Location.mapping_index", l->mapping_index, d->n_mapping_table,
			    r->map) ||
		    !attr_list(c, d, r, "Location.attribute_indices", l->attribute_indices,
			       l->n_attribute_indices))
			return false;
		for (size_t k = 0; k < l->n_lines; k++)
			if (!idx_ok(c, "Line.function_index", l->lines[k]->function_index,
				    d->n_function_table, r->fn))
				return false;
	}
	for (size_t i = 1; i < d->n_function_table; i++) {
		const Function *f = d->function_table[i];
		if (!idx_ok(c, "Function.name_strindex", f->name_strindex, d->n_string_table, r->str) ||
		    !idx_ok(c, "Function.system_name_strindex", f->system_name_strindex,
			    d->n_string_table, r->str) ||
		    !idx_ok(c, "Function.filename_strindex", f->filename_strindex,
			    d->n_string_table, r->str))
			return false;
		if (!f->name_strindex && !f->system_name_strindex && !f->filename_strindex)
			return failf(c, "function_table[%zu] has no name, system name or file", i);
	}
	for (size_t i = 1; i < d->n_attribute_table; i++) {
		const KVU *a = d->attribute_table[i];
		if (!idx_ok(c, "KeyValueAndUnit.key_strindex", a->key_strindex, d->n_string_table,
			    r->str) ||
		    !idx_ok(c, "KeyValueAndUnit.unit_strindex", a->unit_strindex,
			    d->n_string_table, r->str))
			return false;
		if (a->key_strindex == 0)
			return failf(c, "attribute_table[%zu] has an empty key", i);
		if (a->value && a->value->value_case == ANY(STRING_VALUE_STRINDEX) &&
		    !idx_ok(c, "AnyValue.string_value_strindex", a->value->string_value_strindex,
			    d->n_string_table, r->str))
			return false;
	}
	for (size_t i = 1; i < d->n_stack_table; i++) {
		const Stack *s = d->stack_table[i];
		if (s->n_location_indices == 0)
			return failf(c, "stack_table[%zu] is empty", i);
		for (size_t k = 0; k < s->n_location_indices; k++) {
			if (!idx_ok(c, "Stack.location_indices", s->location_indices[k],
				    d->n_location_table, r->loc))
				return false;
			if (s->location_indices[k] == 0)
				return failf(c, "stack_table[%zu] references location 0", i);
		}
	}
	return true;
}

static bool check_unreferenced(struct ck *c, const Dict *d, const struct refs *r)
{
	static const char *const names[] = { "string_table", "mapping_table", "location_table",
					     "function_table", "link_table", "attribute_table",
					     "stack_table" };
	const uint8_t *marks[] = { r->str, r->map, r->loc, r->fn, r->link, r->attr, r->stack };
	size_t ns[] = { d->n_string_table, d->n_mapping_table, d->n_location_table,
			d->n_function_table, d->n_link_table, d->n_attribute_table,
			d->n_stack_table };

	for (size_t t = 0; t < 7; t++)
		for (size_t i = 1; i < ns[t]; i++)
			if (!marks[t][i])
				return failf(c, "%s[%zu] is not referenced", names[t], i);
	return true;
}

static const char *res_str(const Opentelemetry__Proto__Resource__V1__Resource *res,
			   const char *key, int64_t *ival, bool *found)
{
	*found = false;
	for (size_t i = 0; res && i < res->n_attributes; i++) {
		const KeyValue *kv = res->attributes[i];
		if (kv->key && strcmp(kv->key, key) == 0 && kv->value) {
			*found = true;
			if (kv->value->value_case == ANY(INT_VALUE) && ival)
				*ival = kv->value->int_value;
			return kv->value->value_case == ANY(STRING_VALUE) ? kv->value->string_value
									 : NULL;
		}
	}
	return NULL;
}

static bool check_resource_keys(struct ck *c,
				const Opentelemetry__Proto__Resource__V1__Resource *res)
{
	for (size_t i = 0; res && i < res->n_attributes; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(res->attributes[i]->key, res->attributes[j]->key) == 0)
				return failf(c, "resource has key \"%s\" twice", res->attributes[i]->key);
	return true;
}

static bool value_type_is(const Dict *d, const Opentelemetry__Proto__Profiles__V1development__ValueType *vt,
			  const char *type, const char *unit)
{
	if (!vt || vt->type_strindex < 0 || (size_t)vt->type_strindex >= d->n_string_table ||
	    vt->unit_strindex < 0 || (size_t)vt->unit_strindex >= d->n_string_table)
		return false;
	return strcmp(d->string_table[vt->type_strindex], type) == 0 &&
	       strcmp(d->string_table[vt->unit_strindex], unit) == 0;
}

/* A Sample's indices are in range (and mark what they reference). */
static bool sample_refs(struct ck *c, const Dict *d, struct refs *r, const Sample *sm)
{
	return idx_ok(c, "Sample.stack_index", sm->stack_index, d->n_stack_table, r->stack) &&
	       idx_ok(c, "Sample.link_index", sm->link_index, d->n_link_table, r->link) &&
	       attr_list(c, d, r, "Sample.attribute_indices", sm->attribute_indices,
			 sm->n_attribute_indices);
}

/* The samples of an off-CPU Profile (docs/offcpu.md): values and
 * timestamps of equal length. */
static bool check_off_cpu(struct ck *c, const Dict *d, struct refs *r, const Prof *p,
			  struct rcv_summary *s)
{
	r->str[p->sample_type->type_strindex] = r->str[p->sample_type->unit_strindex] = 1;
	if (p->period_type || p->period)
		return failf(c, "an off-CPU profile has a period");
	for (size_t i = 0; i < p->n_samples; i++) {
		const Sample *sm = p->samples[i];
		if (!sample_refs(c, d, r, sm))
			return false;
		if (!sm->n_values || sm->n_values != sm->n_timestamps_unix_nano)
			return failf(c, "an off-CPU sample has %zu values and %zu timestamps",
				     sm->n_values, sm->n_timestamps_unix_nano);
		for (size_t k = 0; k < sm->n_values; k++)
			s->off_cpu_ns += (uint64_t)sm->values[k];
		s->off_cpu_samples += sm->n_timestamps_unix_nano;
	}
	return true;
}

static bool check_profile(struct ck *c, const Dict *d, struct refs *r, const Prof *p,
			  struct rcv_summary *s)
{
	if (value_type_is(d, p->sample_type, "off_cpu", "nanoseconds"))
		return check_off_cpu(c, d, r, p, s);
	if (!value_type_is(d, p->sample_type, "samples", "count"))
		return failf(c, "sample_type is not samples/count");
	if (!value_type_is(d, p->period_type, "cpu", "nanoseconds"))
		return failf(c, "period_type is not cpu/nanoseconds");
	r->str[p->sample_type->type_strindex] = r->str[p->sample_type->unit_strindex] = 1;
	r->str[p->period_type->type_strindex] = r->str[p->period_type->unit_strindex] = 1;
	if (p->period <= 0)
		return failf(c, "period %lld is not positive", (long long)p->period);
	s->period = (uint64_t)p->period;
	if (!attr_list(c, d, r, "Profile.attribute_indices", p->attribute_indices,
		       p->n_attribute_indices))
		return false;
	for (size_t i = 0; i < p->n_samples; i++) {
		const Sample *sm = p->samples[i];
		if (!sample_refs(c, d, r, sm))
			return false;
		if (!sm->n_values && !sm->n_timestamps_unix_nano)
			return failf(c, "a sample has neither values nor timestamps");
		if (sm->n_values && sm->n_timestamps_unix_nano &&
		    sm->n_values != sm->n_timestamps_unix_nano)
			return failf(c, "a sample has %zu values but %zu timestamps", sm->n_values,
				     sm->n_timestamps_unix_nano);
		if (sm->n_values)
			for (size_t k = 0; k < sm->n_values; k++)
				s->samples += (uint64_t)sm->values[k];
		else
			s->samples += sm->n_timestamps_unix_nano;
	}
	return true;
}

static void collect_names(const Dict *d, struct rcv_summary *s)
{
	for (size_t i = 1; i < d->n_function_table; i++) {
		int32_t n = d->function_table[i]->name_strindex;
		if (n > 0 && (size_t)n < d->n_string_table)
			add_name(s, d->string_table[n]);
	}
}

static bool check_request(struct ck *c, const PReq *q, struct rcv_summary *s)
{
	const Dict *d = q->dictionary;
	struct refs r = { 0 };
	bool ok;

	if (!d)
		return failf(c, "request has no dictionary");
	if (!check_strings(c, d) ||
	    !check_table(c, "mapping_table", (ProtobufCMessage **)d->mapping_table,
			 d->n_mapping_table, NULL) ||
	    !check_table(c, "location_table", (ProtobufCMessage **)d->location_table,
			 d->n_location_table, NULL) ||
	    !check_table(c, "function_table", (ProtobufCMessage **)d->function_table,
			 d->n_function_table, NULL) ||
	    !check_table(c, "link_table", (ProtobufCMessage **)d->link_table, d->n_link_table,
			 link_zero_ok) ||
	    !check_table(c, "attribute_table", (ProtobufCMessage **)d->attribute_table,
			 d->n_attribute_table, NULL) ||
	    !check_table(c, "stack_table", (ProtobufCMessage **)d->stack_table, d->n_stack_table,
			 NULL))
		return false;
	r.str = calloc(d->n_string_table, 1);
	r.map = calloc(d->n_mapping_table, 1);
	r.loc = calloc(d->n_location_table, 1);
	r.fn = calloc(d->n_function_table, 1);
	r.link = calloc(d->n_link_table, 1);
	r.attr = calloc(d->n_attribute_table, 1);
	r.stack = calloc(d->n_stack_table, 1);
	ok = r.str && r.map && r.loc && r.fn && r.link && r.attr && r.stack;
	if (!ok)
		failf(c, "out of memory");
	ok = ok && check_dictionary_refs(c, d, &r, s);
	collect_names(d, s);
	s->resources = q->n_resource_profiles;
	for (size_t i = 0; ok && i < q->n_resource_profiles; i++) {
		const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
			q->resource_profiles[i];
		int64_t pid = -1;
		bool has_service, has_pid;
		res_str(rp->resource, "service.name", NULL, &has_service);
		res_str(rp->resource, "process.pid", &pid, &has_pid);
		if (!check_resource_keys(c, rp->resource))
			ok = false;
		else if (!has_service || !has_pid || pid <= 0)
			ok = failf(c, "resource %zu lacks service.name or process.pid", i);
		if (!ok)
			break;
		add_pid(s, pid);
		for (size_t k = 0; ok && k < rp->n_scope_profiles; k++)
			for (size_t m = 0; ok && m < rp->scope_profiles[k]->n_profiles; m++)
				ok = check_profile(c, d, &r, rp->scope_profiles[k]->profiles[m], s);
	}
	ok = ok && check_unreferenced(c, d, &r);
	free(r.str), free(r.map), free(r.loc), free(r.fn), free(r.link), free(r.attr),
		free(r.stack);
	return ok;
}

bool rcv_check_profiles(const uint8_t *plain, size_t len, struct rcv_summary *sum, char *why,
			size_t why_len)
{
	struct ck c = { .why = why, .why_len = why_len };
	PReq *q;
	bool ok;

	snprintf(sum->kind, sizeof(sum->kind), "profiles");
	q = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, plain);
	if (!q)
		return failf(&c, "body is not an ExportProfilesServiceRequest");
	ok = check_request(&c, q, sum);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		q, NULL);
	return ok && !c.bad;
}

/* ---- logs ----------------------------------------------------------------- */

static int gunzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, size_t max)
{
	z_stream zs = { 0 };
	size_t cap = len * 4 + 1024;
	int zr;

	if (inflateInit2(&zs, 15 + 32) != Z_OK)
		return -ENOMEM;
	*out = NULL;
	*out_len = 0;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	do {
		if (cap > max)
			cap = max;
		uint8_t *n = realloc(*out, cap);
		if (!n) {
			inflateEnd(&zs);
			return -ENOMEM;
		}
		*out = n;
		zs.next_out = *out + *out_len;
		zs.avail_out = (uInt)(cap - *out_len);
		zr = inflate(&zs, Z_NO_FLUSH);
		*out_len = cap - zs.avail_out;
		if (zr == Z_STREAM_END)
			break;
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			inflateEnd(&zs);
			return -EBADMSG;
		}
		if (zs.avail_out == 0) {
			if (cap == max) {
				inflateEnd(&zs);
				return -E2BIG;
			}
			cap *= 2;
		} else if (zs.avail_in == 0) {
			inflateEnd(&zs);
			return -EBADMSG;   /* truncated stream */
		}
	} while (1);
	inflateEnd(&zs);
	return 0;
}

/* Exported to receiver.c as well. */
int rcv_gunzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, size_t max);
int rcv_gunzip(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, size_t max)
{
	return gunzip(in, len, out, out_len, max);
}

static const AnyValue *log_attr(const Opentelemetry__Proto__Logs__V1__LogRecord *lr,
				const char *key)
{
	for (size_t i = 0; i < lr->n_attributes; i++)
		if (strcmp(lr->attributes[i]->key, key) == 0)
			return lr->attributes[i]->value;
	return NULL;
}

static bool attr_is(struct ck *c, const Opentelemetry__Proto__Logs__V1__LogRecord *lr,
		    const char *key, const char *want)
{
	const AnyValue *v = log_attr(lr, key);

	if (!v || v->value_case != ANY(STRING_VALUE) || strcmp(v->string_value, want) != 0)
		return failf(c, "log attribute %s is not \"%s\"", key, want);
	return true;
}

static bool check_log_record(struct ck *c, const Opentelemetry__Proto__Logs__V1__LogRecord *lr,
			     struct rcv_summary *s)
{
	const AnyValue *period;
	uint8_t *raw = NULL, *plain = NULL;
	size_t slen, raw_len, plain_len;
	Perftools__Profiles__Profile *pp;
	int n;

	if (!attr_is(c, lr, "profile.payload.format", "pprof") ||
	    !attr_is(c, lr, "profile.payload.compression", "gzip") ||
	    !attr_is(c, lr, "profile.payload.encoding", "base64") ||
	    !attr_is(c, lr, "profile.type", "cpu"))
		return false;
	period = log_attr(lr, "profile.sampling.period_ns");
	if (!period || period->value_case != ANY(INT_VALUE) || period->int_value <= 0)
		return failf(c, "log attribute profile.sampling.period_ns is not a positive int");
	s->period = (uint64_t)period->int_value;
	for (size_t i = 0; i < lr->n_attributes; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(lr->attributes[i]->key, lr->attributes[j]->key) == 0)
				return failf(c, "log attribute %s twice", lr->attributes[i]->key);
	if (!lr->time_unix_nano)
		return failf(c, "log record has no time_unix_nano");
	if (!lr->body || lr->body->value_case != ANY(STRING_VALUE))
		return failf(c, "log body is not a string");
	slen = strlen(lr->body->string_value);
	if (slen == 0 || slen % 4 != 0)
		return failf(c, "log body length %zu is not base64", slen);
	raw = malloc(slen / 4 * 3 + 1);
	if (!raw)
		return failf(c, "out of memory");
	n = EVP_DecodeBlock(raw, (const unsigned char *)lr->body->string_value, (int)slen);
	if (n < 0) {
		free(raw);
		return failf(c, "log body is not valid base64");
	}
	raw_len = (size_t)n;
	if (lr->body->string_value[slen - 1] == '=')
		raw_len--;
	if (lr->body->string_value[slen - 2] == '=')
		raw_len--;
	if (raw_len < 2 || raw[0] != 0x1f || raw[1] != 0x8b) {
		free(raw);
		return failf(c, "decoded log body is not gzip");
	}
	if (gunzip(raw, raw_len, &plain, &plain_len, RCV_MAX_PLAIN) < 0) {
		free(raw);
		free(plain);
		return failf(c, "decoded log body does not gunzip");
	}
	free(raw);
	pp = perftools__profiles__profile__unpack(NULL, plain_len, plain);
	free(plain);
	if (!pp)
		return failf(c, "log body is not a pprof Profile");
	size_t vi = 0;
	for (size_t i = 0; i < pp->n_sample_type; i++) {
		int64_t u = pp->sample_type[i]->unit;
		if (u > 0 && (size_t)u < pp->n_string_table &&
		    strcmp(pp->string_table[u], "count") == 0)
			vi = i;
	}
	for (size_t i = 0; i < pp->n_sample; i++)
		if (vi < pp->sample[i]->n_value)
			s->samples += (uint64_t)pp->sample[i]->value[vi];
	for (size_t i = 0; i < pp->n_function; i++) {
		int64_t nm = pp->function[i]->name;
		if (nm > 0 && (size_t)nm < pp->n_string_table)
			add_name(s, pp->string_table[nm]);
	}
	bool period_ok = (uint64_t)pp->period == s->period;
	perftools__profiles__profile__free_unpacked(pp, NULL);
	if (!period_ok)
		return failf(c, "period attribute differs from the pprof period");
	return true;
}

bool rcv_check_logs(const uint8_t *plain, size_t len, struct rcv_summary *sum, char *why,
		    size_t why_len)
{
	struct ck c = { .why = why, .why_len = why_len };
	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *q;
	bool ok = true;

	snprintf(sum->kind, sizeof(sum->kind), "logs");
	q = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(NULL, len,
											  plain);
	if (!q)
		return failf(&c, "body is not an ExportLogsServiceRequest");
	sum->resources = q->n_resource_logs;
	if (q->n_resource_logs == 0)
		ok = failf(&c, "no ResourceLogs");
	for (size_t i = 0; ok && i < q->n_resource_logs; i++) {
		const Opentelemetry__Proto__Logs__V1__ResourceLogs *rl = q->resource_logs[i];
		bool has_service;
		res_str(rl->resource, "service.name", NULL, &has_service);
		if (!check_resource_keys(&c, rl->resource))
			ok = false;
		else if (!has_service)
			ok = failf(&c, "resource lacks service.name");
		for (size_t k = 0; ok && k < rl->n_scope_logs; k++)
			for (size_t m = 0; ok && m < rl->scope_logs[k]->n_log_records; m++) {
				sum->log_records++;
				ok = check_log_record(&c, rl->scope_logs[k]->log_records[m], sum);
			}
	}
	if (ok && sum->log_records == 0)
		ok = failf(&c, "no LogRecord");
	opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(q,
											     NULL);
	return ok && !c.bad;
}
