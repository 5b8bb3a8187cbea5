/* libFuzzer target: the HTTP API's JSON request parsers
 * (symbolizer/http/http_json.h) on arbitrary bodies. Every parser must either
 * accept with fields in range or refuse with a reason, never crash, leak
 * or read past the body.
 *
 * fuzz-sources: symbolizer/http/http_json.c symbolizer/debuginfo/debuginfo_store.c
 *   (only opal_di_id_valid is reached; the rest links) plus what it links:
 *   see tests/fuzz/build_debuginfo.sh
 * Seeds: tests/fuzz/seeds/json/ */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/http/http_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256];
	struct opal_di_request r;
	for (int with_size = 0; with_size < 2; with_size++) {
		why[0] = '\0';
		if (opal_json_parse_di_request((const char *)data, size, with_size, &r, why,
					       sizeof(why)) == 0) {
			if (!opal_di_id_valid(r.id, r.id_type) || strlen(r.hash) != 64 ||
			    (unsigned)r.type >= OPAL_DI_N_TYPES)
				abort();
		} else if (!why[0]) {
			abort();   /* a refusal always says why */
		}
	}
	char id[OPAL_DI_ID_HEX_MAX + 1], uid[OPAL_DI_UPLOAD_ID_LEN + 1];
	enum opal_di_type t;
	if (opal_json_parse_mark_finished((const char *)data, size, id, sizeof(id), &t, uid,
					  sizeof(uid), why, sizeof(why)) == 0 &&
	    strlen(uid) != OPAL_DI_UPLOAD_ID_LEN)
		abort();
	struct opal_sym_request sr;
	int rc = opal_json_parse_symbolize((const char *)data, size, 64, &sr, why, sizeof(why));
	if (rc == 0) {
		if (sr.total_addrs > 64)
			abort();
		size_t total = 0;
		for (size_t i = 0; i < sr.n; i++)
			total += sr.entries[i].n_addrs;
		if (total != sr.total_addrs)
			abort();
		opal_json_sym_request_free(&sr);
	}
	(void)opal_json_depth_ok((const char *)data, size, OPAL_JSON_MAX_DEPTH);
	return 0;
}
