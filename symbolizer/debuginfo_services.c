/* Assembly of the debug-info services (debuginfo_services.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo_sources.h"
#include "debuginfo/debuginfo_store.h"
#include "debuginfo_services.h"
#include "http/http_client.h"
#include "http/http_server.h"
#include "http/upstream.h"
#include "shared/log.h"
#include "symbolize/sym_dwfl.h"
#include "symbolize/symbolize.h"

#define MAX_PEM (1u << 20)
#define MAX_INVALIDATE 1024   /* cached files of one build ID invalidated at once */

struct opal_services {
	struct opal_symbolizer *sym;
	struct opal_debuginfo_store *store;
	struct opal_http_server *http;
	struct opal_upstream *upstream;
	char *listen, *token, *cert, *key;
	char *upstream_url, *upstream_token, *upstream_ca, *debug_root;
	uint64_t max_upload, expiry_s;
	time_t expired_at;                /* last opal_services_tick expiry */
	bool upload_debuginfo, http_required;
	char tmp_dir[PATH_MAX];
};

/* An upload became the stored file: what the symbolizer cached from
 * worse data goes (in memory, in SQLite, and open sessions). */
static void on_stored(void *arg, const char *id, enum opal_di_id_type id_type,
		      enum opal_di_type type, enum opal_debug_quality q)
{
	struct opal_services *s = arg;
	uint8_t bid[OPAL_BUILD_ID_MAX];
	opal_file_id fid;
	if (type == OPAL_DI_SOURCES)
		return;
	if (id_type == OPAL_DI_ID_HTLHASH) {
		enum opal_debug_quality old;
		if (opal_file_id_from_hex(id, &fid) < 0)
			return;
		opal_symbolizer_debug_data_changed(s->sym, NULL, 0, &fid, q);
		if (opal_symbolizer_file_quality(s->sym, &fid, &old) == 0 && old < q)
			opal_symbolizer_invalidate_file(s->sym, &fid);
		return;
	}
	int n = opal_hex_decode(id, bid, sizeof(bid));
	if (n <= 0)
		return;
	int k = opal_symbolizer_debug_data_changed(s->sym, bid, (size_t)n, NULL, q);
	opal_file_id *ids = calloc(MAX_INVALIDATE, sizeof(*ids));
	int m = ids ? opal_debuginfo_store_files_below(s->store, bid, (size_t)n, q, ids,
						       MAX_INVALIDATE) : 0;
	for (int i = 0; i < m; i++)
		opal_symbolizer_invalidate_file(s->sym, &ids[i]);
	free(ids);
	opal_info("debuginfo: build ID %s now has %s: %d open and %d cached files invalidated",
		  id, opal_di_quality_name(q), k, m > 0 ? m : 0);
}

static char *secret(const char *path, size_t max, bool trim, const char *what)
{
	char *v = opal_http_read_secret(path, max, trim);
	if (!v)
		opal_err("%s %s: %s", what, path,
			 errno == EINVAL ? "empty or not a single token" : strerror(errno));
	return v;
}

static char *copy(const char *s, bool *fail)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*fail = true;
	return d;
}

struct opal_services *opal_services_new(const struct opal_services_config *c)
{
	struct opal_services *s = calloc(1, sizeof(*s));
	bool fail = false;
	if (!s)
		return NULL;
	bool http = c->http_listen && *c->http_listen && strcmp(c->http_listen, "none") != 0;
	if ((!!c->tls_cert) != (!!c->tls_key)) {
		opal_err("--tls-cert and --tls-key go together");
		goto fail;
	}
	if (c->upload_debuginfo && !c->upstream) {
		opal_err("--upload-debuginfo needs --upstream URL");
		goto fail;
	}
	s->listen = http ? copy(c->http_listen, &fail) : NULL;
	s->upstream_url = copy(c->upstream, &fail);
	s->debug_root = copy(c->debug_root, &fail);
	s->max_upload = c->max_upload_bytes;
	s->expiry_s = c->upload_expiry_s;
	s->upload_debuginfo = c->upload_debuginfo;
	s->http_required = c->http_required;
	if (fail)
		goto fail;
	if (c->token_file && !(s->token = secret(c->token_file, OPAL_HTTP_MAX_TOKEN, true,
						 "--token-file")))
		goto fail;
	if (c->tls_cert && (!(s->cert = secret(c->tls_cert, MAX_PEM, false, "--tls-cert")) ||
			    !(s->key = secret(c->tls_key, MAX_PEM, false, "--tls-key"))))
		goto fail;
	if (c->upstream_ca && !(s->upstream_ca = secret(c->upstream_ca, MAX_PEM, false,
							 "--upstream-cacert")))
		goto fail;
	if (c->upstream_token_file &&
	    !(s->upstream_token = secret(c->upstream_token_file, OPAL_HTTP_MAX_TOKEN, true,
					 "--upstream-token-file")))
		goto fail;
	if (c->upstream && opal_http_client_global_init() < 0) {
		opal_err("libcurl initialisation failed");
		goto fail;
	}
	return s;
fail:
	opal_services_stop(s);
	return NULL;
}

int opal_services_open(struct opal_services *s, struct opal_symbolizer *sym,
		       const char *state_dir, const char *db_path)
{
	char dir[PATH_MAX], cache[PATH_MAX];
	s->sym = sym;
	snprintf(dir, sizeof(dir), "%s/debuginfo", state_dir);
	struct opal_debuginfo_store_config sc = { .dir = dir, .db_path = db_path,
						  .max_upload_bytes = s->max_upload,
						  .expiry_s = s->expiry_s, .rank = opal_dwfl_rank };
	s->store = opal_debuginfo_store_open(&sc);
	if (!s->store)
		return -errno;
	opal_debuginfo_store_set_hooks(s->store, on_stored, opal_sym_sources_elsewhere, s);
	snprintf(s->tmp_dir, sizeof(s->tmp_dir), "%.4000s/tmp", dir);

	snprintf(cache, sizeof(cache), "%s/debuginfod", state_dir);
	struct opal_sym_sources_config src = { .store = s->store, .debug_root = s->debug_root,
					       .debuginfod_cache = cache };
	int r = opal_sym_sources_init(&src);
	if (r < 0)
		opal_warn("debuginfod cache %s unusable (%s): debuginfod is not asked", cache,
			  strerror(-r));
	return 0;
}

int opal_services_start(struct opal_services *s, struct opal_recent *recent,
			struct opal_recent *recent_offcpu, struct opal_otlp_exporter *otlp_forward)
{
	if (s->listen) {
		struct opal_http_config hc = { .listen = s->listen, .token = s->token,
					       .tls_cert_pem = s->cert, .tls_key_pem = s->key,
					       .sym = s->sym, .store = s->store, .recent = recent,
					       .recent_offcpu = recent_offcpu,
					       .otlp_forward = otlp_forward,
					       .max_upload_bytes = s->max_upload };
		s->http = opal_http_start(&hc);
		if (!s->http && s->http_required)
			return -errno;
		if (!s->http)
			opal_err("no HTTP API (give --http-listen HOST:PORT, or none)");
	}
	if (s->upstream_url) {
		struct opal_upstream_config uc = { .url = s->upstream_url, .token = s->upstream_token,
						   .ca_pem = s->upstream_ca,
						   .upload_debuginfo = s->upload_debuginfo,
						   .tmp_dir = s->tmp_dir };
		s->upstream = opal_upstream_start(&uc, s->sym);
		if (!s->upstream)
			return -errno;
	}
	return 0;
}

int opal_services_settle(struct opal_services *s)
{
	return s->upstream ? opal_upstream_settle(s->upstream, OPAL_UPSTREAM_FIRST_WAIT_MS) : 0;
}

uint16_t opal_services_http_port(const struct opal_services *s)
{
	return s->http ? opal_http_port(s->http) : 0;
}

void opal_services_tick(struct opal_services *s, time_t now)
{
	if (!s || !s->store || now - s->expired_at < OPAL_SERVICES_EXPIRE_PERIOD_S)
		return;
	s->expired_at = now;
	opal_debuginfo_store_expire(s->store);
}

void opal_services_stop(struct opal_services *s)
{
	if (!s)
		return;
	opal_upstream_stop(s->upstream);
	opal_http_stop(s->http);
	opal_sym_sources_reset();
	opal_debuginfo_store_close(s->store);
	free(s->listen);
	free(s->token);
	free(s->cert);
	free(s->key);
	free(s->upstream_url);
	free(s->upstream_token);
	free(s->upstream_ca);
	free(s->debug_root);
	free(s);
}
