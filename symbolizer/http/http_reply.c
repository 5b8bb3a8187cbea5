/* Queuing HTTP responses (http_reply.h). */
#include "http/http_reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"

enum MHD_Result opal_http_queue(struct MHD_Connection *c, unsigned status,
				struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	enum MHD_Result r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	opal_metrics_http(status);
	return r;
}

enum MHD_Result opal_http_send_buffer(struct MHD_Connection *c, unsigned status,
				      const char *content_type, void *buf, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	return opal_http_queue(c, status, resp);
}

enum MHD_Result opal_http_send_json(struct MHD_Connection *c, unsigned status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return MHD_NO;
	size_t len = strlen(text);
	/* jansson's allocator is malloc: MHD may free the text. */
	return opal_http_send_buffer(c, status, "application/json", text, len);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *header,
				  const char *value, const char *fmt, va_list ap)
{
	char reason[512];
	vsnprintf(reason, sizeof(reason), fmt, ap);
	json_t *j = json_pack("{s:s}", "error", reason);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return MHD_NO;
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (header)
		MHD_add_response_header(resp, header, value);
	return opal_http_queue(c, status, resp);
}

enum MHD_Result opal_http_send_error(struct MHD_Connection *c, unsigned status,
				     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = send_error(c, status, NULL, NULL, fmt, ap);
	va_end(ap);
	return r;
}

enum MHD_Result opal_http_send_error_with(struct MHD_Connection *c, unsigned status,
					  const char *header, const char *value,
					  const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = send_error(c, status, header, value, fmt, ap);
	va_end(ap);
	return r;
}
