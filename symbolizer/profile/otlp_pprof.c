/* A received OTLP profiles request as one gzip'd pprof, for the flame
 * graph's recent profiles (otlp_rewrite.h). Dictionary index i becomes
 * pprof id i (index 0, "unset", has no pprof entry); each Sample of every
 * Profile becomes a pprof sample weighted by its timestamps (or, without
 * them, its first value when the sample type counts), labelled "pid" from
 * process.pid of the Sample or of its Resource. Built in an arena bounded
 * by the request's own memory budget. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/gzip.h"
#include "pprof/profile.pb-c.h"
#include "profile/otlp_rx_impl.h"

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__Sample PSample;
typedef Perftools__Profiles__Label PLabel;
typedef Perftools__Profiles__Mapping PMapping;
typedef Perftools__Profiles__Location PLocation;
typedef Perftools__Profiles__Line PLine;
typedef Perftools__Profiles__Function PFunction;
typedef Perftools__Profiles__ValueType PValueType;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

/* The strings pprof needs besides the request's, appended to its table. */
enum { X_SAMPLES, X_COUNT, X_CPU, X_NS, X_PID, X_N };
static const char *const extra[X_N] = { "samples", "count", "cpu", "nanoseconds", "pid" };

struct conv {
	const Dict *d;
	struct opal_arena a;
	PProfile *p;
	int64_t shift;       /* 1 when the request's string 0 is not "": "" goes first */
	int64_t x0;          /* pprof index of extra[0] */
	bool failed;
};

static void *alloc(struct conv *c, size_t n, size_t size)
{
	void *p = opal_arena_calloc(&c->a, n ? n : 1, size);
	if (!p)
		c->failed = true;
	return p;
}

static int64_t str(const struct conv *c, int32_t i)
{
	return i ? (int64_t)i + c->shift : 0;
}

static void strings(struct conv *c)
{
	const Dict *d = c->d;
	size_t n = d->n_string_table;

	c->shift = !n || d->string_table[0][0] ? 1 : 0;
	c->p->n_string_table = n + (size_t)c->shift + X_N;
	if (!(c->p->string_table = alloc(c, c->p->n_string_table, sizeof(char *))))
		return;
	c->p->string_table[0] = "";
	for (size_t i = 0; i < n; i++)
		c->p->string_table[i + (size_t)c->shift] = d->string_table[i];
	c->x0 = (int64_t)(n + (size_t)c->shift);
	for (int i = 0; i < X_N; i++)
		c->p->string_table[c->x0 + i] = (char *)extra[i];
}

static void functions(struct conv *c)
{
	const Dict *d = c->d;
	size_t n = d->n_function_table ? d->n_function_table - 1 : 0;
	PFunction *fs = alloc(c, n, sizeof(*fs));
	PFunction **ps = alloc(c, n, sizeof(*ps));

	if (!fs || !ps)
		return;
	for (size_t i = 0; i < n; i++) {
		const Function *f = d->function_table[i + 1];
		perftools__profiles__function__init(&fs[i]);
		fs[i].id = i + 1;
		fs[i].name = str(c, f->name_strindex);
		fs[i].system_name = str(c, f->system_name_strindex);
		fs[i].filename = str(c, f->filename_strindex);
		fs[i].start_line = f->start_line;
		ps[i] = &fs[i];
	}
	c->p->function = ps;
	c->p->n_function = n;
}

static void mappings(struct conv *c)
{
	const Dict *d = c->d;
	size_t n = d->n_mapping_table ? d->n_mapping_table - 1 : 0;
	PMapping *ms = alloc(c, n, sizeof(*ms));
	PMapping **ps = alloc(c, n, sizeof(*ps));

	if (!ms || !ps)
		return;
	for (size_t i = 0; i < n; i++) {
		const Mapping *m = d->mapping_table[i + 1];
		perftools__profiles__mapping__init(&ms[i]);
		ms[i].id = i + 1;
		ms[i].memory_start = m->memory_start;
		ms[i].memory_limit = m->memory_limit;
		ms[i].file_offset = m->file_offset;
		ms[i].filename = str(c, m->filename_strindex);
		ps[i] = &ms[i];
	}
	c->p->mapping = ps;
	c->p->n_mapping = n;
}

static void locations(struct conv *c)
{
	const Dict *d = c->d;
	size_t n = d->n_location_table ? d->n_location_table - 1 : 0;
	PLocation *ls = alloc(c, n, sizeof(*ls));
	PLocation **ps = alloc(c, n, sizeof(*ps));

	if (!ls || !ps)
		return;
	for (size_t i = 0; i < n && !c->failed; i++) {
		const Location *l = d->location_table[i + 1];
		perftools__profiles__location__init(&ls[i]);
		ls[i].id = i + 1;
		ls[i].mapping_id = (uint64_t)l->mapping_index;
		ls[i].address = l->address;
		PLine *lines = alloc(c, l->n_lines, sizeof(*lines));
		PLine **lp = alloc(c, l->n_lines, sizeof(*lp));
		for (size_t k = 0; lines && lp && k < l->n_lines; k++) {
			perftools__profiles__line__init(&lines[k]);
			lines[k].function_id = (uint64_t)l->lines[k]->function_index;
			lines[k].line = l->lines[k]->line;
			lp[k] = &lines[k];
		}
		ls[i].line = lp;
		ls[i].n_line = lp ? l->n_lines : 0;
		ps[i] = &ls[i];
	}
	c->p->location = ps;
	c->p->n_location = c->failed ? 0 : n;
}

/* process.pid among `idx` (attribute table indices), or 0. */
static int64_t pid_in(const Dict *d, const int32_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if ((size_t)idx[i] >= d->n_attribute_table)
			continue;   /* 0 with an empty table */
		const KVU *a = d->attribute_table[idx[i]];
		if ((size_t)a->key_strindex < d->n_string_table &&
		    !strcmp(d->string_table[a->key_strindex], "process.pid") && a->value &&
		    a->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE)
			return a->value->int_value;
	}
	return 0;
}

static int64_t resource_pid(const ResourceProfiles *rp)
{
	for (size_t i = 0; rp->resource && i < rp->resource->n_attributes; i++) {
		const KeyValue *kv = rp->resource->attributes[i];
		if (kv->key && !strcmp(kv->key, "process.pid") && kv->value &&
		    kv->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE)
			return kv->value->int_value;
	}
	return 0;
}

/* Weight of `s`: its timestamps, else its first value when the Profile's
 * sample type is a count. */
static int64_t weight(const struct conv *c, const Prof *pr, const Sample *s)
{
	if (s->n_timestamps_unix_nano)
		return (int64_t)s->n_timestamps_unix_nano;
	const ValueType *st = pr->sample_type;
	if (s->n_values && st && (size_t)st->unit_strindex < c->d->n_string_table &&
	    !strcmp(c->d->string_table[st->unit_strindex], "count"))
		return s->values[0];
	return 0;
}

static void add_sample(struct conv *c, const Prof *pr, const Sample *s, int64_t pid,
		       PSample **out, size_t *n)
{
	const Dict *d = c->d;
	int64_t w = weight(c, pr, s);

	if (w <= 0 || !s->stack_index)
		return;
	const Opentelemetry__Proto__Profiles__V1development__Stack *st =
		d->stack_table[s->stack_index];
	PSample *ps = alloc(c, 1, sizeof(*ps));
	uint64_t *ids = alloc(c, st->n_location_indices, sizeof(*ids));
	int64_t *v = alloc(c, 1, sizeof(*v));
	if (!ps || !ids || !v)
		return;
	perftools__profiles__sample__init(ps);
	for (size_t k = 0; k < st->n_location_indices; k++)
		if (st->location_indices[k])
			ids[ps->n_location_id++] = (uint64_t)st->location_indices[k];
	ps->location_id = ids;
	*v = w;
	ps->value = v;
	ps->n_value = 1;
	int64_t spid = pid_in(d, s->attribute_indices, s->n_attribute_indices);
	if (spid || pid) {
		PLabel *lb = alloc(c, 1, sizeof(*lb));
		PLabel **lp = alloc(c, 1, sizeof(*lp));
		if (!lb || !lp)
			return;
		perftools__profiles__label__init(lb);
		lb->key = c->x0 + X_PID;
		lb->num = spid ? spid : pid;
		lp[0] = lb;
		ps->label = lp;
		ps->n_label = 1;
	}
	out[(*n)++] = ps;
}

static void samples(struct conv *c, const Req *q, uint64_t *start, uint64_t *end)
{
	size_t total = 0, n = 0;

	for (size_t i = 0; i < q->n_resource_profiles; i++)
		for (size_t j = 0; j < q->resource_profiles[i]->n_scope_profiles; j++) {
			const ScopeProfiles *sp = q->resource_profiles[i]->scope_profiles[j];
			for (size_t k = 0; k < sp->n_profiles; k++)
				total += sp->profiles[k]->n_samples;
		}
	PSample **out = alloc(c, total, sizeof(*out));
	if (!out)
		return;
	*start = UINT64_MAX;
	*end = 0;
	for (size_t i = 0; i < q->n_resource_profiles; i++) {
		const ResourceProfiles *rp = q->resource_profiles[i];
		int64_t pid = resource_pid(rp);
		for (size_t j = 0; j < rp->n_scope_profiles; j++) {
			const ScopeProfiles *sp = rp->scope_profiles[j];
			for (size_t k = 0; k < sp->n_profiles; k++) {
				const Prof *pr = sp->profiles[k];
				if (pr->time_unix_nano < *start)
					*start = pr->time_unix_nano;
				if (pr->time_unix_nano + pr->duration_nano > *end)
					*end = pr->time_unix_nano + pr->duration_nano;
				if (!c->p->period && pr->period > 0)
					c->p->period = pr->period;
				for (size_t s = 0; s < pr->n_samples && !c->failed; s++)
					add_sample(c, pr, pr->samples[s], pid, out, &n);
			}
		}
	}
	if (*start == UINT64_MAX)
		*start = 0;
	if (*end < *start)
		*end = *start;
	c->p->sample = out;
	c->p->n_sample = n;
}

int opal_otlp_rx_pprof(const struct opal_otlp_rx *rx, uint8_t **gz, size_t *gz_len,
		       uint64_t *start_unix_ns, uint64_t *end_unix_ns)
{
	static const Dict empty = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	PProfile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	PValueType st = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, pt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	PValueType *stp = &st;
	struct conv c = { .d = rx->req->dictionary ? rx->req->dictionary : &empty, .p = &prof };
	int err = -ENOMEM;

	opal_arena_init(&c.a, rx->budget);
	strings(&c);
	functions(&c);
	mappings(&c);
	locations(&c);
	samples(&c, rx->req, start_unix_ns, end_unix_ns);
	if (!c.failed) {
		st.type = c.x0 + X_SAMPLES;
		st.unit = c.x0 + X_COUNT;
		pt.type = c.x0 + X_CPU;
		pt.unit = c.x0 + X_NS;
		prof.sample_type = &stp;
		prof.n_sample_type = 1;
		prof.period_type = &pt;
		prof.time_nanos = (int64_t)*start_unix_ns;
		prof.duration_nanos = (int64_t)(*end_unix_ns - *start_unix_ns);
		size_t n = perftools__profiles__profile__get_packed_size(&prof);
		uint8_t *raw = malloc(n ? n : 1);
		if (raw) {
			perftools__profiles__profile__pack(&prof, raw);
			err = opal_gzip(raw, n, gz, gz_len);
			free(raw);
		}
	}
	opal_arena_free(&c.a);
	return err;
}
