/* opal-symbolizer configuration (sym_config.h). */
#include "sym_config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export/otlp_http.h"
#include "http/http_server.h"
#include "shared/log.h"

#define F(field) offsetof(struct opal_sym_config, o.field)

static const char *const export_kinds[] = { "otlp", "otlp-logs", "pprof", NULL };
static const char *const compressions[] = { "gzip", "none", NULL };

/* Defaults are written as on the command line. */
static const struct opal_opt opts[] = {
	{ .name = "socket", .type = OPAL_OPT_STRING, .offset = F(socket),
	  .def = "/run/opal/collector.sock", .arg = "PATH",
	  .help = "collector socket to listen on (unless systemd passes it)" },
	{ .name = "state-dir", .type = OPAL_OPT_STRING, .offset = F(state_dir),
	  .def = "/var/lib/opal", .arg = "DIR",
	  .help = "SQLite cache, ledger, debug-info store, recent profiles (recent/); "
		  "created with its parents (mode 0700)" },
	{ .name = "out-dir", .type = OPAL_OPT_STRING, .offset = F(out_dir),
	  .def = "/var/lib/opal/out", .arg = "DIR",
	  .help = "profile files: intervals/, profile.pb.gz, profile.otlp.pb; created with "
		  "its parents (mode 0755)" },
	{ .name = "keep-intervals", .type = OPAL_OPT_UINT, .offset = F(keep_intervals),
	  .def = "100", .arg = "N", .help = "interval file pairs kept in intervals/, 0 = all",
	  .max = 1000000, .reloadable = true },
	{ .name = "whole-run", .type = OPAL_OPT_BOOL, .offset = F(whole_run),
	  .help = "also write profile.pb.gz and profile.otlp.pb of the whole run" },
	{ .name = "user", .type = OPAL_OPT_STRING, .offset = F(user), .arg = "NAME",
	  .help = "when started as root: bind, then drop to NAME (required as root)" },
	{ .name = "output-group", .type = OPAL_OPT_STRING, .offset = F(output_group), .arg = "NAME",
	  .help = "make --out-dir and its profiles readable by group NAME (mode 2750, files "
		  "0640); otherwise they are the symbolizer's user's alone (0700, 0600)" },
	{ .name = "allow-uid", .type = OPAL_OPT_LIST, .offset = F(allow_uid), .arg = "UID",
	  .help = "accept collectors of this uid besides 0 (repeatable, at most 16)" },
	{ .name = "max-open-files", .type = OPAL_OPT_UINT, .offset = F(max_open_files),
	  .def = "512", .arg = "N", .help = "libdwfl handles kept open, least recently used "
					   "closed first (0 counts as 1)", .max = 1000000 },
	{ .name = "max-debug-memory", .type = OPAL_OPT_SIZE, .offset = F(max_debug_memory),
	  .def = "1g", .arg = "BYTES",
	  .help = "memory of the open libdwfl sessions together (debug sections, line "
		  "tables), least recently used closed first; 0 = no bound",
	  .max = 1ull << 44, .reloadable = true },
	{ .name = "max-decompress", .type = OPAL_OPT_SIZE, .offset = F(max_decompress),
	  .def = "512m", .arg = "BYTES",
	  .help = "decompressed bytes one ELF file's compressed sections (zlib, zstd, "
		  ".zdebug, .gnu_debugdata xz) may declare; a file over it is refused before "
		  "anything is decompressed (docs/deployment.md)",
	  .min = 1u << 20, .max = 1ull << 44, .reloadable = true },
	{ .name = "max-index-memory", .type = OPAL_OPT_SIZE, .offset = F(max_index_memory),
	  .def = "256m", .arg = "BYTES",
	  .help = "memory of the DWARF address indexes of all files together, least recently "
		  "used units evicted first (rebuilt when needed)",
	  .min = 1u << 20, .max = 1ull << 44, .reloadable = true },
	{ .name = "verbose", .type = OPAL_OPT_BOOL, .offset = F(verbose), .help = "debug logging",
	  .reloadable = true },
	{ .name = "http-listen", .type = OPAL_OPT_STRING, .offset = F(http_listen),
	  .def = OPAL_HTTP_DEFAULT_LISTEN, .arg = "HOST:PORT",
	  .help = "HTTP API (uploads, debuginfod, /symbolize/v1, /metrics, /flamegraph); "
		  "\"none\" disables it; port 0 picks one" },
	{ .name = "token-file", .type = OPAL_OPT_STRING, .offset = F(token_file), .arg = "FILE",
	  .help = "bearer token required by the API's write endpoints" },
	{ .name = "tls-cert", .type = OPAL_OPT_STRING, .offset = F(tls_cert), .arg = "FILE",
	  .help = "serve HTTPS with this PEM certificate (with --tls-key)" },
	{ .name = "tls-key", .type = OPAL_OPT_STRING, .offset = F(tls_key), .arg = "FILE",
	  .help = "PEM private key of --tls-cert" },
	{ .name = "max-upload-bytes", .type = OPAL_OPT_SIZE, .offset = F(max_upload_bytes),
	  .def = "1g", .arg = "BYTES", .help = "largest debug-info upload",
	  .min = 1, .max = 1ull << 40 },
	{ .name = "upload-expiry", .type = OPAL_OPT_UINT, .offset = F(upload_expiry),
	  .def = "900", .arg = "SECONDS", .help = "an unfinished upload expires after this",
	  .min = 1, .max = 1ull << 40 },
	{ .name = "upstream", .type = OPAL_OPT_STRING, .offset = F(upstream), .arg = "URL",
	  .help = "central symbolizer asked about poorly resolved addresses" },
	{ .name = "upstream-token-file", .type = OPAL_OPT_STRING, .offset = F(upstream_token_file),
	  .arg = "FILE", .help = "bearer token of --upstream" },
	{ .name = "upstream-cacert", .type = OPAL_OPT_STRING, .offset = F(upstream_cacert),
	  .arg = "FILE", .help = "CA bundle to trust for an https --upstream" },
	{ .name = "upload-debuginfo", .type = OPAL_OPT_BOOL, .offset = F(upload_debuginfo),
	  .help = "upload new files' debug data to --upstream" },
	{ .name = "export", .type = OPAL_OPT_LIST, .offset = F(exports), .def = "pprof,otlp",
	  .arg = "LIST",
	  .help = "pprof: interval files in intervals/; otlp: OTLP/HTTP profiles (when an "
		  "endpoint is set); otlp-logs: each interval's pprof as an OTLP log record",
	  .choices = export_kinds, .reloadable = true },
	{ .name = "otlp-endpoint", .type = OPAL_OPT_STRING, .offset = F(otlp_endpoint),
	  .env = "OTEL_EXPORTER_OTLP_ENDPOINT", .arg = "URL",
	  .help = "OTLP/HTTP base URL; /v1development/profiles or /v1/logs is appended",
	  .env_note = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT and OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, "
		      "full URLs used as is, beat it and the config file; the flag beats all",
	  .reloadable = true },
	{ .name = "otlp-headers", .type = OPAL_OPT_STRING, .offset = F(otlp_headers),
	  .env = "OTEL_EXPORTER_OTLP_HEADERS", .arg = "K=V,...",
	  .help = "extra HTTP headers of OTLP requests",
	  .env_note = "percent-decoded; OTEL_EXPORTER_OTLP_PROFILES_HEADERS and "
		      "OTEL_EXPORTER_OTLP_LOGS_HEADERS beat it for their exporter",
	  .reloadable = true, .secret = true },
	{ .name = "otlp-timeout", .type = OPAL_OPT_UINT, .offset = F(otlp_timeout_ms),
	  .def = "10000", .env = "OTEL_EXPORTER_OTLP_TIMEOUT", .arg = "MS",
	  .help = "time for one OTLP request, connection included", .min = 1, .max = 600000,
	  .env_note = "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT and OTEL_EXPORTER_OTLP_LOGS_TIMEOUT "
		      "beat it for their exporter",
	  .reloadable = true },
	{ .name = "otlp-compression", .type = OPAL_OPT_STRING, .offset = F(otlp_compression),
	  .def = "gzip", .env = "OTEL_EXPORTER_OTLP_COMPRESSION", .arg = "NAME",
	  .help = "Content-Encoding of OTLP requests", .choices = compressions,
	  .env_note = "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION and "
		      "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION beat it for their exporter",
	  .reloadable = true },
	{ .name = "otlp-queue-bytes", .type = OPAL_OPT_SIZE, .offset = F(otlp_queue_bytes),
	  .def = "64m", .arg = "BYTES",
	  .help = "bound of each exporter's queue (uncompressed); the oldest requests go first",
	  .min = 64u << 10, .max = 4ull << 30, .reloadable = true },
	{ .name = "resource-attributes", .type = OPAL_OPT_STRING, .offset = F(resource_attributes),
	  .env = "OTEL_RESOURCE_ATTRIBUTES", .arg = "K=V,...",
	  .help = "added to every OTLP resource (files and export)",
	  .env_note = "percent-decoded", .reloadable = true },
	{ .name = "service-name", .type = OPAL_OPT_STRING, .offset = F(service_name),
	  .env = "OTEL_SERVICE_NAME", .arg = "NAME",
	  .help = "service.name of the otlp-logs resource (profiles carry each process's own)",
	  .reloadable = true },
	{ .name = "otlp-receive", .type = OPAL_OPT_BOOL, .offset = F(otlp_receive),
	  .help = "serve POST /v1development/profiles: OTLP profiles from other agents are "
		  "symbolized and forwarded (--otlp-forward)" },
	{ .name = "otlp-forward", .type = OPAL_OPT_STRING, .offset = F(otlp_forward),
	  .arg = "URL",
	  .help = "full URL the received profiles go to (default: the OTLP profiles endpoint, "
		  "--otlp-endpoint and its variables); headers, timeout and compression are "
		  "the profiles exporter's" },
	{ .name = "flamegraph-keep", .type = OPAL_OPT_UINT, .offset = F(flamegraph_keep),
	  .def = "720", .arg = "N",
	  .help = "recent interval profiles kept in state-dir/recent for GET /flamegraph; "
		  "0 keeps none", .max = 100000, .reloadable = true },
	{ .name = "flamegraph-max-bytes", .type = OPAL_OPT_SIZE, .offset = F(flamegraph_max_bytes),
	  .def = "256m", .arg = "BYTES", .help = "bound on the bytes of those recent profiles",
	  .min = 1u << 20, .max = 64ull << 30, .reloadable = true },
	{ .name = "flamegraph-max-age", .type = OPAL_OPT_UINT, .offset = F(flamegraph_max_age_s),
	  .def = "3600", .arg = "SECONDS",
	  .help = "recent profiles older than this are deleted; the longest window served",
	  .min = 60, .max = 7 * 86400, .reloadable = true },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static const struct opal_config_spec spec = {
	.prog = "opal-symbolizer",
	.usage = "Receives raw stacks from opal-collector, symbolizes them and writes and exports "
		 "profiles.\nSIGHUP re-reads the configuration: options marked \"reloadable\" take "
		 "effect,\nothers need a restart. DEBUGINFOD_URLS names debuginfod servers asked "
		 "for missing\ndebug info (cached in the state folder).",
	.opts = opts,
	.n_opts = N_OPTS,
	.config_env = OPAL_SYMBOLIZER_CONFIG_ENV,
};

const struct opal_config_spec *opal_sym_config_spec(void)
{
	return &spec;
}

static size_t index_of(const char *name)
{
	for (size_t i = 0; i < N_OPTS; i++)
		if (!strcmp(opts[i].name, name))
			return i;
	abort();   /* a name missing from the table is a programming error */
}

static void free_derived(struct opal_sym_config *c)
{
	free(c->profiles_url);
	free(c->logs_url);
	free(c->forward_url);
	c->forward_url = NULL;
	for (int s = 0; s < 2; s++) {
		free(c->signal[s].headers);
		c->signal[s] = (struct opal_sym_signal){ 0 };
	}
	opal_otlp_kv_free(c->res_attrs, c->n_res_attrs);
	c->profiles_url = c->logs_url = NULL;
	c->res_attrs = NULL;
	c->n_res_attrs = 0;
}

/* A user id: decimal, below (uid_t)-1 (which means "no change" to the
 * kernel's set*id calls). */
static int parse_uid(const char *s, uid_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v >= (uid_t)-1)
		return -EINVAL;
	*out = (uid_t)v;
	return 0;
}

static int resolve(struct opal_sym_config *c, enum opal_otlp_signal sig, char **url, char *why,
		   size_t why_len)
{
	size_t i = index_of("otlp-endpoint");
	int err = opal_otlp_http_resolve_url(sig, c->o.otlp_endpoint, c->src[i], url);

	if (err == -EINVAL)
		snprintf(why, why_len, "the OTLP %s endpoint is not an http:// or https:// URL "
			 "(--otlp-endpoint, OTEL_EXPORTER_OTLP_%sENDPOINT or "
			 "OTEL_EXPORTER_OTLP_ENDPOINT)",
			 sig == OPAL_OTLP_SIGNAL_LOGS ? "logs" : "profiles",
			 sig == OPAL_OTLP_SIGNAL_LOGS ? "LOGS_" : "PROFILES_");
	else if (err < 0)
		snprintf(why, why_len, "out of memory");
	return err;
}

/* The signal's own OTel variable `var` when it is set and option `opt`
 * does not come from the command line; else NULL. */
static const char *signal_env(const struct opal_sym_config *c, const char *opt, const char *var)
{
	const char *v = getenv(var);

	return v && *v && c->src[index_of(opt)] != OPAL_SRC_FLAG ? v : NULL;
}

/* Fills c->signal[sig] (struct opal_sym_signal). */
static int derive_signal(struct opal_sym_config *c, enum opal_otlp_signal sig, char *why,
			 size_t why_len)
{
	const char *name = sig == OPAL_OTLP_SIGNAL_LOGS ? "LOGS" : "PROFILES";
	struct opal_sym_signal *s = &c->signal[sig];
	struct opal_otlp_kv *hdr = NULL;
	size_t n_hdr = 0;
	char var[64];
	const char *v;
	int err;

	snprintf(var, sizeof(var), "OTEL_EXPORTER_OTLP_%s_HEADERS", name);
	if ((v = signal_env(c, "otlp-headers", var))) {
		err = opal_otlp_http_parse_headers(v, &hdr, &n_hdr);
		opal_otlp_kv_free(hdr, n_hdr);
		if (err < 0) {
			snprintf(why, why_len, "%s is malformed: expected name=value,name=value "
				 "(HTTP token names, no control bytes), at most %d: %s", var,
				 OPAL_OTLP_MAX_HEADERS, strerror(-err));
			return err;
		}
	} else {
		v = c->o.otlp_headers;
	}
	if (v && !(s->headers = strdup(v))) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}

	snprintf(var, sizeof(var), "OTEL_EXPORTER_OTLP_%s_TIMEOUT", name);
	s->timeout_ms = c->o.otlp_timeout_ms;
	if ((v = signal_env(c, "otlp-timeout", var))) {
		const struct opal_opt *o = &opts[index_of("otlp-timeout")];
		char *end;
		errno = 0;
		unsigned long long ms = strtoull(v, &end, 10);
		if (*v < '0' || *v > '9' || *end || errno || ms < o->min || ms > o->max) {
			snprintf(why, why_len, "%s: '%s' is not a whole number of milliseconds "
				 "from %llu to %llu", var, v, (unsigned long long)o->min,
				 (unsigned long long)o->max);
			return -EINVAL;
		}
		s->timeout_ms = ms;
	}

	snprintf(var, sizeof(var), "OTEL_EXPORTER_OTLP_%s_COMPRESSION", name);
	if ((v = signal_env(c, "otlp-compression", var))) {
		if (strcmp(v, "gzip") != 0 && strcmp(v, "none") != 0) {
			snprintf(why, why_len, "%s: '%s' is not one of gzip, none", var, v);
			return -EINVAL;
		}
	} else {
		v = c->o.otlp_compression;
	}
	s->gzip = strcmp(v, "gzip") == 0;
	return 0;
}

/* c->forward_url: --otlp-forward as it is, else the profiles endpoint. */
static int derive_forward(struct opal_sym_config *c, char *why, size_t why_len)
{
	const char *f = c->o.otlp_forward;

	if (f && *f) {
		if (strncmp(f, "http://", 7) != 0 && strncmp(f, "https://", 8) != 0) {
			snprintf(why, why_len, "otlp-forward: '%s' is not an http:// or https:// URL",
				 f);
			return -EINVAL;
		}
		if (!(c->forward_url = strdup(f))) {
			snprintf(why, why_len, "out of memory");
			return -ENOMEM;
		}
		return 0;
	}
	int err = resolve(c, OPAL_OTLP_SIGNAL_PROFILES, &c->forward_url, why, why_len);
	if (err == 0 && !c->forward_url) {
		snprintf(why, why_len, "otlp-receive: nowhere to forward to: give --otlp-forward URL "
			 "or an OTLP endpoint (--otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT, "
			 "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT)");
		return -EINVAL;
	}
	return err;
}

/* Computes the derived values from c->o and c->src. On error they are
 * released and `why` holds the reason. */
static int derive(struct opal_sym_config *c, char *why, size_t why_len)
{
	struct opal_otlp_kv *hdr = NULL;
	size_t n_hdr = 0;
	int err;

	free_derived(c);
	c->n_allow = 0;
	if (c->o.allow_uid.n > OPAL_SERVER_MAX_ALLOW) {
		snprintf(why, why_len, "allow-uid: more than %d uids", OPAL_SERVER_MAX_ALLOW);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->o.allow_uid.n; i++) {
		if (parse_uid(c->o.allow_uid.v[i], &c->allow_uids[c->n_allow]) < 0) {
			snprintf(why, why_len, "allow-uid: '%s' is not a user id",
				 c->o.allow_uid.v[i]);
			return -EINVAL;
		}
		c->n_allow++;
	}
	c->http_required = c->src[index_of("http-listen")] != OPAL_SRC_DEFAULT;
	c->write_intervals = opal_strlist_has(&c->o.exports, "pprof");
	err = opal_otlp_parse_resource_attributes(c->o.resource_attributes, &c->res_attrs,
						  &c->n_res_attrs);
	if (err < 0) {
		snprintf(why, why_len, "resource-attributes (OTEL_RESOURCE_ATTRIBUTES) is malformed: "
			 "expected key=value,key=value with %%XX escapes: %s", strerror(-err));
		goto fail;
	}
	err = opal_otlp_http_parse_headers(c->o.otlp_headers, &hdr, &n_hdr);
	opal_otlp_kv_free(hdr, n_hdr);
	if (err < 0) {
		snprintf(why, why_len, "otlp-headers (OTEL_EXPORTER_OTLP_HEADERS) is malformed: "
			 "expected name=value,name=value (HTTP token names, no control bytes), "
			 "at most %d: %s", OPAL_OTLP_MAX_HEADERS, strerror(-err));
		goto fail;
	}
	if ((err = derive_signal(c, OPAL_OTLP_SIGNAL_PROFILES, why, why_len)) < 0 ||
	    (err = derive_signal(c, OPAL_OTLP_SIGNAL_LOGS, why, why_len)) < 0)
		goto fail;
	if (opal_strlist_has(&c->o.exports, "otlp") &&
	    (err = resolve(c, OPAL_OTLP_SIGNAL_PROFILES, &c->profiles_url, why, why_len)) < 0)
		goto fail;
	if (opal_strlist_has(&c->o.exports, "otlp-logs") &&
	    (err = resolve(c, OPAL_OTLP_SIGNAL_LOGS, &c->logs_url, why, why_len)) < 0)
		goto fail;
	if (c->o.otlp_receive && (err = derive_forward(c, why, why_len)) < 0)
		goto fail;
	return 0;
fail:
	free_derived(c);
	return err;
}

int opal_sym_config_load(int argc, char *const *argv, struct opal_sym_config *c, char *why,
			 size_t why_len)
{
	int r;

	memset(c, 0, sizeof(*c));
	r = opal_config_load(&spec, argc, argv, c, c->src, why, why_len);
	if (r != 0)
		return r;
	if ((r = derive(c, why, why_len)) < 0)
		opal_config_free(&spec, c);
	return r;
}

void opal_sym_config_free(struct opal_sym_config *c)
{
	opal_config_free(&spec, c);
	free_derived(c);
}

int opal_sym_config_reload(int argc, char *const *argv, struct opal_sym_config *cur,
			   struct opal_config_plan *plan)
{
	struct opal_sym_config *next = malloc(sizeof(*next));
	char why[512], was[256], now[256];
	int r;

	plan->n_applied = plan->n_restart = 0;
	if (!next)
		return -ENOMEM;
	r = opal_sym_config_load(argc, argv, next, why, sizeof(why));
	if (r != 0) {
		if (r > 0)
			r = -EINVAL;   /* --help cannot appear: argv is the running one */
		opal_err("SIGHUP: configuration not reloaded, keeping the running one: %s", why);
		free(next);
		return r;
	}
	opal_config_apply_reload(&spec, cur, cur->src, next, next->src, plan);
	/* Derived values follow the options now in effect; load checked the
	 * same values already, so this cannot fail but for memory. */
	if (plan->n_applied && (r = derive(cur, why, sizeof(why))) < 0)
		opal_err("SIGHUP: %s", why);
	for (size_t i = 0; i < plan->n_applied; i++) {
		/* after the swap, `next` holds the old value */
		if (plan->applied[i]->secret) {
			opal_info("SIGHUP: %s: changed (value not logged)", plan->applied[i]->name);
			continue;
		}
		opal_config_value_text(plan->applied[i], next, was, sizeof(was));
		opal_config_value_text(plan->applied[i], cur, now, sizeof(now));
		opal_info("SIGHUP: %s: %s -> %s", plan->applied[i]->name, was, now);
	}
	for (size_t i = 0; i < plan->n_restart; i++)
		opal_warn("SIGHUP: %s changed in the configuration: needs a restart (the running "
			  "value stays)", plan->restart[i]->name);
	if (!plan->n_applied && !plan->n_restart)
		opal_info("SIGHUP: nothing to reload: configuration unchanged");
	opal_sym_config_free(next);
	free(next);
	return r;
}

bool opal_sym_config_exporters_changed(const struct opal_config_plan *plan)
{
	static const char *const names[] = { "export", "otlp-endpoint", "otlp-headers",
					     "otlp-timeout", "otlp-compression", "otlp-queue-bytes",
					     "resource-attributes", "service-name" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (opal_config_plan_applied(plan, names[i]))
			return true;
	return false;
}
