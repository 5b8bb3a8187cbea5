/* Flame graph call tree and HTML page (flamegraph.h). Nodes are numbered by
 * an opal_intern of their edge key (parent node, name, kind), so the node
 * index is the key's insertion number and a lookup is one hash probe. */
#include "profile/flamegraph.h"
#include "profile/intern.h"
#include "profile/profile.h"
#include "profile/report.h"
#include "flamegraph_html.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DATA_MARKER "@@OPAL_FLAMEGRAPH_DATA@@"
#define ROOT_PARENT UINT32_MAX

struct node {
	uint32_t name, parent;
	uint64_t value;
	uint8_t kind;
};

struct opal_flamegraph {
	struct opal_intern *names;
	struct opal_intern *edges;
	struct node *nodes;
	size_t n, cap;
	uint64_t truncated;
	const char *unit;            /* what a node's value counts: "samples" or "ns off CPU" */
	char link_text[64], link_href[512];   /* the page's link to another view, "" none */
};

/* A frame of one stack, root first. */
struct frame {
	uint32_t name;
	uint8_t kind;
};

/* Edge key: parent (4 bytes), name (4), kind (1). */
static void edge_key(uint8_t k[9], uint32_t parent, uint32_t name, uint8_t kind)
{
	memcpy(k, &parent, 4);
	memcpy(k + 4, &name, 4);
	k[8] = kind;
}

/* Returns the child of `parent` for (name, kind), creating it. -E2BIG when
 * the tree is full. */
static int child(struct opal_flamegraph *fg, uint32_t parent, uint32_t name, uint8_t kind,
		 uint32_t *out)
{
	uint8_t key[9];
	bool added;
	int err;

	if (fg->n == fg->cap) {
		size_t cap = fg->cap ? fg->cap * 2 : 256;
		struct node *n = realloc(fg->nodes, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		fg->nodes = n;
		fg->cap = cap;
	}
	edge_key(key, parent, name, kind);
	if ((err = opal_intern_add(fg->edges, key, sizeof(key), out, &added)) < 0)
		return err;
	if (added)
		fg->nodes[fg->n++] = (struct node){ .name = name, .parent = parent, .kind = kind };
	return 0;
}

struct opal_flamegraph *opal_flamegraph_new(void)
{
	struct opal_flamegraph *fg = calloc(1, sizeof(*fg));
	uint32_t name, root;

	if (!fg)
		return NULL;
	fg->names = opal_intern_new(OPAL_FLAMEGRAPH_MAX_NAMES);
	fg->edges = opal_intern_new(OPAL_FLAMEGRAPH_MAX_NODES);
	if (!fg->names || !fg->edges || opal_intern_str(fg->names, "all", &name) < 0 ||
	    child(fg, ROOT_PARENT, name, OPAL_FG_NATIVE, &root) < 0) {
		opal_flamegraph_free(fg);
		return NULL;
	}
	return fg;
}

void opal_flamegraph_free(struct opal_flamegraph *fg)
{
	if (!fg)
		return;
	opal_intern_free(fg->names);
	opal_intern_free(fg->edges);
	free(fg->nodes);
	free(fg);
}

void opal_flamegraph_set_link(struct opal_flamegraph *fg, const char *text, const char *href)
{
	snprintf(fg->link_text, sizeof(fg->link_text), "%s", text);
	snprintf(fg->link_href, sizeof(fg->link_href), "%s", href);
}

uint64_t opal_flamegraph_total(const struct opal_flamegraph *fg)
{
	return fg->nodes[0].value;
}

const char *opal_flamegraph_unit(const struct opal_flamegraph *fg)
{
	return fg->unit ? fg->unit : "samples";
}

uint64_t opal_flamegraph_truncated(const struct opal_flamegraph *fg)
{
	return fg->truncated;
}

size_t opal_flamegraph_n_nodes(const struct opal_flamegraph *fg)
{
	return fg->n;
}

/* Adds `weight` samples along `frames` (n, root first). `cut` says the
 * stack already lost frames to the depth bound. */
static int add_stack(struct opal_flamegraph *fg, const struct frame *frames, size_t n,
		     uint64_t weight, bool cut)
{
	uint32_t cur = 0;

	fg->nodes[0].value += weight;
	for (size_t i = 0; i < n; i++) {
		uint32_t next;
		int err = child(fg, cur, frames[i].name, frames[i].kind, &next);
		if (err == -E2BIG) {
			cut = true;
			break;
		}
		if (err < 0)
			return err;
		fg->nodes[next].value += weight;
		cur = next;
	}
	if (cut)
		fg->truncated += weight;
	return 0;
}

/* Frame builders return 0, 1 when the stack is cut here (a bound was hit:
 * the root-most frames collected so far are kept and *cut is set), or
 * -errno. */

/* Appends a frame to a root-first stack of at most OPAL_FLAMEGRAPH_MAX_DEPTH. */
static int push_frame(struct frame *frames, size_t *n, uint32_t name, uint8_t kind, bool *cut)
{
	if (*n == OPAL_FLAMEGRAPH_MAX_DEPTH) {
		*cut = true;
		return 1;
	}
	frames[(*n)++] = (struct frame){ .name = name, .kind = kind };
	return 0;
}

static int intern_name(struct opal_flamegraph *fg, const char *s, uint32_t *name, bool *cut)
{
	int err = opal_intern_str(fg->names, s, name);

	if (err == -E2BIG) {
		*cut = true;
		return 1;
	}
	return err;
}

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path ? path : "";
}

/* An interpreter frame's name: "FUNCTION (FILE:FIRST_LINE)", in `buf`. */
static const char *interp_name(char *buf, size_t len, const char *fn, const char *file,
			       int64_t first_line)
{
	if (first_line == 0)   /* a CPython perf trampoline's JIT frame: no line */
		snprintf(buf, len, "%s (%s)", fn && *fn ? fn : "??", file ? file : "?");
	else
		snprintf(buf, len, "%s (%s:%lld)", fn && *fn ? fn : "??", file ? file : "?",
			 (long long)first_line);
	return buf;
}

/* ---- opal_profile --------------------------------------------------------- */

/* Pushes the frames of one location, outermost line first. */
static int profile_location_frames(struct opal_flamegraph *fg, const struct opal_profile *p,
				   uint32_t loc_id, struct frame *frames, size_t *n, bool *cut)
{
	struct opal_profile_location_info li;
	const struct opal_profile_mapping *m;
	bool kernel;
	uint32_t name;
	int err;

	if (opal_profile_get_location(p, loc_id, &li) < 0)
		return -EINVAL;
	m = opal_profile_get_mapping(p, li.mapping_id);
	kernel = li.type == OPAL_FRAME_KERNEL ||
		 (m && m->filename && strcmp(m->filename, OPAL_REPORT_KERNEL_MAPPING) == 0);
	if (li.n_lines == 0) {
		char buf[512];
		if (m)
			snprintf(buf, sizeof(buf), "%s+0x%llx", base_name(m->filename),
				 (unsigned long long)(li.address - m->start + m->file_offset));
		else
			snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)li.address);
		if ((err = intern_name(fg, buf, &name, cut)) != 0)
			return err;
		return push_frame(frames, n, name, kernel ? OPAL_FG_KERNEL : OPAL_FG_NATIVE, cut);
	}
	for (size_t k = li.n_lines; k-- > 0;) {
		const char *fn = li.lines[k].function;
		char buf[1024];
		uint8_t kind = k + 1 < li.n_lines ? OPAL_FG_INLINE
				: kernel ? OPAL_FG_KERNEL : OPAL_FG_NATIVE;
		if (li.type == OPAL_FRAME_CPYTHON) {
			fn = interp_name(buf, sizeof(buf), fn, li.lines[k].filename,
					 li.lines[k].start_line);
			kind = OPAL_FG_CPYTHON;
		}
		if ((err = intern_name(fg, fn && *fn ? fn : "??", &name, cut)) != 0 ||
		    (err = push_frame(frames, n, name, kind, cut)) != 0)
			return err;
	}
	return 0;
}

static uint64_t count_in_window(const struct opal_profile_sample_info *s,
				const struct opal_fg_filter *f)
{
	uint64_t n = 0;

	if (!f || (!f->start_unix_ns && !f->end_unix_ns))
		return s->n_times;
	for (size_t i = 0; i < s->n_times; i++) {
		uint64_t t = s->timestamps_unix_ns[i];
		if ((!f->start_unix_ns || t >= f->start_unix_ns) &&
		    (!f->end_unix_ns || t < f->end_unix_ns))
			n++;
	}
	return n;
}

int opal_flamegraph_add_profile(struct opal_flamegraph *fg, const struct opal_profile *p,
				const struct opal_fg_filter *f)
{
	struct frame *frames = malloc(OPAL_FLAMEGRAPH_MAX_DEPTH * sizeof(*frames));
	size_t n_samples = opal_profile_n_samples(p);
	int err = 0;

	if (!frames)
		return -ENOMEM;
	for (size_t i = 0; i < n_samples && !err; i++) {
		struct opal_profile_sample_info s;
		const struct opal_profile_process *proc;
		uint64_t weight;
		size_t n = 0;
		bool cut = false;

		if (opal_profile_get_sample(p, i, &s) < 0)
			break;
		proc = opal_profile_get_process(p, s.process_id);
		if (f && f->pid && (!proc || proc->pid != f->pid))
			continue;
		if (!(weight = count_in_window(&s, f)))
			continue;
		for (size_t j = s.n_locations; j-- > 0 && !err;)
			err = profile_location_frames(fg, p, s.location_ids[j], frames, &n, &cut);
		if (err == 1)
			err = 0;
		if (!err)
			err = add_stack(fg, frames, n, weight, cut);
	}
	free(frames);
	return err;
}

/* ---- pprof ------------------------------------------------------------------ */

struct pview {
	const Perftools__Profiles__Profile *p;
	Perftools__Profiles__Location **locs;
	Perftools__Profiles__Function **funcs;
	Perftools__Profiles__Mapping **maps;
};

static int cmp_id_loc(const void *a, const void *b)
{
	uint64_t x = (*(Perftools__Profiles__Location *const *)a)->id;
	uint64_t y = (*(Perftools__Profiles__Location *const *)b)->id;
	return (x > y) - (x < y);
}

static int cmp_id_func(const void *a, const void *b)
{
	uint64_t x = (*(Perftools__Profiles__Function *const *)a)->id;
	uint64_t y = (*(Perftools__Profiles__Function *const *)b)->id;
	return (x > y) - (x < y);
}

static int cmp_id_map(const void *a, const void *b)
{
	uint64_t x = (*(Perftools__Profiles__Mapping *const *)a)->id;
	uint64_t y = (*(Perftools__Profiles__Mapping *const *)b)->id;
	return (x > y) - (x < y);
}

/* Binary search for `want` in an array of `n` message pointers sorted by
 * their `id` field. */
#define FIND_BY_ID(arr, n, want, type)                                              \
	({                                                                          \
		type *found_ = NULL;                                                \
		size_t lo_ = 0, hi_ = (n);                                          \
		while (lo_ < hi_) {                                                 \
			size_t mid_ = lo_ + (hi_ - lo_) / 2;                        \
			if ((arr)[mid_]->id == (want)) {                            \
				found_ = (arr)[mid_];                               \
				break;                                              \
			}                                                           \
			if ((arr)[mid_]->id < (want))                               \
				lo_ = mid_ + 1;                                     \
			else                                                        \
				hi_ = mid_;                                         \
		}                                                                   \
		found_;                                                             \
	})

static void pview_free(struct pview *v)
{
	free(v->locs);
	free(v->funcs);
	free(v->maps);
}

static int pview_init(struct pview *v, const Perftools__Profiles__Profile *p)
{
	*v = (struct pview){ .p = p };
	v->locs = malloc((p->n_location + 1) * sizeof(*v->locs));
	v->funcs = malloc((p->n_function + 1) * sizeof(*v->funcs));
	v->maps = malloc((p->n_mapping + 1) * sizeof(*v->maps));
	if (!v->locs || !v->funcs || !v->maps) {
		pview_free(v);
		return -ENOMEM;
	}
	memcpy(v->locs, p->location, p->n_location * sizeof(*v->locs));
	memcpy(v->funcs, p->function, p->n_function * sizeof(*v->funcs));
	memcpy(v->maps, p->mapping, p->n_mapping * sizeof(*v->maps));
	qsort(v->locs, p->n_location, sizeof(*v->locs), cmp_id_loc);
	qsort(v->funcs, p->n_function, sizeof(*v->funcs), cmp_id_func);
	qsort(v->maps, p->n_mapping, sizeof(*v->maps), cmp_id_map);
	return 0;
}

static const char *pstr(const Perftools__Profiles__Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : NULL;
}

static int pprof_location_frames(struct opal_flamegraph *fg, const struct pview *v, uint64_t id,
				 struct frame *frames, size_t *n, bool *cut)
{
	const Perftools__Profiles__Profile *p = v->p;
	Perftools__Profiles__Location *loc =
		FIND_BY_ID(v->locs, p->n_location, id, Perftools__Profiles__Location);
	Perftools__Profiles__Mapping *m;
	const char *mname;
	bool kernel;
	uint32_t name;
	int err;

	if (!loc)
		return -EINVAL;
	m = loc->mapping_id ? FIND_BY_ID(v->maps, p->n_mapping, loc->mapping_id,
					 Perftools__Profiles__Mapping)
			    : NULL;
	mname = m ? pstr(p, m->filename) : NULL;
	kernel = mname && strcmp(mname, OPAL_REPORT_KERNEL_MAPPING) == 0;
	bool interp = mname && strcmp(mname, OPAL_PROFILE_CPYTHON_MAPPING) == 0;
	if (loc->n_line == 0) {
		char buf[512];
		opal_report_frame_name(p, loc, -1, buf, sizeof(buf));
		if ((err = intern_name(fg, buf, &name, cut)) != 0)
			return err;
		return push_frame(frames, n, name, kernel ? OPAL_FG_KERNEL : OPAL_FG_NATIVE, cut);
	}
	for (size_t k = loc->n_line; k-- > 0;) {
		Perftools__Profiles__Function *fn =
			FIND_BY_ID(v->funcs, p->n_function, loc->line[k]->function_id,
				   Perftools__Profiles__Function);
		const char *s = fn ? pstr(p, fn->name) : NULL;
		char buf[1024];
		uint8_t kind = k + 1 < loc->n_line ? OPAL_FG_INLINE
				: kernel ? OPAL_FG_KERNEL : OPAL_FG_NATIVE;
		if (interp && fn) {
			s = interp_name(buf, sizeof(buf), s, pstr(p, fn->filename), fn->start_line);
			kind = OPAL_FG_CPYTHON;
		}
		if ((err = intern_name(fg, s && *s ? s : "??", &name, cut)) != 0 ||
		    (err = push_frame(frames, n, name, kind, cut)) != 0)
			return err;
	}
	return 0;
}

static bool pprof_pid_matches(const Perftools__Profiles__Profile *p,
			      const Perftools__Profiles__Sample *s, uint32_t pid)
{
	for (size_t i = 0; i < s->n_label; i++) {
		const char *key = pstr(p, s->label[i]->key);
		if (key && strcmp(key, "pid") == 0)
			return s->label[i]->num == (int64_t)pid;
	}
	return false;
}

static bool pprof_in_window(const Perftools__Profiles__Profile *p, const struct opal_fg_filter *f)
{
	uint64_t start, end;

	if (!f || (!f->start_unix_ns && !f->end_unix_ns) || p->time_nanos <= 0)
		return true;
	start = (uint64_t)p->time_nanos;
	end = start + (p->duration_nanos > 0 ? (uint64_t)p->duration_nanos : 0);
	if (end == start)
		end = start + 1;
	return (!f->end_unix_ns || start < f->end_unix_ns) &&
	       (!f->start_unix_ns || end > f->start_unix_ns);
}

int opal_flamegraph_add_pprof(struct opal_flamegraph *fg, const Perftools__Profiles__Profile *p,
			      const struct opal_fg_filter *f)
{
	struct pview v;
	struct frame *frames;
	size_t vi = 0;
	int err;

	if (!pprof_in_window(p, f))
		return 0;
	for (size_t i = 0; i < p->n_sample_type; i++) {
		const char *unit = pstr(p, p->sample_type[i]->unit);
		if (unit && strcmp(unit, "count") == 0) {
			vi = i;
			break;
		}
	}
	/* an off-CPU profile (docs/offcpu.md) weighs by the time off CPU */
	for (size_t i = 0; i < p->n_sample_type; i++) {
		const char *type = pstr(p, p->sample_type[i]->type);
		if (type && strcmp(type, "off_cpu") == 0) {
			vi = i;
			fg->unit = "ns off CPU";
		}
	}
	if ((err = pview_init(&v, p)) < 0)
		return err;
	frames = malloc(OPAL_FLAMEGRAPH_MAX_DEPTH * sizeof(*frames));
	if (!frames) {
		pview_free(&v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_sample && !err; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		size_t n = 0;
		bool cut = false;

		if (vi >= s->n_value || s->value[vi] <= 0)
			continue;
		if (f && f->pid && !pprof_pid_matches(p, s, f->pid))
			continue;
		for (size_t j = s->n_location_id; j-- > 0 && !err;)
			err = pprof_location_frames(fg, &v, s->location_id[j], frames, &n, &cut);
		if (err == 1)
			err = 0;
		if (!err)
			err = add_stack(fg, frames, n, (uint64_t)s->value[vi], cut);
	}
	free(frames);
	pview_free(&v);
	return err;
}

/* ---- HTML ------------------------------------------------------------------- */

/* Writes `s` as a JSON string. '<', '>' and '&' are escaped too, so the text
 * can neither close the <script> element nor open a comment. */
static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&')
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

struct order_ctx {
	const struct opal_flamegraph *fg;
};

static int cmp_siblings(const void *a, const void *b, void *arg)
{
	const struct opal_flamegraph *fg = ((const struct order_ctx *)arg)->fg;
	const struct node *x = &fg->nodes[*(const uint32_t *)a], *y = &fg->nodes[*(const uint32_t *)b];

	if (x->value != y->value)
		return x->value < y->value ? 1 : -1;
	int c = strcmp(opal_intern_key(fg->names, x->name, NULL),
		       opal_intern_key(fg->names, y->name, NULL));
	if (c)
		return c;
	return (x->kind > y->kind) - (x->kind < y->kind);
}

/* Preorder of the tree with siblings sorted: order[k] = node, pos[node] = k. */
static int preorder(const struct opal_flamegraph *fg, uint32_t **order_out, uint32_t **pos_out)
{
	size_t n = fg->n;
	uint32_t *start = calloc(n + 1, sizeof(*start)), *kids = malloc(n * sizeof(*kids));
	uint32_t *fill = malloc(n * sizeof(*fill)), *order = malloc(n * sizeof(*order));
	uint32_t *pos = malloc(n * sizeof(*pos)), *stack = malloc(n * sizeof(*stack));
	struct order_ctx ctx = { fg };
	size_t sp = 0, k = 0;

	if (!start || !kids || !fill || !order || !pos || !stack) {
		free(start), free(kids), free(fill), free(order), free(pos), free(stack);
		return -ENOMEM;
	}
	/* Children lists in CSR form: kids[start[i] .. start[i+1]). */
	for (size_t i = 1; i < n; i++)
		start[fg->nodes[i].parent + 1]++;
	for (size_t i = 0; i < n; i++)
		start[i + 1] += start[i];
	memcpy(fill, start, n * sizeof(*fill));
	for (size_t i = 1; i < n; i++)
		kids[fill[fg->nodes[i].parent]++] = (uint32_t)i;
	for (size_t i = 0; i < n; i++)
		qsort_r(kids + start[i], start[i + 1] - start[i], sizeof(*kids), cmp_siblings, &ctx);
	stack[sp++] = 0;
	while (sp) {
		uint32_t i = stack[--sp];
		pos[i] = (uint32_t)k;
		order[k++] = i;
		for (uint32_t c = start[i + 1]; c-- > start[i];)
			stack[sp++] = kids[c];
	}
	free(start), free(kids), free(fill), free(stack);
	*order_out = order;
	*pos_out = pos;
	return 0;
}

static void write_data(const struct opal_flamegraph *fg, const char *title, const uint32_t *order,
		       const uint32_t *pos, FILE *out)
{
	size_t n_names = opal_intern_count(fg->names);

	fputs("{\"title\":", out);
	json_str(out, title);
	fprintf(out, ",\"unit\":\"%s\",\"total\":%llu,\"truncated\":%llu,\"link\":",
		opal_flamegraph_unit(fg), (unsigned long long)fg->nodes[0].value,
		(unsigned long long)fg->truncated);
	if (fg->link_text[0]) {
		fputs("{\"text\":", out);
		json_str(out, fg->link_text);
		fputs(",\"href\":", out);
		json_str(out, fg->link_href);
		fputc('}', out);
	} else {
		fputs("null", out);
	}
	fputs(",\"names\":[", out);
	for (size_t i = 0; i < n_names; i++) {
		if (i)
			fputc(',', out);
		json_str(out, opal_intern_key(fg->names, (uint32_t)i, NULL));
	}
	fputs("],\"kinds\":[\"native\",\"kernel\",\"inline\",\"cpython\"],\"nodes\":{\"name\":[",
	      out);
	for (size_t k = 0; k < fg->n; k++)
		fprintf(out, "%s%u", k ? "," : "", fg->nodes[order[k]].name);
	fputs("],\"kind\":[", out);
	for (size_t k = 0; k < fg->n; k++)
		fprintf(out, "%s%u", k ? "," : "", fg->nodes[order[k]].kind);
	fputs("],\"parent\":[", out);
	for (size_t k = 0; k < fg->n; k++) {
		uint32_t parent = fg->nodes[order[k]].parent;
		if (parent == ROOT_PARENT)
			fprintf(out, "%s-1", k ? "," : "");
		else
			fprintf(out, "%s%u", k ? "," : "", pos[parent]);
	}
	fputs("],\"value\":[", out);
	for (size_t k = 0; k < fg->n; k++)
		fprintf(out, "%s%llu", k ? "," : "", (unsigned long long)fg->nodes[order[k]].value);
	fputs("]}}", out);
}

int opal_flamegraph_write_html(const struct opal_flamegraph *fg, const char *title, FILE *out)
{
	const char *tpl = opal_flamegraph_template, *mark = strstr(tpl, DATA_MARKER);
	uint32_t *order, *pos;
	int err;

	if (!mark)
		return -EINVAL;   /* the template lost its marker: a build error */
	if ((err = preorder(fg, &order, &pos)) < 0)
		return err;
	fwrite(tpl, 1, (size_t)(mark - tpl), out);
	write_data(fg, title ? title : "opal flame graph", order, pos, out);
	fputs(mark + strlen(DATA_MARKER), out);
	free(order);
	free(pos);
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}

int opal_flamegraph_html_buf(const struct opal_flamegraph *fg, const char *title, char **buf,
			     size_t *len)
{
	FILE *f = open_memstream(buf, len);
	int err;

	if (!f)
		return -ENOMEM;
	err = opal_flamegraph_write_html(fg, title, f);
	if (fclose(f) != 0 && !err)
		err = -ENOMEM;
	if (err) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	return err;
}
