/* pprof encoder (pprof.h): builds a protobuf-c perftools.profiles.Profile
 * in an arena, packs it and optionally gzips it. */
#include "profile/pprof.h"
#include "base/arena.h"
#include "base/atomic_file.h"
#include "base/gzip.h"
#include "profile/intern.h"
#include "profile/profile.h"
#include "pprof/profile.pb-c.h"
#include "shared/fileid.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__ValueType PValueType;
typedef Perftools__Profiles__Sample PSample;
typedef Perftools__Profiles__Label PLabel;
typedef Perftools__Profiles__Mapping PMapping;
typedef Perftools__Profiles__Location PLocation;
typedef Perftools__Profiles__Line PLine;
typedef Perftools__Profiles__Function PFunction;

struct enc {
	struct opal_arena a;
	struct opal_intern *strs;     /* string_table */
	struct opal_intern *funcs;    /* (name, filename, start line) -> function id - 1 */
	PFunction **functions;        /* by function id - 1 */
	int err;                      /* first error; later calls do nothing */
};

/* String table index of `s`; "" and NULL are index 0. */
static int64_t str(struct enc *e, const char *s)
{
	uint32_t idx;

	if (e->err || !s || !*s)
		return 0;
	int err = opal_intern_str(e->strs, s, &idx);
	if (err) {
		e->err = err;
		return 0;
	}
	return idx;
}

static void *alloc(struct enc *e, size_t n, size_t size)
{
	if (e->err)
		return NULL;
	void *p = opal_arena_calloc(&e->a, n ? n : 1, size);
	if (!p)
		e->err = -ENOMEM;
	return p;
}

static PValueType *value_type(struct enc *e, const char *type, const char *unit)
{
	PValueType *vt = alloc(e, 1, sizeof(*vt));

	if (!vt)
		return NULL;
	perftools__profiles__value_type__init(vt);
	vt->type = str(e, type);
	vt->unit = str(e, unit);
	return vt;
}

/* Function id (1-based) for (name, filename, start line), added on first
 * use. */
static uint64_t function_id(struct enc *e, const char *name, const char *filename,
			    int64_t start_line)
{
	int64_t key[3] = { str(e, name), str(e, filename), start_line };
	uint32_t idx;
	bool added;

	if (e->err)
		return 0;
	int err = opal_intern_add(e->funcs, key, sizeof(key), &idx, &added);
	if (err) {
		e->err = err;
		return 0;
	}
	if (added) {
		PFunction *f = alloc(e, 1, sizeof(*f));
		if (!f)
			return 0;
		perftools__profiles__function__init(f);
		f->id = (uint64_t)idx + 1;
		f->name = key[0];
		/* Only the demangled name is known; pprof wants system_name set. */
		f->system_name = key[0];
		f->filename = key[1];
		f->start_line = start_line;
		e->functions[idx] = f;
	}
	return (uint64_t)idx + 1;
}

static void build_mappings(struct enc *e, const struct opal_profile *p, PProfile *prof)
{
	size_t n = opal_profile_n_mappings(p);
	PMapping **ms = alloc(e, n, sizeof(*ms));

	for (uint32_t id = 1; !e->err && id <= n; id++) {
		const struct opal_profile_mapping *m = opal_profile_get_mapping(p, id);
		PMapping *pm = alloc(e, 1, sizeof(*pm));
		if (!pm)
			return;
		perftools__profiles__mapping__init(pm);
		pm->id = id;
		pm->memory_start = m->start;
		pm->memory_limit = m->limit;
		pm->file_offset = m->file_offset;
		pm->filename = str(e, m->filename);
		pm->build_id = str(e, m->build_id_gnu ? m->build_id_gnu : m->file_id_htlhash);
		pm->has_functions = m->has_functions;
		pm->has_filenames = m->has_filenames;
		pm->has_line_numbers = m->has_line_numbers;
		pm->has_inline_frames = m->has_inline_frames;
		ms[id - 1] = pm;
	}
	prof->mapping = ms;
	prof->n_mapping = e->err ? 0 : n;
}

static void build_locations(struct enc *e, const struct opal_profile *p, PProfile *prof)
{
	size_t n = opal_profile_n_locations(p);
	PLocation **ls = alloc(e, n, sizeof(*ls));

	for (uint32_t id = 1; !e->err && id <= n; id++) {
		struct opal_profile_location_info info;
		opal_profile_get_location(p, id, &info);
		PLocation *pl = alloc(e, 1, sizeof(*pl));
		PLine **lines = alloc(e, info.n_lines, sizeof(*lines));
		if (!pl || !lines)
			return;
		perftools__profiles__location__init(pl);
		pl->id = id;
		pl->mapping_id = info.mapping_id;
		pl->address = info.address;
		for (size_t i = 0; i < info.n_lines; i++) {
			const struct opal_profile_line *l = &info.lines[i];
			PLine *pline = alloc(e, 1, sizeof(*pline));
			if (!pline)
				return;
			perftools__profiles__line__init(pline);
			pline->function_id = function_id(e, l->function ? l->function : "??",
							 l->filename, l->start_line);
			pline->line = l->line;
			lines[i] = pline;
		}
		pl->line = lines;
		pl->n_line = info.n_lines;
		ls[id - 1] = pl;
	}
	prof->location = ls;
	prof->n_location = e->err ? 0 : n;
}

static PLabel *label(struct enc *e, const char *key, const char *s, int64_t num)
{
	PLabel *l = alloc(e, 1, sizeof(*l));

	if (!l)
		return NULL;
	perftools__profiles__label__init(l);
	l->key = str(e, key);
	l->str = s ? str(e, s) : 0;
	l->num = num;
	return l;
}

static void build_samples(struct enc *e, const struct opal_profile *p, bool off_cpu,
			  PProfile *prof)
{
	size_t n = opal_profile_n_samples_of(p, off_cpu), k = 0;
	PSample **ss = alloc(e, n, sizeof(*ss));
	int64_t period = (int64_t)opal_profile_period_ns(p);

	for (size_t i = 0; !e->err && i < opal_profile_n_samples(p); i++) {
		struct opal_profile_sample_info si;
		opal_profile_get_sample(p, i, &si);
		if (si.off_cpu != off_cpu)
			continue;
		const struct opal_profile_process *proc = opal_profile_get_process(p, si.process_id);
		PSample *s = alloc(e, 1, sizeof(*s));
		uint64_t *locs = alloc(e, si.n_locations, sizeof(*locs));
		int64_t *values = alloc(e, 2, sizeof(*values));
		size_t n_ctx = si.ctx ? si.ctx->n_attrs : 0;
		PLabel **labels = alloc(e, 6 + proc->n_resource + n_ctx, sizeof(*labels));
		if (!s || !locs || !values || !labels)
			return;
		perftools__profiles__sample__init(s);
		for (size_t j = 0; j < si.n_locations; j++)
			locs[j] = si.location_ids[j];
		s->location_id = locs;
		s->n_location_id = si.n_locations;
		values[0] = (int64_t)si.n_times;
		values[1] = (int64_t)si.n_times * period;
		if (off_cpu) {
			values[1] = 0;
			for (size_t j = 0; j < si.n_times; j++)
				values[1] += (int64_t)si.off_cpu_ns[j];
		}
		s->value = values;
		s->n_value = 2;
		size_t nl = 0;
		labels[nl++] = label(e, "pid", NULL, proc->pid);
		labels[nl++] = label(e, "tid", NULL, si.tid);
		if (si.thread_name && *si.thread_name)
			labels[nl++] = label(e, "thread_name", si.thread_name, 0);
		if (proc->executable_name && *proc->executable_name)
			labels[nl++] = label(e, "process", proc->executable_name, 0);
		/* what the process published (OTEP 4719): service.name, ... */
		for (size_t k = 0; k < proc->n_resource; k++)
			labels[nl++] = label(e, proc->resource[k].key, proc->resource[k].value, 0);
		/* the thread context it ran under (OTEP 4947), IDs in lowercase hex */
		if (si.ctx && si.ctx->has_link) {
			char hex[33];
			opal_hex_encode(si.ctx->trace_id, 16, hex);
			labels[nl++] = label(e, "trace_id", hex, 0);
			opal_hex_encode(si.ctx->span_id, 8, hex);
			labels[nl++] = label(e, "span_id", hex, 0);
		}
		for (size_t k = 0; k < n_ctx; k++)
			labels[nl++] = label(e, si.ctx->attrs[k].key, si.ctx->attrs[k].value, 0);
		s->label = labels;
		s->n_label = nl;
		ss[k++] = s;
	}
	prof->sample = ss;
	prof->n_sample = e->err ? 0 : n;
}

int opal_pprof_encode_of(const struct opal_profile *p, bool off_cpu, bool gzip, uint8_t **buf,
			 size_t *len)
{
	const char *what = off_cpu ? "off_cpu" : "cpu";
	struct enc e = { 0 };
	PProfile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	uint64_t start, end;
	size_t max_funcs = 1;
	int err;

	opal_arena_init(&e.a, 0);
	for (uint32_t id = 1; id <= opal_profile_n_locations(p); id++) {
		struct opal_profile_location_info info;
		opal_profile_get_location(p, id, &info);
		max_funcs += info.n_lines;
	}
	e.strs = opal_intern_new(OPAL_PROFILE_MAX_STRINGS + 64);
	e.funcs = opal_intern_new(max_funcs);
	if (!e.strs || !e.funcs) {
		err = -ENOMEM;
		goto out;
	}
	/* string_table[0] must be "": intern it first. */
	uint32_t zero;
	if (opal_intern_add(e.strs, "", 0, &zero, NULL) < 0) {
		err = -ENOMEM;
		goto out;
	}
	e.functions = alloc(&e, max_funcs, sizeof(*e.functions));

	PValueType **types = alloc(&e, 2, sizeof(*types));
	if (types) {
		types[0] = value_type(&e, "samples", "count");
		types[1] = value_type(&e, what, "nanoseconds");
		prof.sample_type = types;
		prof.n_sample_type = 2;
	}
	prof.period_type = value_type(&e, what, "nanoseconds");
	/* an off-CPU sample has no period: its value is measured */
	prof.period = off_cpu ? 0 : (int64_t)opal_profile_period_ns(p);
	opal_profile_time(p, &start, &end);
	prof.time_nanos = (int64_t)start;
	prof.duration_nanos = (int64_t)(end - start);
	build_mappings(&e, p, &prof);
	build_locations(&e, p, &prof);
	build_samples(&e, p, off_cpu, &prof);
	if (e.err) {
		err = e.err;
		goto out;
	}
	prof.function = e.functions;
	prof.n_function = opal_intern_count(e.funcs);
	size_t nstr = opal_intern_count(e.strs);
	char **table = alloc(&e, nstr, sizeof(*table));
	if (!table) {
		err = e.err;
		goto out;
	}
	for (size_t i = 0; i < nstr; i++)
		table[i] = (char *)opal_intern_key(e.strs, (uint32_t)i, NULL);
	prof.string_table = table;
	prof.n_string_table = nstr;

	size_t size = perftools__profiles__profile__get_packed_size(&prof);
	if (size > OPAL_PPROF_MAX_BYTES) {
		err = -E2BIG;
		goto out;
	}
	uint8_t *raw = malloc(size ? size : 1);
	if (!raw) {
		err = -ENOMEM;
		goto out;
	}
	perftools__profiles__profile__pack(&prof, raw);
	if (!gzip) {
		*buf = raw;
		*len = size;
		err = 0;
		goto out;
	}
	err = opal_gzip(raw, size, buf, len);
	free(raw);
out:
	opal_intern_free(e.strs);
	opal_intern_free(e.funcs);
	opal_arena_free(&e.a);
	return err;
}

int opal_pprof_encode(const struct opal_profile *p, bool gzip, uint8_t **buf, size_t *len)
{
	return opal_pprof_encode_of(p, false, gzip, buf, len);
}

int opal_pprof_write_of(const struct opal_profile *p, bool off_cpu, const char *path)
{
	uint8_t *buf;
	size_t len;
	int err = opal_pprof_encode_of(p, off_cpu, true, &buf, &len);

	if (err)
		return err;
	err = opal_outfile_write(path, buf, len);
	free(buf);
	return err;
}

int opal_pprof_write(const struct opal_profile *p, const char *path)
{
	return opal_pprof_write_of(p, false, path);
}
