/* Unit tests of symbolizer/profile/otlp.c: the ExportProfilesServiceRequest is
 * decoded with the protobuf-c code and checked against the dictionary rules
 * of the v1.11.0 profiles layout (zero value at index 0 of every table, no
 * duplicate entries, indices in range, unique attribute keys per list),
 * resource attributes, per-cpu sample splitting and the frame details;
 * OTEL_RESOURCE_ATTRIBUTES parsing; `protoc --decode` of the written file
 * when protoc exists. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolizer/profile/otlp.h"
#include "symbolizer/profile/profile.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	Request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__Location Location;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KeyValueAndUnit;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

#define PERIOD 50000000ull
#define T0     1700000000000000000ull

/* Process 100 (no service name, container) with threads 101 and 102;
 * process 200 with a service name. Thread 101's stack is sampled on cpus
 * 0, 1, 0, 1, so it must become two OTLP samples. */
static struct opal_profile *build_profile(void)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping app = {
		.start = 0x400000, .limit = 0x500000, .filename = "/usr/bin/app",
		.build_id_gnu = "0123456789abcdef", .file_id_htlhash = "00112233445566778899aabbccddeeff",
		.has_functions = true,
	};
	/* Differs from `app` only in a flag OTLP does not carry: the two must
	 * become one OTLP mapping. */
	struct opal_profile_mapping app2 = app;
	app2.has_inline_frames = true;
	struct opal_profile_mapping libc = {
		.start = 0x7f0000000000, .limit = 0x7f0000200000, .file_offset = 0x28000,
		.filename = "/usr/lib/libc.so.6", .file_id_htlhash = "ffeeddccbbaa99887766554433221100",
	};
	struct opal_profile_mapping kernel = {
		.start = 0xffffffff80000000, .limit = 0xffffffffffffffff, .filename = "[kernel.kallsyms]",
	};
	/* Never referenced by a sample: must not reach the dictionary. */
	struct opal_profile_mapping unused = { .start = 1, .limit = 2, .filename = "/unused" };
	struct opal_profile_line chain[2] = {
		{ .function = "inner_helper", .filename = "app.c", .line = 10 },
		{ .function = "compute", .filename = "app.c", .line = 20 },
	};
	struct opal_profile_line main_line = { .function = "main", .filename = "app.c", .line = 30 };
	struct opal_profile_line ksym = { .function = "do_syscall_64" };
	struct opal_profile_line nameless = { .function = NULL, .filename = "x.c", .line = 5 };

	uint32_t m_app = opal_profile_mapping(p, &app), m_app2 = opal_profile_mapping(p, &app2);
	uint32_t m_libc = opal_profile_mapping(p, &libc), m_k = opal_profile_mapping(p, &kernel);
	assert_int_equal(opal_profile_mapping(p, &unused), 5);
	uint32_t l_inline = opal_profile_location(p, m_app, 0x401234, OPAL_FRAME_NATIVE, chain, 2);
	uint32_t l_main = opal_profile_location(p, m_app, 0x401500, OPAL_FRAME_NATIVE, &main_line, 1);
	/* Same as l_main once mappings collapse: must share one OTLP location. */
	uint32_t l_main2 = opal_profile_location(p, m_app2, 0x401500, OPAL_FRAME_NATIVE, &main_line, 1);
	uint32_t l_libc = opal_profile_location(p, m_libc, 0x7f0000001234, OPAL_FRAME_NATIVE, NULL, 0);
	uint32_t l_k = opal_profile_location(p, m_k, 0xffffffff81000010, OPAL_FRAME_KERNEL, &ksym, 1);
	uint32_t l_nameless = opal_profile_location(p, m_libc, 0x7f0000002000, OPAL_FRAME_NATIVE,
						    &nameless, 1);
	assert_int_not_equal(l_main, l_main2);
	struct opal_profile_process p1 = { .pid = 100, .executable_name = "app",
					   .executable_path = "/usr/bin/app",
					   .container_id = "c0ffee", .host_name = "host1" };
	struct opal_profile_process p2 = { .pid = 200, .executable_name = "app",
					   .executable_path = "/usr/bin/app",
					   .service_name = "checkout", .host_name = "host1" };
	uint32_t pr1 = opal_profile_process(p, &p1), pr2 = opal_profile_process(p, &p2);
	uint32_t s1[3] = { l_k, l_inline, l_main };
	uint32_t s2[3] = { l_libc, l_nameless, l_main2 };
	uint32_t s3[2] = { l_inline, l_main2 };
	uint64_t ts[4] = { T0 + 4, T0 + 1, T0 + 3, T0 + 2 };
	uint32_t cpus[4] = { 0, 1, 0, 1 };
	assert_int_equal(opal_profile_add_sample(p, pr1, 101, "worker", s1, 3, ts, cpus, 4), 0);
	assert_int_equal(opal_profile_add_sample(p, pr1, 102, NULL, s2, 3, ts, cpus, 1), 0);
	assert_int_equal(opal_profile_add_sample(p, pr2, 201, "main", s3, 2, ts + 1, cpus + 1, 2), 0);
	opal_profile_set_time(p, T0, T0 + 5000000000ull);
	return p;
}

static const struct opal_otlp_kv extra[3] = {
	{ "deployment.environment.name", "prod" },
	{ "service.name", "must-not-override" },
	{ "host.name", "must-not-override" },
};

static Request *encode(const struct opal_profile *p)
{
	struct opal_otlp_options o = { .resource_attributes = extra, .n_resource_attributes = 3,
				       .scope_version = "1.2.3" };
	uint8_t *buf;
	size_t len;

	assert_int_equal(opal_otlp_encode(p, &o, &buf, &len), 0);
	Request *r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(NULL, len, buf);
	free(buf);
	assert_non_null(r);
	return r;
}

/* Serialized bytes of a message, for equality checks. */
static size_t packed(const ProtobufCMessage *m, uint8_t **out)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	*out = malloc(n ? n : 1);
	assert_non_null(*out);
	protobuf_c_message_pack(m, *out);
	return n;
}

/* Entry 0 packs to nothing (the zero value) and no two entries are equal. */
static void check_table(ProtobufCMessage **items, size_t n, const char *name)
{
	uint8_t **bytes = calloc(n, sizeof(*bytes));
	size_t *lens = calloc(n, sizeof(*lens));

	if (n == 0)
		fail_msg("%s: empty table, index 0 must hold the zero value", name);
	for (size_t i = 0; i < n; i++)
		lens[i] = packed(items[i], &bytes[i]);
	if (lens[0] != 0)
		fail_msg("%s[0] is not the zero value", name);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (lens[i] == lens[j] && memcmp(bytes[i], bytes[j], lens[i]) == 0)
				fail_msg("%s[%zu] duplicates %s[%zu]", name, j, name, i);
	for (size_t i = 0; i < n; i++)
		free(bytes[i]);
	free(bytes);
	free(lens);
}

static const char *S(const Dictionary *d, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < d->n_string_table);
	return d->string_table[i];
}

/* attribute_indices lists: every index valid, no key twice. */
static void check_attr_list(const Dictionary *d, const int32_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		assert_true(idx[i] > 0 && (size_t)idx[i] < d->n_attribute_table);
		for (size_t j = i + 1; j < n; j++)
			if (d->attribute_table[idx[i]]->key_strindex ==
			    d->attribute_table[idx[j]]->key_strindex)
				fail_msg("attribute key %s twice in one list",
					 S(d, d->attribute_table[idx[i]]->key_strindex));
	}
}

/* The attribute named `key` in a list, or NULL. */
static const KeyValueAndUnit *attr(const Dictionary *d, const int32_t *idx, size_t n,
				   const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(S(d, d->attribute_table[idx[i]]->key_strindex), key) == 0)
			return d->attribute_table[idx[i]];
	return NULL;
}

static const char *attr_str(const Dictionary *d, const int32_t *idx, size_t n, const char *key)
{
	const KeyValueAndUnit *a = attr(d, idx, n, key);
	if (!a)
		return NULL;
	assert_int_equal(a->value->value_case,
			 OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
	return a->value->string_value;
}

static const KeyValue *res_attr(const Opentelemetry__Proto__Resource__V1__Resource *r,
				const char *key)
{
	for (size_t i = 0; i < r->n_attributes; i++)
		if (strcmp(r->attributes[i]->key, key) == 0)
			return r->attributes[i];
	return NULL;
}

static void test_dictionary_rules(void **state)
{
	struct opal_profile *p = build_profile();
	Request *r = encode(p);
	const Dictionary *d = r->dictionary;

	assert_non_null(d);
	assert_true(d->n_string_table > 0);
	assert_string_equal(d->string_table[0], "");
	for (size_t i = 0; i < d->n_string_table; i++)
		for (size_t j = i + 1; j < d->n_string_table; j++)
			assert_string_not_equal(d->string_table[i], d->string_table[j]);
	check_table((ProtobufCMessage **)d->mapping_table, d->n_mapping_table, "mapping_table");
	check_table((ProtobufCMessage **)d->location_table, d->n_location_table, "location_table");
	check_table((ProtobufCMessage **)d->function_table, d->n_function_table, "function_table");
	check_table((ProtobufCMessage **)d->link_table, d->n_link_table, "link_table");
	check_table((ProtobufCMessage **)d->attribute_table, d->n_attribute_table, "attribute_table");
	check_table((ProtobufCMessage **)d->stack_table, d->n_stack_table, "stack_table");

	/* app and app2 collapse; the unused mapping is absent: zero + app +
	 * libc + kernel. Locations: zero + 5 distinct. */
	assert_int_equal(d->n_mapping_table, 4);
	assert_int_equal(d->n_location_table, 6);
	for (size_t i = 1; i < d->n_string_table; i++)
		assert_string_not_equal(d->string_table[i], "/unused");

	for (size_t i = 0; i < d->n_mapping_table; i++) {
		const Mapping *m = d->mapping_table[i];
		S(d, m->filename_strindex);
		check_attr_list(d, m->attribute_indices, m->n_attribute_indices);
	}
	for (size_t i = 0; i < d->n_location_table; i++) {
		const Location *l = d->location_table[i];
		assert_true(l->mapping_index >= 0 && (size_t)l->mapping_index < d->n_mapping_table);
		check_attr_list(d, l->attribute_indices, l->n_attribute_indices);
		for (size_t j = 0; j < l->n_lines; j++)
			assert_true(l->lines[j]->function_index > 0 &&
				    (size_t)l->lines[j]->function_index < d->n_function_table);
	}
	for (size_t i = 0; i < d->n_function_table; i++) {
		S(d, d->function_table[i]->name_strindex);
		S(d, d->function_table[i]->filename_strindex);
	}
	for (size_t i = 1; i < d->n_attribute_table; i++)
		assert_true(d->attribute_table[i]->key_strindex > 0);
	for (size_t i = 0; i < d->n_stack_table; i++)
		for (size_t j = 0; j < d->stack_table[i]->n_location_indices; j++) {
			int32_t li = d->stack_table[i]->location_indices[j];
			assert_true(li > 0 && (size_t)li < d->n_location_table);
		}

	/* Every attribute list of every profile and sample, and resources. */
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_profiles[i]->resource;
		for (size_t a = 0; a < res->n_attributes; a++)
			for (size_t b = a + 1; b < res->n_attributes; b++)
				assert_string_not_equal(res->attributes[a]->key, res->attributes[b]->key);
		const Profile *pr = r->resource_profiles[i]->scope_profiles[0]->profiles[0];
		check_attr_list(d, pr->attribute_indices, pr->n_attribute_indices);
		for (size_t s = 0; s < pr->n_samples; s++) {
			const Sample *sm = pr->samples[s];
			assert_true(sm->stack_index > 0 && (size_t)sm->stack_index < d->n_stack_table);
			assert_int_equal(sm->link_index, 0);
			check_attr_list(d, sm->attribute_indices, sm->n_attribute_indices);
		}
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r, NULL);
	opal_profile_free(p);
}

static const Profile *profile_of(const Request *r, int64_t pid)
{
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const KeyValue *kv = res_attr(r->resource_profiles[i]->resource, "process.pid");
		assert_non_null(kv);
		if (kv->value->int_value == pid) {
			assert_int_equal(r->resource_profiles[i]->n_scope_profiles, 1);
			assert_int_equal(r->resource_profiles[i]->scope_profiles[0]->n_profiles, 1);
			return r->resource_profiles[i]->scope_profiles[0]->profiles[0];
		}
	}
	fail_msg("no resource for pid %lld", (long long)pid);
	return NULL;
}

static void test_resources_and_samples(void **state)
{
	struct opal_profile *p = build_profile();
	Request *r = encode(p);
	const Dictionary *d = r->dictionary;

	assert_int_equal(r->n_resource_profiles, 2);
	const Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_profiles[0]->resource;
	assert_string_equal(res_attr(res, "service.name")->value->string_value, "unknown_service:app");
	assert_int_equal(res_attr(res, "process.pid")->value->int_value, 100);
	assert_string_equal(res_attr(res, "process.executable.name")->value->string_value, "app");
	assert_string_equal(res_attr(res, "process.executable.path")->value->string_value,
			    "/usr/bin/app");
	assert_string_equal(res_attr(res, "container.id")->value->string_value, "c0ffee");
	assert_string_equal(res_attr(res, "host.name")->value->string_value, "host1");
	assert_string_equal(res_attr(res, "deployment.environment.name")->value->string_value, "prod");
	res = r->resource_profiles[1]->resource;
	assert_string_equal(res_attr(res, "service.name")->value->string_value, "checkout");
	assert_null(res_attr(res, "container.id"));
	const Opentelemetry__Proto__Common__V1__InstrumentationScope *scope =
		r->resource_profiles[1]->scope_profiles[0]->scope;
	assert_string_equal(scope->name, "opal");
	assert_string_equal(scope->version, "1.2.3");

	const Profile *pr = profile_of(r, 100);
	assert_string_equal(S(d, pr->sample_type->type_strindex), "samples");
	assert_string_equal(S(d, pr->sample_type->unit_strindex), "count");
	assert_string_equal(S(d, pr->period_type->type_strindex), "cpu");
	assert_string_equal(S(d, pr->period_type->unit_strindex), "nanoseconds");
	assert_int_equal(pr->period, PERIOD);
	assert_int_equal(pr->time_unix_nano, T0);
	assert_int_equal(pr->duration_nano, 5000000000ull);
	assert_int_equal(pr->profile_id.len, 16);

	/* Thread 101 on cpus 0 and 1 -> 2 samples; thread 102 -> 1. */
	assert_int_equal(pr->n_samples, 3);
	size_t total = 0;
	for (size_t i = 0; i < pr->n_samples; i++) {
		const Sample *s = pr->samples[i];
		const KeyValueAndUnit *cpu = attr(d, s->attribute_indices, s->n_attribute_indices,
						  "cpu.logical_number");
		const KeyValueAndUnit *tid = attr(d, s->attribute_indices, s->n_attribute_indices,
						  "thread.id");
		assert_non_null(cpu);
		assert_non_null(tid);
		assert_int_equal(s->n_values, 0);
		total += s->n_timestamps_unix_nano;
		for (size_t t = 1; t < s->n_timestamps_unix_nano; t++)
			assert_true(s->timestamps_unix_nano[t - 1] <= s->timestamps_unix_nano[t]);
		if (tid->value->int_value == 101) {
			assert_string_equal(attr_str(d, s->attribute_indices, s->n_attribute_indices,
						     "thread.name"), "worker");
			assert_int_equal(s->n_timestamps_unix_nano, 2);
			if (cpu->value->int_value == 0) {
				assert_int_equal(s->timestamps_unix_nano[0], T0 + 3);
				assert_int_equal(s->timestamps_unix_nano[1], T0 + 4);
			} else {
				assert_int_equal(cpu->value->int_value, 1);
				assert_int_equal(s->timestamps_unix_nano[0], T0 + 1);
			}
			/* Stack leaf first: kernel, inline chain, main. */
			const Opentelemetry__Proto__Profiles__V1development__Stack *st =
				d->stack_table[s->stack_index];
			assert_int_equal(st->n_location_indices, 3);
			const Location *k = d->location_table[st->location_indices[0]];
			assert_string_equal(attr_str(d, k->attribute_indices, k->n_attribute_indices,
						     "profile.frame.type"), "kernel");
			assert_int_equal(k->address, 0xffffffff81000010);
			assert_string_equal(S(d, d->mapping_table[k->mapping_index]->filename_strindex),
					    "[kernel.kallsyms]");
			const Location *in = d->location_table[st->location_indices[1]];
			assert_string_equal(attr_str(d, in->attribute_indices, in->n_attribute_indices,
						     "profile.frame.type"), "native");
			assert_int_equal(in->n_lines, 2);
			assert_string_equal(S(d, d->function_table[in->lines[0]->function_index]->name_strindex),
					    "inner_helper");
			assert_string_equal(S(d, d->function_table[in->lines[1]->function_index]->name_strindex),
					    "compute");
			assert_int_equal(in->lines[0]->line, 10);
			const Mapping *m = d->mapping_table[in->mapping_index];
			assert_int_equal(m->memory_start, 0x400000);
			assert_string_equal(attr_str(d, m->attribute_indices, m->n_attribute_indices,
						     "process.executable.build_id.gnu"), "0123456789abcdef");
			assert_string_equal(attr_str(d, m->attribute_indices, m->n_attribute_indices,
						     "process.executable.build_id.htlhash"),
					    "00112233445566778899aabbccddeeff");
		} else {
			assert_int_equal(tid->value->int_value, 102);
			assert_null(attr(d, s->attribute_indices, s->n_attribute_indices, "thread.name"));
			const Opentelemetry__Proto__Profiles__V1development__Stack *st =
				d->stack_table[s->stack_index];
			/* Unsymbolized libc frame: mapping and runtime address kept. */
			const Location *l = d->location_table[st->location_indices[0]];
			assert_int_equal(l->n_lines, 0);
			assert_int_equal(l->address, 0x7f0000001234);
			const Mapping *m = d->mapping_table[l->mapping_index];
			assert_string_equal(S(d, m->filename_strindex), "/usr/lib/libc.so.6");
			assert_int_equal(m->file_offset, 0x28000);
			assert_null(attr(d, m->attribute_indices, m->n_attribute_indices,
					 "process.executable.build_id.gnu"));
			/* A line without a function name is named "??". */
			const Location *n = d->location_table[st->location_indices[1]];
			assert_string_equal(S(d, d->function_table[n->lines[0]->function_index]->name_strindex),
					    "??");
		}
	}
	assert_int_equal(total, 5);
	assert_int_equal(profile_of(r, 200)->n_samples, 2);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r, NULL);
	opal_profile_free(p);
}

static void test_empty_profile(void **state)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	Request *r = encode(p);

	assert_int_equal(r->n_resource_profiles, 0);
	/* Even empty, every table has its zero value. */
	assert_int_equal(r->dictionary->n_string_table, 1);
	assert_int_equal(r->dictionary->n_mapping_table, 1);
	assert_int_equal(r->dictionary->n_location_table, 1);
	assert_int_equal(r->dictionary->n_function_table, 1);
	assert_int_equal(r->dictionary->n_link_table, 1);
	assert_int_equal(r->dictionary->n_attribute_table, 1);
	assert_int_equal(r->dictionary->n_stack_table, 1);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r, NULL);
	opal_profile_free(p);
}

static void test_parse_resource_attributes(void **state)
{
	struct opal_otlp_kv *kv;
	size_t n;

	assert_int_equal(opal_otlp_parse_resource_attributes("a=b,c=d", &kv, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(kv[0].key, "a");
	assert_string_equal(kv[0].value, "b");
	assert_string_equal(kv[1].key, "c");
	assert_string_equal(kv[1].value, "d");
	opal_otlp_kv_free(kv, n);

	/* Whitespace around members is dropped; escapes are decoded after. */
	assert_int_equal(opal_otlp_parse_resource_attributes(
				 " k = v%20x , k%2E2=%2C%3D%25 ,,x=a=b,empty=", &kv, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(kv[0].key, "k");
	assert_string_equal(kv[0].value, "v x");
	assert_string_equal(kv[1].key, "k.2");
	assert_string_equal(kv[1].value, ",=%");
	assert_string_equal(kv[2].key, "x");
	assert_string_equal(kv[2].value, "a=b");
	assert_string_equal(kv[3].key, "empty");
	assert_string_equal(kv[3].value, "");
	opal_otlp_kv_free(kv, n);

	/* A repeated key keeps the last value at the first position. */
	assert_int_equal(opal_otlp_parse_resource_attributes("a=1,b=2,a=3", &kv, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(kv[0].key, "a");
	assert_string_equal(kv[0].value, "3");
	opal_otlp_kv_free(kv, n);

	assert_int_equal(opal_otlp_parse_resource_attributes("", &kv, &n), 0);
	assert_int_equal(n, 0);
	assert_null(kv);
	assert_int_equal(opal_otlp_parse_resource_attributes(NULL, &kv, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(opal_otlp_parse_resource_attributes(" , ", &kv, &n), 0);
	assert_int_equal(n, 0);

	/* Any error discards the whole value. */
	const char *bad[] = { "a=b,c", "=v", " =v", "a=%zz", "a=%4", "a=%", "a=%00", "%zz=v" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kv = (void *)1;
		n = 99;
		if (opal_otlp_parse_resource_attributes(bad[i], &kv, &n) != -EINVAL)
			fail_msg("\"%s\" was accepted", bad[i]);
		assert_null(kv);
		assert_int_equal(n, 0);
	}

	/* Bounds: pair count and decoded length. */
	char *many = malloc(OPAL_OTLP_MAX_RES_ATTRS * 16 + 32);
	size_t off = 0;
	for (int i = 0; i <= OPAL_OTLP_MAX_RES_ATTRS; i++)
		off += (size_t)sprintf(many + off, "k%d=v,", i);
	assert_int_equal(opal_otlp_parse_resource_attributes(many, &kv, &n), -E2BIG);
	free(many);
	char *longv = malloc(OPAL_OTLP_MAX_RES_ATTR_LEN + 16);
	strcpy(longv, "k=");
	memset(longv + 2, 'v', OPAL_OTLP_MAX_RES_ATTR_LEN + 1);
	longv[OPAL_OTLP_MAX_RES_ATTR_LEN + 3] = '\0';
	assert_int_equal(opal_otlp_parse_resource_attributes(longv, &kv, &n), -E2BIG);
	free(longv);
}

/* Repository root: the first ancestor of the test binary (or of the
 * working directory) holding the OTLP protos. */
static bool find_srcdir(char out[PATH_MAX])
{
	char exe[PATH_MAX], cwd[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	const char *starts[2] = { exe, cwd };
	for (int k = 0; k < 2; k++) {
		char dir[PATH_MAX], probe[PATH_MAX + 96];
		size_t len = strnlen(starts[k], sizeof(dir) - 1);
		memcpy(dir, starts[k], len);
		dir[len] = '\0';
		while (*dir) {
			snprintf(probe, sizeof(probe), "%s/proto/opentelemetry/proto/collector/"
				 "profiles/v1development/profiles_service.proto", dir);
			if (access(probe, R_OK) == 0) {
				memcpy(out, dir, strlen(dir) + 1);
				return true;
			}
			char *slash = strrchr(dir, '/');
			if (!slash)
				break;
			*slash = '\0';
		}
	}
	return false;
}

/* A Python frame: frame type "cpython", its function's first line. */
static void test_cpython_frame(void **state)
{
	struct opal_profile *p = opal_profile_new(PERIOD);
	struct opal_profile_mapping py = { .filename = OPAL_PROFILE_CPYTHON_MAPPING,
					   .has_functions = true };
	struct opal_profile_line l = { .function = "Worker.spin", .filename = "app.py", .line = 14,
				       .start_line = 12 };
	struct opal_profile_process pr = { .pid = 7, .executable_name = "python3.11" };
	uint64_t ts = T0 + 1;
	uint32_t cpu = 0;

	uint32_t loc = opal_profile_location(p, opal_profile_mapping(p, &py), 0, OPAL_FRAME_CPYTHON,
					     &l, 1);
	assert_int_equal(opal_profile_add_sample(p, opal_profile_process(p, &pr), 7, NULL, &loc, 1,
						 &ts, &cpu, 1), 0);
	Request *r = encode(p);
	const Dictionary *d = r->dictionary;
	const Location *pl = NULL;
	for (size_t i = 1; i < d->n_location_table; i++)
		pl = d->location_table[i];
	assert_non_null(pl);
	assert_string_equal(attr_str(d, pl->attribute_indices, pl->n_attribute_indices,
				     "profile.frame.type"), "cpython");
	assert_int_equal(pl->n_lines, 1);
	assert_int_equal(pl->lines[0]->line, 14);
	const Opentelemetry__Proto__Profiles__V1development__Function *fn =
		d->function_table[pl->lines[0]->function_index];
	assert_string_equal(S(d, fn->name_strindex), "Worker.spin");
	assert_string_equal(S(d, fn->filename_strindex), "app.py");
	assert_int_equal(fn->start_line, 12);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r, NULL);
	opal_profile_free(p);
}

static void test_protoc_decodes(void **state)
{
	char src[PATH_MAX], dir[64] = "/tmp/opal-test-otlp-XXXXXX", path[128];
	char cmd[PATH_MAX * 2 + 512];

	if (system("command -v protoc >/dev/null 2>&1") != 0)
		fail_msg("protoc not on PATH: scripts/install-deps.sh installs protobuf-compiler");
	if (!find_srcdir(src))
		fail_msg("proto/opentelemetry/... not found above the test binary or the working "
			 "directory: run the test from the source tree");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/profile.otlp.pb", dir);
	struct opal_profile *p = build_profile();
	assert_int_equal(opal_otlp_write(p, NULL, path), 0);
	opal_profile_free(p);
	snprintf(cmd, sizeof(cmd),
		 "protoc --decode "
		 "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest "
		 "-I'%s/proto' '%s/proto/opentelemetry/proto/collector/profiles/v1development/"
		 "profiles_service.proto' < '%s' > '%s/decoded.txt'", src, src, path, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "grep -q 'string_table: \"inner_helper\"' '%s/decoded.txt' && "
		 "grep -q 'key: \"service.name\"' '%s/decoded.txt'", dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dictionary_rules),
		cmocka_unit_test(test_resources_and_samples),
		cmocka_unit_test(test_empty_profile),
		cmocka_unit_test(test_cpython_frame),
		cmocka_unit_test(test_parse_resource_attributes),
		cmocka_unit_test(test_protoc_decodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
