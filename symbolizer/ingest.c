/* Interval -> profile: symbolize each frame and intern it as a location. */
#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"

#define KERNEL_MAPPING_NAME "[kernel.kallsyms]"
#define MAX_REQUESTS_PER_INTERVAL 64

struct ingest_run {
	struct opal_symbolizer *s;
	const struct opal_ingest_source *src;
	struct opal_profile *p;
	struct opal_ingest_stats *stats;
	uint32_t kernel_mapping;
	opal_file_id requested[MAX_REQUESTS_PER_INTERVAL];
	size_t n_requested;
};

static const char *unwind_error_name(uint64_t code)
{
	switch (code) {
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING: return "[unknown: no mapping]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_TRUNCATED: return "[truncated stack]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_UNWIND_INFO: return "[unknown: no unwind info]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_UNREADABLE_STACK: return "[unknown: unreadable stack]";
	case OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_FILE_UNREADABLE: return "[unknown: file unreadable]";
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

/* Converts symbolizer frames to profile lines (same order: innermost first).
 * Kernel functions of modules are named "function [module]". */
static uint32_t location_from_result(struct ingest_run *r, uint32_t mapping, uint64_t address,
				     enum opal_frame_type type, const struct opal_sym_result *res)
{
	struct opal_profile_line lines[64];
	char *named = NULL;
	size_t n = res->n < 64 ? res->n : 64;

	for (size_t i = 0; i < n; i++)
		lines[i] = (struct opal_profile_line){ .function = res->frames[i].function,
						       .filename = res->frames[i].file,
						       .line = res->frames[i].line };
	if (type == OPAL_FRAME_KERNEL && n == 1 && res->module && res->module[0] &&
	    lines[0].function && asprintf(&named, "%s [%s]", lines[0].function, res->module) > 0)
		lines[0].function = named;
	if (n > 0)
		r->stats->frames_symbolized++;
	uint32_t id = opal_profile_location(r->p, mapping, address, type, lines, n);
	free(named);
	return id;
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
	opal_symbolize_kernel(r->s, f->address, f->return_address, &res);
	id = location_from_result(r, r->kernel_mapping, f->address, OPAL_FRAME_KERNEL, &res);
	opal_sym_result_free(&res);
	return id;
}

/* The has_* flags say what symbolization could give for this file (so
 * pprof tools do not try to re-symbolize it themselves). */
static uint32_t profile_mapping(struct ingest_run *r, const Opal__Wire__V1__Mapping *m)
{
	char build_id[2 * OPAL_BUILD_ID_MAX + 1], file_id[33];
	enum opal_debug_quality q = OPAL_DEBUG_NONE;
	struct opal_profile_mapping pm = {
		.start = m->start, .limit = m->limit, .file_offset = m->file_offset,
		.filename = m->path ? m->path : "",
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

static uint32_t native_location(struct ingest_run *r, const Opal__Wire__V1__Process *proc,
				uint32_t *mapping_ids, const Opal__Wire__V1__Frame *f)
{
	struct opal_sym_result res = { 0 };
	const Opal__Wire__V1__Mapping *m;
	uint32_t id;

	if (f->mapping_index >= proc->n_mappings) {
		r->stats->frames_malformed++;
		return error_location(r, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);
	}
	m = proc->mappings[f->mapping_index];
	if (!mapping_ids[f->mapping_index])
		mapping_ids[f->mapping_index] = profile_mapping(r, m);
	if (m->file_id.len != OPAL_FILE_ID_LEN)   /* anonymous/JIT: runtime address */
		return opal_profile_location(r->p, mapping_ids[f->mapping_index], f->address,
					     OPAL_FRAME_NATIVE, NULL, 0);
	opal_file_id fid;
	memcpy(fid.b, m->file_id.data, OPAL_FILE_ID_LEN);
	if (opal_symbolize_native(r->s, &fid, f->address, f->return_address, &res) == -ENOENT)
		request_once(r, &fid);
	id = location_from_result(r, mapping_ids[f->mapping_index], f->address + m->load_bias,
				  OPAL_FRAME_NATIVE, &res);
	opal_sym_result_free(&res);
	return id;
}

static int ingest_stack(struct ingest_run *r, const Opal__Wire__V1__Process *proc,
			uint32_t process_id, uint32_t *mapping_ids, const Opal__Wire__V1__Thread *t,
			const Opal__Wire__V1__Stack *st)
{
	uint32_t *locs;
	int err;

	if (st->n_timestamps_unix_ns != st->n_cpus || st->n_frames > OPAL_INGEST_MAX_FRAMES ||
	    st->n_timestamps_unix_ns == 0) {
		r->stats->stacks_malformed++;
		return 0;
	}
	locs = malloc((st->n_frames ? st->n_frames : 1) * sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_frames; i++) {
		const Opal__Wire__V1__Frame *f = st->frames[i];
		switch (f->kind) {
		case OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL:
			locs[i] = kernel_location(r, f);
			break;
		case OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE:
			locs[i] = native_location(r, proc, mapping_ids, f);
			break;
		default:
			locs[i] = error_location(r, f->address);
			break;
		}
		if (!locs[i]) {
			free(locs);
			return -ENOMEM;
		}
	}
	r->stats->frames += st->n_frames;
	err = opal_profile_add_sample(r->p, process_id, t->tid, t->name, locs, st->n_frames,
				      st->timestamps_unix_ns, st->cpus, st->n_timestamps_unix_ns);
	if (!err)
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
		uint32_t process_id = opal_profile_process(p, &pp);
		uint32_t *mapping_ids = calloc(proc->n_mappings + 1, sizeof(*mapping_ids));
		if (!process_id || !mapping_ids) {
			free(mapping_ids);
			return -ENOMEM;
		}
		for (size_t t = 0; t < proc->n_threads; t++) {
			const Opal__Wire__V1__Thread *th = proc->threads[t];
			for (size_t k = 0; k < th->n_stacks; k++) {
				int err = ingest_stack(r, proc, process_id, mapping_ids, th,
						       th->stacks[k]);
				if (err) {
					free(mapping_ids);
					return err;
				}
			}
		}
		free(mapping_ids);
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
	/* The interval's new SQLite rows, in one transaction. */
	opal_symbolizer_flush(s);
	return err;
}
