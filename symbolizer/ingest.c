/* Interval -> profile: symbolize each frame and intern it as a location. */
#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "profile/process_context.h"
#include "shared/log.h"
#include "shared/wire.h"
#include "shared/wire_frames.h"

#define KERNEL_MAPPING_NAME "[kernel.kallsyms]"
#define CPYTHON_UNKNOWN "[cpython: unknown code]"
#define MAX_REQUESTS_PER_INTERVAL 64

/* Locations of native and kernel frames already made in this interval,
 * by (profile mapping, address, return address): a warm interval repeats
 * the same frames across its stacks, and one lookup here replaces the
 * symbolizer's cache lookup and the interning of the location's lines.
 * At most LOC_CACHE_MAX entries (24 bytes each); past that, frames are
 * made the long way. */
#define LOC_CACHE_MAX   (1u << 16)

struct loc_slot {
	uint64_t address;
	uint32_t mapping;       /* 0: empty (profile ids start at 1) */
	uint32_t id;            /* the location */
	uint32_t flags;         /* bit 0: return address, bit 1: symbolized, bit 2: split */
	uint32_t inlined;       /* split: the location of its inlined callees, or 0 */
};

/* The key bits of loc_slot.flags. */
#define LOC_KEY(ret, split) ((uint32_t)(ret) | ((uint32_t)(split) << 2))
#define LOC_KEY_MASK        5u

struct loc_cache {
	struct loc_slot *slot;
	size_t n, nslots;       /* nslots: 0 or a power of two */
};

struct ingest_run {
	struct opal_symbolizer *s;
	const struct opal_ingest_source *src;
	struct opal_profile *p;
	struct opal_ingest_stats *stats;
	uint32_t kernel_mapping;
	uint32_t cpython_mapping;
	opal_file_id requested[MAX_REQUESTS_PER_INTERVAL];
	size_t n_requested;
	struct loc_cache locs;
};

static size_t loc_hash(uint32_t mapping, uint64_t address, uint32_t key)
{
	uint64_t h = (address ^ ((uint64_t)mapping << 40) ^ ((uint64_t)key << 61)) *
		     0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32);
}

/* The slot of the key, or the empty slot where it goes; NULL when the
 * cache has no table yet. */
static struct loc_slot *loc_find(struct loc_cache *c, uint32_t mapping, uint64_t address,
				 uint32_t key)
{
	if (!c->nslots)
		return NULL;
	size_t mask = c->nslots - 1;
	for (size_t i = loc_hash(mapping, address, key) & mask;; i = (i + 1) & mask) {
		struct loc_slot *sl = &c->slot[i];
		if (!sl->mapping || (sl->mapping == mapping && sl->address == address &&
				     (sl->flags & LOC_KEY_MASK) == key))
			return sl;
	}
}

/* Remembers a location; silently does nothing at the bound or without
 * memory (the cache only saves work). Load kept at most 1/2. */
static void loc_put(struct loc_cache *c, uint32_t mapping, uint64_t address, uint32_t key,
		    uint32_t id, uint32_t inlined, bool symbolized)
{
	if (c->n >= LOC_CACHE_MAX)
		return;
	if ((c->n + 1) * 2 > c->nslots) {
		size_t nslots = c->nslots ? c->nslots * 2 : 1024;
		struct loc_slot *old = c->slot, *t = calloc(nslots, sizeof(*t));
		if (!t)
			return;
		size_t oldn = c->nslots;
		c->slot = t;
		c->nslots = nslots;
		for (size_t i = 0; i < oldn; i++)
			if (old[i].mapping)
				*loc_find(c, old[i].mapping, old[i].address,
					  old[i].flags & LOC_KEY_MASK) = old[i];
		free(old);
	}
	struct loc_slot *sl = loc_find(c, mapping, address, key);
	if (sl->mapping)
		return;
	*sl = (struct loc_slot){ .address = address, .mapping = mapping, .id = id,
				 .flags = key | (symbolized ? 2u : 0u), .inlined = inlined };
	c->n++;
}

/* A location made earlier in this interval, counted as the first one was;
 * 0 when there is none. A split frame's (key's split bit) also sets
 * *inlined. */
static uint32_t loc_cached(struct ingest_run *r, uint32_t mapping, uint64_t address, uint32_t key,
			   uint32_t *inlined)
{
	struct loc_slot *sl = loc_find(&r->locs, mapping, address, key);
	if (!sl || !sl->mapping)
		return 0;
	if (sl->flags & 2)
		r->stats->frames_symbolized++;
	if (inlined)
		*inlined = sl->inlined;
	return sl->id;
}

static const char *unwind_error_name(uint64_t code)
{
	switch (code) {
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING: return "[unknown: no mapping]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_TRUNCATED: return "[truncated stack]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_UNWIND_INFO: return "[unknown: no unwind info]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_UNREADABLE_STACK: return "[unknown: unreadable stack]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_FILE_UNREADABLE: return "[unknown: file unreadable]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_UNREADABLE:
		return "[unknown: unreadable interpreter frame]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_TRUNCATED:
		return "[truncated interpreter stack]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_BAD_FRAME:
		return "[unknown: bad interpreter frame]";
	default: return "[unknown: unwind error]";
	}
}

static void request_once(struct ingest_run *r, const opal_file_id *id)
{
	for (size_t i = 0; i < r->n_requested; i++)
		if (opal_file_id_eq(&r->requested[i], id))
			return;
	if (r->n_requested == MAX_REQUESTS_PER_INTERVAL || !r->src->request_file)
		return;
	r->requested[r->n_requested++] = *id;
	r->src->request_file(r->src->arg, id);
}

#define MAX_LINES 64

/* Converts symbolizer frames `from` to `to` (exclusive) to profile lines
 * (same order: innermost first). Kernel functions of modules are named
 * "function [module]". */
static uint32_t location_from_result(struct ingest_run *r, uint32_t mapping, uint64_t address,
				     enum opal_frame_type type, const struct opal_sym_result *res,
				     size_t from, size_t to)
{
	struct opal_profile_line lines[MAX_LINES];
	char *named = NULL;
	size_t n = to - from;

	for (size_t i = 0; i < n; i++)
		lines[i] = (struct opal_profile_line){ .function = res->frames[from + i].function,
						       .filename = res->frames[from + i].file,
						       .line = res->frames[from + i].line };
	if (type == OPAL_FRAME_KERNEL && n == 1 && res->module && res->module[0] &&
	    lines[0].function && asprintf(&named, "%s [%s]", lines[0].function, res->module) > 0)
		lines[0].function = named;
	if (n > 0 && to == (res->n < MAX_LINES ? res->n : MAX_LINES))
		r->stats->frames_symbolized++;
	uint32_t id = opal_profile_location(r->p, mapping, address, type, lines, n);
	free(named);
	return id;
}

static size_t n_lines(const struct opal_sym_result *res)
{
	return res->n < MAX_LINES ? res->n : MAX_LINES;
}

static uint32_t error_location(struct ingest_run *r, uint64_t code)
{
	struct opal_profile_line line = { .function = unwind_error_name(code) };

	return opal_profile_location(r->p, 0, 0, OPAL_FRAME_NATIVE, &line, 1);
}

static uint32_t kernel_location(struct ingest_run *r, const Opal__Wire__V1__Frame *f)
{
	struct opal_sym_result res = { 0 };
	uint32_t id;

	if (!r->kernel_mapping) {
		struct opal_profile_mapping m = {
			.start = 0xffff800000000000ull, .limit = UINT64_MAX, .file_offset = 0,
			.filename = KERNEL_MAPPING_NAME,
			.build_id_gnu = r->src->kernel_build_id_hex,
			.has_functions = true,
		};
		r->kernel_mapping = opal_profile_mapping(r->p, &m);
	}
	if ((id = loc_cached(r, r->kernel_mapping, f->address, LOC_KEY(f->return_address, 0), NULL)))
		return id;
	opal_symbolize_kernel(r->s, f->address, f->return_address, &res);
	id = location_from_result(r, r->kernel_mapping, f->address, OPAL_FRAME_KERNEL, &res, 0,
				  n_lines(&res));
	if (id && r->kernel_mapping)
		loc_put(&r->locs, r->kernel_mapping, f->address, LOC_KEY(f->return_address, 0), id, 0,
			res.n > 0);
	opal_sym_result_free(&res);
	return id;
}

struct interp_use {
	struct ingest_run *r;
	uint32_t id;
};

static int interp_location_of(void *arg, const struct opal_code_frame *f)
{
	struct interp_use *u = arg;
	struct opal_profile_line line = {
		.function = f->function, .filename = f->file, .line = f->line,
		.start_line = f->first_line,
	};

	u->r->stats->frames_symbolized++;
	u->id = opal_profile_location(u->r->p, u->r->cpython_mapping, 0, OPAL_FRAME_CPYTHON,
				      &line, 1);
	return 0;
}

/* An interpreter frame, named from the code objects its collector sent;
 * one whose code object is unknown keeps the runtime's name only. */
static uint32_t interp_location(struct ingest_run *r, const Opal__Wire__V1__Frame *f)
{
	struct interp_use u = { .r = r };

	if (!r->cpython_mapping) {
		struct opal_profile_mapping m = {
			.filename = OPAL_PROFILE_CPYTHON_MAPPING,
			.has_functions = true, .has_filenames = true, .has_line_numbers = true,
		};
		if (!(r->cpython_mapping = opal_profile_mapping(r->p, &m)))
			return 0;
	}
	if (r->src->codes && f->code_id &&
	    opal_code_table_with(r->src->codes, r->src->conn, f->code_id,
				 f->address > UINT32_MAX ? UINT32_MAX : (uint32_t)f->address,
				 interp_location_of, &u) == 0)
		return u.id;
	r->stats->interp_unnamed++;
	struct opal_profile_line line = { .function = CPYTHON_UNKNOWN };
	return opal_profile_location(r->p, r->cpython_mapping, 0, OPAL_FRAME_CPYTHON, &line, 1);
}

/* The has_* flags say what symbolization could give for this file (so
 * pprof tools do not try to re-symbolize it themselves). */
static uint32_t profile_mapping(struct ingest_run *r, const Opal__Wire__V1__Mapping *m,
				const char *name)
{
	char build_id[2 * OPAL_BUILD_ID_MAX + 1], file_id[33];
	enum opal_debug_quality q = OPAL_DEBUG_NONE;
	struct opal_profile_mapping pm = {
		.start = m->start, .limit = m->limit, .file_offset = m->file_offset,
		.filename = name ? name : m->path ? m->path : "",
	};

	if (m->file_id.len == OPAL_FILE_ID_LEN) {
		opal_file_id fid;
		memcpy(fid.b, m->file_id.data, OPAL_FILE_ID_LEN);
		if (opal_symbolizer_file_quality(r->s, &fid, &q) < 0)
			q = OPAL_DEBUG_NONE;
		opal_hex_encode(m->file_id.data, OPAL_FILE_ID_LEN, file_id);
		pm.file_id_htlhash = file_id;
	}
	pm.has_functions = q >= OPAL_DEBUG_DYNSYM;
	pm.has_filenames = pm.has_line_numbers = q >= OPAL_DEBUG_DWARF_LINES;
	pm.has_inline_frames = q >= OPAL_DEBUG_DWARF_INLINE;
	if (m->gnu_build_id.len > 0 && m->gnu_build_id.len <= OPAL_BUILD_ID_MAX) {
		opal_hex_encode(m->gnu_build_id.data, m->gnu_build_id.len, build_id);
		pm.build_id_gnu = build_id;
	}
	return opal_profile_mapping(r->p, &pm);
}

/* A native frame's location. With `inlined` (the frame of an
 * interpreter's evaluation function, just rootward of the interpreter
 * frames it runs), a frame with inlined callees is split: *inlined gets
 * a location of the callees (0 when there are none), the one returned
 * holds the function itself; the callees ran on behalf of the
 * interpreter's innermost frame there, so they go leafward of it. */
static uint32_t native_location(struct ingest_run *r, const Opal__Wire__V1__Process *proc,
				uint32_t *mapping_ids, const Opal__Wire__V1__Frame *f,
				uint32_t *inlined)
{
	struct opal_sym_result res = { 0 };
	const Opal__Wire__V1__Mapping *m;
	uint32_t id;
	size_t split = 0;

	if (f->mapping_index >= proc->n_mappings) {
		r->stats->frames_malformed++;
		return error_location(r, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);
	}
	m = proc->mappings[f->mapping_index];
	if (!mapping_ids[f->mapping_index])
		mapping_ids[f->mapping_index] = profile_mapping(r, m, NULL);
	if (m->file_id.len != OPAL_FILE_ID_LEN)   /* anonymous/JIT: runtime address */
		return opal_profile_location(r->p, mapping_ids[f->mapping_index], f->address,
					     OPAL_FRAME_NATIVE, NULL, 0);
	uint32_t mid = mapping_ids[f->mapping_index];
	uint32_t key = LOC_KEY(f->return_address, inlined != NULL);
	if ((id = loc_cached(r, mid, f->address, key, inlined)))
		return id;
	opal_file_id fid;
	memcpy(fid.b, m->file_id.data, OPAL_FILE_ID_LEN);
	if (opal_symbolize_native(r->s, &fid, f->address, f->return_address, &res) == -ENOENT)
		request_once(r, &fid);
	if (inlined && n_lines(&res) > 1) {
		split = n_lines(&res) - 1;
		*inlined = location_from_result(r, mid, f->address + m->load_bias, OPAL_FRAME_NATIVE,
						&res, 0, split);
		if (!*inlined) {
			opal_sym_result_free(&res);
			return 0;
		}
	}
	id = location_from_result(r, mid, f->address + m->load_bias, OPAL_FRAME_NATIVE, &res, split,
				  n_lines(&res));
	if (id && mid)
		loc_put(&r->locs, mid, f->address, key, id, inlined ? *inlined : 0, res.n > 0);
	opal_sym_result_free(&res);
	return id;
}

static enum opal_frame_type jit_frame_type(enum opal_jit_runtime rt)
{
	switch (rt) {
	case OPAL_JIT_V8JS: return OPAL_FRAME_V8JS;
	case OPAL_JIT_JVM: return OPAL_FRAME_JVM;
	case OPAL_JIT_CPYTHON: return OPAL_FRAME_CPYTHON;
	default: return OPAL_FRAME_NATIVE;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A frame in JIT code, named from its process's perf map or jitdump file
 * by the runtime's conventions; unnamed it stays an address in its
 * mapping ("[jit]+0xOFF" when the mapping has no name). The frame type is
 * the runtime's the name shows, else the executable's. */
static uint32_t jit_location(struct ingest_run *r, const Opal__Wire__V1__Process *proc,
			     uint32_t *mapping_ids, const Opal__Wire__V1__Frame *f)
{
	char name[OPAL_JIT_MAX_NAME + 1], func[OPAL_JIT_MAX_NAME + 1], file[OPAL_JIT_MAX_NAME + 1];
	enum opal_jit_runtime rt = opal_jit_runtime_of_exe(proc->executable_path);
	const Opal__Wire__V1__Mapping *m;
	uint64_t at = f->return_address && f->address ? f->address - 1 : f->address;
	uint32_t line;

	if (f->mapping_index >= proc->n_mappings) {
		r->stats->frames_malformed++;
		return error_location(r, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);
	}
	m = proc->mappings[f->mapping_index];
	if (!mapping_ids[f->mapping_index])
		mapping_ids[f->mapping_index] =
			profile_mapping(r, m, m->path && m->path[0] ? NULL : OPAL_PROFILE_JIT_MAPPING);
	if (!r->src->jits || !proc->jit_id ||
	    opal_jit_table_name(r->src->jits, r->src->conn, proc->jit_id, at, mono_ns(), name,
				sizeof(name)) < 0)
		return opal_profile_location(r->p, mapping_ids[f->mapping_index], f->address,
					     jit_frame_type(rt), NULL, 0);
	enum opal_jit_runtime shown = opal_jit_name_split(name, strlen(name), func, file,
							  sizeof(func), &line);
	struct opal_profile_line l = { .function = func, .filename = file[0] ? file : NULL,
				       .line = line };
	r->stats->frames_symbolized++;
	return opal_profile_location(r->p, mapping_ids[f->mapping_index], f->address,
				     jit_frame_type(shown != OPAL_JIT_NATIVE ? shown : rt), &l, 1);
}

/* The thread context of `st` into *ctx (attribute values in buf, 2 *
 * OPAL_TCTX_ATTRS_MAX bytes); false when it has none. */
static bool stack_ctx(const Opal__Wire__V1__Stack *st, const struct opal_process_context *pc,
		      char *buf, struct opal_profile_attr *attrs, struct opal_profile_trace_ctx *ctx)
{
	*ctx = (struct opal_profile_trace_ctx){ 0 };
	if (st->trace_id.len == 16 && st->span_id.len == 8) {
		ctx->has_link = true;
		memcpy(ctx->trace_id, st->trace_id.data, 16);
		memcpy(ctx->span_id, st->span_id.data, 8);
		ctx->trace_flags = (uint8_t)st->trace_flags;
	}
	if (st->thread_attributes.len && st->thread_attributes.len <= OPAL_INGEST_MAX_TCTX_ATTRS)
		ctx->n_attrs = opal_thread_attrs_parse(st->thread_attributes.data,
						       st->thread_attributes.len, pc, buf, attrs,
						       OPAL_PCTX_MAX_KEYS);
	ctx->attrs = attrs;
	return ctx->has_link || ctx->n_attrs;
}

static int ingest_stack(struct ingest_run *r, const Opal__Wire__V1__Process *proc,
			uint32_t process_id, uint32_t *mapping_ids, const Opal__Wire__V1__Thread *t,
			const Opal__Wire__V1__Stack *st, const struct opal_process_context *pc)
{
	static __thread char buf[2 * OPAL_INGEST_MAX_TCTX_ATTRS];
	static __thread struct opal_profile_attr attrs[OPAL_PCTX_MAX_KEYS];
	struct opal_profile_trace_ctx ctx;
	uint32_t *locs, inlined;
	size_t n = 0, interp_at = SIZE_MAX;   /* where the run of interpreter frames began */
	int err;

	bool off_cpu = st->kind == OPAL__WIRE__V1__SAMPLE_KIND__SAMPLE_KIND_OFF_CPU;

	size_t n_frames = opal_wire_stack_n_frames(st), code_at = 0;
	Opal__Wire__V1__Frame unpacked;

	if (st->n_timestamps_unix_ns != st->n_cpus || n_frames > OPAL_INGEST_MAX_FRAMES ||
	    opal_wire_stack_frames_check(st) < 0 ||
	    st->n_timestamps_unix_ns == 0 ||
	    (off_cpu && st->n_off_cpu_ns != st->n_timestamps_unix_ns) ||
	    (!off_cpu && st->kind != OPAL__WIRE__V1__SAMPLE_KIND__SAMPLE_KIND_CPU)) {
		r->stats->stacks_malformed++;
		return 0;
	}
	/* a frame may become two locations (native_location's split) */
	locs = malloc((n_frames ? 2 * n_frames : 1) * sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	for (size_t i = 0; i < n_frames; i++) {
		const Opal__Wire__V1__Frame *f = opal_wire_stack_frame(st, i, &code_at, &unpacked);
		bool interp = f->kind == OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED;
		bool may_split;
		inlined = 0;
		switch (f->kind) {
		case OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL:
			locs[n] = kernel_location(r, f);
			break;
		case OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE:
			/* split only while the stack stays within its bound */
			may_split = interp_at != SIZE_MAX &&
				    n + (n_frames - i) < OPAL_PROFILE_MAX_STACK;
			locs[n] = native_location(r, proc, mapping_ids, f,
						  may_split ? &inlined : NULL);
			break;
		case OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED:
			locs[n] = interp_location(r, f);
			break;
		case OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_JIT:
			locs[n] = jit_location(r, proc, mapping_ids, f);
			break;
		default:
			locs[n] = error_location(r, f->address);
			break;
		}
		if (!locs[n]) {
			free(locs);
			return -ENOMEM;
		}
		if (inlined) {
			uint32_t outer = locs[n];
			memmove(&locs[interp_at + 1], &locs[interp_at],
				(n - interp_at) * sizeof(*locs));
			locs[interp_at] = inlined;
			locs[++n] = outer;
		}
		n++;
		if (!interp)
			interp_at = SIZE_MAX;
		else if (interp_at == SIZE_MAX)
			interp_at = n - 1;
	}
	r->stats->frames += n_frames;
	bool has_ctx = stack_ctx(st, pc, buf, attrs, &ctx);
	if (off_cpu)
		err = opal_profile_add_off_cpu(r->p, process_id, t->tid, t->name, locs, n,
					       st->timestamps_unix_ns, st->cpus, st->off_cpu_ns,
					       st->n_timestamps_unix_ns, has_ctx ? &ctx : NULL);
	else
		err = opal_profile_add_sample_ctx(r->p, process_id, t->tid, t->name, locs, n,
						  st->timestamps_unix_ns, st->cpus,
						  st->n_timestamps_unix_ns, has_ctx ? &ctx : NULL);
	if (!err && off_cpu)
		r->stats->off_cpu_samples += st->n_timestamps_unix_ns;
	else if (!err)
		r->stats->samples += st->n_timestamps_unix_ns;
	free(locs);
	return err;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static int ingest_processes(struct ingest_run *r, const Opal__Wire__V1__Interval *iv)
{
	const struct opal_ingest_source *src = r->src;
	struct opal_profile *p = r->p;

	for (size_t i = 0; i < iv->n_processes; i++) {
		const Opal__Wire__V1__Process *proc = iv->processes[i];
		const char *path = proc->executable_path && proc->executable_path[0]
					   ? proc->executable_path : proc->comm;
		struct opal_profile_process pp = {
			.pid = proc->pid,
			.executable_name = base_name(path ? path : ""),
			.executable_path = proc->executable_path,
			.service_name = proc->service_name && proc->service_name[0]
						? proc->service_name : NULL,
			.container_id = proc->container_id && proc->container_id[0]
						? proc->container_id : NULL,
			.host_name = src->host_name,
		};
		struct opal_process_context pc = { 0 };
		if (proc->process_context.len) {
			int perr = opal_process_context_parse(proc->process_context.data,
							      proc->process_context.len, &pc);
			if (perr == -ENOMEM)
				return -ENOMEM;
			if (perr < 0)
				r->stats->process_ctx_invalid++;
		}
		pp.resource = pc.resource;
		pp.n_resource = pc.n_resource;
		pp.host_id = src->host_id;
		pp.pod_uid = proc->k8s_pod_uid && proc->k8s_pod_uid[0] &&
				     strlen(proc->k8s_pod_uid) <= 36 &&
				     opal_utf8_valid(proc->k8s_pod_uid, strlen(proc->k8s_pod_uid))
			     ? proc->k8s_pod_uid : NULL;
		pp.os_version = src->kernel_release;
		/* opt-in in the collector; one that is not UTF-8 is left out */
		size_t cl = proc->command_line ? strlen(proc->command_line) : 0;
		pp.command_line = cl && cl < OPAL_WIRE_CMDLINE_MAX &&
					  opal_utf8_valid(proc->command_line, cl)
				  ? proc->command_line : NULL;
		uint32_t process_id = opal_profile_process(p, &pp);
		uint32_t *mapping_ids = calloc(proc->n_mappings + 1, sizeof(*mapping_ids));
		if (!process_id || !mapping_ids) {
			free(mapping_ids);
			opal_process_context_free(&pc);
			return -ENOMEM;
		}
		for (size_t t = 0; t < proc->n_threads; t++) {
			const Opal__Wire__V1__Thread *th = proc->threads[t];
			for (size_t k = 0; k < th->n_stacks; k++) {
				int err = ingest_stack(r, proc, process_id, mapping_ids, th,
						       th->stacks[k], &pc);
				if (err) {
					free(mapping_ids);
					opal_process_context_free(&pc);
					return err;
				}
			}
		}
		free(mapping_ids);
		opal_process_context_free(&pc);
	}
	return 0;
}

int opal_ingest_interval(struct opal_symbolizer *s, const struct opal_ingest_source *src,
			 const Opal__Wire__V1__Interval *iv, struct opal_profile *p,
			 struct opal_ingest_stats *stats)
{
	struct ingest_run r = { .s = s, .src = src, .p = p, .stats = stats };

	opal_profile_set_time(p, iv->start_unix_ns, iv->end_unix_ns);
	int err = ingest_processes(&r, iv);
	free(r.locs.slot);
	/* The interval's new SQLite rows, in one transaction. */
	opal_symbolizer_flush(s);
	return err;
}
