/* The upload flow over HTTP (docs/http-api.md, "Uploads"): JSON in and
 * out around the debuginfo store (debuginfo_store.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "http/http_internal.h"
#include "http/http_json.h"
#include "shared/log.h"

static enum MHD_Result store_failed(struct MHD_Connection *c, int err)
{
	opal_warn("http: debuginfo store: %s", strerror(-err));
	if (err == -ENOSPC || err == -EDQUOT)
		return opal_http_send_error(c, 507, "no space left in the symbolizer's state "
					    "folder");
	return opal_http_send_error(c, 500, "debuginfo store failure: %s", strerror(-err));
}

static enum MHD_Result refusal(struct MHD_Connection *c, const struct opal_di_answer *a)
{
	return opal_http_send_error(c, (unsigned)a->status, "%s", a->reason);
}

enum MHD_Result opal_http_should_initiate(struct opal_http_server *h, struct MHD_Connection *c,
					  struct opal_http_req *r)
{
	struct opal_di_request rq;
	struct opal_di_answer a;
	char why[256];
	if (opal_json_parse_di_request(r->body, r->len, false, &rq, why, sizeof(why)) < 0)
		return opal_http_send_error(c, 400, "%s", why);
	int err = opal_debuginfo_should_initiate(h->store, &rq, &a);
	if (err < 0)
		return store_failed(c, err);
	if (a.status != 200)
		return refusal(c, &a);
	return opal_http_send_json(c, 200, json_pack("{s:b,s:s}", "should_initiate_upload",
						       (int)a.yes, "reason", a.reason));
}

enum MHD_Result opal_http_initiate(struct opal_http_server *h, struct MHD_Connection *c,
				   struct opal_http_req *r)
{
	struct opal_di_request rq;
	struct opal_di_answer a;
	char why[256], url[96];
	if (opal_json_parse_di_request(r->body, r->len, true, &rq, why, sizeof(why)) < 0)
		return opal_http_send_error(c, 400, "%s", why);
	int err = opal_debuginfo_initiate(h->store, &rq, &a);
	if (err < 0)
		return store_failed(c, err);
	if (a.status != 200)
		return refusal(c, &a);
	snprintf(url, sizeof(url), "/debuginfo/v1/upload/%s", a.upload_id);
	opal_info("http: upload %s started for %s %s %s (%llu bytes)", a.upload_id,
		  opal_di_type_name(rq.type), opal_di_id_type_name(rq.id_type), rq.id,
		  (unsigned long long)rq.size);
	return opal_http_send_json(c, 200, json_pack("{s:s,s:s,s:s}", "upload_id", a.upload_id,
						       "upload_strategy", "put", "upload_url", url));
}

enum MHD_Result opal_http_mark_finished(struct opal_http_server *h, struct MHD_Connection *c,
					struct opal_http_req *r)
{
	char id[OPAL_DI_ID_HEX_MAX + 1], upload_id[OPAL_DI_UPLOAD_ID_LEN + 1], why[256];
	enum opal_di_type type;
	struct opal_di_answer a;
	if (opal_json_parse_mark_finished(r->body, r->len, id, sizeof(id), &type, upload_id,
					  sizeof(upload_id), why, sizeof(why)) < 0)
		return opal_http_send_error(c, 400, "%s", why);
	int err = opal_debuginfo_mark_finished(h->store, id, type, upload_id, &a);
	if (err < 0)
		return store_failed(c, err);
	if (a.status != 200)
		return refusal(c, &a);
	return opal_http_send_json(c, 200, json_pack("{s:s,s:s}", "state", "uploaded", "reason",
						       a.reason));
}

enum MHD_Result opal_http_upload_start(struct opal_http_server *h, struct MHD_Connection *c,
				       struct opal_http_req *r, const char *url)
{
	const char *id = url + strlen("/debuginfo/v1/upload/");
	if (strlen(id) != OPAL_DI_UPLOAD_ID_LEN || !opal_is_lower_hex(id, OPAL_DI_UPLOAD_ID_LEN))
		return opal_http_send_error(c, 400, "malformed upload ID: want %d lowercase hex "
					    "digits", OPAL_DI_UPLOAD_ID_LEN);
	snprintf(r->upload_id, sizeof(r->upload_id), "%s", id);
	int err = opal_debuginfo_upload_begin(h->store, id, &r->upload);
	switch (err) {
	case 0:
		break;
	case -ENOENT:
		return opal_http_send_error(c, 404, "unknown or expired upload %s", id);
	case -EALREADY:
		return opal_http_send_error(c, 409, "upload %s was already received", id);
	case -EBUSY:
		return opal_http_send_error(c, 409, "upload %s is being received by another "
					    "request, or too many uploads run at once", id);
	default:
		return store_failed(c, err);
	}
	uint64_t want = opal_debuginfo_upload_expected(r->upload);
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long cl = v ? strtoull(v, NULL, 10) : 0;
	if (v && cl > want) {
		opal_debuginfo_upload_abort(r->upload);
		r->upload = NULL;
		opal_metrics_upload(OPAL_UPLOAD_TOO_LARGE);
		return opal_http_send_error(c, 413, "body of %llu bytes; %llu were announced", cl,
					    (unsigned long long)want);
	}
	r->limit = opal_debuginfo_store_max_upload(h->store);
	return MHD_YES;
}

void opal_http_upload_data(struct opal_http_req *r, const char *data, size_t size)
{
	if (!r->upload || r->upload_err) {
		r->discarded += size;
		return;
	}
	int err = opal_debuginfo_upload_write(r->upload, data, size);
	if (err < 0) {
		r->upload_err = err;
		r->discarded += size;
		/* The partial body goes now; the upload may be PUT again. */
		opal_debuginfo_upload_abort(r->upload);
		r->upload = NULL;
	}
}

enum MHD_Result opal_http_upload_end(struct opal_http_server *h, struct MHD_Connection *c,
				     struct opal_http_req *r)
{
	(void)h;
	if (r->upload_err == -EFBIG) {
		opal_metrics_upload(OPAL_UPLOAD_TOO_LARGE);
		return opal_http_send_error(c, 413, "body larger than announced or than the limit");
	}
	if (r->upload_err)
		return opal_http_send_error(c, 500, "storing the body failed: %s",
					    strerror(-r->upload_err));
	if (!r->upload)
		return opal_http_send_error(c, 500, "upload state lost");
	struct opal_di_answer a;
	struct opal_di_upload *u = r->upload;
	r->upload = NULL;   /* finish frees it */
	int err = opal_debuginfo_upload_finish(u, &a);
	if (err < 0)
		return store_failed(c, err);
	if (a.status != 200)
		return refusal(c, &a);
	return opal_http_send_json(c, 200, json_pack("{s:s,s:s,s:b,s:s,s:s}", "upload_id",
						       r->upload_id, "state", "uploaded", "stored",
						       (int)a.replaced, "quality",
						       opal_di_quality_name(a.quality), "reason",
						       a.reason));
}
