/* In-memory profile model (profile.h): every entity is interned in an
 * opal_intern table keyed by a byte serialization of its identity, so equal
 * entities share one id. Strings are interned once and referenced by
 * pointer; entity arrays are indexed by id - 1. Growth is bounded by the
 * OPAL_PROFILE_MAX_* limits of profile.h. */
#include "profile/profile.h"
#include "base/arena.h"
#include "profile/intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct location {
	uint32_t mapping_id;
	uint64_t address;
	enum opal_frame_type type;
	struct opal_profile_line *lines;   /* arena */
	size_t n_lines;
};

struct sample {
	uint32_t process_id, tid;
	const char *thread_name;
	uint32_t *location_ids;            /* arena */
	size_t n_locations;
	uint64_t *ts;                      /* heap, n_times */
	uint32_t *cpus;                    /* heap, n_times */
	uint64_t *off_cpu_ns;              /* heap, n_times; off-CPU samples only */
	bool off_cpu;
	size_t n_times, cap_times;
	struct opal_profile_trace_ctx *ctx;   /* arena, NULL: none */
};

struct opal_profile {
	uint64_t period_ns, start_ns, end_ns;
	bool time_set;
	size_t events;
	struct opal_arena arena;           /* lines and stacks */
	struct opal_intern *strings, *mapping_keys, *location_keys, *process_keys, *sample_keys;
	struct opal_profile_mapping *mappings;
	struct location *locations;
	struct opal_profile_process *processes;
	struct sample *samples;
	size_t cap_mappings, cap_locations, cap_processes, cap_samples;
};

/* Growable serialization buffer for identity keys. */
struct key {
	unsigned char *b;
	size_t n, cap;
	bool oom;
};

static void key_put(struct key *k, const void *v, size_t len)
{
	if (k->oom || !len)
		return;
	if (k->n + len > k->cap) {
		size_t cap = k->cap ? k->cap : 128;
		while (cap < k->n + len)
			cap *= 2;
		unsigned char *b = realloc(k->b, cap);
		if (!b) {
			k->oom = true;
			return;
		}
		k->b = b;
		k->cap = cap;
	}
	memcpy(k->b + k->n, v, len);
	k->n += len;
}

static void key_u64(struct key *k, uint64_t v)
{
	key_put(k, &v, sizeof(v));
}

static void key_u32(struct key *k, uint32_t v)
{
	key_put(k, &v, sizeof(v));
}

/* Interns `s` (NULL stays NULL). Returns 0 with *out set, or -errno. */
static int intern_string(struct opal_profile *p, const char *s, const char **out)
{
	uint32_t idx;

	*out = NULL;
	if (!s)
		return 0;
	size_t len = strnlen(s, OPAL_PROFILE_MAX_STRLEN + 1);
	if (len > OPAL_PROFILE_MAX_STRLEN)
		return -E2BIG;
	int err = opal_intern_add(p->strings, s, len, &idx, NULL);
	if (err)
		return err;
	*out = opal_intern_key(p->strings, idx, NULL);
	return 0;
}

/* A string already interned is identified by its pointer; keys store the
 * pointer value so equal strings give equal keys. */
static void key_str(struct key *k, const char *interned)
{
	key_u64(k, (uint64_t)(uintptr_t)interned);
}

/* Makes room for one more element in *arr (cap in *cap, element size `sz`). */
static int reserve(void **arr, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	void *a = realloc(*arr, c * sz);
	if (!a)
		return -ENOMEM;
	*arr = a;
	*cap = c;
	return 0;
}

struct opal_profile *opal_profile_new(uint64_t period_ns)
{
	struct opal_profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->period_ns = period_ns;
	opal_arena_init(&p->arena, 0);
	p->strings = opal_intern_new(OPAL_PROFILE_MAX_STRINGS);
	p->mapping_keys = opal_intern_new(OPAL_PROFILE_MAX_MAPPINGS);
	p->location_keys = opal_intern_new(OPAL_PROFILE_MAX_LOCATIONS);
	p->process_keys = opal_intern_new(OPAL_PROFILE_MAX_PROCESSES);
	p->sample_keys = opal_intern_new(OPAL_PROFILE_MAX_SAMPLES);
	if (!p->strings || !p->mapping_keys || !p->location_keys || !p->process_keys ||
	    !p->sample_keys) {
		opal_profile_free(p);
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void opal_profile_free(struct opal_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < opal_profile_n_samples(p); i++) {
		free(p->samples[i].ts);
		free(p->samples[i].cpus);
		free(p->samples[i].off_cpu_ns);
	}
	free(p->samples);
	free(p->processes);
	free(p->locations);
	free(p->mappings);
	opal_intern_free(p->strings);
	opal_intern_free(p->mapping_keys);
	opal_intern_free(p->location_keys);
	opal_intern_free(p->process_keys);
	opal_intern_free(p->sample_keys);
	opal_arena_free(&p->arena);
	free(p);
}

void opal_profile_set_time(struct opal_profile *p, uint64_t start_unix_ns, uint64_t end_unix_ns)
{
	if (end_unix_ns < start_unix_ns)
		end_unix_ns = start_unix_ns;
	if (!p->time_set) {
		p->start_ns = start_unix_ns;
		p->end_ns = end_unix_ns;
		p->time_set = true;
		return;
	}
	if (start_unix_ns < p->start_ns)
		p->start_ns = start_unix_ns;
	if (end_unix_ns > p->end_ns)
		p->end_ns = end_unix_ns;
}

/* Common tail of the interning calls: maps an intern result to the
 * header's convention (1-based id, 0 with errno on failure). */
static uint32_t fail(int err)
{
	errno = -err;
	return 0;
}

uint32_t opal_profile_mapping(struct opal_profile *p, const struct opal_profile_mapping *m)
{
	struct opal_profile_mapping c = *m;
	struct key k = { 0 };
	uint32_t idx;
	bool added;
	int err;

	if ((err = intern_string(p, m->filename, &c.filename)) ||
	    (err = intern_string(p, m->build_id_gnu, &c.build_id_gnu)) ||
	    (err = intern_string(p, m->file_id_htlhash, &c.file_id_htlhash)))
		return fail(err);
	key_u64(&k, c.start);
	key_u64(&k, c.limit);
	key_u64(&k, c.file_offset);
	key_str(&k, c.filename);
	key_str(&k, c.build_id_gnu);
	key_str(&k, c.file_id_htlhash);
	uint8_t flags = (uint8_t)(c.has_functions | c.has_filenames << 1 |
				  c.has_line_numbers << 2 | c.has_inline_frames << 3);
	key_put(&k, &flags, 1);
	err = k.oom ? -ENOMEM :
		reserve((void **)&p->mappings, &p->cap_mappings, opal_profile_n_mappings(p),
			sizeof(*p->mappings));
	if (!err)
		err = opal_intern_add(p->mapping_keys, k.b, k.n, &idx, &added);
	free(k.b);
	if (err)
		return fail(err);
	if (added)
		p->mappings[idx] = c;
	return idx + 1;
}

uint32_t opal_profile_location(struct opal_profile *p, uint32_t mapping_id, uint64_t address,
			       enum opal_frame_type type, const struct opal_profile_line *lines,
			       size_t n_lines)
{
	struct opal_profile_line copy[OPAL_PROFILE_MAX_LINES];
	struct key k = { 0 };
	uint32_t idx;
	bool added;
	int err;

	if (mapping_id > opal_profile_n_mappings(p) || n_lines > OPAL_PROFILE_MAX_LINES ||
	    (unsigned)type >= OPAL_FRAME_N_TYPES || (n_lines && !lines))
		return fail(n_lines > OPAL_PROFILE_MAX_LINES ? -E2BIG : -EINVAL);
	key_u32(&k, mapping_id);
	key_u64(&k, address);
	key_u32(&k, (uint32_t)type);
	key_u32(&k, (uint32_t)n_lines);
	for (size_t i = 0; i < n_lines; i++) {
		copy[i].line = lines[i].line;
		copy[i].start_line = lines[i].start_line;
		if ((err = intern_string(p, lines[i].function, &copy[i].function)) ||
		    (err = intern_string(p, lines[i].filename, &copy[i].filename))) {
			free(k.b);
			return fail(err);
		}
		key_str(&k, copy[i].function);
		key_str(&k, copy[i].filename);
		key_u64(&k, (uint64_t)copy[i].line);
		key_u64(&k, (uint64_t)copy[i].start_line);
	}
	err = k.oom ? -ENOMEM :
		reserve((void **)&p->locations, &p->cap_locations, opal_profile_n_locations(p),
			sizeof(*p->locations));
	struct opal_profile_line *stored = NULL;
	if (!err && n_lines) {
		/* Allocated before interning so a failure cannot leave an id
		 * without its lines; unused when the location already exists. */
		stored = opal_arena_calloc(&p->arena, n_lines, sizeof(*stored));
		if (!stored)
			err = -ENOMEM;
	}
	if (!err)
		err = opal_intern_add(p->location_keys, k.b, k.n, &idx, &added);
	free(k.b);
	if (err)
		return fail(err);
	if (added) {
		if (n_lines)
			memcpy(stored, copy, n_lines * sizeof(*stored));
		p->locations[idx] = (struct location){
			.mapping_id = mapping_id, .address = address, .type = type,
			.lines = stored, .n_lines = n_lines,
		};
	}
	return idx + 1;
}

/* Copies `n` attributes into the profile (*out NULL when n is 0). */
static int intern_attrs(struct opal_profile *p, const struct opal_profile_attr *a, size_t n,
			const struct opal_profile_attr **out)
{
	struct opal_profile_attr *c;
	int err;

	*out = NULL;
	if (n == 0)
		return 0;
	if (!(c = opal_arena_calloc(&p->arena, n, sizeof(*c))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if ((err = intern_string(p, a[i].key, &c[i].key)) ||
		    (err = intern_string(p, a[i].value, &c[i].value)))
			return err;
	*out = c;
	return 0;
}

uint32_t opal_profile_process(struct opal_profile *p, const struct opal_profile_process *proc)
{
	struct opal_profile_process c = *proc;
	struct key k = { 0 };
	uint32_t idx;
	bool added;
	int err;

	const char *name = proc->executable_name;
	if (!name && proc->executable_path) {
		const char *slash = strrchr(proc->executable_path, '/');
		name = slash ? slash + 1 : proc->executable_path;
	}
	if ((err = intern_string(p, name, &c.executable_name)) ||
	    (err = intern_string(p, proc->executable_path, &c.executable_path)) ||
	    (err = intern_string(p, proc->service_name, &c.service_name)) ||
	    (err = intern_string(p, proc->container_id, &c.container_id)) ||
	    (err = intern_string(p, proc->host_name, &c.host_name)) ||
	    (err = intern_string(p, proc->host_id, &c.host_id)) ||
	    (err = intern_string(p, proc->os_version, &c.os_version)) ||
	    (err = intern_string(p, proc->pod_uid, &c.pod_uid)) ||
	    (err = intern_string(p, proc->command_line, &c.command_line)) ||
	    (err = intern_attrs(p, proc->resource, proc->n_resource, &c.resource)))
		return fail(err);
	key_u32(&k, c.pid);
	key_str(&k, c.executable_path);
	/* a process that publishes its context (or another one) in the run is
	 * another resource from then on */
	key_u32(&k, (uint32_t)c.n_resource);
	for (size_t i = 0; i < c.n_resource; i++) {
		key_str(&k, c.resource[i].key);
		key_str(&k, c.resource[i].value);
	}
	err = k.oom ? -ENOMEM :
		reserve((void **)&p->processes, &p->cap_processes, opal_profile_n_processes(p),
			sizeof(*p->processes));
	if (!err)
		err = opal_intern_add(p->process_keys, k.b, k.n, &idx, &added);
	free(k.b);
	if (err)
		return fail(err);
	if (added)
		p->processes[idx] = c;
	return idx + 1;
}

/* A copy of `ctx` in the profile's arena (strings interned), or NULL with
 * *err. Made for every add: the arena keeps a copy an existing sample
 * did not need (bounded by the samples added). */
static struct opal_profile_trace_ctx *copy_ctx(struct opal_profile *p,
					       const struct opal_profile_trace_ctx *ctx, int *err)
{
	struct opal_profile_trace_ctx *c = opal_arena_calloc(&p->arena, 1, sizeof(*c));

	*err = -ENOMEM;
	if (!c)
		return NULL;
	*c = *ctx;
	if ((*err = intern_attrs(p, ctx->attrs, ctx->n_attrs, &c->attrs)))
		return NULL;
	return c;
}

/* The one add of every kind: with `off_cpu_ns` an off-CPU sample, under
 * thread context `ctx` (NULL: none). The key keeps CPU and off-CPU
 * samples, and samples under different contexts, apart. */
static int add_sample(struct opal_profile *p, uint32_t process_id, uint32_t tid,
		      const char *thread_name, const uint32_t *location_ids, size_t n_locations,
		      const uint64_t *timestamps_unix_ns, const uint32_t *cpus,
		      const uint64_t *off_cpu_ns, size_t n_times,
		      const struct opal_profile_trace_ctx *ctx)
{
	uint8_t kind = off_cpu_ns != NULL;
	struct key k = { 0 };
	const char *name;
	uint32_t idx;
	bool added;
	int err;

	if (process_id == 0 || process_id > opal_profile_n_processes(p) || n_times == 0 ||
	    !timestamps_unix_ns || !cpus || (n_locations && !location_ids))
		return -EINVAL;
	if (n_locations > OPAL_PROFILE_MAX_STACK || n_times > OPAL_PROFILE_MAX_EVENTS - p->events)
		return -E2BIG;
	for (size_t i = 0; i < n_locations; i++)
		if (location_ids[i] == 0 || location_ids[i] > opal_profile_n_locations(p))
			return -EINVAL;
	if ((err = intern_string(p, thread_name, &name)))
		return err;
	key_put(&k, &kind, 1);
	key_u32(&k, process_id);
	key_u32(&k, tid);
	key_str(&k, name);
	key_put(&k, location_ids, n_locations * sizeof(*location_ids));
	struct opal_profile_trace_ctx *cctx = NULL;
	if (ctx) {   /* after the stack: a key without one never equals one with */
		uint8_t marker = 1;
		if (!(cctx = copy_ctx(p, ctx, &err))) {
			free(k.b);
			return err;
		}
		key_put(&k, &marker, 1);
		if (cctx->has_link) {
			key_put(&k, cctx->trace_id, 16);
			key_put(&k, cctx->span_id, 8);
		}
		key_put(&k, &cctx->trace_flags, 1);
		for (size_t i = 0; i < cctx->n_attrs; i++) {
			key_str(&k, cctx->attrs[i].key);
			key_str(&k, cctx->attrs[i].value);
		}
	}
	uint32_t *stack = NULL;
	err = k.oom ? -ENOMEM :
		reserve((void **)&p->samples, &p->cap_samples, opal_profile_n_samples(p),
			sizeof(*p->samples));
	if (!err && opal_intern_find(p->sample_keys, k.b, k.n, &idx) < 0 && n_locations) {
		stack = opal_arena_calloc(&p->arena, n_locations, sizeof(*stack));
		if (!stack)
			err = -ENOMEM;
	}
	/* Room for the timestamps is made before the sample is interned, so an
	 * allocation failure leaves no half-added sample behind. */
	struct sample fresh = { 0 };
	struct sample *s = &fresh;
	if (!err && opal_intern_find(p->sample_keys, k.b, k.n, &idx) == 0)
		s = &p->samples[idx];
	if (!err && s->n_times + n_times > s->cap_times) {
		size_t cap = s->cap_times ? s->cap_times : 4;
		while (cap < s->n_times + n_times)
			cap *= 2;
		uint64_t *ts = realloc(s->ts, cap * sizeof(*ts));
		if (ts)
			s->ts = ts;
		uint32_t *cp = ts ? realloc(s->cpus, cap * sizeof(*cp)) : NULL;
		if (cp)
			s->cpus = cp;
		uint64_t *oc = cp && kind ? realloc(s->off_cpu_ns, cap * sizeof(*oc)) : NULL;
		if (oc)
			s->off_cpu_ns = oc;
		if (ts && cp && (oc || !kind))
			s->cap_times = cap;
		else
			err = -ENOMEM;
	}
	if (!err)
		err = opal_intern_add(p->sample_keys, k.b, k.n, &idx, &added);
	free(k.b);
	if (err) {
		free(fresh.ts);
		free(fresh.cpus);
		free(fresh.off_cpu_ns);
		return err;
	}
	if (added) {
		if (n_locations)
			memcpy(stack, location_ids, n_locations * sizeof(*stack));
		fresh.process_id = process_id;
		fresh.tid = tid;
		fresh.thread_name = name;
		fresh.location_ids = stack;
		fresh.n_locations = n_locations;
		fresh.off_cpu = kind;
		fresh.ctx = cctx;
		p->samples[idx] = fresh;
		s = &p->samples[idx];
	}
	memcpy(s->ts + s->n_times, timestamps_unix_ns, n_times * sizeof(*s->ts));
	memcpy(s->cpus + s->n_times, cpus, n_times * sizeof(*s->cpus));
	if (kind)
		memcpy(s->off_cpu_ns + s->n_times, off_cpu_ns, n_times * sizeof(*s->off_cpu_ns));
	s->n_times += n_times;
	p->events += n_times;
	return 0;
}

int opal_profile_add_sample(struct opal_profile *p, uint32_t process_id, uint32_t tid,
			    const char *thread_name, const uint32_t *location_ids,
			    size_t n_locations, const uint64_t *timestamps_unix_ns,
			    const uint32_t *cpus, size_t n_times)
{
	return add_sample(p, process_id, tid, thread_name, location_ids, n_locations,
			  timestamps_unix_ns, cpus, NULL, n_times, NULL);
}

int opal_profile_add_sample_ctx(struct opal_profile *p, uint32_t process_id, uint32_t tid,
				const char *thread_name, const uint32_t *location_ids,
				size_t n_locations, const uint64_t *timestamps_unix_ns,
				const uint32_t *cpus, size_t n_times,
				const struct opal_profile_trace_ctx *ctx)
{
	return add_sample(p, process_id, tid, thread_name, location_ids, n_locations,
			  timestamps_unix_ns, cpus, NULL, n_times, ctx);
}

int opal_profile_add_off_cpu(struct opal_profile *p, uint32_t process_id, uint32_t tid,
			     const char *thread_name, const uint32_t *location_ids,
			     size_t n_locations, const uint64_t *timestamps_unix_ns,
			     const uint32_t *cpus, const uint64_t *off_cpu_ns, size_t n_times,
			     const struct opal_profile_trace_ctx *ctx)
{
	if (!off_cpu_ns)
		return -EINVAL;
	return add_sample(p, process_id, tid, thread_name, location_ids, n_locations,
			  timestamps_unix_ns, cpus, off_cpu_ns, n_times, ctx);
}

size_t opal_profile_n_samples_of(const struct opal_profile *p, bool off_cpu)
{
	size_t n = 0;

	for (size_t i = 0; i < opal_profile_n_samples(p); i++)
		n += p->samples[i].off_cpu == off_cpu;
	return n;
}

size_t opal_profile_sample_count(const struct opal_profile *p)
{
	return p->events;
}

uint64_t opal_profile_period_ns(const struct opal_profile *p)
{
	return p->period_ns;
}

void opal_profile_time(const struct opal_profile *p, uint64_t *start_unix_ns,
		       uint64_t *end_unix_ns)
{
	if (p->time_set) {
		*start_unix_ns = p->start_ns;
		*end_unix_ns = p->end_ns;
		return;
	}
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < opal_profile_n_samples(p); i++)
		for (size_t j = 0; j < p->samples[i].n_times; j++) {
			uint64_t t = p->samples[i].ts[j];
			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
		}
	if (lo > hi) {
		*start_unix_ns = *end_unix_ns = 0;
		return;
	}
	*start_unix_ns = lo;
	*end_unix_ns = hi + p->period_ns;
}

size_t opal_profile_n_mappings(const struct opal_profile *p)
{
	return opal_intern_count(p->mapping_keys);
}

const struct opal_profile_mapping *opal_profile_get_mapping(const struct opal_profile *p,
							    uint32_t id)
{
	if (id == 0 || id > opal_profile_n_mappings(p))
		return NULL;
	return &p->mappings[id - 1];
}

size_t opal_profile_n_locations(const struct opal_profile *p)
{
	return opal_intern_count(p->location_keys);
}

int opal_profile_get_location(const struct opal_profile *p, uint32_t id,
			      struct opal_profile_location_info *out)
{
	if (id == 0 || id > opal_profile_n_locations(p))
		return -ENOENT;
	const struct location *l = &p->locations[id - 1];
	*out = (struct opal_profile_location_info){
		.mapping_id = l->mapping_id, .address = l->address, .type = l->type,
		.lines = l->lines, .n_lines = l->n_lines,
	};
	return 0;
}

size_t opal_profile_n_processes(const struct opal_profile *p)
{
	return opal_intern_count(p->process_keys);
}

const struct opal_profile_process *opal_profile_get_process(const struct opal_profile *p,
							    uint32_t id)
{
	if (id == 0 || id > opal_profile_n_processes(p))
		return NULL;
	return &p->processes[id - 1];
}

size_t opal_profile_n_samples(const struct opal_profile *p)
{
	return p->sample_keys ? opal_intern_count(p->sample_keys) : 0;
}

int opal_profile_get_sample(const struct opal_profile *p, size_t index,
			    struct opal_profile_sample_info *out)
{
	if (index >= opal_profile_n_samples(p))
		return -ENOENT;
	const struct sample *s = &p->samples[index];
	*out = (struct opal_profile_sample_info){
		.process_id = s->process_id, .tid = s->tid, .thread_name = s->thread_name,
		.location_ids = s->location_ids, .n_locations = s->n_locations,
		.timestamps_unix_ns = s->ts, .cpus = s->cpus, .n_times = s->n_times,
		.off_cpu = s->off_cpu, .off_cpu_ns = s->off_cpu_ns,
		.ctx = s->ctx,
	};
	return 0;
}
