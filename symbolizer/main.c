/* opal-symbolizer: unprivileged daemon that turns collector intervals into
 * symbolized pprof and OTLP profiles, keeps recent ones for the served
 * flame graph and exports them over OTLP/HTTP. Configuration:
 * sym_config.h; SIGHUP reloads what can change at run time. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <libgen.h>
#include "activation.h"
#include "cache.h"
#include "exporters.h"
#include "http_client.h"
#include "ledger.h"
#include "log.h"
#include "notify.h"
#include "otlp.h"
#include "otlp_logs.h"
#include "output.h"
#include "privdrop.h"
#include "recent.h"
#include "sandbox.h"
#include "sandbox_seccomp.h"
#include "server.h"
#include "services.h"
#include "sqlite_vfs.h"
#include "sym_config.h"
#include "symbolize.h"

static volatile sig_atomic_t stop_flag, reload_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
	opal_notify("STOPPING=1");   /* async-signal-safe: one sendto() */
}

/* The main loop does the reload (hook_tick). */
static void on_sighup(int sig)
{
	(void)sig;
	reload_flag = 1;
}

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

/* What the server hooks and SIGHUP work on; main thread only. */
struct daemon {
	int argc;
	char **argv;
	struct opal_sym_config cfg;
	struct opal_output out;
	struct opal_otlp_options otlp;          /* files and profiles export */
	struct opal_otlp_logs_options logs;     /* profiles-as-logs resource */
	struct opal_exporters *exporters;
	struct opal_recent *recent;             /* NULL: none kept */
	struct opal_symbolizer *sym;
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
		err = opal_recent_add(d->recent, w->enc->pprof_gz, w->enc->pprof_len,
				      w->start_unix_ns, w->end_unix_ns, w->run_id, w->seq,
				      (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
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

	reload_flag = 0;
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
		}
		if (opal_sym_config_exporters_changed(&plan))
			configure_exporters(d);
	}
	opal_notify("READY=1");
}

static void hook_tick(void *arg)
{
	struct daemon *d = arg;

	if (reload_flag)
		reload(d);
	opal_exporters_publish(d->exporters);
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

/* Opens `dir` (creating it) and returns a path that keeps reaching it after
 * the privilege drop even when its ancestors are closed to the new user:
 * /proc/self/fd/<N> of a descriptor held for the process's lifetime. */
static char *hold_dir(const char *dir, bool dropping, uid_t uid, gid_t gid)
{
	char *path;
	int fd;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		opal_err("cannot create %s: %s", dir, strerror(errno));
		return NULL;
	}
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

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	static struct daemon d;   /* static: the hooks reach it until exit */
	uid_t uid = 0;
	gid_t gid = 0;
	bool dropping;
	char *state_dir, *out_dir, db_path[PATH_MAX], intervals[PATH_MAX], sock_dir[PATH_MAX];
	char why[512], recent_dir[PATH_MAX], conf_dir[PATH_MAX];
	bool inherited;
	int lfd, err;

	err = opal_sym_config_load(argc, argv, &d.cfg, why, sizeof(why));
	if (err > 0)
		return 0;   /* --help */
	if (err < 0) {
		fprintf(stderr, "opal-symbolizer: %s\nTry 'opal-symbolizer --help'.\n", why);
		return 2;
	}
	d.argc = argc;
	d.argv = argv;
	const struct opal_sym_options *o = &d.cfg.o;
	opal_log_init("opal-symbolizer", o->verbose);
	dropping = geteuid() == 0;
	if (dropping && !o->user) {
		opal_err("refusing to run as root: give --user NAME to drop privileges after startup");
		return 2;
	}
	if (dropping && opal_lookup_user(o->user, &uid, &gid) < 0) {
		opal_err("unknown user '%s'", o->user);
		return 2;
	}
	/* Secret files may be readable by root only: read before the drop. */
	struct opal_services_config svc_cfg = {
		.debug_root = "/usr/lib/debug", .http_listen = o->http_listen,
		.http_required = d.cfg.http_required, .token_file = o->token_file,
		.tls_cert = o->tls_cert, .tls_key = o->tls_key,
		.max_upload_bytes = o->max_upload_bytes, .upload_expiry_s = o->upload_expiry,
		.upstream = o->upstream, .upstream_token_file = o->upstream_token_file,
		.upstream_ca = o->upstream_cacert, .upload_debuginfo = o->upload_debuginfo,
	};
	struct opal_services *svc = opal_services_new(&svc_cfg);
	if (!svc)
		return 2;
	raise_nofile();
	if ((err = opal_notify_init()) < 0)
		opal_warn("NOTIFY_SOCKET unusable (%s): no readiness notifications", strerror(-err));
	state_dir = hold_dir(o->state_dir, dropping, uid, gid);
	out_dir = state_dir ? hold_dir(o->out_dir, dropping, uid, gid) : NULL;
	if (!state_dir || !out_dir)
		return 1;
	snprintf(intervals, sizeof(intervals), "%s/intervals", o->out_dir);
	if (dropping && mkdir(intervals, 0755) == 0)
		give_dir(intervals, uid, gid);
	else if (dropping)
		give_dir(intervals, uid, gid);
	/* Socket activation (opal-symbolizer.socket) passes the listening
	 * socket; otherwise we bind --socket ourselves. */
	lfd = opal_activation_listen_fd();
	if (lfd < 0) {
		opal_err("inherited listening socket unusable: %s", strerror(-lfd));
		return 1;
	}
	inherited = lfd > 0;
	if (!inherited)
		lfd = listen_unix(o->socket);
	if (lfd < 0) {
		opal_err("cannot listen on %s: %s", o->socket, strerror(-lfd));
		return 1;
	}
	snprintf(sock_dir, sizeof(sock_dir), "%s", o->socket);
	if (dropping && (err = opal_drop_privileges(uid, gid)) < 0) {
		opal_err("dropping privileges to %s failed: %s", o->user, strerror(-err));
		return 1;
	}

	snprintf(db_path, sizeof(db_path), "%s/state.db", state_dir);
	if (opal_sqlite_vfs_register() < 0) {
		opal_err("SQLite has no default VFS");
		return 1;
	}
	struct opal_cache *cache = opal_cache_open(db_path);
	struct opal_ledger *ledger = opal_ledger_open(db_path);
	struct opal_symbolizer *sym =
		opal_symbolizer_new(cache, o->max_open_files ? (unsigned)o->max_open_files : 1);
	if (!cache || !ledger || !sym) {
		opal_err("cannot initialise state in %s", o->state_dir);
		return 1;
	}
	d.out = (struct opal_output){ .dir = out_dir, .otlp = &d.otlp };
	d.sym = sym;
	refresh_options(&d);
	if ((err = opal_output_init(&d.out)) < 0) {
		opal_err("cannot prepare %s: %s", o->out_dir, strerror(-err));
		return 1;
	}

	if ((err = opal_services_open(svc, sym, state_dir, db_path)) < 0) {
		opal_err("cannot open the debuginfo store in %s: %s", o->state_dir, strerror(-err));
		return 1;
	}
	snprintf(recent_dir, sizeof(recent_dir), "%.4000s/recent", state_dir);
	struct opal_recent_limits rl = recent_limits(&d.cfg);
	if ((err = opal_recent_open(recent_dir, &rl, &d.recent)) < 0) {
		opal_warn("recent profiles folder %s/recent unusable (%s): GET /flamegraph has "
			  "nothing to show", o->state_dir, strerror(-err));
		d.recent = NULL;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_sighup;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* Everything opened by privilege is held now, and no collector input
	 * has been read yet. The config file's folder stays readable for
	 * SIGHUP. */
	const char *rw_dirs[] = { state_dir, out_dir }, *ro_dirs[1];
	struct opal_sandbox_config sbc = { .prog = "opal-symbolizer", .rw_dirs = rw_dirs,
					   .n_rw_dirs = 2, .ro_dirs = ro_dirs,
					   .unlink_dir = inherited ? NULL : dirname(sock_dir) };
	/* The folder, so that a file replaced by rename (as editors do) stays
	 * readable; the file alone when that folder would be "/". */
	const char *conf = opal_config_file(opal_sym_config_spec(), argc, argv);
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
	/* libcurl's global state (OpenSSL's too) before any thread exists;
	 * after the sandbox, so that the socket is not bound long before the
	 * process is sandboxed. */
	if (opal_http_client_global_init() < 0 || !(d.exporters = opal_exporters_new())) {
		opal_err("libcurl initialisation failed");
		return 1;
	}
	/* Threads (HTTP API, fleet, exporters) only once the sandbox covers
	 * them: Landlock refuses a process that already has threads. */
	if ((err = opal_services_start(svc, d.recent)) < 0) {
		opal_err("cannot start the HTTP API / upstream: %s", strerror(-err));
		return 1;
	}
	configure_exporters(&d);
	log_flamegraph_url(&d, opal_services_http_port(svc));

	struct interval_tally tally = { 0 };
	struct opal_server_config cfg = { .listen_fd = lfd, .sym = sym, .ledger = ledger,
					  .out = &d.out, .whole_run = o->whole_run,
					  .n_allow = d.cfg.n_allow, .on_interval = report_interval,
					  .on_interval_arg = &tally, .want_otlp = hook_want_otlp,
					  .on_written = hook_written, .on_tick = hook_tick,
					  .hook_arg = &d };
	memcpy(cfg.allow_uids, d.cfg.allow_uids, sizeof(d.cfg.allow_uids));
	opal_info("listening on %s%s; state %s; profiles in %s%s; export: %s", o->socket,
		  inherited ? " (socket activation)" : "", o->state_dir, o->out_dir,
		  dropping ? "; privileges dropped" : "",
		  d.cfg.write_intervals ? "interval files" : "no interval files");
	opal_notify("READY=1");
	opal_notify_status("listening on %s for collectors", o->socket);
	err = opal_server_run(&cfg, &stop_flag);

	opal_exporters_stop(d.exporters, OPAL_EXPORTERS_FLUSH_MS);
	opal_services_stop(svc);
	opal_recent_close(d.recent);
	opal_symbolizer_free(sym);
	opal_ledger_close(ledger);
	opal_cache_close(cache);
	close(lfd);
	if (!inherited && unlink(d.cfg.o.socket) < 0 && errno != ENOENT)   /* activated: its unit's */
		opal_info("socket %s left in place (%s): the next start replaces it",
			  d.cfg.o.socket, strerror(errno));
	if (opal_seccomp_denials())
		opal_warn("seccomp denied %llu system calls in this run (the first are logged above)",
			  (unsigned long long)opal_seccomp_denials());
	opal_sym_config_free(&d.cfg);
	opal_notify_close();
	opal_info("stopped");
	return err < 0 ? 1 : 0;
}
