/* libFuzzer target: the OTEP 4719 process context decoder
 * (symbolizer/profile/process_context.h) on arbitrary payloads, as a
 * process may publish them. It must accept with every string within its
 * bound and valid UTF-8, or refuse; never crash, leak or read outside the
 * input.
 *
 * fuzz-sources: symbolizer/profile/process_context.c and the generated
 *   process_context.pb-c.c
 * Seeds: the payload of tests/fixtures/correlation/pctx (seeds.list) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/profile/process_context.h"

static void check(const char *s)
{
	if (!s)
		return;
	size_t len = strlen(s);
	if (len > OPAL_PCTX_MAX_STRLEN || !opal_utf8_valid(s, len))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct opal_process_context pc;

	if (opal_process_context_parse(data, size, &pc) != 0)
		return 0;
	if (pc.n_resource > OPAL_PCTX_MAX_ATTRS || pc.n_keys > OPAL_PCTX_MAX_KEYS)
		abort();
	for (size_t i = 0; i < pc.n_resource; i++) {
		check(pc.resource[i].key);
		check(pc.resource[i].value);
	}
	for (size_t i = 0; i < pc.n_keys; i++)
		check(pc.keys[i]);
	check(pc.schema_version);
	opal_process_context_free(&pc);
	return 0;
}
