/* POST /v1development/profiles (docs/otlp-receive.md): an OTLP/HTTP
 * profiles receiver. The body (protobuf, optionally gzip'd) is inflated
 * under the same bound as the body itself, decoded and checked
 * (profile/otlp_rewrite.h), its native Locations symbolized
 * (symbolize/sym_otlp.h), and the whole request handed to the forward
 * exporter's queue; the answer is OTLP's success, an empty
 * ExportProfilesServiceResponse; its pprof joins the recent profiles of
 * the flame graph. A request that fails any step is answered
 * with an error and nothing of it is forwarded. At most
 * OPAL_HTTP_OTLP_AT_ONCE requests are worked on at once (memory: each may
 * hold OPAL_OTLP_RX_MAX_MEMORY); a further one is answered 503 with
 * Retry-After, which OTLP exporters retry. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zlib.h>

#include "base/metrics.h"
#include "export/otlp_http.h"
#include "http/http_internal.h"
#include "profile/recent.h"
#include "shared/log.h"
#include "symbolize/sym_otlp.h"

/* True when header `name` of the request is `value` (case-insensitive),
 * parameters after ';' ignored; an absent header matches `absent`. */
static bool header_is(struct MHD_Connection *c, const char *name, const char *value, bool absent)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
	size_t n = strlen(value);

	if (!v || !*v)
		return absent;
	while (*v == ' ')
		v++;
	return !strncasecmp(v, value, n) && (!v[n] || v[n] == ';' || v[n] == ' ');
}

enum MHD_Result opal_http_otlp_headers(struct opal_http_server *h, struct MHD_Connection *c,
				       struct opal_http_req *r)
{
	if (!h->otlp_forward)
		return opal_http_send_error(c, 404, "OTLP receiving is off (--otlp-receive)");
	if (!header_is(c, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-protobuf", false)) {
		opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_UNSUPPORTED);
		return opal_http_send_error(c, 415, "send Content-Type: application/x-protobuf "
					    "(the JSON encoding is not accepted)");
	}
	r->gzip = header_is(c, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip", false);
	if (!r->gzip && !header_is(c, MHD_HTTP_HEADER_CONTENT_ENCODING, "identity", true)) {
		opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_UNSUPPORTED);
		return opal_http_send_error(c, 415, "Content-Encoding: gzip or none");
	}
	r->limit = h->otlp_max_bytes;
	return MHD_YES;
}

/* gzip (RFC 1952) `in` into *out (malloc'd), at most `max` bytes: the bound
 * holds before any byte beyond it is produced. Returns 0, -E2BIG, -EINVAL
 * (not gzip, corrupt, truncated, or bytes after the stream), -ENOMEM. */
static int gunzip_bounded(const uint8_t *in, size_t len, size_t max, uint8_t **out,
			  size_t *out_len)
{
	z_stream z = { 0 };
	size_t cap = len * 4 < max ? (len * 4 > 4096 ? len * 4 : 4096) : max, n = 0;
	uint8_t *buf = malloc(cap ? cap : 1);
	int rc = Z_OK, err = 0;

	if (!buf || inflateInit2(&z, 15 + 16) != Z_OK) {
		free(buf);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;   /* len is at most the body bound, far below 4 GiB */
	while (rc != Z_STREAM_END) {
		if (n == cap) {
			if (cap >= max) {
				err = -E2BIG;
				break;
			}
			size_t ncap = cap * 2 < max ? cap * 2 : max;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		size_t room = cap - n < (1u << 30) ? cap - n : (1u << 30);
		z.next_out = buf + n;
		z.avail_out = (uInt)room;
		rc = inflate(&z, Z_NO_FLUSH);
		n += room - z.avail_out;
		if (rc == Z_BUF_ERROR && z.avail_in == 0) {
			err = -EINVAL;   /* truncated */
			break;
		}
		if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
			err = rc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
			break;
		}
	}
	if (!err && z.avail_in)
		err = -EINVAL;   /* bytes after the gzip member */
	inflateEnd(&z);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*out_len = n;
	return 0;
}

static enum MHD_Result refuse(struct MHD_Connection *c, int err, const char *why)
{
	unsigned status = err == -E2BIG ? 413 : err == -ENOMEM ? 500 : 400;

	opal_metrics_otlp_receive(status == 413 ? OPAL_OTLP_RECEIVE_TOO_LARGE :
						  OPAL_OTLP_RECEIVE_MALFORMED);
	return opal_http_send_error(c, status, "%s", why);
}

/* The request's pprof among the recent profiles of GET /flamegraph, so the
 * page shows other agents' profiles too; named with run ID
 * OPAL_HTTP_OTLP_RUN_ID and a per-process sequence number. */
static void keep_recent(struct opal_http_server *h, uint8_t *gz, size_t len, uint64_t start,
			uint64_t end)
{
	static uint64_t seq;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if (!start)
		start = end = now_ns;
	int err = opal_recent_add(h->recent, gz, len, NULL, start, end, OPAL_HTTP_OTLP_RUN_ID,
				  __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED), now_ns);
	if (err < 0)
		opal_warn("otlp receive: profile not kept for the flame graph: %s", strerror(-err));
	free(gz);
}

/* Decode, symbolize, forward. */
static enum MHD_Result receive(struct opal_http_server *h, struct MHD_Connection *c,
			       const uint8_t *body, size_t len)
{
	struct opal_otlp_rx_stats st;
	struct opal_otlp_rx *rx;
	char why[256];
	uint8_t *out;
	size_t out_len;
	int err = opal_otlp_rx_decode(body, len, 0, &rx, why, sizeof(why));

	if (err < 0)
		return refuse(c, err, why);
	if ((err = opal_symbolize_otlp(h->sym, rx, &st)) < 0) {
		opal_otlp_rx_free(rx);
		return refuse(c, err, err == -E2BIG ? "symbolized request over its memory bound" :
						      "out of memory");
	}
	opal_metrics_otlp_locations(st.symbolized, st.unresolved, st.unknown_file, st.kept);
	err = opal_otlp_rx_encode(rx, &out, &out_len);
	if (err < 0) {
		opal_otlp_rx_free(rx);
		return refuse(c, err, "out of memory");
	}
	uint8_t *gz = NULL;
	size_t gz_len = 0;
	uint64_t start = 0, end = 0;
	if (h->recent && opal_otlp_rx_pprof(rx, &gz, &gz_len, &start, &end) < 0)
		opal_debug("otlp receive: no memory for the flame graph's copy");
	opal_otlp_rx_free(rx);
	err = opal_otlp_exporter_push(h->otlp_forward, out, out_len);
	opal_http_publish_forward(h);
	if (err < 0) {
		free(gz);
		opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_NOT_FORWARDED);
		return opal_http_send_error_with(c, 503, MHD_HTTP_HEADER_RETRY_AFTER, "5",
						 "the forward queue refused the request: %s",
						 strerror(-err));
	}
	opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_FORWARDED);
	if (gz)
		keep_recent(h, gz, gz_len, start, end);
	/* An empty ExportProfilesServiceResponse: full success. */
	return opal_http_send_buffer(c, 200, "application/x-protobuf", NULL, 0);
}

enum MHD_Result opal_http_otlp_profiles(struct opal_http_server *h, struct MHD_Connection *c,
					struct opal_http_req *r)
{
	pthread_mutex_lock(&h->otlp_lock);
	bool busy = h->otlp_busy >= OPAL_HTTP_OTLP_AT_ONCE;
	if (!busy)
		h->otlp_busy++;
	pthread_mutex_unlock(&h->otlp_lock);
	if (busy) {
		opal_metrics_otlp_receive(OPAL_OTLP_RECEIVE_BUSY);
		return opal_http_send_error_with(c, 503, MHD_HTTP_HEADER_RETRY_AFTER, "1",
						 "%d OTLP requests are being symbolized",
						 OPAL_HTTP_OTLP_AT_ONCE);
	}
	const uint8_t *body = (const uint8_t *)r->body;
	size_t len = r->len;
	uint8_t *plain = NULL;
	enum MHD_Result ret;
	int err = r->gzip ? gunzip_bounded(body, len, h->otlp_max_bytes, &plain, &len) : 0;

	if (err < 0) {
		char why[128] = "body is not valid gzip";
		if (err == -E2BIG)
			snprintf(why, sizeof(why), "gzip body inflates over %llu bytes",
				 (unsigned long long)h->otlp_max_bytes);
		ret = refuse(c, err, why);
	} else {
		ret = receive(h, c, plain ? plain : body, len);
	}
	free(plain);
	pthread_mutex_lock(&h->otlp_lock);
	h->otlp_busy--;
	pthread_mutex_unlock(&h->otlp_lock);
	return ret;
}

void opal_http_publish_forward(struct opal_http_server *h)
{
	struct opal_export_stats st;

	if (!h->otlp_forward)
		return;
	opal_otlp_exporter_stats(h->otlp_forward, &st);
	opal_metrics_exporter(OPAL_EXPORTER_OTLP_FORWARD, &st);
}
