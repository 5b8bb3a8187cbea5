/* Unit tests of the OTEP 4719 process context: the collector's copy
 * (collector/proc/procctx.c: mapping names, header checks, the read
 * protocol on this process's own memory, a torn update) and the
 * symbolizer's decoding (symbolizer/profile/process_context.c: Resource,
 * thread-local key map, bounds, bad bytes). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/proc/procctx.h"
#include "symbolizer/profile/process_context.h"
#include "opentelemetry/proto/processcontext/v1development/process_context.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

struct header {
	char signature[8];
	uint32_t version, size;
	uint64_t published_ns, payload;
};

static void test_find(void **state)
{
	struct opal_map_entry m[4] = {
		{ .start = 0x1000, .limit = 0x2000, .readable = true, .path = "/usr/lib/libc.so.6" },
		{ .start = 0x3000, .limit = 0x4000, .readable = false, .path = "[anon:OTEL_CTX]" },
		{ .start = 0x5000, .limit = 0x6000, .readable = true, .path = "/memfd:OTEL_CTX" },
		{ .start = 0x7000, .limit = 0x8000, .readable = true, .path = "[anon_shmem:OTEL_CTX]" },
	};

	(void)state;
	assert_int_equal(opal_procctx_find(m, 4), 0x5000);
	assert_int_equal(opal_procctx_find(m + 3, 1), 0x7000);
	assert_int_equal(opal_procctx_find(m, 2), 0);
}

static void test_header(void **state)
{
	struct header h = { .version = 2, .size = 10, .published_ns = 5, .payload = 0x1234 };
	uint64_t pub, addr;
	uint32_t size;

	(void)state;
	memcpy(h.signature, "OTEL_CTX", 8);
	assert_int_equal(opal_procctx_parse_header((uint8_t *)&h, &pub, &addr, &size), 0);
	assert_int_equal(pub, 5);
	assert_int_equal(addr, 0x1234);
	assert_int_equal(size, 10);
	h.published_ns = 0;
	assert_int_equal(opal_procctx_parse_header((uint8_t *)&h, &pub, &addr, &size), -EAGAIN);
	h.published_ns = 5;
	h.size = OPAL_PROCCTX_MAX_PAYLOAD + 1;
	assert_int_equal(opal_procctx_parse_header((uint8_t *)&h, &pub, &addr, &size), -E2BIG);
	h.size = 10;
	h.version = 1;
	assert_int_equal(opal_procctx_parse_header((uint8_t *)&h, &pub, &addr, &size), -ENOENT);
	h.version = 2;
	h.signature[7] = 'x';
	assert_int_equal(opal_procctx_parse_header((uint8_t *)&h, &pub, &addr, &size), -ENOENT);
}

/* The read protocol on this process: a copy, the cache key, an update,
 * and an update in progress. */
static void test_read_self(void **state)
{
	static uint8_t payload[64] = "first", payload2[64] = "second payload";
	static struct header h = { .version = 2, .size = 5, .published_ns = 100 };
	struct opal_procctx c = { .header = (uint64_t)(uintptr_t)&h };

	(void)state;
	memcpy(h.signature, "OTEL_CTX", 8);
	h.payload = (uint64_t)(uintptr_t)payload;
	assert_int_equal(opal_procctx_read(getpid(), &c), 1);
	assert_int_equal(c.len, 5);
	assert_memory_equal(c.payload, "first", 5);
	assert_int_equal(c.published_ns, 100);
	assert_int_equal(opal_procctx_read(getpid(), &c), 0);   /* unchanged */
	h.payload = (uint64_t)(uintptr_t)payload2;
	h.size = 14;
	h.published_ns = 200;
	assert_int_equal(opal_procctx_read(getpid(), &c), 1);
	assert_memory_equal(c.payload, "second payload", 14);
	/* torn: an update under way is never read; the last copy stays */
	h.published_ns = 0;
	memset(payload2, 0xff, sizeof(payload2));
	c.published_ns = 1;   /* as if it had changed */
	assert_int_equal(opal_procctx_read(getpid(), &c), -EAGAIN);
	assert_memory_equal(c.payload, "second payload", 14);
	/* a payload pointer into nothing */
	h.published_ns = 300;
	h.payload = 8;
	assert_int_equal(opal_procctx_read(getpid(), &c), -EFAULT);
	opal_procctx_clear(&c);
	assert_int_equal(opal_procctx_read(getpid(), &c), -ENOENT);
}

static KeyValue *kv_str(const char *key, const char *value)
{
	KeyValue *kv = calloc(1, sizeof(*kv));
	AnyValue *v = calloc(1, sizeof(*v));

	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(v);
	kv->key = (char *)key;
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	v->string_value = (char *)value;
	kv->value = v;
	return kv;
}

static void test_parse(void **state)
{
	Opentelemetry__Proto__Processcontext__V1development__ProcessContext m;
	Opentelemetry__Proto__Resource__V1__Resource r;
	Opentelemetry__Proto__Common__V1__ArrayValue arr;
	AnyValue map_value, *keys[3];
	KeyValue *res[4], *extra[2];
	struct opal_process_context pc;
	uint8_t buf[1024];

	(void)state;
	opentelemetry__proto__processcontext__v1development__process_context__init(&m);
	opentelemetry__proto__resource__v1__resource__init(&r);
	res[0] = kv_str("service.name", "checkout");
	res[1] = kv_str("service.version", "1.2.3");
	res[2] = kv_str("service.name", "duplicate");
	res[3] = kv_str("bad.utf8", "\xc3\x28");
	r.attributes = res;
	r.n_attributes = 4;
	m.resource = &r;
	opentelemetry__proto__common__v1__array_value__init(&arr);
	for (int i = 0; i < 3; i++) {
		keys[i] = calloc(1, sizeof(*keys[i]));
		opentelemetry__proto__common__v1__any_value__init(keys[i]);
		keys[i]->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	}
	keys[0]->string_value = "http.route";
	keys[1]->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	keys[2]->string_value = "user.id";
	arr.values = keys;
	arr.n_values = 3;
	opentelemetry__proto__common__v1__any_value__init(&map_value);
	map_value.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
	map_value.array_value = &arr;
	extra[0] = kv_str("threadlocal.schema_version", "tls_v1");
	extra[1] = kv_str("threadlocal.attribute_key_map", "");
	extra[1]->value = &map_value;
	m.attributes = extra;
	m.n_attributes = 2;
	size_t len = opentelemetry__proto__processcontext__v1development__process_context__pack(&m,
												     buf);

	assert_int_equal(opal_process_context_parse(buf, len, &pc), 0);
	assert_int_equal(pc.n_resource, 2);
	assert_string_equal(pc.resource[0].key, "service.name");
	assert_string_equal(pc.resource[0].value, "checkout");
	assert_string_equal(pc.resource[1].key, "service.version");
	assert_string_equal(pc.schema_version, "tls_v1");
	assert_int_equal(pc.n_keys, 3);
	assert_string_equal(pc.keys[0], "http.route");
	assert_null(pc.keys[1]);
	assert_string_equal(pc.keys[2], "user.id");
	opal_process_context_free(&pc);

	/* not a ProcessContext; over the bound */
	static const uint8_t junk[] = { 0x0a, 0x7f, 0x01 };
	assert_int_equal(opal_process_context_parse(junk, sizeof(junk), &pc), -EINVAL);
	assert_int_equal(opal_process_context_parse(buf, OPAL_PCTX_MAX_BYTES + 1, &pc), -E2BIG);
	/* empty: a context with nothing in it */
	assert_int_equal(opal_process_context_parse(buf, 0, &pc), 0);
	assert_int_equal(pc.n_resource, 0);
	opal_process_context_free(&pc);

	for (int i = 0; i < 4; i++) {
		free(res[i]->value);
		free(res[i]);
	}
	free(extra[0]->value);
	free(extra[0]);
	free(extra[1]);
	for (int i = 0; i < 3; i++)
		free(keys[i]);
}

static void test_thread_attrs(void **state)
{
	char *keys[3] = { "http.route", NULL, "user.id" };
	struct opal_process_context pc = { .keys = keys, .n_keys = 3 };
	struct opal_profile_attr out[4];
	char buf[64];
	/* route=/a, an unnamed key, a key outside the map, user.id=x, route
	 * again (the last wins), bad UTF-8, then a cut entry */
	static const uint8_t attrs[] = { 0, 2, '/', 'a', 1, 1, 'q', 7, 1, 'z', 2, 1, 'x',
					 0, 2, '/', 'b', 2, 1, 0xff, 0, 5, 'a' };
	size_t n;

	(void)state;
	n = opal_thread_attrs_parse(attrs, sizeof(attrs), &pc, buf, out, 4);
	assert_int_equal(n, 2);
	assert_string_equal(out[0].key, "http.route");
	assert_string_equal(out[0].value, "/b");
	assert_string_equal(out[1].key, "user.id");
	assert_string_equal(out[1].value, "x");
	assert_int_equal(opal_thread_attrs_parse(attrs, sizeof(attrs), &pc, buf, out, 1), 1);
	pc.n_keys = 0;
	assert_int_equal(opal_thread_attrs_parse(attrs, sizeof(attrs), &pc, buf, out, 4), 0);
}

static void test_utf8(void **state)
{
	(void)state;
	assert_true(opal_utf8_valid("abc", 3));
	assert_true(opal_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
	assert_false(opal_utf8_valid("\xc0\xaf", 2));           /* overlong */
	assert_false(opal_utf8_valid("\xed\xa0\x80", 3));       /* surrogate */
	assert_false(opal_utf8_valid("\xe2\x82", 2));           /* cut */
	assert_false(opal_utf8_valid("a\0b", 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_read_self),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_thread_attrs),
		cmocka_unit_test(test_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
