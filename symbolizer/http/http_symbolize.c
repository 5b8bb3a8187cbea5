/* POST /symbolize/v1 (docs/http-api.md, "Remote symbolization"): ELF
 * virtual addresses of files named by build ID or htlhash file ID, each
 * answered with its inline chain, innermost frame first. IDs the
 * symbolizer cannot find answer with empty frames. The answer is bounded
 * by OPAL_HTTP_MAX_ADDRESSES addresses of at most OPAL_SYM_MAX_FRAMES
 * frames each. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "http/http_internal.h"
#include "http/http_json.h"
#include "shared/log.h"
#include "symbolize/symbolize.h"

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *frames_json(const struct opal_sym_result *res)
{
	json_t *frames = json_array();
	for (size_t i = 0; frames && i < res->n; i++) {
		const struct opal_sym_frame *f = &res->frames[i];
		json_t *o = json_object();
		if (!o) {
			json_decref(frames);
			return NULL;
		}
		json_object_set_new(o, "function", str_or_null(f->function));
		json_object_set_new(o, "file", str_or_null(f->file));
		json_object_set_new(o, "line", f->line ? json_integer(f->line) : json_null());
		json_object_set_new(o, "inlined", json_boolean(f->inlined));
		json_array_append_new(frames, o);
	}
	return frames;
}

/* The "locations" of one request entry. */
static json_t *locations_json(struct opal_http_server *h, const struct opal_sym_request_entry *e)
{
	opal_file_id key;
	int r;
	if (e->by_file_id) {
		r = opal_file_id_from_hex(e->id, &key);
		if (r == 0)
			r = opal_symbolizer_ensure_file_id(h->sym, &key);
	} else {
		r = opal_symbolizer_ensure_build_id(h->sym, e->id, &key);
	}
	bool known = r == 0;
	json_t *locs = json_array();
	for (size_t k = 0; locs && k < e->n_addrs; k++) {
		struct opal_sym_result res = { 0 };
		char addr[24];
		snprintf(addr, sizeof(addr), "0x%" PRIx64, e->addrs[k]);
		if (known && opal_symbolize_native(h->sym, &key, e->addrs[k], false, &res) < 0)
			memset(&res, 0, sizeof(res));
		json_t *frames = frames_json(&res);
		opal_sym_result_free(&res);
		json_t *loc = frames ? json_pack("{s:s,s:o}", "address", addr, "frames", frames) : NULL;
		if (!loc) {
			json_decref(locs);
			return NULL;
		}
		json_array_append_new(locs, loc);
	}
	return locs;
}

enum MHD_Result opal_http_symbolize(struct opal_http_server *h, struct MHD_Connection *c,
				    struct opal_http_req *r)
{
	struct opal_sym_request rq;
	char why[256];
	int err = opal_json_parse_symbolize(r->body, r->len, OPAL_HTTP_MAX_ADDRESSES, &rq, why,
					    sizeof(why));
	if (err == -E2BIG)
		return opal_http_send_error(c, 413, "%s", why);
	if (err == -ENOMEM)
		return opal_http_send_error(c, 500, "out of memory");
	if (err < 0)
		return opal_http_send_error(c, 400, "%s", why);
	json_t *results = json_array();
	for (size_t i = 0; results && i < rq.n; i++) {
		const struct opal_sym_request_entry *e = &rq.entries[i];
		json_t *locs = locations_json(h, e);
		json_t *one = locs ? json_pack("{s:s,s:o}", e->by_file_id ? "file_id" : "build_id",
					       e->id, "locations", locs) : NULL;
		if (!one) {
			json_decref(results);
			results = NULL;
			break;
		}
		json_array_append_new(results, one);
	}
	opal_json_sym_request_free(&rq);
	opal_symbolizer_flush(h->sym);   /* the request's new SQLite rows, in one transaction */
	if (!results)
		return opal_http_send_error(c, 500, "out of memory");
	return opal_http_send_json(c, 200, json_pack("{s:o}", "results", results));
}
