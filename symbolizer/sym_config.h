/* Configuration of opal-symbolizer: one option table (shared/config.h) for
 * flags, OpenTelemetry environment variables, the JSON config file
 * (--config FILE or OPAL_SYMBOLIZER_CONFIG) and --help, plus the values
 * derived from it (uids, parsed resource attributes, OTLP URLs), checked
 * before anything runs or, on SIGHUP, before anything changes. */
#ifndef OPAL_SYM_CONFIG_H
#define OPAL_SYM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "collector_link.h"
#include "export/otlp_http.h"
#include "profile/otlp.h"
#include "shared/config.h"

#define OPAL_SYMBOLIZER_CONFIG_ENV "OPAL_SYMBOLIZER_CONFIG"

/* Values as loaded (field per option; see the table in sym_config.c). */
struct opal_sym_options {
	char *socket, *state_dir, *out_dir, *user, *output_group;
	uint64_t keep_intervals, max_open_files, max_debug_memory, max_decompress, max_index_memory;
	bool whole_run, verbose;
	struct opal_strlist allow_uid;
	char *http_listen, *token_file, *tls_cert, *tls_key;
	uint64_t max_upload_bytes, upload_expiry;
	char *upstream, *upstream_token_file, *upstream_cacert;
	bool upload_debuginfo;
	struct opal_strlist exports;                    /* "otlp", "otlp-logs", "pprof" */
	char *otlp_endpoint, *otlp_headers, *otlp_compression;
	uint64_t otlp_timeout_ms, otlp_queue_bytes;
	char *resource_attributes, *service_name;
	uint64_t flamegraph_keep, flamegraph_max_bytes, flamegraph_max_age_s;
	bool otlp_receive;
	char *otlp_forward;
};

/* An exporter's request settings for one signal: the signal's own
 * OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS / _TIMEOUT / _COMPRESSION when set,
 * else otlp-headers / otlp-timeout / otlp-compression as loaded; a
 * command-line flag beats both (the OTel SDK's order, as for the
 * endpoint). */
struct opal_sym_signal {
	char *headers;                       /* NULL: none */
	uint64_t timeout_ms;
	bool gzip;
};

struct opal_sym_config {
	struct opal_sym_options o;
	enum opal_config_source src[OPAL_CONFIG_MAX_OPTS];   /* per option of the table */
	/* derived, refreshed by load and reload */
	uid_t allow_uids[OPAL_SERVER_MAX_ALLOW];
	size_t n_allow;
	bool http_required;                  /* http-listen set by flag, env or file */
	bool write_intervals;                /* "pprof" in exports */
	char *profiles_url, *logs_url;       /* resolved when the exporter is on; else NULL */
	char *forward_url;                   /* with otlp-receive: where received profiles go */
	struct opal_sym_signal signal[2];    /* by enum opal_otlp_signal */
	struct opal_otlp_kv *res_attrs;      /* parsed resource-attributes */
	size_t n_res_attrs;
};

/* The option table (for tests and --help). */
const struct opal_config_spec *opal_sym_config_spec(void);

/* Loads and checks the configuration into `c` (zeroed by this call).
 * Returns 0, 1 (--help printed to stdout), or -errno with the reason in
 * `why` (why_len bytes); on error `c` holds no allocation. */
int opal_sym_config_load(int argc, char *const *argv, struct opal_sym_config *c, char *why,
			 size_t why_len);

/* Releases what load stored. Safe on a zeroed struct. */
void opal_sym_config_free(struct opal_sym_config *c);

/* SIGHUP: loads and checks the configuration again from the same argv (the
 * config file may have changed). On success the values of changed
 * reloadable options are moved into `cur` (derived values refreshed), each
 * logged with its old and new value, and changed options that cannot
 * change at run time are logged as needing a restart and keep their
 * running value; `plan` says which. On a load or check error `cur` is left
 * as it was and the reason is logged. Returns 0 or the load's -errno. */
int opal_sym_config_reload(int argc, char *const *argv, struct opal_sym_config *cur,
			   struct opal_config_plan *plan);

/* True when an option of the exporters (export list, otlp-*, resource
 * attributes, service name) is among plan->applied. */
bool opal_sym_config_exporters_changed(const struct opal_config_plan *plan);

#endif
