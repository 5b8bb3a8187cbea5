/* libFuzzer target: the OTLP profiles receiver's decode, index checks,
 * rewrite and encode (symbolizer/profile/otlp_rewrite.h) on arbitrary
 * bodies, with a resolver that knows every file and answers each address
 * with 0 to 3 frames (or an error) derived from it. A decoded request must
 * rewrite within its bounds or refuse, and a rewritten one must encode into
 * a request that decodes and passes the checks again with the same
 * Locations, and its pprof copy (the flame graph's) is built or refused
 * for memory; nothing may crash, leak or read past the body.
 * Seeds: tests/fuzz/seed_otlp_receive.sh (requests shaped like the OTel
 * eBPF profiler's, encoded by protoc). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "symbolizer/profile/otlp_rewrite.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Req;

static int find_file(void *arg, const char *htl, const char *gnu, opal_file_id *key)
{
	(void)arg;
	memset(key, 0, sizeof(*key));
	return htl && strlen(htl) == 1 ? -ENOENT : 0;   /* some files unknown */
}

static int symbolize(void *arg, const opal_file_id *key, uint64_t addr,
		     struct opal_sym_result *out)
{
	static const char *const names[] = { "f", "g", NULL, "f" };
	(void)arg;
	(void)key;
	memset(out, 0, sizeof(*out));
	if ((addr & 15) == 15)
		return -EIO;
	size_t n = addr & 3;
	if (!n)
		return 0;
	out->frames = calloc(n, sizeof(*out->frames));
	if (!out->frames)
		return -ENOMEM;
	out->n = n;
	for (size_t i = 0; i < n; i++) {
		const char *name = names[(addr >> (2 + i)) & 3];
		out->frames[i].function = name ? strdup(name) : NULL;
		out->frames[i].file = (addr >> 8) & 1 ? strdup("/src/x.c") : NULL;
		out->frames[i].line = (uint32_t)(addr >> 4) & 0xff;
		out->frames[i].inlined = i + 1 < n;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct opal_otlp_resolver r = { find_file, symbolize, NULL };
	struct opal_otlp_rx *rx, *again;
	struct opal_otlp_rx_stats st;
	char why[256] = "";
	uint8_t *out;
	size_t len;

	/* A small budget, so that the fuzzer also reaches its refusals. */
	int err = opal_otlp_rx_decode(data, size, 4u << 20, &rx, why, sizeof(why));
	if (err < 0) {
		if (!why[0] || (err != -EINVAL && err != -E2BIG && err != -ENOMEM))
			abort();   /* a refusal always says why */
		return 0;
	}
	const Req *q = opal_otlp_rx_request(rx);
	size_t n_loc = q->dictionary ? q->dictionary->n_location_table : 0;
	err = opal_otlp_rx_rewrite(rx, &r, &st);
	if (err < 0) {
		if (err != -E2BIG && err != -ENOMEM)
			abort();
		opal_otlp_rx_free(rx);
		return 0;
	}
	if (st.symbolized + st.unresolved + st.unknown_file + st.kept != n_loc)
		abort();
	uint8_t *gz;
	size_t gz_len;
	uint64_t start, end;
	if (opal_otlp_rx_pprof(rx, &gz, &gz_len, &start, &end) == 0) {
		if (end < start)
			abort();
		free(gz);
	}
	if (opal_otlp_rx_encode(rx, &out, &len) < 0)
		abort();
	opal_otlp_rx_free(rx);
	if (opal_otlp_rx_decode(out, len, 0, &again, why, sizeof(why)) < 0) {
		fprintf(stderr, "rewritten request refused: %s\n", why);
		abort();
	}
	q = opal_otlp_rx_request(again);
	if ((q->dictionary ? q->dictionary->n_location_table : 0) != n_loc)
		abort();
	opal_otlp_rx_free(again);
	free(out);
	return 0;
}
