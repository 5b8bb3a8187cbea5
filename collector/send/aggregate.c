/* Per-interval stack aggregation and Interval packing (aggregate.h). */
#include "send/aggregate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/array.h"
#include "base/htab.h"
#include "shared/wire_frames.h"

/* Upper bounds of the packed size of each message (tags, length prefixes
 * and varints at their widest), used for the max_bytes bound. */
#define EST_PROCESS   64   /* + the four strings */
#define EST_THREAD    32   /* + name */
#define EST_MAPPING   96   /* + path + build ID */
#define EST_STACK     16
#define EST_FRAME     24
#define EST_SAMPLE    16   /* one timestamp varint + one cpu varint */
#define EST_OFF_CPU   10   /* one off_cpu_ns varint */

struct agg_map {
	struct opal_hnode node;
	uint64_t start, limit, file_offset, load_bias;
	bool has_file_id;
	opal_file_id file_id;
	size_t build_id_len;
	uint8_t build_id[OPAL_BUILD_ID_MAX];
	char *path;
	uint32_t index;
};

/* Frame as stored and hashed: fixed layout without padding holes. */
struct agg_frame {
	uint64_t address;
	uint32_t mapping_index;
	uint8_t kind;
	uint8_t return_address;
	uint16_t zero;
};

struct agg_stack {
	struct opal_hnode node;
	struct agg_thread *thread;
	size_t n_frames;
	struct agg_frame *frames;
	uint64_t *times;
	uint32_t *cpus;
	uint64_t *off_cpu_ns;   /* off-CPU stacks only, else NULL */
	bool off_cpu;
	size_t n, cap;
	uint8_t *ctx;            /* thread context: trace ID, span ID, flags, attrs */
	size_t ctx_len;          /* 0: none */
};

struct agg_thread {
	struct opal_hnode node;
	uint32_t tid;
	char name[OPAL_COMM_MAX];
	struct agg_stack **stacks;
	size_t n_stacks, cap_stacks;
};

struct agg_proc {
	struct opal_hnode node;
	uint32_t pid;
	uint64_t jit_id;     /* the latest sample's nonzero one */
	char *comm, *exe, *service_name, *container_id, *command_line;
	char pod_uid[OPAL_POD_UID_LEN + 1];
	struct opal_htab maps;
	struct agg_map **map_list;
	size_t n_maps, cap_maps;
	struct opal_htab threads;
	struct agg_thread **thread_list;
	size_t n_threads, cap_threads;
	uint8_t *pctx;               /* process context payload, pctx_len bytes */
	size_t pctx_len;
	uint64_t pctx_published_ns;
};

struct opal_agg {
	struct opal_agg_limits lim;
	struct opal_htab procs;
	struct agg_proc **proc_list;
	size_t n_procs, cap_procs;
	struct opal_htab stacks;
	size_t n_stacks, n_samples, n_off_cpu, est_bytes;
};

#define AGG_FIRST_CAP 8   /* processes, threads, mappings, stacks first allocated */

struct opal_agg *opal_agg_new(const struct opal_agg_limits *lim)
{
	struct opal_agg *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->lim = *lim;
	if (opal_htab_init(&a->procs, 6) || opal_htab_init(&a->stacks, 10)) {
		opal_htab_destroy(&a->procs);
		free(a);
		return NULL;
	}
	return a;
}

static void free_proc(struct agg_proc *p)
{
	for (size_t i = 0; i < p->n_maps; i++) {
		free(p->map_list[i]->path);
		free(p->map_list[i]);
	}
	for (size_t i = 0; i < p->n_threads; i++) {
		struct agg_thread *t = p->thread_list[i];
		for (size_t j = 0; j < t->n_stacks; j++) {
			struct agg_stack *s = t->stacks[j];
			free(s->frames);
			free(s->ctx);
			free(s->times);
			free(s->cpus);
			free(s->off_cpu_ns);
			free(s);
		}
		free(t->stacks);
		free(t);
	}
	opal_htab_destroy(&p->maps);
	opal_htab_destroy(&p->threads);
	free(p->map_list);
	free(p->thread_list);
	free(p->comm);
	free(p->exe);
	free(p->service_name);
	free(p->command_line);
	free(p->container_id);
	free(p->pctx);
	free(p);
}

void opal_agg_reset(struct opal_agg *a)
{
	for (size_t i = 0; i < a->n_procs; i++)
		free_proc(a->proc_list[i]);
	a->n_procs = 0;
	memset(a->procs.buckets, 0, a->procs.nbuckets * sizeof(*a->procs.buckets));
	a->procs.count = 0;
	memset(a->stacks.buckets, 0, a->stacks.nbuckets * sizeof(*a->stacks.buckets));
	a->stacks.count = 0;
	a->n_stacks = 0;
	a->n_samples = 0;
	a->n_off_cpu = 0;
	a->est_bytes = 0;
}

void opal_agg_free(struct opal_agg *a)
{
	if (!a)
		return;
	opal_agg_reset(a);
	opal_htab_destroy(&a->procs);
	opal_htab_destroy(&a->stacks);
	free(a->proc_list);
	free(a);
}

size_t opal_agg_n_samples(const struct opal_agg *a)
{
	return a->n_samples;
}

size_t opal_agg_n_off_cpu(const struct opal_agg *a)
{
	return a->n_off_cpu;
}

size_t opal_agg_n_stacks(const struct opal_agg *a)
{
	return a->n_stacks;
}

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

static uint64_t proc_hash(uint32_t pid, const char *exe)
{
	return opal_hash_bytes(opal_hash_u64(pid), exe, strlen(exe));
}

static struct agg_proc *find_proc(const struct opal_agg *a, uint32_t pid, const char *exe)
{
	uint64_t h = proc_hash(pid, exe);

	for (struct opal_hnode *n = opal_htab_first(&a->procs, h); n; n = opal_htab_next(n)) {
		struct agg_proc *p = opal_container_of(n, struct agg_proc, node);
		if (p->pid == pid && strcmp(p->exe, exe) == 0)
			return p;
	}
	return NULL;
}

static struct agg_proc *new_proc(struct opal_agg *a, const struct opal_agg_sample *s,
				 const char *exe)
{
	const struct opal_proc_info *info = s->proc;
	const char *comm = info && info->comm[0] ? info->comm : str_or_empty(s->thread_name);
	struct agg_proc *p;

	if (opal_array_reserve((void **)&a->proc_list, &a->cap_procs, a->n_procs + 1,
			       sizeof(*a->proc_list), AGG_FIRST_CAP))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = s->pid;
	p->comm = strdup(comm);
	p->exe = strdup(exe);
	p->service_name = strdup(info ? str_or_empty(info->service_name) : "");
	p->container_id = strdup(info ? info->container_id : "");
	p->command_line = strdup(info && info->command_line ? info->command_line : "");
	snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", info ? info->pod_uid : "");
	if (s->process_context && s->process_context_len &&
	    (p->pctx = malloc(s->process_context_len))) {
		memcpy(p->pctx, s->process_context, s->process_context_len);
		p->pctx_len = s->process_context_len;
		p->pctx_published_ns = s->process_context_published_ns;
	}
	if (!p->comm || !p->exe || !p->service_name || !p->container_id || !p->command_line ||
	    (s->process_context_len && !p->pctx) || opal_htab_init(&p->maps, 4) || opal_htab_init(&p->threads, 4)) {
		free_proc(p);
		return NULL;
	}
	opal_htab_insert(&a->procs, &p->node, proc_hash(p->pid, p->exe));
	a->proc_list[a->n_procs++] = p;
	a->est_bytes += EST_PROCESS + strlen(p->comm) + strlen(p->exe) + strlen(p->service_name) +
			strlen(p->container_id) + strlen(p->command_line) + p->pctx_len;
	return p;
}

/* Threads are told apart by (tid, name): a thread renamed within the
 * interval (pthread_setname_np) gets one Thread per name, so that every
 * sample keeps the name it was taken with. */
static uint64_t thread_hash(uint32_t tid, const char *name)
{
	return opal_hash_bytes(opal_hash_u64(tid), name, strlen(name));
}

static struct agg_thread *find_thread(const struct agg_proc *p, uint32_t tid, const char *name)
{
	uint64_t h = thread_hash(tid, name);

	for (struct opal_hnode *n = opal_htab_first(&p->threads, h); n; n = opal_htab_next(n)) {
		struct agg_thread *t = opal_container_of(n, struct agg_thread, node);
		if (t->tid == tid && strcmp(t->name, name) == 0)
			return t;
	}
	return NULL;
}

static struct agg_thread *new_thread(struct opal_agg *a, struct agg_proc *p, uint32_t tid,
				     const char *name)
{
	struct agg_thread *t;

	if (opal_array_reserve((void **)&p->thread_list, &p->cap_threads, p->n_threads + 1,
			       sizeof(*p->thread_list), AGG_FIRST_CAP))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->tid = tid;
	snprintf(t->name, sizeof(t->name), "%s", name);
	opal_htab_insert(&p->threads, &t->node, thread_hash(tid, t->name));
	p->thread_list[p->n_threads++] = t;
	a->est_bytes += EST_THREAD + OPAL_COMM_MAX;
	return t;
}

static uint64_t map_hash(const struct opal_mapping_desc *d)
{
	uint64_t h = opal_hash_u64(d->start ^ opal_hash_u64(d->limit ^ d->file_offset));

	return opal_hash_bytes(h, d->file_id.b, d->has_file_id ? sizeof(d->file_id.b) : 0);
}

static bool map_eq(const struct agg_map *m, const struct opal_mapping_desc *d)
{
	return m->start == d->start && m->limit == d->limit && m->file_offset == d->file_offset &&
	       m->load_bias == d->load_bias && m->has_file_id == d->has_file_id &&
	       (!d->has_file_id || opal_file_id_eq(&m->file_id, &d->file_id)) &&
	       strcmp(m->path, str_or_empty(d->path)) == 0;
}

/* Index of mapping `d` in p's list; with `create`, added when missing.
 * Returns the index, -ENOENT (missing, !create; or past the indexes a
 * packed frame holds) or -ENOMEM. */
static int64_t intern_map(struct opal_agg *a, struct agg_proc *p, const struct opal_mapping_desc *d,
			  bool create)
{
	uint64_t h = map_hash(d);
	struct agg_map *m;

	for (struct opal_hnode *n = opal_htab_first(&p->maps, h); n; n = opal_htab_next(n)) {
		m = opal_container_of(n, struct agg_map, node);
		if (map_eq(m, d))
			return m->index;
	}
	if (!create || p->n_maps > OPAL_WIRE_FRAME_MAX_MAPPING)
		return -ENOENT;
	if (opal_array_reserve((void **)&p->map_list, &p->cap_maps, p->n_maps + 1,
			       sizeof(*p->map_list), AGG_FIRST_CAP))
		return -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(str_or_empty(d->path)))) {
		free(m);
		return -ENOMEM;
	}
	m->start = d->start;
	m->limit = d->limit;
	m->file_offset = d->file_offset;
	m->load_bias = d->load_bias;
	m->has_file_id = d->has_file_id;
	m->file_id = d->file_id;
	m->build_id_len = d->build_id_len <= OPAL_BUILD_ID_MAX ? d->build_id_len : 0;
	memcpy(m->build_id, d->build_id, m->build_id_len);
	m->index = (uint32_t)p->n_maps;
	opal_htab_insert(&p->maps, &m->node, h);
	p->map_list[p->n_maps++] = m;
	a->est_bytes += EST_MAPPING + strlen(m->path) + m->build_id_len;
	return m->index;
}

/* A thread context as stored: trace ID, span ID, trace flags, attrs. */
#define CTX_HEAD 25

/* The stored form of `e` into buf (CTX_HEAD + OPAL_TCTX_ATTRS_MAX bytes);
 * returns its length, 0 for none. */
static size_t ctx_bytes(const struct opal_tctx_event *e, uint8_t *buf)
{
	size_t n;

	if (!e)
		return 0;
	n = e->attrs_len < OPAL_TCTX_ATTRS_MAX ? e->attrs_len : OPAL_TCTX_ATTRS_MAX;
	memcpy(buf, e->trace_id, 16);
	memcpy(buf + 16, e->span_id, 8);
	buf[24] = e->trace_flags;
	memcpy(buf + CTX_HEAD, e->attrs, n);
	return CTX_HEAD + n;
}

/* A stack's identity: its thread, its kind (CPU or off-CPU), its frames
 * and its thread context (ctx_len 0: none). */
struct stack_key {
	const struct agg_thread *thread;
	bool off_cpu;
	const struct agg_frame *frames;
	size_t n_frames;
	const uint8_t *ctx;
	size_t ctx_len;
};

static uint64_t stack_hash(const struct stack_key *k)
{
	uint64_t h = opal_hash_bytes(opal_hash_u64((uint64_t)(uintptr_t)k->thread + k->off_cpu),
				     k->frames, k->n_frames * sizeof(*k->frames));

	return k->ctx_len ? opal_hash_bytes(h, k->ctx, k->ctx_len) : h;
}

static struct agg_stack *find_stack(const struct opal_agg *a, const struct stack_key *k,
				    uint64_t h)
{
	for (struct opal_hnode *x = opal_htab_first(&a->stacks, h); x; x = opal_htab_next(x)) {
		struct agg_stack *s = opal_container_of(x, struct agg_stack, node);
		if (s->thread == k->thread && s->off_cpu == k->off_cpu &&
		    s->n_frames == k->n_frames &&
		    memcmp(s->frames, k->frames, k->n_frames * sizeof(*k->frames)) == 0 &&
		    s->ctx_len == k->ctx_len &&
		    (!k->ctx_len || memcmp(s->ctx, k->ctx, k->ctx_len) == 0))
			return s;
	}
	return NULL;
}

static struct agg_stack *new_stack(struct opal_agg *a, struct agg_thread *t,
				   const struct stack_key *k, uint64_t h)
{
	struct agg_stack *s;

	if (opal_array_reserve((void **)&t->stacks, &t->cap_stacks, t->n_stacks + 1,
			       sizeof(*t->stacks), AGG_FIRST_CAP))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->frames = malloc((k->n_frames ? k->n_frames : 1) * sizeof(*k->frames));
	if (!s->frames) {
		free(s);
		return NULL;
	}
	memcpy(s->frames, k->frames, k->n_frames * sizeof(*k->frames));
	if (k->ctx_len && !(s->ctx = malloc(k->ctx_len))) {
		free(s->frames);
		free(s);
		return NULL;
	}
	if (k->ctx_len)
		memcpy(s->ctx, k->ctx, k->ctx_len);
	s->ctx_len = k->ctx_len;
	s->n_frames = k->n_frames;
	s->thread = t;
	s->off_cpu = k->off_cpu;
	opal_htab_insert(&a->stacks, &s->node, h);
	t->stacks[t->n_stacks++] = s;
	a->n_stacks++;
	a->est_bytes += EST_STACK + k->n_frames * EST_FRAME + k->ctx_len;
	return s;
}

static int add_time(struct agg_stack *s, uint64_t t, uint32_t cpu, uint64_t off_cpu_ns)
{
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 4;
		uint64_t *nt = realloc(s->times, ncap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		s->times = nt;
		uint32_t *nc = realloc(s->cpus, ncap * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		s->cpus = nc;
		if (s->off_cpu) {
			uint64_t *nv = realloc(s->off_cpu_ns, ncap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			s->off_cpu_ns = nv;
		}
		s->cap = ncap;
	}
	s->times[s->n] = t;
	s->cpus[s->n] = cpu;
	if (s->off_cpu)
		s->off_cpu_ns[s->n] = off_cpu_ns;
	s->n++;
	return 0;
}

int opal_agg_add(struct opal_agg *a, const struct opal_agg_sample *s)
{
	struct agg_frame frames[OPAL_MAX_FRAMES];
	const char *exe = s->proc ? str_or_empty(s->proc->exe) : "";
	char tname[OPAL_COMM_MAX];
	bool full = a->n_stacks >= a->lim.max_stacks || a->est_bytes >= a->lim.max_bytes;
	size_t n = s->n_frames < OPAL_MAX_FRAMES ? s->n_frames : OPAL_MAX_FRAMES;
	struct agg_proc *p;
	struct agg_thread *t;
	struct agg_stack *st;

	if (a->n_samples >= a->lim.max_samples)
		return -ENOSPC;
	if (!(p = find_proc(a, s->pid, exe))) {
		if (full)
			return -ENOSPC;
		if (!(p = new_proc(a, s, exe)))
			return -ENOMEM;
	}
	if (s->jit_id)
		p->jit_id = s->jit_id;
	snprintf(tname, sizeof(tname), "%s", str_or_empty(s->thread_name));   /* as stored */
	if (!(t = find_thread(p, s->tid, tname))) {
		if (full)
			return -ENOSPC;
		if (!(t = new_thread(a, p, s->tid, tname)))
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct opal_frame *f = &s->frames[i];
		int64_t idx = 0;
		if (f->kind == OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE ||
		    f->kind == OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_JIT) {
			if (!f->mapping)
				return -EINVAL;
			idx = intern_map(a, p, f->mapping, !full);
			if (idx == -ENOENT)
				return -ENOSPC;   /* a new mapping means a new stack */
			if (idx < 0)
				return (int)idx;
		}
		frames[i] = (struct agg_frame){
			.address = f->address,
			.mapping_index = (uint32_t)idx,
			.kind = f->kind,
			.return_address = f->return_address,
		};
		/* an interpreter frame: the code ID in `address`, the
		 * instruction index in `mapping_index` */
		if (f->kind == OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED)
			frames[i] = (struct agg_frame){ .address = f->code_id,
							.mapping_index = (uint32_t)f->address,
							.kind = f->kind };
	}
	uint8_t ctx[CTX_HEAD + OPAL_TCTX_ATTRS_MAX];
	struct stack_key k = { .thread = t, .off_cpu = s->off_cpu, .frames = frames, .n_frames = n,
			       .ctx = ctx, .ctx_len = ctx_bytes(s->thread_ctx, ctx) };
	uint64_t h = stack_hash(&k);
	if (!(st = find_stack(a, &k, h))) {
		if (full)
			return -ENOSPC;
		if (!(st = new_stack(a, t, &k, h)))
			return -ENOMEM;
	}
	if (add_time(st, s->time_unix_ns, s->cpu, s->off_cpu_ns) < 0)
		return -ENOMEM;
	a->n_samples++;
	a->n_off_cpu += s->off_cpu;
	a->est_bytes += EST_SAMPLE + (s->off_cpu ? EST_OFF_CPU : 0);
	return 0;
}

static int cmp_id(const void *x, const void *y)
{
	return memcmp(x, y, sizeof(opal_file_id));
}

/* Sorted, distinct file IDs of every mapping. */
static int collect_ids(const struct opal_agg *a, opal_file_id **ids, size_t *n_ids)
{
	size_t total = 0, n = 0;
	opal_file_id *v;

	*ids = NULL;
	*n_ids = 0;
	for (size_t i = 0; i < a->n_procs; i++)
		total += a->proc_list[i]->n_maps;
	if (total == 0)
		return 0;
	v = malloc(total * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_procs; i++)
		for (size_t j = 0; j < a->proc_list[i]->n_maps; j++)
			if (a->proc_list[i]->map_list[j]->has_file_id)
				v[n++] = a->proc_list[i]->map_list[j]->file_id;
	qsort(v, n, sizeof(*v), cmp_id);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || !opal_file_id_eq(&v[u - 1], &v[i]))
			v[u++] = v[i];
	if (u == 0) {
		free(v);
		return 0;
	}
	*ids = v;
	*n_ids = u;
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Sorted, distinct code IDs of every interpreter frame (kept in
 * agg_frame.address). */
static int collect_code_ids(const struct opal_agg *a, uint64_t **ids, size_t *n_ids)
{
	size_t n = 0, cap = 0, u = 0;
	uint64_t *v = NULL;

	*ids = NULL;
	*n_ids = 0;
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct agg_proc *p = a->proc_list[i];
		for (size_t j = 0; j < p->n_threads; j++) {
			const struct agg_thread *t = p->thread_list[j];
			for (size_t k = 0; k < t->n_stacks; k++) {
				const struct agg_stack *st = t->stacks[k];
				for (size_t f = 0; f < st->n_frames; f++) {
					if (st->frames[f].kind !=
						    OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED ||
					    !st->frames[f].address)
						continue;
					if (opal_array_reserve((void **)&v, &cap, n + 1, sizeof(*v), 64) < 0) {
						free(v);
						return -ENOMEM;
					}
					v[n++] = st->frames[f].address;
				}
			}
		}
	}
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (u == 0 || v[u - 1] != v[i])
			v[u++] = v[i];
	*ids = v;
	*n_ids = u;
	return 0;
}

/* Sorted, distinct nonzero jit_ids of the processes. */
static int collect_jit_ids(const struct opal_agg *a, uint64_t **ids, size_t *n_ids)
{
	size_t n = 0, u = 0;
	uint64_t *v;

	*ids = NULL;
	*n_ids = 0;
	if (!a->n_procs || !(v = malloc(a->n_procs * sizeof(*v))))
		return a->n_procs ? -ENOMEM : 0;
	for (size_t i = 0; i < a->n_procs; i++)
		if (a->proc_list[i]->jit_id)
			v[n++] = a->proc_list[i]->jit_id;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		if (u == 0 || v[u - 1] != v[i])
			v[u++] = v[i];
	if (u == 0) {
		free(v);
		return 0;
	}
	*ids = v;
	*n_ids = u;
	return 0;
}

/* Every protobuf-c struct of one packed interval, allocated in bulk; the
 * strings, bytes and sample arrays point into the aggregation. */
struct pack_arena {
	Opal__Wire__V1__Process *procs;
	Opal__Wire__V1__Process **proc_ptrs;
	Opal__Wire__V1__Mapping *maps;
	Opal__Wire__V1__Mapping **map_ptrs;
	Opal__Wire__V1__Thread *threads;
	Opal__Wire__V1__Thread **thread_ptrs;
	Opal__Wire__V1__Stack *stacks;
	Opal__Wire__V1__Stack **stack_ptrs;
	uint32_t *frame_info;       /* the stacks' packed frames, end to end */
	uint64_t *frame_address;
	uint64_t *frame_code_id;
};

static void arena_free(struct pack_arena *r)
{
	free(r->procs);
	free(r->proc_ptrs);
	free(r->maps);
	free(r->map_ptrs);
	free(r->threads);
	free(r->thread_ptrs);
	free(r->stacks);
	free(r->stack_ptrs);
	free(r->frame_info);
	free(r->frame_address);
	free(r->frame_code_id);
}

static int arena_alloc(struct pack_arena *r, const struct opal_agg *a)
{
	size_t n_maps = 0, n_threads = 0, n_frames = 0;

	for (size_t i = 0; i < a->n_procs; i++) {
		const struct agg_proc *p = a->proc_list[i];
		n_maps += p->n_maps;
		n_threads += p->n_threads;
		for (size_t j = 0; j < p->n_threads; j++)
			for (size_t k = 0; k < p->thread_list[j]->n_stacks; k++)
				n_frames += p->thread_list[j]->stacks[k]->n_frames;
	}
	/* +1: calloc(0) may return NULL */
	r->procs = calloc(a->n_procs + 1, sizeof(*r->procs));
	r->proc_ptrs = calloc(a->n_procs + 1, sizeof(*r->proc_ptrs));
	r->maps = calloc(n_maps + 1, sizeof(*r->maps));
	r->map_ptrs = calloc(n_maps + 1, sizeof(*r->map_ptrs));
	r->threads = calloc(n_threads + 1, sizeof(*r->threads));
	r->thread_ptrs = calloc(n_threads + 1, sizeof(*r->thread_ptrs));
	r->stacks = calloc(a->n_stacks + 1, sizeof(*r->stacks));
	r->stack_ptrs = calloc(a->n_stacks + 1, sizeof(*r->stack_ptrs));
	r->frame_info = calloc(n_frames + 1, sizeof(*r->frame_info));
	r->frame_address = calloc(n_frames + 1, sizeof(*r->frame_address));
	r->frame_code_id = calloc(n_frames + 1, sizeof(*r->frame_code_id));
	if (!r->procs || !r->proc_ptrs || !r->maps || !r->map_ptrs || !r->threads ||
	    !r->thread_ptrs || !r->stacks || !r->stack_ptrs || !r->frame_info ||
	    !r->frame_address || !r->frame_code_id)
		return -ENOMEM;
	return 0;
}

/* Fills `out` from `s`, its frames packed into info/address/code_id (room
 * for s->n_frames each). */
static void fill_stack(Opal__Wire__V1__Stack *out, const struct agg_stack *s, uint32_t *info,
		       uint64_t *address, uint64_t *code_id)
{
	size_t n_code = 0;

	opal__wire__v1__stack__init(out);
	if (s->ctx_len >= CTX_HEAD) {
		out->trace_id = (ProtobufCBinaryData){ 16, s->ctx };
		out->span_id = (ProtobufCBinaryData){ 8, s->ctx + 16 };
		out->trace_flags = s->ctx[24];
		out->thread_attributes = (ProtobufCBinaryData){ s->ctx_len - CTX_HEAD,
								 s->ctx + CTX_HEAD };
	}
	for (size_t i = 0; i < s->n_frames; i++) {
		const struct agg_frame *f = &s->frames[i];
		if (f->kind == OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED) {
			info[i] = opal_wire_frame_info(f->kind, false, 0);
			address[i] = f->mapping_index;
			code_id[n_code++] = f->address;
		} else {
			info[i] = opal_wire_frame_info(f->kind, f->return_address, f->mapping_index);
			address[i] = f->address;
		}
	}
	out->n_frame_info = out->n_frame_address = s->n_frames;
	out->frame_info = info;
	out->frame_address = address;
	out->n_frame_code_id = n_code;
	out->frame_code_id = code_id;
	out->n_timestamps_unix_ns = s->n;
	out->timestamps_unix_ns = s->times;
	out->n_cpus = s->n;
	out->cpus = s->cpus;
	if (s->off_cpu) {
		out->kind = OPAL__WIRE__V1__SAMPLE_KIND__SAMPLE_KIND_OFF_CPU;
		out->n_off_cpu_ns = s->n;
		out->off_cpu_ns = s->off_cpu_ns;
	}
}

static void fill_mapping(Opal__Wire__V1__Mapping *out, const struct agg_map *m)
{
	opal__wire__v1__mapping__init(out);
	out->start = m->start;
	out->limit = m->limit;
	out->file_offset = m->file_offset;
	out->load_bias = m->load_bias;
	out->path = m->path;
	if (m->has_file_id) {
		out->file_id.len = OPAL_FILE_ID_LEN;
		out->file_id.data = (uint8_t *)m->file_id.b;
	}
	if (m->build_id_len) {
		out->gnu_build_id.len = m->build_id_len;
		out->gnu_build_id.data = (uint8_t *)m->build_id;
	}
}

int opal_agg_pack(const struct opal_agg *a, const struct opal_interval_meta *m,
		  struct opal_sendq_entry *e)
{
	uint8_t **buf = &e->buf;
	size_t *len = &e->len;
	opal_file_id **ids = &e->ids;
	size_t *n_ids = &e->n_ids;
	Opal__Wire__V1__Interval iv = OPAL__WIRE__V1__INTERVAL__INIT;
	Opal__Wire__V1__CollectorCounters ctr = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	struct pack_arena r = { 0 };
	size_t im = 0, it = 0, is = 0, ifr = 0;
	int err;

	*buf = NULL;
	*len = 0;
	e->code_ids = NULL;
	e->n_code_ids = 0;
	e->jit_ids = NULL;
	e->n_jit_ids = 0;
	if ((err = arena_alloc(&r, a)) < 0 || (err = collect_ids(a, ids, n_ids)) < 0 ||
	    (err = collect_code_ids(a, &e->code_ids, &e->n_code_ids)) < 0 ||
	    (err = collect_jit_ids(a, &e->jit_ids, &e->n_jit_ids)) < 0) {
		arena_free(&r);
		free(*ids);
		*ids = NULL;
		*n_ids = 0;
		free(e->code_ids);
		e->code_ids = NULL;
		e->n_code_ids = 0;
		return err;
	}
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct agg_proc *p = a->proc_list[i];
		Opal__Wire__V1__Process *op = &r.procs[i];
		opal__wire__v1__process__init(op);
		op->pid = p->pid;
		op->comm = p->comm;
		op->executable_path = p->exe;
		op->service_name = p->service_name;
		op->container_id = p->container_id;
		op->jit_id = p->jit_id;
		op->process_context.data = p->pctx;
		op->process_context.len = p->pctx_len;
		op->process_context_published_ns = p->pctx_published_ns;
		op->k8s_pod_uid = (char *)p->pod_uid;
		op->command_line = p->command_line;
		op->n_mappings = p->n_maps;
		op->mappings = &r.map_ptrs[im];
		for (size_t j = 0; j < p->n_maps; j++, im++) {
			fill_mapping(&r.maps[im], p->map_list[j]);
			r.map_ptrs[im] = &r.maps[im];
		}
		op->n_threads = p->n_threads;
		op->threads = &r.thread_ptrs[it];
		for (size_t j = 0; j < p->n_threads; j++, it++) {
			const struct agg_thread *t = p->thread_list[j];
			Opal__Wire__V1__Thread *ot = &r.threads[it];
			opal__wire__v1__thread__init(ot);
			r.thread_ptrs[it] = ot;
			ot->tid = t->tid;
			ot->name = (char *)t->name;
			ot->n_stacks = t->n_stacks;
			ot->stacks = &r.stack_ptrs[is];
			for (size_t k = 0; k < t->n_stacks; k++, is++) {
				fill_stack(&r.stacks[is], t->stacks[k], &r.frame_info[ifr],
					   &r.frame_address[ifr], &r.frame_code_id[ifr]);
				ifr += t->stacks[k]->n_frames;
				r.stack_ptrs[is] = &r.stacks[is];
			}
		}
		r.proc_ptrs[i] = op;
	}
	if (m->counters)
		ctr = *m->counters;
	iv.seq = m->seq;
	iv.run_id = m->run_id;
	iv.start_unix_ns = m->start_unix_ns;
	iv.end_unix_ns = m->end_unix_ns;
	iv.idle_samples = m->idle_samples;
	iv.counters = &ctr;
	iv.final = m->final;
	iv.n_processes = a->n_procs;
	iv.processes = r.proc_ptrs;

	*len = opal__wire__v1__interval__get_packed_size(&iv);
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		arena_free(&r);
		free(*ids);
		*ids = NULL;
		*n_ids = 0;
		free(e->code_ids);
		e->code_ids = NULL;
		e->n_code_ids = 0;
		free(e->jit_ids);
		e->jit_ids = NULL;
		e->n_jit_ids = 0;
		return -ENOMEM;
	}
	opal__wire__v1__interval__pack(&iv, *buf);
	arena_free(&r);
	return 0;
}
