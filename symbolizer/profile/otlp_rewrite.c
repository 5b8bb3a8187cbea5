/* Symbolizing the native Locations of a received OTLP profiles request
 * (otlp_rewrite.h). New Functions and strings are interned against the
 * entries already in the dictionary, so that the dictionary stays free of
 * duplicates; everything added is allocated from the request's budget and
 * attached at once, so that freeing the request frees it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/intern.h"
#include "profile/otlp_rx_impl.h"

#define ATTR_HTLHASH    "process.executable.build_id.htlhash"
#define ATTR_GNU        "process.executable.build_id.gnu"
#define ATTR_FRAME_TYPE "profile.frame.type"

enum file_state { FILE_UNTRIED, FILE_FOUND, FILE_UNKNOWN, FILE_NO_ID };

struct file {
	enum file_state state;
	opal_file_id key;
};

/* A table of the dictionary, interned: intern number -> table index. */
struct table {
	struct opal_intern *keys;
	uint32_t *at;
	size_t n_at, cap;     /* `at` entries; capacity of the dictionary's array */
};

struct rw {
	struct opal_otlp_rx *rx;
	Dict *d;
	const struct opal_otlp_resolver *r;
	struct file *files;   /* per Mapping */
	struct table strs, funcs;
	bool ready;           /* strs and funcs built */
	size_t new_lines;
};

static int no_memory(struct rw *w)
{
	return w->rx->over_budget ? -E2BIG : -ENOMEM;
}

/* Room for one more element in a protobuf-c repeated field of `n`
 * elements whose array holds *cap. */
static int grow(struct rw *w, void *arrp, size_t n, size_t *cap, size_t elem)
{
	void **arr = arrp;

	if (n < *cap)
		return 0;
	size_t ncap = *cap < 16 ? 16 : *cap * 2;
	void *na = opal_otlp_rx_alloc(w->rx, ncap * elem);
	if (!na)
		return no_memory(w);
	if (n)
		memcpy(na, *arr, n * elem);
	opal_otlp_rx_dealloc(w->rx, *arr);
	*arr = na;
	*cap = ncap;
	return 0;
}

/* Records that intern number `k` is table index `idx`. */
static int table_note(struct table *t, uint32_t k, uint32_t idx)
{
	if (k >= t->n_at) {
		size_t n = t->n_at ? t->n_at * 2 : 64;
		while (n <= k)
			n *= 2;
		uint32_t *na = realloc(t->at, n * sizeof(*na));
		if (!na)
			return -ENOMEM;
		t->at = na;
		t->n_at = n;
	}
	t->at[k] = idx;
	return 0;
}

static void function_key(const Function *f, uint8_t key[20])
{
	memcpy(key, &f->name_strindex, 4);
	memcpy(key + 4, &f->system_name_strindex, 4);
	memcpy(key + 8, &f->filename_strindex, 4);
	memcpy(key + 12, &f->start_line, 8);
}

/* Index of string `s`, appended to the string table when new. */
static int string_index(struct rw *w, const char *s, int32_t *idx)
{
	size_t len = strlen(s);
	uint32_t k;
	bool added;
	int err = opal_intern_add(w->strs.keys, s, len, &k, &added);

	if (err < 0)
		return err;
	if (!added) {
		*idx = (int32_t)w->strs.at[k];
		return 0;
	}
	Dict *d = w->d;
	char *copy;
	if ((err = grow(w, &d->string_table, d->n_string_table, &w->strs.cap, sizeof(char *))) < 0 ||
	    !(copy = opal_otlp_rx_alloc(w->rx, len + 1)))
		return err < 0 ? err : no_memory(w);
	memcpy(copy, s, len + 1);
	*idx = (int32_t)d->n_string_table;
	d->string_table[d->n_string_table++] = copy;
	return table_note(&w->strs, k, (uint32_t)*idx);
}

/* Index of the Function named `name` in `file` (either may be NULL),
 * appended when new. */
static int function_index(struct rw *w, const char *name, const char *file, int32_t *idx)
{
	Function f = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
	uint8_t key[20];
	uint32_t k;
	bool added;
	int err = 0;

	if ((name && (err = string_index(w, name, &f.name_strindex)) < 0) ||
	    (file && (err = string_index(w, file, &f.filename_strindex)) < 0))
		return err;
	function_key(&f, key);
	if ((err = opal_intern_add(w->funcs.keys, key, sizeof(key), &k, &added)) < 0)
		return err;
	if (!added) {
		*idx = (int32_t)w->funcs.at[k];
		return 0;
	}
	Dict *d = w->d;
	Function *nf;
	if ((err = grow(w, &d->function_table, d->n_function_table, &w->funcs.cap,
			sizeof(Function *))) < 0 ||
	    !(nf = opal_otlp_rx_alloc(w->rx, sizeof(*nf))))
		return err < 0 ? err : no_memory(w);
	*nf = f;
	*idx = (int32_t)d->n_function_table;
	d->function_table[d->n_function_table++] = nf;
	return table_note(&w->funcs, k, (uint32_t)*idx);
}

/* Interns the dictionary's strings and Functions; an empty table first
 * gets its zero entry, so that nothing added takes index 0. */
static int prepare(struct rw *w)
{
	Dict *d = w->d;
	size_t max = d->n_string_table + d->n_function_table + 2 * OPAL_OTLP_RX_MAX_NEW_LINES + 2;
	int err;

	w->strs.cap = d->n_string_table;
	w->funcs.cap = d->n_function_table;
	if (!(w->strs.keys = opal_intern_new(max)) || !(w->funcs.keys = opal_intern_new(max)))
		return -ENOMEM;
	w->ready = true;
	for (size_t i = 0; i < d->n_string_table; i++) {
		uint32_t k;
		bool added;
		const char *s = d->string_table[i] ? d->string_table[i] : "";
		if ((err = opal_intern_add(w->strs.keys, s, strlen(s), &k, &added)) < 0 ||
		    (added && (err = table_note(&w->strs, k, (uint32_t)i)) < 0))
			return err;
	}
	if (!d->n_string_table && (err = string_index(w, "", &(int32_t){ 0 })) < 0)
		return err;
	for (size_t i = 0; i < d->n_function_table; i++) {
		uint8_t key[20];
		uint32_t k;
		bool added;
		function_key(d->function_table[i], key);
		if ((err = opal_intern_add(w->funcs.keys, key, sizeof(key), &k, &added)) < 0 ||
		    (added && (err = table_note(&w->funcs, k, (uint32_t)i)) < 0))
			return err;
	}
	if (!d->n_function_table)
		return function_index(w, NULL, NULL, &(int32_t){ 0 });
	return 0;
}

/* The string value of attribute `idx` when its key is `key`, else NULL. */
static const char *attr_value(const Dict *d, int32_t idx, const char *key)
{
	if (idx < 0 || (size_t)idx >= d->n_attribute_table)
		return NULL;
	const KVU *a = d->attribute_table[idx];
	if ((size_t)a->key_strindex >= d->n_string_table ||
	    strcmp(d->string_table[a->key_strindex], key) != 0 || !a->value)
		return NULL;
	if (a->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
		return a->value->string_value;
	if (a->value->value_case ==
	    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX &&
	    (size_t)a->value->string_value_strindex < d->n_string_table)
		return d->string_table[a->value->string_value_strindex];
	return NULL;
}

static const char *find_attr(const Dict *d, const int32_t *v, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const char *s = attr_value(d, v[i], key);
		if (s)
			return s;
	}
	return NULL;
}

/* The file of Mapping `mi`, looked up once per request. */
static const struct file *file_of(struct rw *w, int32_t mi)
{
	struct file *f = &w->files[mi];

	if (f->state != FILE_UNTRIED)
		return f;
	const Mapping *m = w->d->mapping_table[mi];
	const char *htl = find_attr(w->d, m->attribute_indices, m->n_attribute_indices, ATTR_HTLHASH);
	const char *gnu = find_attr(w->d, m->attribute_indices, m->n_attribute_indices, ATTR_GNU);
	if (htl && !*htl)
		htl = NULL;
	if (gnu && !*gnu)
		gnu = NULL;
	if (!htl && !gnu)
		f->state = FILE_NO_ID;
	else
		f->state = w->r->find_file(w->r->arg, htl, gnu, &f->key) == 0 ? FILE_FOUND :
										 FILE_UNKNOWN;
	return f;
}

/* Gives Location `l` the Lines of `res`, innermost first. Returns the
 * number added (0: nothing usable) or -errno. */
static int add_lines(struct rw *w, Location *l, const struct opal_sym_result *res)
{
	size_t n = 0;
	int err;

	for (size_t i = 0; i < res->n; i++)
		n += res->frames[i].function || res->frames[i].file;
	if (!n)
		return 0;
	if (n > OPAL_OTLP_RX_MAX_NEW_LINES - w->new_lines)
		return -E2BIG;
	if (!w->ready && (err = prepare(w)) < 0)
		return err;
	Line **lines = opal_otlp_rx_alloc(w->rx, n * sizeof(*lines));
	if (!lines)
		return no_memory(w);
	l->lines = lines;
	l->n_lines = 0;
	for (size_t i = 0; i < res->n; i++) {
		const struct opal_sym_frame *f = &res->frames[i];
		int32_t fn;
		if (!f->function && !f->file)
			continue;
		if ((err = function_index(w, f->function, f->file, &fn)) < 0)
			return err;
		Line *ln = opal_otlp_rx_alloc(w->rx, sizeof(*ln));
		if (!ln)
			return no_memory(w);
		opentelemetry__proto__profiles__v1development__line__init(ln);
		ln->function_index = fn;
		ln->line = f->line;
		lines[l->n_lines++] = ln;
	}
	w->new_lines += n;
	return (int)n;
}

/* One Location: symbolized, or counted as kept / unknown / unresolved. */
static int rewrite_location(struct rw *w, Location *l, struct opal_otlp_rx_stats *st)
{
	const Dict *d = w->d;
	const char *type;

	if (l->n_lines || !d->n_mapping_table ||
	    ((type = find_attr(d, l->attribute_indices, l->n_attribute_indices, ATTR_FRAME_TYPE)) &&
	     strcmp(type, "native") != 0)) {
		st->kept++;
		return 0;
	}
	const struct file *f = file_of(w, l->mapping_index);
	if (f->state == FILE_NO_ID) {
		st->kept++;
		return 0;
	}
	if (f->state == FILE_UNKNOWN) {
		st->unknown_file++;
		return 0;
	}
	struct opal_sym_result res = { 0 };
	int n = w->r->symbolize(w->r->arg, &f->key, l->address, &res);
	if (n == 0)
		n = add_lines(w, l, &res);
	else
		n = 0;   /* a failed lookup leaves the Location as it came */
	opal_sym_result_free(&res);
	if (n < 0)
		return n;
	if (n > 0)
		st->symbolized++;
	else
		st->unresolved++;
	return 0;
}

int opal_otlp_rx_rewrite(struct opal_otlp_rx *rx, const struct opal_otlp_resolver *r,
			 struct opal_otlp_rx_stats *st)
{
	struct opal_otlp_rx_stats local = { 0 };
	struct rw w = { .rx = rx, .d = rx->req->dictionary, .r = r };
	int err = 0;

	if (!st)
		st = &local;
	*st = (struct opal_otlp_rx_stats){ 0 };
	if (!w.d)
		return 0;
	if (w.d->n_mapping_table && !(w.files = calloc(w.d->n_mapping_table, sizeof(*w.files))))
		return -ENOMEM;
	for (size_t i = 0; !err && i < w.d->n_location_table; i++)
		err = rewrite_location(&w, w.d->location_table[i], st);
	free(w.files);
	opal_intern_free(w.strs.keys);
	opal_intern_free(w.funcs.keys);
	free(w.strs.at);
	free(w.funcs.at);
	return err;
}
