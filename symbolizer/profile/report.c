/* pprof reading and summaries (report.h). */
#include "profile/report.h"

#include "base/why.h"
#include "profile/profile.h"
#include "profile/intern.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__Location PLocation;
typedef Perftools__Profiles__Function PFunction;
typedef Perftools__Profiles__Mapping PMapping;
typedef Perftools__Profiles__Sample PSample;

/* Profile entities sorted by id for bsearch (pprof ids need not be dense). */
struct view {
	const PProfile *p;
	PLocation **locs;
	PFunction **funcs;
	PMapping **maps;
	size_t value_index;   /* the sample value used as the count */
};

static int cmp_loc(const void *a, const void *b)
{
	uint64_t x = (*(PLocation *const *)a)->id, y = (*(PLocation *const *)b)->id;
	return (x > y) - (x < y);
}

static int cmp_func(const void *a, const void *b)
{
	uint64_t x = (*(PFunction *const *)a)->id, y = (*(PFunction *const *)b)->id;
	return (x > y) - (x < y);
}

static int cmp_map(const void *a, const void *b)
{
	uint64_t x = (*(PMapping *const *)a)->id, y = (*(PMapping *const *)b)->id;
	return (x > y) - (x < y);
}

static void *find(void **arr, size_t n, uint64_t id, size_t id_offset)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t v = *(const uint64_t *)((const char *)arr[mid] + id_offset);
		if (v == id)
			return arr[mid];
		if (v < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static PLocation *find_loc(const struct view *v, uint64_t id)
{
	return find((void **)v->locs, v->p->n_location, id, offsetof(PLocation, id));
}

static PFunction *find_func(const struct view *v, uint64_t id)
{
	return find((void **)v->funcs, v->p->n_function, id, offsetof(PFunction, id));
}

static PMapping *find_map(const struct view *v, uint64_t id)
{
	return find((void **)v->maps, v->p->n_mapping, id, offsetof(PMapping, id));
}

static void view_free(struct view *v)
{
	free(v->locs);
	free(v->funcs);
	free(v->maps);
}

static const char *strtab(const PProfile *p, int64_t idx)
{
	return idx >= 0 && (size_t)idx < p->n_string_table ? p->string_table[idx] : "";
}

static int view_init(struct view *v, const PProfile *p)
{
	memset(v, 0, sizeof(*v));
	v->p = p;
	v->locs = malloc((p->n_location + 1) * sizeof(*v->locs));
	v->funcs = malloc((p->n_function + 1) * sizeof(*v->funcs));
	v->maps = malloc((p->n_mapping + 1) * sizeof(*v->maps));
	if (!v->locs || !v->funcs || !v->maps) {
		view_free(v);
		return -ENOMEM;
	}
	/* Empty repeated fields are NULL: memcpy must not see them. */
	if (p->n_location)
		memcpy(v->locs, p->location, p->n_location * sizeof(*v->locs));
	if (p->n_function)
		memcpy(v->funcs, p->function, p->n_function * sizeof(*v->funcs));
	if (p->n_mapping)
		memcpy(v->maps, p->mapping, p->n_mapping * sizeof(*v->maps));
	qsort(v->locs, p->n_location, sizeof(*v->locs), cmp_loc);
	qsort(v->funcs, p->n_function, sizeof(*v->funcs), cmp_func);
	qsort(v->maps, p->n_mapping, sizeof(*v->maps), cmp_map);
	for (size_t i = 0; i < p->n_sample_type; i++)
		if (strcmp(strtab(p, p->sample_type[i]->unit), "count") == 0) {
			v->value_index = i;
			break;
		}
	return 0;
}

static bool str_ok(const PProfile *p, int64_t idx)
{
	return idx >= 0 && (size_t)idx < p->n_string_table;
}

int opal_report_validate(const PProfile *p, char *why, size_t why_len)
{
	struct view v;
	int err = 0;

	if (p->n_string_table == 0 || p->string_table[0][0] != '\0')
		return opal_why(why, why_len, -EINVAL, "string_table[0] is not \"\"");
	if (p->n_sample_type == 0)
		return opal_why(why, why_len, -EINVAL, "no sample_type");
	for (size_t i = 0; i < p->n_sample_type; i++)
		if (!str_ok(p, p->sample_type[i]->type) || !str_ok(p, p->sample_type[i]->unit))
			return opal_why(why, why_len, -EINVAL,
					"sample_type %zu: bad string index", i);
	if (view_init(&v, p) < 0)
		return -ENOMEM;
	for (size_t i = 0; !err && i < p->n_mapping; i++) {
		const PMapping *m = v.maps[i];
		if (m->id == 0 || (i && v.maps[i - 1]->id == m->id))
			err = opal_why(why, why_len, -EINVAL,
				       "mapping id %" PRIu64 " zero or repeated", m->id);
		else if (!str_ok(p, m->filename) || !str_ok(p, m->build_id))
			err = opal_why(why, why_len, -EINVAL,
				       "mapping %" PRIu64 ": bad string index", m->id);
	}
	for (size_t i = 0; !err && i < p->n_function; i++) {
		const PFunction *f = v.funcs[i];
		if (f->id == 0 || (i && v.funcs[i - 1]->id == f->id))
			err = opal_why(why, why_len, -EINVAL,
				       "function id %" PRIu64 " zero or repeated", f->id);
		else if (!str_ok(p, f->name) || !str_ok(p, f->system_name) ||
			 !str_ok(p, f->filename))
			err = opal_why(why, why_len, -EINVAL,
				       "function %" PRIu64 ": bad string index", f->id);
	}
	for (size_t i = 0; !err && i < p->n_location; i++) {
		const PLocation *l = v.locs[i];
		if (l->id == 0 || (i && v.locs[i - 1]->id == l->id))
			err = opal_why(why, why_len, -EINVAL,
				       "location id %" PRIu64 " zero or repeated", l->id);
		else if (l->mapping_id && !find_map(&v, l->mapping_id))
			err = opal_why(why, why_len, -EINVAL,
				       "location %" PRIu64 ": unknown mapping %" PRIu64,
				       l->id, l->mapping_id);
		for (size_t j = 0; !err && j < l->n_line; j++)
			if (l->line[j]->function_id && !find_func(&v, l->line[j]->function_id))
				err = opal_why(why, why_len, -EINVAL,
					       "location %" PRIu64 ": unknown function %" PRIu64,
					       l->id, l->line[j]->function_id);
	}
	for (size_t i = 0; !err && i < p->n_sample; i++) {
		const PSample *s = p->sample[i];
		if (s->n_value != p->n_sample_type)
			err = opal_why(why, why_len, -EINVAL,
				       "sample %zu: %zu values for %zu sample types", i,
				       s->n_value, p->n_sample_type);
		for (size_t j = 0; !err && j < s->n_location_id; j++)
			if (!find_loc(&v, s->location_id[j]))
				err = opal_why(why, why_len, -EINVAL,
					       "sample %zu: unknown location %" PRIu64, i,
					       s->location_id[j]);
		for (size_t j = 0; !err && j < s->n_label; j++)
			if (!str_ok(p, s->label[j]->key) || !str_ok(p, s->label[j]->str))
				err = opal_why(why, why_len, -EINVAL,
					       "sample %zu: bad label string", i);
	}
	view_free(&v);
	return err;
}

int opal_report_load(const char *path, PProfile **out, char *why, size_t why_len)
{
	size_t cap = 1 << 20, len = 0;
	uint8_t *buf;
	int err = 0;

	errno = 0;
	gzFile gz = gzopen(path, "rb");
	if (!gz) {
		err = errno ? -errno : -ENOMEM;
		opal_why(why, why_len, -EINVAL, "%s", strerror(-err));
		return err;
	}
	buf = malloc(cap);
	if (!buf) {
		gzclose(gz);
		opal_why(why, why_len, -EINVAL, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		if (len == cap) {
			if (cap > OPAL_REPORT_MAX_INPUT) {
				err = -E2BIG;
				opal_why(why, why_len, -EINVAL,
					 "larger than %u bytes", OPAL_REPORT_MAX_INPUT);
				break;
			}
			uint8_t *n = realloc(buf, cap * 2);
			if (!n) {
				err = -ENOMEM;
				opal_why(why, why_len, -EINVAL, "out of memory");
				break;
			}
			buf = n;
			cap *= 2;
		}
		/* gzread transparently passes through a file that is not gzip. */
		size_t want = cap - len > (1u << 30) ? (1u << 30) : cap - len;
		int n = gzread(gz, buf + len, (unsigned)want);
		if (n < 0) {
			int zerr;
			const char *msg = gzerror(gz, &zerr);
			err = zerr == Z_ERRNO ? -errno : -EBADMSG;
			opal_why(why, why_len, -EINVAL,
				 "%s", zerr == Z_ERRNO ? strerror(-err) : msg);
			break;
		}
		if (n == 0) {
			/* zlib reports a gzip stream cut short only through
			 * gzerror after the final read. */
			int zerr;
			const char *msg = gzerror(gz, &zerr);
			if (zerr != Z_OK) {
				err = -EBADMSG;
				opal_why(why, why_len, -EINVAL, "gzip: %s", msg);
			}
			break;
		}
		len += (size_t)n;
		if (len > OPAL_REPORT_MAX_INPUT) {
			err = -E2BIG;
			opal_why(why, why_len, -EINVAL,
				 "larger than %u bytes", OPAL_REPORT_MAX_INPUT);
			break;
		}
	}
	gzclose(gz);
	if (err) {
		free(buf);
		return err;
	}
	PProfile *p = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	if (!p) {
		opal_why(why, why_len, -EINVAL, "not a pprof profile (protobuf decoding failed)");
		return -EBADMSG;
	}
	err = opal_report_validate(p, why, why_len);
	if (err) {
		perftools__profiles__profile__free_unpacked(p, NULL);
		return err;
	}
	*out = p;
	return 0;
}

/* True for a location of interpreter frames (its mapping names the
 * runtime, profile.h). */
static bool interpreted(const struct view *v, const PLocation *loc)
{
	const PMapping *m = loc->mapping_id ? find_map(v, loc->mapping_id) : NULL;

	return m && strcmp(strtab(v->p, m->filename), OPAL_PROFILE_CPYTHON_MAPPING) == 0;
}

/* How frame_name writes a frame's source position. */
enum where {
	WHERE_FIRST_LINE,   /* interpreter frames: "(FILE:FIRST_LINE)" (top lists) */
	WHERE_EXECUTING,    /* interpreter frames: "(FILE:LINE)", the line executing */
	WHERE_EVERY_LINE,   /* every frame with a file: "(FILE:LINE)" */
};

/* A frame's text: its function, or file+0xOFFSET when unsymbolized, with
 * its source position as `where` says. */
static void frame_name(const struct view *v, const PLocation *loc, long line, enum where where,
		       char *buf, size_t len)
{
	const PProfile *p = v->p;

	if (line >= 0 && (size_t)line < loc->n_line) {
		const PFunction *f = find_func(v, loc->line[line]->function_id);
		const char *name = f ? strtab(p, f->name) : "";
		bool interp = interpreted(v, loc);
		if (f && f->filename && *strtab(p, f->filename) &&
		    (interp || where == WHERE_EVERY_LINE)) {
			bool executing = where != WHERE_FIRST_LINE || !interp;
			int64_t at = executing ? loc->line[line]->line : f->start_line;
			snprintf(buf, len, "%s (%s:%" PRId64 ")", *name ? name : "??",
				 strtab(p, f->filename), at);
			return;
		}
		snprintf(buf, len, "%s", *name ? name : "??");
		return;
	}
	const PMapping *m = loc->mapping_id ? find_map(v, loc->mapping_id) : NULL;
	if (!m) {
		snprintf(buf, len, "0x%" PRIx64, loc->address);
		return;
	}
	const char *file = strtab(p, m->filename);
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	snprintf(buf, len, "%s+0x%" PRIx64, *base ? base : "?",
		 loc->address - m->memory_start + m->file_offset);
}

void opal_report_frame_name(const PProfile *p, const PLocation *loc, long line, char *buf,
			    size_t len)
{
	struct view v;

	if (view_init(&v, p) < 0) {
		snprintf(buf, len, "?");
		return;
	}
	frame_name(&v, loc, line, WHERE_FIRST_LINE, buf, len);
	view_free(&v);
}

/* What ran a location, from its mapping's name (pprof has no frame type). */
static enum opal_frame_type location_type(const struct view *v, const PLocation *loc)
{
	const PMapping *m = loc->mapping_id ? find_map(v, loc->mapping_id) : NULL;

	if (interpreted(v, loc))
		return OPAL_FRAME_CPYTHON;
	if (m && strcmp(strtab(v->p, m->filename), OPAL_REPORT_KERNEL_MAPPING) == 0)
		return OPAL_FRAME_KERNEL;
	return OPAL_FRAME_NATIVE;
}

/* Calls fn(frame text, its type) for every frame of sample `s`, leaf
 * first; `where` as for frame_name. */
static void for_each_frame(const struct view *v, const PSample *s, enum where where,
			   void (*fn)(void *ctx, const char *name, enum opal_frame_type type),
			   void *ctx)
{
	char name[1024];

	for (size_t i = 0; i < s->n_location_id; i++) {
		const PLocation *loc = find_loc(v, s->location_id[i]);
		if (!loc)
			continue;
		enum opal_frame_type type = location_type(v, loc);
		if (loc->n_line == 0) {
			frame_name(v, loc, -1, where, name, sizeof(name));
			fn(ctx, name, type);
			continue;
		}
		for (size_t j = 0; j < loc->n_line; j++) {
			frame_name(v, loc, (long)j, where, name, sizeof(name));
			fn(ctx, name, type);
		}
	}
}

static int64_t sample_value(const struct view *v, const PSample *s)
{
	return v->value_index < s->n_value ? s->value[v->value_index] : 0;
}

/* ---- top ---- */

struct fstat {
	int64_t flat, cum;
	size_t last_sample;   /* sample index + 1 that last added to cum */
};

struct top_ctx {
	struct opal_intern *names;
	struct fstat *stats;
	size_t cap;
	size_t sample;        /* current sample index + 1 */
	int64_t value;
	bool leaf;
	int kind;             /* an enum opal_frame_type to count only, or -1 */
	int err;
};

static void top_frame(void *vctx, const char *name, enum opal_frame_type type)
{
	struct top_ctx *c = vctx;
	uint32_t idx;
	bool added;

	if (c->err || (c->kind >= 0 && (int)type != c->kind))
		return;
	int err = opal_intern_add(c->names, name, strlen(name), &idx, &added);
	if (err) {
		c->err = err;
		return;
	}
	if (idx >= c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		struct fstat *s = realloc(c->stats, cap * sizeof(*s));
		if (!s) {
			c->err = -ENOMEM;
			return;
		}
		memset(s + c->cap, 0, (cap - c->cap) * sizeof(*s));
		c->stats = s;
		c->cap = cap;
	}
	struct fstat *f = &c->stats[idx];
	if (c->leaf)
		f->flat += c->value;
	c->leaf = false;
	/* A recursive function counts once per sample in cum. */
	if (f->last_sample != c->sample) {
		f->cum += c->value;
		f->last_sample = c->sample;
	}
}

static int cmp_by(const uint32_t *a, const uint32_t *b, const struct top_ctx *c, bool by_cum)
{
	const struct fstat *x = &c->stats[*a], *y = &c->stats[*b];
	int64_t vx = by_cum ? x->cum : x->flat, vy = by_cum ? y->cum : y->flat;

	if (vx != vy)
		return vx > vy ? -1 : 1;
	return strcmp(opal_intern_key(c->names, *a, NULL), opal_intern_key(c->names, *b, NULL));
}

static int cmp_flat(const void *a, const void *b, void *c)
{
	return cmp_by(a, b, c, false);
}

static int cmp_cum(const void *a, const void *b, void *c)
{
	return cmp_by(a, b, c, true);
}

static void print_table(FILE *out, const struct top_ctx *c, uint32_t *order, size_t nnames,
			size_t n, int64_t total, bool by_cum)
{
	qsort_r(order, nnames, sizeof(*order), by_cum ? cmp_cum : cmp_flat, (void *)c);
	double t = total ? (double)total : 1.0, sum = 0;
	size_t shown = n < nnames ? n : nnames;
	fprintf(out, "Showing top %zu of %zu functions by %s, total %" PRId64 " samples\n", shown,
		nnames, by_cum ? "cumulative" : "self", total);
	fprintf(out, "%10s %6s %6s %10s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%", "name");
	for (size_t i = 0; i < shown; i++) {
		const struct fstat *f = &c->stats[order[i]];
		sum += (double)f->flat;
		fprintf(out, "%10" PRId64 " %5.2f%% %5.2f%% %10" PRId64 " %5.2f%%  %s\n", f->flat,
			100.0 * (double)f->flat / t, 100.0 * sum / t, f->cum,
			100.0 * (double)f->cum / t,
			(const char *)opal_intern_key(c->names, order[i], NULL));
	}
}

int opal_report_top(FILE *out, const PProfile *p, size_t n, int kind)
{
	struct view v;
	struct top_ctx c = { .kind = kind };
	int64_t total = 0;

	if (view_init(&v, p) < 0)
		return -ENOMEM;
	c.names = opal_intern_new(1u << 24);
	if (!c.names) {
		view_free(&v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_sample && !c.err; i++) {
		c.sample = i + 1;
		c.value = sample_value(&v, p->sample[i]);
		c.leaf = true;
		total += c.value;
		for_each_frame(&v, p->sample[i], WHERE_FIRST_LINE, top_frame, &c);
	}
	size_t nnames = opal_intern_count(c.names);
	uint32_t *order = malloc((nnames ? nnames : 1) * sizeof(*order));
	int err = c.err ? c.err : order ? 0 : -ENOMEM;
	if (!err) {
		for (size_t i = 0; i < nnames; i++)
			order[i] = (uint32_t)i;
		print_table(out, &c, order, nnames, n, total, false);
		fputc('\n', out);
		print_table(out, &c, order, nnames, n, total, true);
	}
	free(order);
	free(c.stats);
	opal_intern_free(c.names);
	view_free(&v);
	return err;
}

/* ---- stacks ---- */

struct stack_ctx {
	FILE *out;
	bool first;
};

static void stack_frame(void *vctx, const char *name, enum opal_frame_type type)
{
	struct stack_ctx *c = vctx;

	fprintf(c->out, "%s%s", c->first ? "" : ";", name);
	c->first = false;
}

/* The first label of `s` named `key`, or NULL. */
static const Perftools__Profiles__Label *label(const PProfile *p, const PSample *s,
					       const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (strcmp(strtab(p, s->label[i]->key), key) == 0)
			return s->label[i];
	return NULL;
}

int opal_report_stacks(FILE *out, const PProfile *p, bool lines)
{
	struct view v;

	if (view_init(&v, p) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_sample; i++) {
		const PSample *s = p->sample[i];
		const Perftools__Profiles__Label *pid = label(p, s, "pid");
		const Perftools__Profiles__Label *tid = label(p, s, "tid");
		const Perftools__Profiles__Label *comm = label(p, s, "thread_name");
		char pbuf[24] = "?", tbuf[24] = "?";
		if (pid)
			snprintf(pbuf, sizeof(pbuf), "%" PRId64, pid->num);
		if (tid)
			snprintf(tbuf, sizeof(tbuf), "%" PRId64, tid->num);
		const char *name = comm ? strtab(p, comm->str) : "";
		fprintf(out, "pid=%s tid=%s comm=%s count=%" PRId64 ": ", pbuf, tbuf,
			*name ? name : "?", sample_value(&v, s));
		struct stack_ctx c = { .out = out, .first = true };
		for_each_frame(&v, s, lines ? WHERE_EVERY_LINE : WHERE_EXECUTING, stack_frame, &c);
		fputc('\n', out);
	}
	view_free(&v);
	return 0;
}

/* ---- check ---- */

int opal_report_check(const PProfile *p, char *why, size_t why_len)
{
	bool user = false, kernel = false;
	struct view v;

	if (view_init(&v, p) < 0)
		return opal_why(why, why_len, -ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n_sample; i++) {
		const PSample *s = p->sample[i];
		for (size_t j = 0; j < s->n_location_id; j++) {
			const PLocation *loc = find_loc(&v, s->location_id[j]);
			if (!loc)
				continue;
			const PMapping *m = loc->mapping_id ? find_map(&v, loc->mapping_id) : NULL;
			bool is_kernel = m &&
				strcmp(strtab(p, m->filename), OPAL_REPORT_KERNEL_MAPPING) == 0;
			kernel |= is_kernel;
			for (size_t k = 0; !is_kernel && k < loc->n_line; k++) {
				const PFunction *f = find_func(&v, loc->line[k]->function_id);
				const char *name = f ? strtab(p, f->name) : "";
				if (*name && strcmp(name, "??") != 0)
					user = true;
			}
		}
	}
	view_free(&v);
	if (!p->n_sample) {
		opal_why(why, why_len, -EINVAL, "the profile has no samples");
		return 1;
	}
	if (!user) {
		opal_why(why, why_len, -EINVAL,
			 "no symbolized user frame (a named function outside %s)",
			 OPAL_REPORT_KERNEL_MAPPING);
		return 1;
	}
	if (!kernel) {
		opal_why(why, why_len, -EINVAL, "no kernel frame (no location in mapping %s)",
			 OPAL_REPORT_KERNEL_MAPPING);
		return 1;
	}
	return 0;
}
