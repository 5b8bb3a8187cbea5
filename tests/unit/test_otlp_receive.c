/* Unit tests of the OTLP profiles receiver's decode and rewrite
 * (symbolizer/profile/otlp_rewrite.h, symbolizer/symbolize/sym_otlp.h).
 * Requests are built the way the OpenTelemetry eBPF profiler builds them:
 * native frames as an address (ELF virtual address) with a Mapping that
 * carries the htlhash file ID (computed with shared/fileid.c) and the GNU
 * build ID and no Line; kernel and interpreter frames already carrying a
 * Line; every frame with profile.frame.type. The fixture is
 * tests/fixtures/symbolize's inline_pie (run `make fixtures`); expected
 * lines come from its source's LINE: markers, addresses from its .symtab
 * read with libelf. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_symbol.h"
#include "shared/fileid.h"
#include "symbolizer/profile/otlp_rewrite.h"
#include "symbolizer/profile/report.h"
#include "symbolizer/symbolize/sym_otlp.h"
#include "symbolizer/symbolize/symbolize.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Req;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles RP;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles SP;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Prof;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack Stack;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location Location;
typedef Opentelemetry__Proto__Profiles__V1development__Line Line;
typedef Opentelemetry__Proto__Profiles__V1development__Function Function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KVU;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

static char fixdir[PATH_MAX];

static int setup(void **state)
{
	const char *base = getenv("OPAL_FIXTURES");
	char probe[PATH_MAX + 32];

	snprintf(fixdir, sizeof(fixdir), "%s/symbolize", base ? base : "build/fixtures");
	snprintf(probe, sizeof(probe), "%s/inline_pie", fixdir);
	if (access(probe, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures`\n", probe);
		return -1;
	}
	return 0;
}

static int open_fixture(const char *name)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", fixdir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static uint64_t sym_addr(const char *sym)
{
	int fd = open_fixture("inline_pie");
	uint64_t v = test_elf_symbol(fd, "inline_pie", sym, NULL);
	close(fd);
	return v;
}

static int64_t marker_line(const char *marker)
{
	char p[PATH_MAX + 64], tag[128], line[1024];
	snprintf(p, sizeof(p), "%s/inline.c", fixdir);
	snprintf(tag, sizeof(tag), "LINE:%s", marker);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	int64_t n = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		const char *hit = strstr(line, tag);
		if (hit && strchr(" \n", hit[strlen(tag)])) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	fail_msg("marker %s missing", marker);
	return 0;
}

/* The GNU build ID of inline_pie as lowercase hex, read with libelf. */
static void fixture_build_id(char *hex, size_t cap)
{
	int fd = open_fixture("inline_pie");
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	hex[0] = '\0';
	while (elf && !hex[0] && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;
		while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || 2 * nh.n_descsz + 1 > cap)
				continue;
			for (size_t i = 0; i < nh.n_descsz; i++)
				sprintf(hex + 2 * i, "%02x", ((uint8_t *)data->d_buf)[desc_off + i]);
			break;
		}
	}
	elf_end(elf);
	close(fd);
	assert_true(hex[0] != '\0');
}

/* ---- the request, as the reference agent builds it ------------------------------------ */

enum { S_EMPTY, S_HTL, S_HTL_VAL, S_GNU, S_GNU_VAL, S_TYPE, S_NATIVE, S_KERNEL, S_CPYTHON,
       S_KFUNC, S_PYFUNC, S_PYFILE, S_EXE, S_UNKNOWN_HTL, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_N };
enum { A_ZERO, A_HTL, A_GNU, A_NATIVE, A_KERNEL, A_CPYTHON, A_UNKNOWN_HTL, A_N };
enum { L_ZERO, L_LEAF, L_PLAIN, L_KERNEL, L_PYTHON, L_UNKNOWN, L_N };

struct built {
	char *strings[S_N];
	char htl[33], gnu[2 * 64 + 1];
	KVU attrs[A_N];
	KVU *attr_p[A_N];
	AnyValue vals[A_N];
	Mapping maps[3];
	Mapping *map_p[3];
	int32_t map_attrs[2][2];
	Function funcs[3];
	Function *func_p[3];
	Line lines[2];
	Line *line_p[2][1];
	Location locs[L_N];
	Location *loc_p[L_N];
	int32_t loc_attrs[L_N];
	Stack stacks[2];
	Stack *stack_p[2];
	int32_t stack_locs[L_N - 1];
	Sample sample;
	Sample *sample_p[1];
	uint64_t ts[1];
	Opentelemetry__Proto__Profiles__V1development__ValueType st, pt;
	Prof prof;
	Prof *prof_p[1];
	SP sp;
	SP *sp_p[1];
	RP rp;
	RP *rp_p[1];
	Dict dict;
	Req req;
};

static void set_str_attr(struct built *b, int i, int key, int val)
{
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&b->attrs[i]);
	opentelemetry__proto__common__v1__any_value__init(&b->vals[i]);
	b->attrs[i].key_strindex = key;
	b->vals[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	b->vals[i].string_value = b->strings[val];
	b->attrs[i].value = &b->vals[i];
	b->attr_p[i] = &b->attrs[i];
}

/* The request of the tests: one sample whose stack is a native frame with
 * an inline chain (leaf), a plain native frame, a kernel frame and a
 * CPython frame with names, and a native frame of a file opal never saw. */
/* `gnu_hex` NULL: the fixture's own GNU build ID. */
static void build(struct built *b, const char *gnu_hex)
{
	memset(b, 0, sizeof(*b));
	int fd = open_fixture("inline_pie");
	opal_file_id id;
	assert_int_equal(opal_file_id_from_fd(fd, &id), 0);
	close(fd);
	opal_file_id_to_hex(&id, b->htl);
	static char *const fixed[S_N] = {
		[S_EMPTY] = "", [S_HTL] = "process.executable.build_id.htlhash",
		[S_GNU] = "process.executable.build_id.gnu", [S_TYPE] = "profile.frame.type",
		[S_NATIVE] = "native", [S_KERNEL] = "kernel", [S_CPYTHON] = "cpython",
		[S_KFUNC] = "do_syscall_64", [S_PYFUNC] = "work", [S_PYFILE] = "/srv/app.py",
		[S_EXE] = "inline_pie", [S_UNKNOWN_HTL] = "00112233445566778899aabbccddeeff",
		[S_SAMPLES] = "samples", [S_COUNT] = "count", [S_CPU] = "cpu", [S_NS] = "nanoseconds",
	};
	memcpy(b->strings, fixed, sizeof(fixed));
	b->strings[S_HTL_VAL] = b->htl;
	if (gnu_hex)
		snprintf(b->gnu, sizeof(b->gnu), "%s", gnu_hex);
	else
		fixture_build_id(b->gnu, sizeof(b->gnu));
	b->strings[S_GNU_VAL] = b->gnu;

	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&b->attrs[0]);
	b->attr_p[0] = &b->attrs[0];
	set_str_attr(b, A_HTL, S_HTL, S_HTL_VAL);
	set_str_attr(b, A_GNU, S_GNU, S_GNU_VAL);
	set_str_attr(b, A_NATIVE, S_TYPE, S_NATIVE);
	set_str_attr(b, A_KERNEL, S_TYPE, S_KERNEL);
	set_str_attr(b, A_CPYTHON, S_TYPE, S_CPYTHON);
	set_str_attr(b, A_UNKNOWN_HTL, S_HTL, S_UNKNOWN_HTL);

	for (int i = 0; i < 3; i++) {
		opentelemetry__proto__profiles__v1development__mapping__init(&b->maps[i]);
		b->map_p[i] = &b->maps[i];
	}
	b->maps[1].filename_strindex = S_EXE;
	b->maps[1].memory_start = 0x555555554000;
	b->maps[1].memory_limit = 0x555555559000;
	b->map_attrs[0][0] = A_HTL;
	b->map_attrs[0][1] = A_GNU;
	b->maps[1].attribute_indices = b->map_attrs[0];
	b->maps[1].n_attribute_indices = 2;
	b->map_attrs[1][0] = A_UNKNOWN_HTL;
	b->maps[2].attribute_indices = b->map_attrs[1];
	b->maps[2].n_attribute_indices = 1;

	for (int i = 0; i < 3; i++) {
		opentelemetry__proto__profiles__v1development__function__init(&b->funcs[i]);
		b->func_p[i] = &b->funcs[i];
	}
	b->funcs[1].name_strindex = S_KFUNC;
	b->funcs[2].name_strindex = S_PYFUNC;
	b->funcs[2].filename_strindex = S_PYFILE;
	for (int i = 0; i < 2; i++) {
		opentelemetry__proto__profiles__v1development__line__init(&b->lines[i]);
		b->line_p[i][0] = &b->lines[i];
	}
	b->lines[0].function_index = 1;
	b->lines[1].function_index = 2;
	b->lines[1].line = 7;

	static const int types[L_N] = { 0, A_NATIVE, A_NATIVE, A_KERNEL, A_CPYTHON, A_NATIVE };
	for (int i = 0; i < L_N; i++) {
		opentelemetry__proto__profiles__v1development__location__init(&b->locs[i]);
		b->loc_p[i] = &b->locs[i];
		if (!i)
			continue;
		b->loc_attrs[i] = types[i];
		b->locs[i].attribute_indices = &b->loc_attrs[i];
		b->locs[i].n_attribute_indices = 1;
	}
	b->locs[L_LEAF].mapping_index = 1;
	b->locs[L_LEAF].address = sym_addr("opal_mark_leaf");
	b->locs[L_PLAIN].mapping_index = 1;
	b->locs[L_PLAIN].address = sym_addr("opal_mark_plain");
	b->locs[L_KERNEL].address = 0xffffffff81000000;
	b->locs[L_KERNEL].lines = b->line_p[0];
	b->locs[L_KERNEL].n_lines = 1;
	b->locs[L_PYTHON].lines = b->line_p[1];
	b->locs[L_PYTHON].n_lines = 1;
	b->locs[L_UNKNOWN].mapping_index = 2;
	b->locs[L_UNKNOWN].address = 0x1234;

	for (int i = 0; i < 2; i++) {
		opentelemetry__proto__profiles__v1development__stack__init(&b->stacks[i]);
		b->stack_p[i] = &b->stacks[i];
	}
	for (int i = 0; i < L_N - 1; i++)
		b->stack_locs[i] = i + 1;
	b->stacks[1].location_indices = b->stack_locs;
	b->stacks[1].n_location_indices = L_N - 1;

	opentelemetry__proto__profiles__v1development__sample__init(&b->sample);
	b->sample.stack_index = 1;
	b->ts[0] = 1700000000000000000ull;
	b->sample.timestamps_unix_nano = b->ts;
	b->sample.n_timestamps_unix_nano = 1;
	b->sample_p[0] = &b->sample;
	opentelemetry__proto__profiles__v1development__value_type__init(&b->st);
	opentelemetry__proto__profiles__v1development__value_type__init(&b->pt);
	b->st.type_strindex = S_SAMPLES;
	b->st.unit_strindex = S_COUNT;
	b->pt.type_strindex = S_CPU;
	b->pt.unit_strindex = S_NS;
	opentelemetry__proto__profiles__v1development__profile__init(&b->prof);
	b->prof.sample_type = &b->st;
	b->prof.period_type = &b->pt;
	b->prof.period = 50000000;
	b->prof.samples = b->sample_p;
	b->prof.n_samples = 1;
	b->prof_p[0] = &b->prof;
	opentelemetry__proto__profiles__v1development__scope_profiles__init(&b->sp);
	b->sp.profiles = b->prof_p;
	b->sp.n_profiles = 1;
	b->sp_p[0] = &b->sp;
	opentelemetry__proto__profiles__v1development__resource_profiles__init(&b->rp);
	b->rp.scope_profiles = b->sp_p;
	b->rp.n_scope_profiles = 1;
	b->rp_p[0] = &b->rp;

	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(&b->dict);
	b->dict.string_table = b->strings;
	b->dict.n_string_table = S_N;
	b->dict.attribute_table = b->attr_p;
	b->dict.n_attribute_table = A_N;
	b->dict.mapping_table = b->map_p;
	b->dict.n_mapping_table = 3;
	b->dict.function_table = b->func_p;
	b->dict.n_function_table = 3;
	b->dict.location_table = b->loc_p;
	b->dict.n_location_table = L_N;
	b->dict.stack_table = b->stack_p;
	b->dict.n_stack_table = 2;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(&b->req);
	b->req.resource_profiles = b->rp_p;
	b->req.n_resource_profiles = 1;
	b->req.dictionary = &b->dict;
}

static uint8_t *pack(const Req *q, size_t *len)
{
	*len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(q);
	uint8_t *buf = malloc(*len + 1);
	assert_non_null(buf);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(q, buf);
	return buf;
}

/* Decodes, rewrites with `sym`, encodes; the result decoded again with
 * protobuf-c (freed by the caller). */
static Req *round_trip(const Req *in, struct opal_symbolizer *sym, struct opal_otlp_rx_stats *st)
{
	size_t len, olen;
	uint8_t *buf = pack(in, &len), *out;
	struct opal_otlp_rx *rx;
	char why[256];

	assert_int_equal(opal_otlp_rx_decode(buf, len, 0, &rx, why, sizeof(why)), 0);
	assert_int_equal(opal_symbolize_otlp(sym, rx, st), 0);
	assert_int_equal(opal_otlp_rx_encode(rx, &out, &olen), 0);
	opal_otlp_rx_free(rx);
	free(buf);
	/* The rewritten request passes the receiver's own index checks. */
	assert_int_equal(opal_otlp_rx_decode(out, olen, 0, &rx, why, sizeof(why)), 0);
	opal_otlp_rx_free(rx);
	Req *q = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(NULL, olen, out);
	free(out);
	assert_non_null(q);
	return q;
}

static void free_req(Req *q)
{
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(q, NULL);
}

/* The dictionary rules: zero entries at index 0, no duplicate strings or
 * Functions, every Function named. */
static void check_dictionary(const Dict *d)
{
	assert_true(d->n_string_table > 0);
	assert_string_equal(d->string_table[0], "");
	for (size_t i = 0; i < d->n_string_table; i++)
		for (size_t j = i + 1; j < d->n_string_table; j++)
			if (!strcmp(d->string_table[i], d->string_table[j]))
				fail_msg("string %zu and %zu are both '%s'", i, j, d->string_table[i]);
	assert_true(d->n_function_table > 0);
	const Function *z = d->function_table[0];
	assert_true(!z->name_strindex && !z->system_name_strindex && !z->filename_strindex);
	for (size_t i = 1; i < d->n_function_table; i++) {
		const Function *a = d->function_table[i];
		assert_true(a->name_strindex || a->system_name_strindex || a->filename_strindex);
		for (size_t j = i + 1; j < d->n_function_table; j++) {
			const Function *b = d->function_table[j];
			assert_false(a->name_strindex == b->name_strindex &&
				     a->system_name_strindex == b->system_name_strindex &&
				     a->filename_strindex == b->filename_strindex &&
				     a->start_line == b->start_line);
		}
	}
}

static void assert_line(const Dict *d, const Line *l, const char *func, const char *file_tail,
			int64_t line)
{
	assert_true(l->function_index > 0 && (size_t)l->function_index < d->n_function_table);
	const Function *f = d->function_table[l->function_index];
	assert_string_equal(d->string_table[f->name_strindex], func);
	const char *file = d->string_table[f->filename_strindex];
	size_t fl = strlen(file), tl = strlen(file_tail);
	assert_true(fl > tl && file[fl - tl - 1] == '/');
	assert_string_equal(file + fl - tl, file_tail);
	assert_int_equal(l->line, line);
}

static struct opal_symbolizer *symbolizer_with_fixture(void)
{
	struct opal_symbolizer *s = opal_symbolizer_new(NULL, 4);
	opal_file_id id;
	int fd = open_fixture("inline_pie");

	assert_non_null(s);
	assert_int_equal(opal_file_id_from_fd(fd, &id), 0);
	assert_int_equal(opal_symbolizer_add_file(s, &id, fd, NULL, 0, "inline_pie"), 0);
	return s;
}

/* Native frames get the fixture's exact chain; the rest is untouched. */
static void test_rewrite_agent_request(void **state)
{
	struct built *b = malloc(sizeof(*b));
	struct opal_symbolizer *s = symbolizer_with_fixture();
	struct opal_otlp_rx_stats st;

	assert_non_null(b);
	build(b, NULL);
	Req *q = round_trip(&b->req, s, &st);
	const Dict *d = q->dictionary;
	assert_int_equal(st.symbolized, 2);
	assert_int_equal(st.unknown_file, 1);
	assert_int_equal(st.kept, 3);   /* the zero Location, the kernel and the CPython frame */
	assert_int_equal(st.unresolved, 0);
	check_dictionary(d);

	assert_int_equal(d->n_location_table, L_N);
	const Location *leaf = d->location_table[L_LEAF];
	assert_int_equal(leaf->n_lines, 3);   /* innermost first */
	assert_line(d, leaf->lines[0], "leaf", "inline.c", marker_line("leaf_body"));
	assert_line(d, leaf->lines[1], "mid", "inline.c", marker_line("mid_call_leaf"));
	assert_line(d, leaf->lines[2], "outer", "inline.c", marker_line("outer_call_mid"));
	assert_int_equal(leaf->address, b->locs[L_LEAF].address);
	assert_int_equal(leaf->mapping_index, 1);
	const Location *plain = d->location_table[L_PLAIN];
	assert_int_equal(plain->n_lines, 1);
	assert_line(d, plain->lines[0], "plain", "inline.c", marker_line("plain_body"));
	/* Both frames share one Function per name and one string per file. */
	assert_int_equal(d->function_table[leaf->lines[0]->function_index]->filename_strindex,
			 d->function_table[plain->lines[0]->function_index]->filename_strindex);

	/* Untouched: the kernel and CPython frames, the unknown file's frame,
	 * the tables the rewrite does not add to. */
	const Location *k = d->location_table[L_KERNEL], *py = d->location_table[L_PYTHON];
	assert_int_equal(k->n_lines, 1);
	assert_int_equal(k->lines[0]->function_index, 1);
	assert_string_equal(d->string_table[d->function_table[1]->name_strindex], "do_syscall_64");
	assert_int_equal(py->n_lines, 1);
	assert_int_equal(py->lines[0]->function_index, 2);
	assert_int_equal(py->lines[0]->line, 7);
	assert_int_equal(d->location_table[L_UNKNOWN]->n_lines, 0);
	assert_int_equal(d->location_table[L_UNKNOWN]->address, 0x1234);
	assert_int_equal(d->n_mapping_table, 3);
	assert_int_equal(d->n_attribute_table, A_N);
	assert_int_equal(d->n_stack_table, 2);
	for (int i = 0; i < S_N; i++)
		assert_string_equal(d->string_table[i], b->strings[i]);
	assert_int_equal(q->resource_profiles[0]->scope_profiles[0]->profiles[0]->samples[0]->stack_index, 1);

	/* Rewriting the result again changes nothing: it is symbolized. */
	Req *again = round_trip(q, s, &st);
	assert_int_equal(st.symbolized, 0);
	assert_int_equal(again->dictionary->n_function_table, d->n_function_table);
	assert_int_equal(again->dictionary->n_string_table, d->n_string_table);
	free_req(again);
	free_req(q);
	opal_symbolizer_free(s);
	free(b);
}

/* A fake resolver: every file known, every address "f" in "/x.c" (or
 * nothing); counts lookups. */
static int fake_find(void *arg, const char *htl, const char *gnu, opal_file_id *key)
{
	memset(key, 0, sizeof(*key));
	return 0;
}

static struct opal_sym_frame fake_frames[2] = {
	{ .function = "f", .file = "/x.c", .line = 3, .inlined = true },
	{ .function = "do_syscall_64", .file = NULL, .line = 0 },
};

static int fake_symbolize(void *arg, const opal_file_id *key, uint64_t addr,
			  struct opal_sym_result *out)
{
	(*(int *)arg)++;
	memset(out, 0, sizeof(*out));
	if (addr == 0x1234)
		return 0;   /* unresolved */
	out->frames = calloc(2, sizeof(*out->frames));
	for (int i = 0; i < 2; i++) {
		out->frames[i] = fake_frames[i];
		out->frames[i].function = strdup(fake_frames[i].function);
		out->frames[i].file = fake_frames[i].file ? strdup(fake_frames[i].file) : NULL;
	}
	out->n = 2;
	return 0;
}

/* New Functions reuse equal entries (the kernel frame's do_syscall_64);
 * empty tables get their zero entry before anything is added. */
static void test_rewrite_reuses_entries(void **state)
{
	struct built *b = malloc(sizeof(*b));
	int calls = 0;
	const struct opal_otlp_resolver r = { fake_find, fake_symbolize, &calls };
	struct opal_otlp_rx_stats st;
	struct opal_otlp_rx *rx;
	uint8_t *buf, *out;
	size_t len, olen;
	char why[256];

	build(b, "aabbccdd");
	buf = pack(&b->req, &len);
	assert_int_equal(opal_otlp_rx_decode(buf, len, 0, &rx, why, sizeof(why)), 0);
	assert_int_equal(opal_otlp_rx_rewrite(rx, &r, &st), 0);
	assert_int_equal(calls, 3);
	assert_int_equal(st.symbolized, 2);
	assert_int_equal(st.unresolved, 1);
	assert_int_equal(opal_otlp_rx_encode(rx, &out, &olen), 0);
	opal_otlp_rx_free(rx);
	Req *q = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(NULL, olen, out);
	assert_non_null(q);
	check_dictionary(q->dictionary);
	assert_int_equal(q->dictionary->n_function_table, 4);   /* + f only */
	assert_int_equal(q->dictionary->location_table[L_LEAF]->lines[1]->function_index, 1);
	assert_int_equal(q->dictionary->n_string_table, S_N + 2);   /* + "f", "/x.c" */
	free_req(q);
	free(out);
	free(buf);

	/* Empty string and function tables: "" and the zero Function first. */
	b->dict.n_function_table = 0;
	b->locs[L_KERNEL].n_lines = b->locs[L_PYTHON].n_lines = 0;
	b->dict.n_string_table = 0;
	b->dict.n_attribute_table = 0;
	b->maps[1].filename_strindex = 0;
	b->maps[1].n_attribute_indices = b->maps[2].n_attribute_indices = 0;
	for (int i = 0; i < L_N; i++)
		b->locs[i].n_attribute_indices = 0;
	b->prof.sample_type = b->prof.period_type = NULL;
	buf = pack(&b->req, &len);
	assert_int_equal(opal_otlp_rx_decode(buf, len, 0, &rx, why, sizeof(why)), 0);
	assert_int_equal(opal_otlp_rx_rewrite(rx, &r, &st), 0);
	/* No Mapping names a file now: nothing to look up. */
	assert_int_equal(st.symbolized, 0);
	opal_otlp_rx_free(rx);
	free(buf);
	free(b);
}

/* The flame graph's copy: a valid pprof with the symbolized chain, the
 * sample weighted by its timestamp and labelled with the Resource's pid. */
static void test_pprof_copy(void **state)
{
	struct built *b = malloc(sizeof(*b));
	struct opal_symbolizer *s = symbolizer_with_fixture();
	Opentelemetry__Proto__Common__V1__KeyValue pid_kv =
		OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT, *pid_p = &pid_kv;
	AnyValue pid_v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	Opentelemetry__Proto__Resource__V1__Resource res =
		OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	struct opal_otlp_rx *rx;
	char why[256], path[] = "/tmp/opal-test-otlp-pprof.XXXXXX";
	uint8_t *buf, *gz;
	size_t len, gz_len;
	uint64_t start, end;

	build(b, NULL);
	pid_kv.key = "process.pid";
	pid_v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	pid_v.int_value = 4242;
	pid_kv.value = &pid_v;
	res.attributes = &pid_p;
	res.n_attributes = 1;
	b->rp.resource = &res;
	b->prof.time_unix_nano = 1700000000000000000ull;
	b->prof.duration_nano = 5000000000ull;
	buf = pack(&b->req, &len);
	assert_int_equal(opal_otlp_rx_decode(buf, len, 0, &rx, why, sizeof(why)), 0);
	assert_int_equal(opal_symbolize_otlp(s, rx, NULL), 0);
	assert_int_equal(opal_otlp_rx_pprof(rx, &gz, &gz_len, &start, &end), 0);
	assert_int_equal(start, 1700000000000000000ull);
	assert_int_equal(end, 1700000005000000000ull);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, gz, gz_len), (ssize_t)gz_len);
	close(fd);
	Perftools__Profiles__Profile *p;
	assert_int_equal(opal_report_load(path, &p, why, sizeof(why)), 0);
	unlink(path);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(p->sample[0]->value[0], 1);
	assert_int_equal(p->sample[0]->n_label, 1);
	assert_string_equal(p->string_table[p->sample[0]->label[0]->key], "pid");
	assert_int_equal(p->sample[0]->label[0]->num, 4242);
	assert_int_equal(p->sample[0]->n_location_id, L_N - 1);
	const Perftools__Profiles__Location *leaf = p->location[p->sample[0]->location_id[0] - 1];
	assert_int_equal(leaf->n_line, 3);
	static const char *const chain[3] = { "leaf", "mid", "outer" };
	for (int i = 0; i < 3; i++) {
		const Perftools__Profiles__Function *f = p->function[leaf->line[i]->function_id - 1];
		assert_int_equal(f->id, leaf->line[i]->function_id);
		assert_string_equal(p->string_table[f->name], chain[i]);
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	opal_otlp_rx_free(rx);
	free(buf);
	opal_symbolizer_free(s);
	free(b);
}

static void expect_refused(const uint8_t *buf, size_t len, size_t max_memory, int want,
			   const char *why_part)
{
	struct opal_otlp_rx *rx = (void *)1;
	char why[256] = "";

	assert_int_equal(opal_otlp_rx_decode(buf, len, max_memory, &rx, why, sizeof(why)), want);
	assert_null(rx);
	if (!strstr(why, why_part))
		fail_msg("reason '%s' lacks '%s'", why, why_part);
}

static void test_bad_input(void **state)
{
	struct built *b = malloc(sizeof(*b));
	size_t len;
	uint8_t *buf;

	build(b, NULL);
	buf = pack(&b->req, &len);
	/* Truncated protobuf, at every length that cuts a field short. */
	size_t refused = 0;
	for (size_t cut = 1; cut < len; cut++) {
		struct opal_otlp_rx *rx;
		char why[256];
		int err = opal_otlp_rx_decode(buf, cut, 0, &rx, why, sizeof(why));
		assert_true(err == 0 || err == -EINVAL);
		refused += err == -EINVAL;
		opal_otlp_rx_free(rx);
	}
	assert_true(refused > len / 2);
	expect_refused(buf, len / 2, 0, -EINVAL, "");
	/* Field number 0, written as a two-byte key (protobuf-c would take it,
	 * and forward a request nobody can read back). */
	static const uint8_t field0[10] = { 0x81, 0x00, 0, 0, 0, 0, 0, 0, 0x12, 0x0b };
	expect_refused(field0, sizeof(field0), 0, -EINVAL, "malformed protobuf");
	/* The whole request fits in 1 MiB, not in 256 bytes. */
	expect_refused(buf, len, 256, -E2BIG, "decoded request over");
	free(buf);

	/* Out-of-range indices, one table at a time. */
	b->locs[L_PLAIN].mapping_index = 3;
	buf = pack(&b->req, &len);
	expect_refused(buf, len, 0, -EINVAL, "location 2: index 3 out of range");
	free(buf);
	b->locs[L_PLAIN].mapping_index = 1;
	b->lines[0].function_index = 99;
	buf = pack(&b->req, &len);
	expect_refused(buf, len, 0, -EINVAL, "location 3");
	free(buf);
	b->lines[0].function_index = 1;
	b->stack_locs[0] = -1;
	buf = pack(&b->req, &len);
	expect_refused(buf, len, 0, -EINVAL, "stack 1");
	free(buf);
	b->stack_locs[0] = 1;
	b->sample.stack_index = 2;
	buf = pack(&b->req, &len);
	expect_refused(buf, len, 0, -EINVAL, "sample 0");
	free(buf);
	b->sample.stack_index = 1;
	b->attrs[A_HTL].key_strindex = S_N;
	buf = pack(&b->req, &len);
	expect_refused(buf, len, 0, -EINVAL, "attribute 1");
	free(buf);
	b->attrs[A_HTL].key_strindex = S_HTL;
	b->funcs[2].filename_strindex = 1000;
	buf = pack(&b->req, &len);
	expect_refused(buf, len, 0, -EINVAL, "function 2");
	free(buf);
	free(b);
}

/* 10^6 Locations: refused on the count, with far less memory than the
 * decoded table would take; and a nesting bomb of AnyValue arrays. */
static void test_bombs(void **state)
{
	size_t n = 1000000, len = 0;
	uint8_t *buf = malloc(2 * n + 16), *dict = malloc(2 * n);

	assert_non_null(buf);
	assert_non_null(dict);
	for (size_t i = 0; i < n; i++) {   /* location_table (2): an empty Location each */
		dict[2 * i] = 0x12;
		dict[2 * i + 1] = 0;
	}
	buf[len++] = 0x12;   /* dictionary (2), length as a varint */
	for (size_t v = 2 * n; ; v >>= 7) {
		buf[len++] = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
		if (v < 0x80)
			break;
	}
	memcpy(buf + len, dict, 2 * n);
	len += 2 * n;
	expect_refused(buf, len, 0, -E2BIG, "1000000 locations; at most");
	/* With a smaller budget the decoder stops before the table is whole. */
	expect_refused(buf, len, 8u << 20, -E2BIG, "decoded request over");
	free(dict);

	/* dictionary { attribute_table { value { array_value { values {
	 * array_value ... 60 levels, built from the inside out, with two-byte
	 * lengths. */
	size_t levels = 60;
	uint8_t *deep = calloc(1, 8 * levels + 64);
	size_t dl = 0;
	for (size_t i = 0; i < levels; i++) {
		uint8_t hdr[8];
		size_t h = 0, inner = dl + 3;   /* "0a" + 2-byte length + inner */
		hdr[h++] = 0x2a;
		hdr[h++] = (uint8_t)(inner & 0x7f) | 0x80;
		hdr[h++] = (uint8_t)(inner >> 7);
		hdr[h++] = 0x0a;
		hdr[h++] = (uint8_t)(dl & 0x7f) | 0x80;
		hdr[h++] = (uint8_t)(dl >> 7);
		memmove(deep + h, deep, dl);
		memcpy(deep, hdr, h);
		dl += h;
	}
	/* KeyValueAndUnit.value (2), ProfilesDictionary.attribute_table (6),
	 * request.dictionary (2), each with a two-byte length. */
	static const uint8_t tags[3] = { 0x12, 0x32, 0x12 };
	for (int i = 0; i < 3; i++) {
		memmove(deep + 3, deep, dl);
		deep[0] = tags[i];
		deep[1] = (uint8_t)(dl & 0x7f) | 0x80;
		deep[2] = (uint8_t)(dl >> 7);
		dl += 3;
	}
	expect_refused(deep, dl, 0, -E2BIG, "nested over");
	free(deep);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rewrite_agent_request),
		cmocka_unit_test(test_rewrite_reuses_entries),
		cmocka_unit_test(test_pprof_copy),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_bombs),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
