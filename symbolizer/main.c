/* opal-symbolizer: unprivileged daemon that turns collector intervals into
 * symbolized pprof and OTLP profiles, keeps recent ones for the served
 * flame graph and exports them over OTLP/HTTP. Configuration:
 * sym_config.h; SIGHUP reloads what can change at run time. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <grp.h>
#include <libgen.h>
#include "activation.h"
#include "base/mkdirs.h"
#include "base/sqlite_vfs.h"
#include "collector_link.h"
#include "interp/code_table.h"
#include "debuginfo/debuginfo_bound.h"
#include "debuginfo_services.h"
#include "export/exporters.h"
#include "export/otlp_http.h"
#include "http/http_client.h"
#include "ledger.h"
#include "output.h"
#include "profile/otlp.h"
#include "profile/otlp_logs.h"
#include "profile/recent.h"
#include "sandbox/privdrop.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_seccomp.h"
#include "shared/log.h"
#include "shared/notify.h"
#include "shared/service.h"
#include "stop_deadline.h"
#include "sym_config.h"
#include "symbolize/sym_index.h"
#include "symbolize/sym_sqlite.h"
#include "symbolize/symbolize.h"

struct interval_tally {
	uint64_t intervals, samples;
};

/* Keeps the service manager's STATUS= line current. */
static void report_interval(void *arg, uint64_t seq, uint64_t samples)
{
	struct interval_tally *t = arg;

	t->intervals++;
	t->samples += samples;
	opal_notify_status("%llu intervals, %llu samples written; last interval %llu",
			   (unsigned long long)t->intervals, (unsigned long long)t->samples,
			   (unsigned long long)seq);
}

/* What the server hooks and SIGHUP work on, and what start-up opens and
 * holds until exit; main thread only. */
struct daemon {
	int argc;
	char **argv;
	struct opal_sym_config cfg;
	struct opal_output out;
	struct opal_otlp_options otlp;          /* files and profiles export */
	struct opal_otlp_logs_options logs;     /* profiles-as-logs resource */
	struct opal_exporters *exporters;
	struct opal_otlp_exporter *forward;     /* --otlp-receive: received profiles go on */
	struct opal_recent *recent;             /* NULL: none kept */
	struct opal_recent *recent_offcpu;      /* off-CPU profiles; NULL: none kept */
	struct opal_symbolizer *sym;
	struct opal_code_table *codes;          /* interpreter code objects */
	struct opal_jit_table *jits;            /* JIT names */
	/* held from start-up to exit */
	bool dropping;                          /* started as root: runs as --user */
	bool stopping;                          /* a stop signal arrived: the deadline runs */
	uid_t uid;
	gid_t gid;
	struct opal_services *svc;              /* HTTP API, debuginfo store, upstream */
	char *state_dir, *out_dir;              /* paths that reach them after the drop */
	int lfd;                                /* collector socket */
	bool inherited;                         /* lfd came from socket activation */
	struct opal_cache *cache;
	struct opal_ledger *ledger;
};

static struct opal_recent_limits recent_limits(const struct opal_sym_config *c)
{
	return (struct opal_recent_limits){ .max_files = c->o.flamegraph_keep,
					    .max_bytes = c->o.flamegraph_max_bytes,
					    .max_age_s = c->o.flamegraph_max_age_s };
}

/* Points the encoders' options at the configuration now in effect (its
 * derived values are reallocated by every reload that applies something). */
static void refresh_options(struct daemon *d)
{
	if (d->sym)
		opal_symbolizer_set_max_debug_memory(d->sym, d->cfg.o.max_debug_memory);
	opal_sym_index_set_budget(d->cfg.o.max_index_memory);
	opal_decomp_set_budget(d->cfg.o.max_decompress);
	d->out.keep_intervals = d->cfg.o.keep_intervals;
	d->out.write_intervals = d->cfg.write_intervals;
	d->otlp = (struct opal_otlp_options){ .resource_attributes = d->cfg.res_attrs,
					      .n_resource_attributes = d->cfg.n_res_attrs };
	d->logs = (struct opal_otlp_logs_options){ .service_name = d->cfg.o.service_name,
						   .resource_attributes = d->cfg.res_attrs,
						   .n_resource_attributes = d->cfg.n_res_attrs };
}

static int configure_exporters(struct daemon *d)
{
	const struct opal_sym_config *c = &d->cfg;
	const struct opal_sym_signal *ps = &c->signal[OPAL_OTLP_SIGNAL_PROFILES],
				     *ls = &c->signal[OPAL_OTLP_SIGNAL_LOGS];
	struct opal_exporters_config ec = {
		.profiles = { c->profiles_url, ps->headers, (unsigned)ps->timeout_ms, ps->gzip },
		.logs = { c->logs_url, ls->headers, (unsigned)ls->timeout_ms, ls->gzip },
		.queue_bytes = c->o.otlp_queue_bytes,
	};

	if (opal_strlist_has(&c->o.exports, "otlp") && !c->profiles_url)
		opal_info("otlp export: no endpoint configured (--otlp-endpoint, "
			  "OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT): "
			  "profiles are not sent");
	return opal_exporters_configure(d->exporters, &ec);
}

static int hook_settle(void *arg)
{
	const struct daemon *d = arg;

	return opal_services_settle(d->svc);
}

static bool hook_want_otlp(void *arg)
{
	struct daemon *d = arg;

	return opal_exporters_want_otlp(d->exporters);
}

/* After an interval is written: a copy for the flame graph, then the
 * exporters' queues. Neither waits for anything but the local disk. */
static void hook_written(void *arg, const struct opal_server_written *w)
{
	struct daemon *d = arg;
	struct timespec now;
	int err;

	if (opal_profile_sample_count(w->p) == 0)
		return;
	if (d->recent) {
		clock_gettime(CLOCK_REALTIME, &now);
		uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		err = opal_recent_add(d->recent, w->enc->pprof_gz, w->enc->pprof_len,
				      w->enc->pprof_path, w->start_unix_ns, w->end_unix_ns,
				      w->run_id, w->seq, now_ns);
		if (!err && d->recent_offcpu && w->enc->offcpu_gz)
			err = opal_recent_add(d->recent_offcpu, w->enc->offcpu_gz,
					      w->enc->offcpu_len, NULL, w->start_unix_ns,
					      w->end_unix_ns, w->run_id, w->seq, now_ns);
		if (err < 0)
			opal_warn("interval %llu not kept for the flame graph: %s",
				  (unsigned long long)w->seq, strerror(-err));
	}
	d->logs.host_name = w->host_name[0] ? w->host_name : NULL;
	uint8_t *otlp = opal_exporters_want_otlp(d->exporters) ? w->enc->otlp : NULL;
	if (otlp)
		w->enc->otlp = NULL;   /* taken over by the exporter */
	opal_exporters_push(d->exporters, w->p, otlp, w->enc->otlp_len, w->enc->pprof_gz,
			    w->enc->pprof_len, &d->logs);
}

/* SIGHUP, on the main thread: reload and apply what may change. */
static void reload(struct daemon *d)
{
	struct opal_config_plan plan;

	opal_reload_signal = 0;
	opal_notify("RELOADING=1");
	if (opal_sym_config_reload(d->argc, d->argv, &d->cfg, &plan) == 0 && plan.n_applied) {
		if (opal_config_plan_applied(&plan, "verbose"))
			opal_log_init("opal-symbolizer", d->cfg.o.verbose);
		refresh_options(d);
		if (d->recent && (opal_config_plan_applied(&plan, "flamegraph-keep") ||
				  opal_config_plan_applied(&plan, "flamegraph-max-bytes") ||
				  opal_config_plan_applied(&plan, "flamegraph-max-age"))) {
			struct opal_recent_limits l = recent_limits(&d->cfg);
			opal_recent_set_limits(d->recent, &l);
			if (d->recent_offcpu)
				opal_recent_set_limits(d->recent_offcpu, &l);
		}
		if (opal_sym_config_exporters_changed(&plan))
			configure_exporters(d);
	}
	opal_notify("READY=1");
}

static void hook_tick(void *arg)
{
	struct daemon *d = arg;

	struct opal_code_table_stats cs;

	if (opal_stop_signals && !d->stopping) {
		/* the server drains collectors first (collector_link.h): their
		 * last intervals are written before anything waits on others */
		d->stopping = true;
		opal_stop_deadline_start();
		opal_stop_deadline_step("serving the connected collectors until they hang up");
	}
	if (opal_reload_signal)   /* SIGHUP */
		reload(d);
	opal_exporters_publish(d->exporters);
	opal_code_table_stats(d->codes, &cs);
	opal_metrics_code_table(cs.entries, cs.bytes, cs.added, cs.invalid, cs.evicted, cs.unknown);
	struct opal_jit_table_stats js;
	opal_jit_table_stats(d->jits, &js);
	const uint64_t jv[OPAL_METRICS_JIT_N] = { js.procs, js.bytes, js.files, js.ranges,
						  js.bad_lines, js.bad_records, js.cut,
						  js.evicted, js.named, js.unnamed };
	opal_metrics_jit_table(jv);
	opal_services_tick(d->svc, time(NULL));
}

/* Logs where the flame graph of recent profiles is served. */
static void log_flamegraph_url(const struct daemon *d, uint16_t port)
{
	const char *listen = d->cfg.o.http_listen, *colon = strrchr(listen, ':');
	int host_len = colon ? (int)(colon - listen) : 0;

	if (!d->recent || !port)
		return;
	opal_info("flame graph of recent profiles: http://%.*s:%u/flamegraph?seconds=%u "
		  "(&pid=P for one process)%s", host_len, listen, (unsigned)port,
		  OPAL_HTTP_FLAMEGRAPH_DEFAULT_S,
		  d->cfg.profiles_url ? "" : "; no OTLP endpoint is configured, so this page is "
					     "where the profiles are seen");
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Only a stale socket is replaced: never another kind of file (this
	 * runs as root, and --socket may be mistyped), nor a socket another
	 * symbolizer still listens on. */
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			opal_err("%s exists and is not a socket: not replacing it", path);
			close(fd);
			return -EEXIST;
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			opal_err("%s: another process listens on it (a running symbolizer?)", path);
			close(fd);
			return -EADDRINUSE;
		}
		close(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		unlink(path);
	}
	/* the socket's folder (e.g. /run/opal) may not exist yet: create it,
	 * one level, as systemd's RuntimeDirectory would */
	char parent[sizeof(sa.sun_path)];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (mkdir(parent, 0755) == 0)
			opal_info("created %s for the collector socket", parent);
	}
	mode_t old = umask(0077);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 8) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Makes `dir` (and its direct entries) belong to the user we drop to, so the
 * daemon can keep writing there after the drop. */
static void give_dir(const char *dir, uid_t uid, gid_t gid)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (chown(dir, uid, gid) < 0)
		opal_warn("chown %s: %s", dir, strerror(errno));
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lchown(path, uid, gid) < 0)
			opal_warn("chown %s: %s", path, strerror(errno));
	}
	closedir(d);
}

/* Opens `dir` (creating it with mode `mode` and its missing parents with
 * 0755, as root before the drop) and returns a path that keeps reaching it
 * after the privilege drop even when its ancestors are closed to the new
 * user: /proc/self/fd/<N> of a descriptor held for the process's lifetime. */
static char *hold_dir(const char *dir, mode_t mode, bool dropping, uid_t uid, gid_t gid)
{
	char *path;
	bool created;
	int fd, err;

	if ((err = opal_mkdirs(dir, mode, &created)) < 0) {
		opal_err("cannot create %s: %s", dir, strerror(-err));
		return NULL;
	}
	if (created)
		opal_info("created %s", dir);
	if (!dropping)
		return strdup(dir);
	give_dir(dir, uid, gid);
	fd = open(dir, O_RDONLY | O_DIRECTORY);   /* held open: no O_CLOEXEC needed either way */
	if (fd < 0) {
		opal_err("cannot open %s: %s", dir, strerror(errno));
		return NULL;
	}
	if (asprintf(&path, "/proc/self/fd/%d", fd) < 0)
		return NULL;
	opal_log_alias(path, dir);
	return path;
}

/* Before the privilege drop: what only root may do or read. Refuses to
 * keep root (--user is required), reads the secret files (token, TLS key)
 * that may be readable by root only, raises the descriptor limit to the
 * hard one, creates the folders and hands them to --user, and binds the
 * collector socket (or takes the one systemd passes). Returns 0 or the
 * exit status. */
static int before_privilege_drop(struct daemon *d)
{
	const struct opal_sym_options *o = &d->cfg.o;
	char intervals[PATH_MAX];
	int err;

	d->dropping = geteuid() == 0;
	if (d->dropping && !o->user) {
		opal_err("refusing to run as root: give --user NAME to drop privileges after startup");
		return 2;
	}
	if (d->dropping && opal_lookup_user(o->user, &d->uid, &d->gid) < 0) {
		opal_err("unknown user '%s'", o->user);
		return 2;
	}
	struct opal_services_config svc_cfg = {
		.debug_root = "/usr/lib/debug", .http_listen = o->http_listen,
		.http_required = d->cfg.http_required, .token_file = o->token_file,
		.tls_cert = o->tls_cert, .tls_key = o->tls_key,
		.max_upload_bytes = o->max_upload_bytes, .upload_expiry_s = o->upload_expiry,
		.upstream = o->upstream, .upstream_token_file = o->upstream_token_file,
		.upstream_ca = o->upstream_cacert, .upload_debuginfo = o->upload_debuginfo,
	};
	if (!(d->svc = opal_services_new(&svc_cfg)))
		return 2;
	opal_raise_nofile();
	if ((err = opal_notify_init()) < 0)
		opal_warn("NOTIFY_SOCKET unusable (%s): no readiness notifications", strerror(-err));
	/* The state (cache, uploads) is the daemon's alone; the profiles are
	 * for their readers. */
	gid_t out_gid = d->gid;
	mode_t out_mode = 0700;
	if (o->output_group) {
		struct group *gr = getgrnam(o->output_group);
		if (!gr) {
			opal_err("unknown group '%s' (--output-group)", o->output_group);
			return 2;
		}
		/* setgid: the files made inside take the group */
		out_gid = gr->gr_gid;
		out_mode = 02750;
	}
	d->state_dir = hold_dir(o->state_dir, 0700, d->dropping, d->uid, d->gid);
	d->out_dir = d->state_dir ? hold_dir(o->out_dir, out_mode, d->dropping, d->uid, out_gid) :
				    NULL;
	if (!d->state_dir || !d->out_dir)
		return 1;
	snprintf(intervals, sizeof(intervals), "%s/intervals", o->out_dir);
	opal_mkdirs(intervals, out_mode, NULL);   /* may exist: handed over either way */
	if (d->dropping)
		give_dir(intervals, d->uid, out_gid);
	/* an existing folder gets the modes too (a start before this one may
	 * have left it readable by all) */
	if (chmod(o->out_dir, out_mode) < 0 || chmod(intervals, out_mode) < 0)
		opal_warn("chmod %s: %s", o->out_dir, strerror(errno));
	/* Socket activation (opal-symbolizer.socket) passes the listening
	 * socket; otherwise we bind --socket ourselves. */
	d->lfd = opal_activation_listen_fd();
	if (d->lfd < 0) {
		opal_err("inherited listening socket unusable: %s", strerror(-d->lfd));
		return 1;
	}
	d->inherited = d->lfd > 0;
	if (!d->inherited)
		d->lfd = listen_unix(o->socket);
	if (d->lfd < 0) {
		opal_err("cannot listen on %s: %s", o->socket, strerror(-d->lfd));
		return 1;
	}
	return 0;
}

/* The drop itself, when started as root. Returns 0 or the exit status. */
static int drop_privileges(struct daemon *d)
{
	int err;

	if (d->dropping && (err = opal_drop_privileges(d->uid, d->gid)) < 0) {
		opal_err("dropping privileges to %s failed: %s", d->cfg.o.user, strerror(-err));
		return 1;
	}
	return 0;
}

/* The database stays the daemon's alone under --output-group's umask too
 * (SQLite gives its -wal and -shm files the database's mode). */
static void private_db(const char *db_path)
{
	static const char *const suffix[] = { "", "-wal", "-shm" };
	char p[PATH_MAX];

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", db_path, suffix[i]);
		if (chmod(p, 0600) < 0 && errno != ENOENT)
			opal_warn("chmod %s: %s", p, strerror(errno));
	}
}

/* After the drop: the state is opened as the user the daemon runs as, so
 * that every file it creates belongs to that user (SQLite cache and
 * ledger, output folder, debuginfo store, recent profiles); then the
 * signal handlers. Returns 0 or the exit status. */
static int after_privilege_drop(struct daemon *d)
{
	const struct opal_sym_options *o = &d->cfg.o;
	char db_path[PATH_MAX], recent_dir[PATH_MAX];
	int err;

	snprintf(db_path, sizeof(db_path), "%s/state.db", d->state_dir);
	if (opal_sqlite_vfs_register() < 0) {
		opal_err("SQLite has no default VFS");
		return 1;
	}
	d->cache = opal_cache_open(db_path);
	d->ledger = opal_ledger_open(db_path);
	d->sym = opal_symbolizer_new(d->cache, o->max_open_files ? (unsigned)o->max_open_files : 1);
	if (!d->cache || !d->ledger || !d->sym) {
		opal_err("cannot initialise state in %s", o->state_dir);
		return 1;
	}
	private_db(db_path);
	d->out = (struct opal_output){ .dir = d->out_dir, .otlp = &d->otlp };
	refresh_options(d);
	if ((err = opal_output_init(&d->out)) < 0) {
		opal_err("cannot prepare %s: %s", o->out_dir, strerror(-err));
		return 1;
	}
	if ((err = opal_services_open(d->svc, d->sym, d->state_dir, db_path)) < 0) {
		opal_err("cannot open the debuginfo store in %s: %s", o->state_dir, strerror(-err));
		return 1;
	}
	snprintf(recent_dir, sizeof(recent_dir), "%.4000s/recent", d->state_dir);
	struct opal_recent_limits rl = recent_limits(&d->cfg);
	if ((err = opal_recent_open(recent_dir, &rl, &d->recent)) < 0) {
		opal_warn("recent profiles folder %s/recent unusable (%s): GET /flamegraph has "
			  "nothing to show", o->state_dir, strerror(-err));
		d->recent = NULL;
	}
	snprintf(recent_dir, sizeof(recent_dir), "%.4000s/recent-offcpu", d->state_dir);
	if (d->recent && (err = opal_recent_open(recent_dir, &rl, &d->recent_offcpu)) < 0) {
		opal_warn("recent profiles folder %s/recent-offcpu unusable (%s): GET /flamegraph "
			  "has no off-CPU view", o->state_dir, strerror(-err));
		d->recent_offcpu = NULL;
	}
	opal_service_signals();
	return 0;
}

/* Sandbox: once everything opened by privilege is held and before any
 * collector input is read. Writable: the state and output folders; the
 * socket's folder for the unlink at exit (unless systemd owns the
 * socket); readable: the config file's folder, for SIGHUP. Returns 0 or
 * the exit status. */
static int enter_sandbox(struct daemon *d)
{
	char sock_dir[PATH_MAX], conf_dir[PATH_MAX];
	int err;

	snprintf(sock_dir, sizeof(sock_dir), "%s", d->cfg.o.socket);
	const char *rw_dirs[] = { d->state_dir, d->out_dir }, *ro_dirs[1];
	struct opal_sandbox_config sbc = { .prog = "opal-symbolizer", .rw_dirs = rw_dirs,
					   .n_rw_dirs = 2, .ro_dirs = ro_dirs,
					   .unlink_dir = d->inherited ? NULL : dirname(sock_dir) };
	/* The folder, so that a file replaced by rename (as editors do) stays
	 * readable; the file alone when that folder would be "/". */
	const char *conf = opal_config_file(opal_sym_config_spec(), d->argc, d->argv);
	if (conf && realpath(conf, conf_dir)) {
		char *slash = strrchr(conf_dir, '/');
		if (slash && slash != conf_dir)
			*slash = '\0';
		ro_dirs[0] = conf_dir;
		sbc.n_ro_dirs = 1;
		opal_info("sandbox: %s stays readable, for SIGHUP to re-read the config file",
			  conf_dir);
	}
	struct opal_sandbox_result sbr;
	if ((err = opal_sandbox_apply(&sbc, &sbr)) < 0) {
		opal_err("cannot sandbox the symbolizer: %s", strerror(-err));
		return 1;
	}
	if (sbr.landlock_abi > 0)
		opal_info("sandbox: seccomp allow-list; Landlock ABI %d (kernel offers %d), %u rules",
			  sbr.landlock_abi, sbr.landlock_kernel_abi, sbr.landlock_rules);
	else
		opal_warn("sandbox: seccomp allow-list only; this kernel has no Landlock, so file "
			  "access is limited by permissions alone");
	return 0;
}

/* Threads (HTTP API, fleet, exporters) only once the sandbox covers them:
 * Landlock refuses a process that already has threads. libcurl's global
 * state (OpenSSL's too) is set up first, before any thread exists, and
 * after the sandbox, so that the socket is not bound long before the
 * process is sandboxed. Returns 0 or the exit status. */
static int start_threads(struct daemon *d)
{
	int err;

	if (opal_http_client_global_init() < 0 || !(d->exporters = opal_exporters_new())) {
		opal_err("libcurl initialisation failed");
		return 1;
	}
	if (d->cfg.o.otlp_receive) {
		const struct opal_sym_signal *ps = &d->cfg.signal[OPAL_OTLP_SIGNAL_PROFILES];
		struct opal_exporter_settings fs = { d->cfg.forward_url, ps->headers,
						     (unsigned)ps->timeout_ms, ps->gzip };
		if (opal_exporter_start("otlp-forward", OPAL_OTLP_SIGNAL_PROFILES, &fs,
					d->cfg.o.otlp_queue_bytes, &d->forward) < 0)
			return 1;
	}
	if ((err = opal_services_start(d->svc, d->recent, d->recent_offcpu, d->forward)) < 0) {
		opal_err("cannot start the HTTP API / upstream: %s", strerror(-err));
		return 1;
	}
	configure_exporters(d);
	log_flamegraph_url(d, opal_services_http_port(d->svc));
	return 0;
}

/* Serves collectors until SIGINT/SIGTERM. Returns opal_server_run's. */
static int serve(struct daemon *d)
{
	const struct opal_sym_options *o = &d->cfg.o;
	struct interval_tally tally = { 0 };
	if (!(d->codes = opal_code_table_new()) || !(d->jits = opal_jit_table_new())) {
		opal_err("out of memory");
		return -ENOMEM;
	}
	struct opal_server_config cfg = { .listen_fd = d->lfd, .sym = d->sym, .ledger = d->ledger,
					  .out = &d->out, .codes = d->codes, .jits = d->jits, .whole_run = o->whole_run,
					  .n_allow = d->cfg.n_allow, .on_interval = report_interval,
					  .on_interval_arg = &tally, .want_otlp = hook_want_otlp,
					  .settle = hook_settle, .on_written = hook_written,
					  .on_tick = hook_tick, .hook_arg = d };

	memcpy(cfg.allow_uids, d->cfg.allow_uids, sizeof(d->cfg.allow_uids));
	opal_info("listening on %s%s; state %s; profiles in %s%s; export: %s", o->socket,
		  d->inherited ? " (socket activation)" : "", o->state_dir, o->out_dir,
		  d->dropping ? "; privileges dropped" : "",
		  d->cfg.write_intervals ? "interval files" : "no interval files");
	opal_notify("READY=1");
	opal_notify_status("listening on %s for collectors", o->socket);
	return opal_server_run(&cfg, &opal_stop_signals);
}

/* Clean stop, within the stop deadline (stop_deadline.h): exporters
 * flushed for what is left of it, the HTTP API's workers woken and joined
 * (a download they wait for is cancelled), state closed, the socket
 * removed unless systemd owns it. */
static void shut_down(struct daemon *d)
{
	unsigned flush_ms = opal_stop_deadline_wait_left_ms();

	opal_stop_deadline_step("flushing the exporters");
	opal_exporters_stop(d->exporters, flush_ms < OPAL_EXPORTERS_FLUSH_MS ? flush_ms :
				OPAL_EXPORTERS_FLUSH_MS);
	opal_stop_deadline_step("stopping the HTTP API and the fleet upstream");
	opal_services_stop(d->svc);
	if (d->forward) {   /* after the HTTP threads, which push to it */
		struct opal_export_stats fst;
		opal_stop_deadline_step("flushing the OTLP forwarder");
		opal_otlp_exporter_stop(d->forward, opal_stop_deadline_wait_left_ms(), &fst);
		opal_info("otlp-forward totals: %" PRIu64 " requests enqueued, %" PRIu64
			  " sent, %" PRIu64 " failed, %" PRIu64 " dropped", fst.enqueued, fst.sent,
			  fst.failed, fst.dropped);
	}
	opal_stop_deadline_step("closing the state");
	opal_recent_close(d->recent);
	opal_recent_close(d->recent_offcpu);
	opal_output_free(&d->out);
	opal_code_table_free(d->codes);
	opal_jit_table_free(d->jits);
	opal_symbolizer_free(d->sym);
	opal_ledger_close(d->ledger);
	opal_cache_close(d->cache);
	close(d->lfd);
	if (!d->inherited && unlink(d->cfg.o.socket) < 0 && errno != ENOENT)   /* activated: its unit's */
		opal_info("socket %s left in place (%s): the next start replaces it",
			  d->cfg.o.socket, strerror(errno));
	/* The total, zero included, so that a clean run says so (tests read it). */
	unsigned long long denied = opal_seccomp_denials();
	if (denied)
		opal_warn("seccomp denied %llu system calls in this run (the first are logged above)",
			  denied);
	else
		opal_info("seccomp denied 0 system calls in this run");
	opal_sym_config_free(&d->cfg);
	opal_notify_close();
	opal_stop_deadline_end();
	opal_info("stopped");
}

int main(int argc, char **argv)
{
	static struct daemon d;   /* static: the hooks reach it until exit */
	char why[512];
	int rc, err = opal_sym_config_load(argc, argv, &d.cfg, why, sizeof(why));

	if (err > 0)
		return 0;   /* --help */
	if (err < 0) {
		fprintf(stderr, "opal-symbolizer: %s\nTry 'opal-symbolizer --help'.\n", why);
		return 2;
	}
	d.argc = argc;
	d.argv = argv;
	/* Files private unless --output-group asks otherwise (the state folder
	 * stays 0700 either way), whatever the caller's umask. */
	umask(d.cfg.o.output_group ? 027 : 077);
	opal_log_init("opal-symbolizer", d.cfg.o.verbose);
	if ((rc = before_privilege_drop(&d)) || (rc = drop_privileges(&d)) ||
	    (rc = after_privilege_drop(&d)) || (rc = enter_sandbox(&d)) || (rc = start_threads(&d)))
		return rc;
	err = serve(&d);
	shut_down(&d);
	return err < 0 ? 1 : 0;
}
