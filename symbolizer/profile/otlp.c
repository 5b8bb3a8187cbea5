/* OTLP profiles encoder (otlp.h). Dictionary entries are created on first
 * use only, so the request carries no orphaned entries; every table is an
 * opal_intern of a byte key describing the entry, preloaded with the zero
 * value's key at index 0 so that an entry equal to the zero value reuses
 * index 0 instead of duplicating it. */
#include "profile/otlp.h"
#include "base/arena.h"
#include "base/atomic_file.h"
#include "profile/intern.h"
#include "profile/profile.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	Request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles ResourceProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles ScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Profile;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType ValueType;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Stack Stack;
typedef Opentelemetry__Proto__Profiles__V1development__Location Location;
typedef Opentelemetry__Proto__Profiles__V1development__Line Line;
typedef Opentelemetry__Proto__Profiles__V1development__Function Function;
typedef Opentelemetry__Proto__Profiles__V1development__Link Link;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KeyValueAndUnit;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;

#define PROF(x) opentelemetry__proto__profiles__v1development__##x
#define COMMON(x) opentelemetry__proto__common__v1__##x

/* Entries per dictionary table; indices are int32 on the wire. */
#define MAX_TABLE  (1u << 26)

/* Growable array of pointers (heap), entries live in the arena. */
struct vec {
	void **v;
	size_t n, cap;
};

/* One dictionary table: identity keys plus the built entries, same order. */
struct table {
	struct opal_intern *keys;
	struct vec items;
};

struct enc {
	struct opal_arena a;
	const struct opal_profile *p;
	struct opal_intern *strs;
	struct table attrs, funcs, maps, locs, stacks;
	struct table links;    /* key: trace ID and span ID (24 bytes) */
	int32_t *map_idx;      /* by profile mapping id; -1 = not encoded yet */
	int32_t *loc_idx;      /* by profile location id */
	int err;               /* first error; later calls do nothing */
};

static void set_err(struct enc *e, int err)
{
	if (!e->err)
		e->err = err;
}

static int vec_push(struct vec *v, void *item)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		void **n = realloc(v->v, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		v->v = n;
		v->cap = cap;
	}
	v->v[v->n++] = item;
	return 0;
}

static void *alloc(struct enc *e, size_t n, size_t size)
{
	if (e->err)
		return NULL;
	void *p = opal_arena_calloc(&e->a, n ? n : 1, size);
	if (!p)
		set_err(e, -ENOMEM);
	return p;
}

static char *dup_str(struct enc *e, const char *s)
{
	if (e->err)
		return NULL;
	char *c = opal_arena_memdup0(&e->a, s, strlen(s));
	if (!c)
		set_err(e, -ENOMEM);
	return c;
}

static int32_t str(struct enc *e, const char *s)
{
	uint32_t idx;

	if (e->err || !s || !*s)
		return 0;
	int err = opal_intern_str(e->strs, s, &idx);
	if (err) {
		set_err(e, err);
		return 0;
	}
	return (int32_t)idx;
}

/* Looks `key` up in table `t`. Returns its index and sets *added when the
 * caller must build the entry and vec_push it (it gets that index). */
static int32_t table_add(struct enc *e, struct table *t, const void *key, size_t len, bool *added)
{
	uint32_t idx;

	*added = false;
	if (e->err)
		return 0;
	int err = opal_intern_add(t->keys, key, len, &idx, added);
	if (err) {
		set_err(e, err);
		*added = false;
		return 0;
	}
	return (int32_t)idx;
}

static void table_put(struct enc *e, struct table *t, void *item)
{
	if (!item) {
		set_err(e, -ENOMEM);
		return;
	}
	if (vec_push(&t->items, item) < 0)
		set_err(e, -ENOMEM);
}

/* Key serialization into a fixed buffer; keys here are small and bounded
 * (a location has at most OPAL_PROFILE_MAX_LINES lines). */
struct key {
	unsigned char b[16 + 16 * OPAL_PROFILE_MAX_LINES + 8 * 4];
	size_t n;
};

static void key_put(struct key *k, const void *v, size_t len)
{
	if (!len)
		return;
	memcpy(k->b + k->n, v, len);
	k->n += len;
}

/* ---- attributes ---- */

enum { ATTR_STR = 1, ATTR_INT = 2 };

static int32_t attr(struct enc *e, const char *key, const char *sval, int64_t ival)
{
	int32_t kidx = str(e, key);
	uint8_t kind = sval ? ATTR_STR : ATTR_INT;
	size_t slen = sval ? strlen(sval) : 0;
	size_t len = sizeof(kidx) + 1 + (sval ? slen : sizeof(ival));
	unsigned char *k = malloc(len);
	bool added;

	if (!k) {
		set_err(e, -ENOMEM);
		return 0;
	}
	memcpy(k, &kidx, sizeof(kidx));
	k[sizeof(kidx)] = kind;
	if (sval)
		memcpy(k + sizeof(kidx) + 1, sval, slen);
	else
		memcpy(k + sizeof(kidx) + 1, &ival, sizeof(ival));
	int32_t idx = table_add(e, &e->attrs, k, len, &added);
	free(k);
	if (!added)
		return idx;
	KeyValueAndUnit *kv = alloc(e, 1, sizeof(*kv));
	AnyValue *v = alloc(e, 1, sizeof(*v));
	if (kv && v) {
		PROF(key_value_and_unit__init)(kv);
		COMMON(any_value__init)(v);
		kv->key_strindex = kidx;
		if (sval) {
			v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
			v->string_value = dup_str(e, sval);
		} else {
			v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
			v->int_value = ival;
		}
		kv->value = v;
	}
	table_put(e, &e->attrs, e->err ? NULL : kv);
	return idx;
}

/* ---- mappings, functions, locations, stacks ---- */

static int32_t mapping(struct enc *e, uint32_t id)
{
	if (id == 0 || e->err)
		return 0;
	if (e->map_idx[id] >= 0)
		return e->map_idx[id];
	const struct opal_profile_mapping *m = opal_profile_get_mapping(e->p, id);
	int32_t attrs[2];
	size_t nattrs = 0;
	if (m->file_id_htlhash)
		attrs[nattrs++] = attr(e, "process.executable.build_id.htlhash", m->file_id_htlhash, 0);
	if (m->build_id_gnu)
		attrs[nattrs++] = attr(e, "process.executable.build_id.gnu", m->build_id_gnu, 0);
	int32_t fname = str(e, m->filename);
	struct key k = { .n = 0 };
	key_put(&k, &m->start, 8);
	key_put(&k, &m->limit, 8);
	key_put(&k, &m->file_offset, 8);
	key_put(&k, &fname, 4);
	key_put(&k, attrs, nattrs * sizeof(attrs[0]));
	bool added;
	int32_t idx = table_add(e, &e->maps, k.b, k.n, &added);
	if (added) {
		Mapping *pm = alloc(e, 1, sizeof(*pm));
		int32_t *ai = alloc(e, nattrs, sizeof(*ai));
		if (pm && ai) {
			PROF(mapping__init)(pm);
			pm->memory_start = m->start;
			pm->memory_limit = m->limit;
			pm->file_offset = m->file_offset;
			pm->filename_strindex = fname;
			memcpy(ai, attrs, nattrs * sizeof(*ai));
			pm->attribute_indices = ai;
			pm->n_attribute_indices = nattrs;
		}
		table_put(e, &e->maps, e->err ? NULL : pm);
	}
	if (!e->err)
		e->map_idx[id] = idx;
	return idx;
}

static int32_t function(struct enc *e, const char *name, const char *filename,
			int64_t start_line)
{
	int32_t f[3] = { str(e, name), str(e, name), str(e, filename) };
	struct key k = { .n = 0 };
	bool added;

	key_put(&k, f, sizeof(f));
	key_put(&k, &start_line, sizeof(start_line));
	int32_t idx = table_add(e, &e->funcs, k.b, k.n, &added);
	if (added) {
		Function *fn = alloc(e, 1, sizeof(*fn));
		if (fn) {
			PROF(function__init)(fn);
			fn->name_strindex = f[0];
			/* Only the demangled name is known. */
			fn->system_name_strindex = f[1];
			fn->filename_strindex = f[2];
			fn->start_line = start_line;
		}
		table_put(e, &e->funcs, e->err ? NULL : fn);
	}
	return idx;
}

static int32_t location(struct enc *e, uint32_t id)
{
	struct opal_profile_location_info info;

	if (e->err)
		return 0;
	if (e->loc_idx[id] >= 0)
		return e->loc_idx[id];
	opal_profile_get_location(e->p, id, &info);
	int32_t midx = mapping(e, info.mapping_id);
	static const char *const type_names[OPAL_FRAME_N_TYPES] = {
		[OPAL_FRAME_NATIVE] = "native", [OPAL_FRAME_KERNEL] = "kernel",
		[OPAL_FRAME_CPYTHON] = "cpython", [OPAL_FRAME_V8JS] = "v8js",
		[OPAL_FRAME_JVM] = "jvm",
	};
	int32_t type = attr(e, "profile.frame.type", type_names[info.type], 0);
	int32_t fidx[OPAL_PROFILE_MAX_LINES];
	struct key k = { .n = 0 };
	key_put(&k, &midx, 4);
	key_put(&k, &info.address, 8);
	key_put(&k, &info.n_lines, sizeof(info.n_lines));
	for (size_t i = 0; i < info.n_lines; i++) {
		const struct opal_profile_line *l = &info.lines[i];
		fidx[i] = function(e, l->function ? l->function : "??", l->filename, l->start_line);
		key_put(&k, &fidx[i], 4);
		key_put(&k, &l->line, 8);
	}
	key_put(&k, &type, 4);
	bool added;
	int32_t idx = table_add(e, &e->locs, k.b, k.n, &added);
	if (added) {
		Location *pl = alloc(e, 1, sizeof(*pl));
		Line **lines = alloc(e, info.n_lines, sizeof(*lines));
		int32_t *ai = alloc(e, 1, sizeof(*ai));
		for (size_t i = 0; lines && i < info.n_lines; i++) {
			lines[i] = alloc(e, 1, sizeof(*lines[i]));
			if (!lines[i])
				break;
			PROF(line__init)(lines[i]);
			lines[i]->function_index = fidx[i];
			lines[i]->line = info.lines[i].line;
		}
		if (pl && ai && !e->err) {
			PROF(location__init)(pl);
			pl->mapping_index = midx;
			pl->address = info.address;
			pl->lines = lines;
			pl->n_lines = info.n_lines;
			ai[0] = type;
			pl->attribute_indices = ai;
			pl->n_attribute_indices = 1;
		}
		table_put(e, &e->locs, e->err ? NULL : pl);
	}
	if (!e->err)
		e->loc_idx[id] = idx;
	return idx;
}

static int32_t stack(struct enc *e, const struct opal_profile_sample_info *si)
{
	int32_t *idx = alloc(e, si->n_locations, sizeof(*idx));
	bool added;

	if (!idx)
		return 0;
	for (size_t i = 0; i < si->n_locations; i++)
		idx[i] = location(e, si->location_ids[i]);
	int32_t s = table_add(e, &e->stacks, idx, si->n_locations * sizeof(*idx), &added);
	if (added) {
		Stack *st = alloc(e, 1, sizeof(*st));
		if (st) {
			PROF(stack__init)(st);
			st->location_indices = idx;
			st->n_location_indices = si->n_locations;
		}
		table_put(e, &e->stacks, e->err ? NULL : st);
	}
	return s;
}

/* The link_table index of a sample's trace context (0: none, or all-zero
 * IDs: the zero Link). */
static int32_t link_index(struct enc *e, const struct opal_profile_trace_ctx *ctx)
{
	uint8_t key[24];
	bool added;

	if (!ctx || !ctx->has_link)
		return 0;
	memcpy(key, ctx->trace_id, 16);
	memcpy(key + 16, ctx->span_id, 8);
	int32_t idx = table_add(e, &e->links, key, sizeof(key), &added);
	if (added) {
		Link *l = alloc(e, 1, sizeof(*l));
		uint8_t *ids = alloc(e, 24, 1);
		if (l && ids) {
			PROF(link__init)(l);
			memcpy(ids, key, 24);
			l->trace_id = (ProtobufCBinaryData){ 16, ids };
			l->span_id = (ProtobufCBinaryData){ 8, ids + 16 };
		}
		table_put(e, &e->links, e->err ? NULL : l);
	}
	return idx;
}

/* ---- samples ---- */

struct event {
	uint32_t cpu;
	uint64_t ts;
	uint64_t off_cpu_ns;   /* off-CPU samples */
};

static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return (x->ts > y->ts) - (x->ts < y->ts);
}

/* Appends to `out` one OTLP Sample per cpu that sampled `si`. */
static void add_samples(struct enc *e, const struct opal_profile_sample_info *si,
			struct vec *out)
{
	struct event *ev = malloc(si->n_times * sizeof(*ev));

	if (!ev) {
		set_err(e, -ENOMEM);
		return;
	}
	for (size_t i = 0; i < si->n_times; i++)
		ev[i] = (struct event){ .cpu = si->cpus[i], .ts = si->timestamps_unix_ns[i],
					.off_cpu_ns = si->off_cpu ? si->off_cpu_ns[i] : 0 };
	qsort(ev, si->n_times, sizeof(*ev), cmp_event);
	int32_t st = stack(e, si);
	int32_t tid = attr(e, "thread.id", NULL, si->tid);
	bool named = si->thread_name && *si->thread_name;
	int32_t tname = named ? attr(e, "thread.name", si->thread_name, 0) : 0;
	int32_t link = link_index(e, si->ctx);
	size_t n_ctx = si->ctx ? si->ctx->n_attrs : 0;
	for (size_t i = 0; i < si->n_times && !e->err;) {
		size_t j = i;
		while (j < si->n_times && ev[j].cpu == ev[i].cpu)
			j++;
		Sample *s = alloc(e, 1, sizeof(*s));
		uint64_t *ts = alloc(e, j - i, sizeof(*ts));
		int32_t *ai = alloc(e, 3 + n_ctx, sizeof(*ai));
		int32_t cpu = attr(e, "cpu.logical_number", NULL, ev[i].cpu);
		if (!s || !ts || !ai || e->err)
			break;
		PROF(sample__init)(s);
		s->stack_index = st;
		size_t na = 0;
		ai[na++] = tid;
		if (named)
			ai[na++] = tname;
		ai[na++] = cpu;
		/* the thread context's attributes (keys unique, named by the
		 * process context) */
		for (size_t k = 0; k < n_ctx; k++)
			ai[na++] = attr(e, si->ctx->attrs[k].key, si->ctx->attrs[k].value, 0);
		s->link_index = link;
		s->attribute_indices = ai;
		s->n_attribute_indices = na;
		for (size_t t = i; t < j; t++)
			ts[t - i] = ev[t].ts;
		s->timestamps_unix_nano = ts;
		s->n_timestamps_unix_nano = j - i;
		/* an off-CPU sample's values: its times off CPU, one per timestamp */
		int64_t *vs = si->off_cpu ? alloc(e, j - i, sizeof(*vs)) : NULL;
		for (size_t t = i; vs && t < j; t++)
			vs[t - i] = (int64_t)ev[t].off_cpu_ns;
		if (vs) {
			s->values = vs;
			s->n_values = j - i;
		}
		if (vec_push(out, s) < 0)
			set_err(e, -ENOMEM);
		i = j;
	}
	free(ev);
}

/* ---- resource ---- */

struct kvlist {
	KeyValue **v;
	size_t n, cap;
};

static bool kv_has(const struct kvlist *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i]->key, key) == 0)
			return true;
	return false;
}

/* Adds key=value unless the key is present already (attribute keys of a
 * Resource are unique; the first setter wins). */
static void kv_add(struct enc *e, struct kvlist *l, const char *key, const char *sval,
		   int64_t ival)
{
	if (e->err || kv_has(l, key) || l->n == l->cap)
		return;
	KeyValue *kv = alloc(e, 1, sizeof(*kv));
	AnyValue *v = alloc(e, 1, sizeof(*v));
	if (!kv || !v)
		return;
	COMMON(key_value__init)(kv);
	COMMON(any_value__init)(v);
	kv->key = dup_str(e, key);
	if (sval) {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		v->string_value = dup_str(e, sval);
	} else {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		v->int_value = ival;
	}
	kv->value = v;
	l->v[l->n++] = kv;
}

static Resource *resource(struct enc *e, const struct opal_profile_process *proc,
			  const struct opal_otlp_options *o)
{
	size_t extra = o ? o->n_resource_attributes : 0;
	struct kvlist l = { .cap = 10 + extra + proc->n_resource };
	Resource *r = alloc(e, 1, sizeof(*r));

	l.v = alloc(e, l.cap, sizeof(*l.v));
	if (!r || !l.v)
		return NULL;
	opentelemetry__proto__resource__v1__resource__init(r);
	const char *exe = proc->executable_name ? proc->executable_name : "";
	/* what the process published (OTEP 4719) first: the first setter of
	 * a key wins, so neither opal's own attributes nor the host's
	 * OTEL_RESOURCE_ATTRIBUTES override it */
	for (size_t i = 0; i < proc->n_resource; i++)
		kv_add(e, &l, proc->resource[i].key, proc->resource[i].value, 0);
	if (proc->service_name && *proc->service_name) {
		kv_add(e, &l, "service.name", proc->service_name, 0);
	} else {
		char *name = alloc(e, strlen(exe) + sizeof("unknown_service:"), 1);
		if (name) {
			sprintf(name, "unknown_service:%s", exe);
			kv_add(e, &l, "service.name", name, 0);
		}
	}
	kv_add(e, &l, "process.pid", NULL, proc->pid);
	if (*exe)
		kv_add(e, &l, "process.executable.name", exe, 0);
	if (proc->executable_path && *proc->executable_path)
		kv_add(e, &l, "process.executable.path", proc->executable_path, 0);
	if (proc->container_id && *proc->container_id)
		kv_add(e, &l, "container.id", proc->container_id, 0);
	if (proc->pod_uid && *proc->pod_uid)
		kv_add(e, &l, "k8s.pod.uid", proc->pod_uid, 0);
	if (proc->command_line && *proc->command_line)
		kv_add(e, &l, "process.command_line", proc->command_line, 0);
	if (proc->host_name && *proc->host_name)
		kv_add(e, &l, "host.name", proc->host_name, 0);
	if (proc->host_id && *proc->host_id)
		kv_add(e, &l, "host.id", proc->host_id, 0);
	kv_add(e, &l, "os.type", "linux", 0);
	if (proc->os_version && *proc->os_version)
		kv_add(e, &l, "os.version", proc->os_version, 0);
	for (size_t i = 0; i < extra; i++)
		if (o->resource_attributes[i].key && o->resource_attributes[i].value)
			kv_add(e, &l, o->resource_attributes[i].key,
			       o->resource_attributes[i].value, 0);
	r->attributes = l.v;
	r->n_attributes = l.n;
	return r;
}

static ValueType *value_type(struct enc *e, const char *type, const char *unit)
{
	ValueType *vt = alloc(e, 1, sizeof(*vt));

	if (vt) {
		PROF(value_type__init)(vt);
		vt->type_strindex = str(e, type);
		vt->unit_strindex = str(e, unit);
	}
	return vt;
}

/* The ResourceProfiles of process `process_id`, whose samples are the
 * profile sample indices idx[0, n). */
/* The Profile of process samples idx[0..n) of one kind (`off_cpu`), or
 * NULL when none is of that kind. */
static Profile *profile_of(struct enc *e, const size_t *idx, size_t n, bool off_cpu)
{
	Profile *prof;
	struct vec samples = { 0 };
	uint64_t start, end;

	for (size_t i = 0; i < n; i++) {
		struct opal_profile_sample_info si;
		opal_profile_get_sample(e->p, idx[i], &si);
		if (si.off_cpu == off_cpu)
			break;
		if (i + 1 == n)
			return NULL;
	}
	if (!(prof = alloc(e, 1, sizeof(*prof))))
		return NULL;
	PROF(profile__init)(prof);
	if (off_cpu) {   /* values measured per sample: no period */
		prof->sample_type = value_type(e, "off_cpu", "nanoseconds");
	} else {
		prof->sample_type = value_type(e, "samples", "count");
		prof->period_type = value_type(e, "cpu", "nanoseconds");
		prof->period = (int64_t)opal_profile_period_ns(e->p);
	}
	opal_profile_time(e->p, &start, &end);
	prof->time_unix_nano = start;
	prof->duration_nano = end - start;
	uint8_t *id = alloc(e, 16, 1);
	if (id && getrandom(id, 16, GRND_NONBLOCK) == 16) {
		prof->profile_id.data = id;
		prof->profile_id.len = 16;
	}
	for (size_t i = 0; i < n && !e->err; i++) {
		struct opal_profile_sample_info si;
		opal_profile_get_sample(e->p, idx[i], &si);
		if (si.off_cpu == off_cpu)
			add_samples(e, &si, &samples);
	}
	Sample **arr = alloc(e, samples.n, sizeof(*arr));
	if (arr && samples.n) {
		memcpy(arr, samples.v, samples.n * sizeof(*arr));
		prof->samples = arr;
		prof->n_samples = samples.n;
	}
	free(samples.v);
	return prof;
}

/* One ResourceProfiles per process: samples idx[0..n) of process_id, as a
 * CPU Profile and (when it has off-CPU samples) an off-CPU Profile in its
 * one ScopeProfiles. */
static ResourceProfiles *resource_profiles(struct enc *e, uint32_t process_id,
					   const size_t *idx, size_t n,
					   const struct opal_otlp_options *o)
{
	const struct opal_profile_process *proc = opal_profile_get_process(e->p, process_id);
	ResourceProfiles *rp = alloc(e, 1, sizeof(*rp));
	ScopeProfiles *sp = alloc(e, 1, sizeof(*sp));
	ScopeProfiles **sps = alloc(e, 1, sizeof(*sps));
	Scope *scope = alloc(e, 1, sizeof(*scope));
	Profile **profs = alloc(e, 2, sizeof(*profs));
	Profile *prof;

	if (!rp || !sp || !sps || !scope || !profs)
		return NULL;
	PROF(resource_profiles__init)(rp);
	PROF(scope_profiles__init)(sp);
	COMMON(instrumentation_scope__init)(scope);
	rp->resource = resource(e, proc, o);
	scope->name = dup_str(e, "opal");
	if (o && o->scope_version)
		scope->version = dup_str(e, o->scope_version);
	sp->scope = scope;
	for (int off_cpu = 0; off_cpu < 2; off_cpu++)
		if ((prof = profile_of(e, idx, n, off_cpu)))
			profs[sp->n_profiles++] = prof;
	sp->profiles = profs;
	sps[0] = sp;
	rp->scope_profiles = sps;
	rp->n_scope_profiles = 1;
	return e->err ? NULL : rp;
}

/* ---- dictionary ---- */

static int table_init(struct table *t, const void *zero_key, size_t len)
{
	uint32_t idx;

	t->keys = opal_intern_new(MAX_TABLE);
	if (!t->keys)
		return -ENOMEM;
	return opal_intern_add(t->keys, zero_key, len, &idx, NULL);
}

static void table_free(struct table *t)
{
	opal_intern_free(t->keys);
	free(t->items.v);
}

/* Copies table items into a fresh arena array (entries stay in the arena). */
static void **table_array(struct enc *e, struct table *t, size_t *n)
{
	void **arr = alloc(e, t->items.n, sizeof(*arr));

	*n = 0;
	if (!arr)
		return NULL;
	if (t->items.n)
		memcpy(arr, t->items.v, t->items.n * sizeof(*arr));
	*n = t->items.n;
	return arr;
}

/* Zero entries of every table: message values with all fields unset. */
static void add_zero_entries(struct enc *e)
{
	Mapping *m = alloc(e, 1, sizeof(*m));
	Location *l = alloc(e, 1, sizeof(*l));
	Function *f = alloc(e, 1, sizeof(*f));
	KeyValueAndUnit *a = alloc(e, 1, sizeof(*a));
	Stack *s = alloc(e, 1, sizeof(*s));
	Link *k = alloc(e, 1, sizeof(*k));

	if (!m || !l || !f || !a || !s || !k)
		return;
	PROF(link__init)(k);
	table_put(e, &e->links, k);
	PROF(mapping__init)(m);
	PROF(location__init)(l);
	PROF(function__init)(f);
	PROF(key_value_and_unit__init)(a);
	PROF(stack__init)(s);
	table_put(e, &e->maps, m);
	table_put(e, &e->locs, l);
	table_put(e, &e->funcs, f);
	table_put(e, &e->attrs, a);
	table_put(e, &e->stacks, s);
}

static Dictionary *dictionary(struct enc *e)
{
	Dictionary *d = alloc(e, 1, sizeof(*d));

	if (!d)
		return NULL;
	PROF(profiles_dictionary__init)(d);
	d->link_table = (Link **)table_array(e, &e->links, &d->n_link_table);
	d->mapping_table = (Mapping **)table_array(e, &e->maps, &d->n_mapping_table);
	d->location_table = (Location **)table_array(e, &e->locs, &d->n_location_table);
	d->function_table = (Function **)table_array(e, &e->funcs, &d->n_function_table);
	d->attribute_table = (KeyValueAndUnit **)table_array(e, &e->attrs, &d->n_attribute_table);
	d->stack_table = (Stack **)table_array(e, &e->stacks, &d->n_stack_table);
	size_t nstr = opal_intern_count(e->strs);
	char **strs = alloc(e, nstr, sizeof(*strs));
	if (!strs)
		return NULL;
	for (size_t i = 0; i < nstr; i++)
		strs[i] = (char *)opal_intern_key(e->strs, (uint32_t)i, NULL);
	d->string_table = strs;
	d->n_string_table = nstr;
	return e->err ? NULL : d;
}

int opal_otlp_encode(const struct opal_profile *p, const struct opal_otlp_options *o,
		     uint8_t **buf, size_t *len)
{
	struct enc e = { .p = p };
	Request req = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	size_t nproc = opal_profile_n_processes(p), nsamp = opal_profile_n_samples(p);
	size_t *count = calloc(nproc + 2, sizeof(*count));
	size_t *order = malloc((nsamp ? nsamp : 1) * sizeof(*order));
	struct vec rps = { 0 };
	uint32_t zero;
	int err;

	/* Zero keys: "" for strings; for other tables the key a zero entry
	 * would serialize to (all-zero bytes of each table's key layout). */
	static const unsigned char zero_attr[5], zero_func[20], zero_map[28];
	unsigned char zero_loc[4 + 8 + sizeof(size_t) + 4] = { 0 };
	const uint8_t zero_link[24] = { 0 };

	opal_arena_init(&e.a, 0);
	e.map_idx = malloc((opal_profile_n_mappings(p) + 1) * sizeof(*e.map_idx));
	e.loc_idx = malloc((opal_profile_n_locations(p) + 1) * sizeof(*e.loc_idx));
	e.strs = opal_intern_new(MAX_TABLE);
	if (!count || !order || !e.map_idx || !e.loc_idx || !e.strs ||
	    opal_intern_add(e.strs, "", 0, &zero, NULL) < 0 ||
	    table_init(&e.attrs, zero_attr, sizeof(zero_attr)) < 0 ||
	    table_init(&e.funcs, zero_func, sizeof(zero_func)) < 0 ||
	    table_init(&e.maps, zero_map, sizeof(zero_map)) < 0 ||
	    table_init(&e.locs, zero_loc, sizeof(zero_loc)) < 0 ||
	    table_init(&e.stacks, "", 0) < 0 ||
	    table_init(&e.links, zero_link, sizeof(zero_link)) < 0) {
		err = -ENOMEM;
		goto out;
	}
	memset(e.map_idx, 0xff, (opal_profile_n_mappings(p) + 1) * sizeof(*e.map_idx));
	memset(e.loc_idx, 0xff, (opal_profile_n_locations(p) + 1) * sizeof(*e.loc_idx));
	add_zero_entries(&e);

	/* Group sample indices by process (counting sort, stable). */
	for (size_t i = 0; i < nsamp; i++) {
		struct opal_profile_sample_info si;
		opal_profile_get_sample(p, i, &si);
		count[si.process_id + 1]++;
	}
	for (size_t i = 1; i <= nproc + 1; i++)
		count[i] += count[i - 1];
	for (size_t i = 0; i < nsamp; i++) {
		struct opal_profile_sample_info si;
		opal_profile_get_sample(p, i, &si);
		order[count[si.process_id]++] = i;
	}
	/* count[id] is now the end of process id's run; its start is
	 * count[id - 1]. */
	for (uint32_t id = 1; id <= nproc && !e.err; id++) {
		size_t begin = count[id - 1], end = count[id];
		if (begin == end)
			continue;
		ResourceProfiles *rp = resource_profiles(&e, id, order + begin, end - begin, o);
		if (rp && vec_push(&rps, rp) < 0)
			set_err(&e, -ENOMEM);
	}
	req.dictionary = dictionary(&e);
	ResourceProfiles **arr = alloc(&e, rps.n, sizeof(*arr));
	if (e.err) {
		err = e.err;
		goto out;
	}
	if (rps.n)
		memcpy(arr, rps.v, rps.n * sizeof(*arr));
	req.resource_profiles = arr;
	req.n_resource_profiles = rps.n;

	size_t size = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(&req);
	if (size > OPAL_OTLP_MAX_BYTES) {
		err = -E2BIG;
		goto out;
	}
	*buf = malloc(size ? size : 1);
	if (!*buf) {
		err = -ENOMEM;
		goto out;
	}
	*len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(&req, *buf);
	err = 0;
out:
	free(rps.v);
	free(count);
	free(order);
	free(e.map_idx);
	free(e.loc_idx);
	opal_intern_free(e.strs);
	table_free(&e.attrs);
	table_free(&e.funcs);
	table_free(&e.maps);
	table_free(&e.locs);
	table_free(&e.stacks);
	table_free(&e.links);
	opal_arena_free(&e.a);
	return err;
}

int opal_otlp_write(const struct opal_profile *p, const struct opal_otlp_options *o,
		    const char *path)
{
	uint8_t *buf;
	size_t len;
	int err = opal_otlp_encode(p, o, &buf, &len);

	if (err)
		return err;
	err = opal_outfile_write(path, buf, len);
	free(buf);
	return err;
}
