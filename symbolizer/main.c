/* opal-symbolizer: unprivileged daemon that turns collector intervals into
 * symbolized pprof and OTLP profiles. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <dirent.h>
#include <libgen.h>
#include "activation.h"
#include "cache.h"
#include "ledger.h"
#include "log.h"
#include "notify.h"
#include "otlp.h"
#include "output.h"
#include "privdrop.h"
#include "sandbox.h"
#include "sandbox_seccomp.h"
#include "server.h"
#include "services.h"
#include "sqlite_vfs.h"
#include "symbolize.h"

#define DEFAULT_SOCKET     "/run/opal/collector.sock"
#define DEFAULT_STATE_DIR  "/var/lib/opal"
#define DEFAULT_OUT_DIR    "/var/lib/opal/out"
#define DEFAULT_KEEP       100
#define DEFAULT_MAX_FILES  512

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
	opal_notify("STOPPING=1");   /* async-signal-safe: one sendto() */
}

/* Every setting comes from the command line or the environment, which a
 * running process cannot re-read, so SIGHUP has nothing to reload yet; it
 * is accepted (not fatal, as by default) and says so. */
static void on_sighup(int sig)
{
	static const char msg[] = "<5>opal-symbolizer: SIGHUP: nothing to reload: all settings "
				  "come from the command line and environment (restart to change "
				  "them)\n";
	int saved_errno = errno;
	ssize_t written = write(STDERR_FILENO, msg, sizeof(msg) - 1);

	(void)sig;
	(void)written;
	errno = saved_errno;
}

struct options {
	const char *socket_path, *state_dir, *out_dir, *user;
	unsigned keep_intervals, max_open_files;
	bool whole_run, verbose;
	uid_t allow_uids[OPAL_SERVER_MAX_ALLOW];
	size_t n_allow;
	struct opal_services_config svc;   /* HTTP API, uploads, fleet */
};

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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: opal-symbolizer [options]\n"
		"Receives raw stacks from opal-collector, symbolizes them and writes profiles.\n\n"
		"  --socket PATH          collector socket to listen on (default " DEFAULT_SOCKET ")\n"
		"  --state-dir DIR        SQLite cache and ledger (default " DEFAULT_STATE_DIR ")\n"
		"  --out-dir DIR          profiles: intervals/, profile.pb.gz (default " DEFAULT_OUT_DIR ")\n"
		"  --keep-intervals N     interval files kept, 0 = all (default %d)\n"
		"  --whole-run            also write profile.pb.gz/profile.otlp.pb of the whole run\n"
		"  --user NAME            when started as root: bind, then drop to NAME (required as root)\n"
		"  --allow-uid UID        accept collectors of this uid besides 0 (repeatable)\n"
		"  --max-open-files N     libdwfl handles kept open, LRU (default %d)\n"
		"  --verbose              debug logging\n"
		"  --http-listen HOST:PORT  HTTP API (uploads, debuginfod, /symbolize/v1, /metrics);\n"
		"                         \"none\" disables it (default " OPAL_HTTP_DEFAULT_LISTEN ")\n"
		"  --token-file F         bearer token required by the API's write endpoints\n"
		"  --tls-cert F, --tls-key F  serve HTTPS with this PEM certificate and key\n"
		"  --max-upload-bytes N   largest debug-info upload, k/m/g suffixes (default 1g)\n"
		"  --upload-expiry S      seconds before an unfinished upload expires (default 900)\n"
		"  --upstream URL         central symbolizer for poorly resolved addresses\n"
		"  --upstream-token-file F  its bearer token\n"
		"  --upstream-cacert F    CA bundle to trust for an https upstream\n"
		"  --upload-debuginfo     upload new files' debug data to the upstream\n"
		"  --help                 this text\n"
		"Environment: OTEL_RESOURCE_ATTRIBUTES (added to every OTLP resource), DEBUGINFOD_URLS\n"
		"(debuginfod servers asked for missing debug info, cached under the state folder).\n",
		DEFAULT_KEEP, DEFAULT_MAX_FILES);
}

/* A positive decimal number; with `sizes`, an optional k, m or g suffix
 * (1024-based). At most 2^40. Returns 0 or -EINVAL. */
static int parse_service_number(const char *s, bool sizes, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (sizes && *end) {
		shift = *end == 'k' ? 10 : *end == 'm' ? 20 : *end == 'g' ? 30 : 64;
		end++;
	}
	if (end == s || *end || shift == 64 || v == 0 || v > (1ull << 40) >> shift)
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum { O_SOCKET = 256, O_STATE, O_OUT, O_KEEP, O_WHOLE, O_USER, O_ALLOW, O_MAXF, O_VERB, O_HELP,
	       O_HTTP, O_TOKEN, O_CERT, O_KEY, O_MAXUP, O_EXPIRY, O_UP, O_UPTOKEN, O_UPCA, O_UPLOAD };
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "out-dir", required_argument, NULL, O_OUT },
		{ "keep-intervals", required_argument, NULL, O_KEEP },
		{ "whole-run", no_argument, NULL, O_WHOLE },
		{ "user", required_argument, NULL, O_USER },
		{ "allow-uid", required_argument, NULL, O_ALLOW },
		{ "max-open-files", required_argument, NULL, O_MAXF },
		{ "verbose", no_argument, NULL, O_VERB },
		{ "http-listen", required_argument, NULL, O_HTTP },
		{ "token-file", required_argument, NULL, O_TOKEN },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "max-upload-bytes", required_argument, NULL, O_MAXUP },
		{ "upload-expiry", required_argument, NULL, O_EXPIRY },
		{ "upstream", required_argument, NULL, O_UP },
		{ "upstream-token-file", required_argument, NULL, O_UPTOKEN },
		{ "upstream-cacert", required_argument, NULL, O_UPCA },
		{ "upload-debuginfo", no_argument, NULL, O_UPLOAD },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	char *end;
	int c;

	*o = (struct options){ .socket_path = DEFAULT_SOCKET, .state_dir = DEFAULT_STATE_DIR,
			       .out_dir = DEFAULT_OUT_DIR, .keep_intervals = DEFAULT_KEEP,
			       .max_open_files = DEFAULT_MAX_FILES,
			       .svc = { .http_listen = OPAL_HTTP_DEFAULT_LISTEN,
					.debug_root = "/usr/lib/debug" } };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_HTTP:
			o->svc.http_listen = optarg;
			o->svc.http_required = true;
			break;
		case O_TOKEN: o->svc.token_file = optarg; break;
		case O_CERT: o->svc.tls_cert = optarg; break;
		case O_KEY: o->svc.tls_key = optarg; break;
		case O_UP: o->svc.upstream = optarg; break;
		case O_UPTOKEN: o->svc.upstream_token_file = optarg; break;
		case O_UPCA: o->svc.upstream_ca = optarg; break;
		case O_UPLOAD: o->svc.upload_debuginfo = true; break;
		case O_MAXUP:
		case O_EXPIRY:
			if (parse_service_number(optarg, c == O_MAXUP,
						 c == O_MAXUP ? &o->svc.max_upload_bytes
							      : &o->svc.upload_expiry_s) < 0) {
				fprintf(stderr, "opal-symbolizer: bad value '%s'\n", optarg);
				return -EINVAL;
			}
			break;
		case O_SOCKET: o->socket_path = optarg; break;
		case O_STATE: o->state_dir = optarg; break;
		case O_OUT: o->out_dir = optarg; break;
		case O_WHOLE: o->whole_run = true; break;
		case O_USER: o->user = optarg; break;
		case O_VERB: o->verbose = true; break;
		case O_HELP: usage(stdout); exit(0);
		case O_KEEP:
		case O_MAXF: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 1000000) {
				fprintf(stderr, "opal-symbolizer: bad number '%s'\n", optarg);
				return -EINVAL;
			}
			if (c == O_KEEP)
				o->keep_intervals = (unsigned)v;
			else
				o->max_open_files = v ? (unsigned)v : 1;
			break;
		}
		case O_ALLOW: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || o->n_allow == OPAL_SERVER_MAX_ALLOW) {
				fprintf(stderr, "opal-symbolizer: bad --allow-uid '%s'\n", optarg);
				return -EINVAL;
			}
			o->allow_uids[o->n_allow++] = (uid_t)v;
			break;
		}
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
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
	unlink(path);
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
	struct options o;
	uid_t uid = 0;
	gid_t gid = 0;
	bool dropping;
	char *state_dir, *out_dir, db_path[PATH_MAX], intervals[PATH_MAX], sock_dir[PATH_MAX];
	bool inherited;
	int lfd, err;

	if (parse_options(argc, argv, &o) < 0)
		return 2;
	opal_log_init("opal-symbolizer", o.verbose);
	dropping = geteuid() == 0;
	if (dropping && !o.user) {
		opal_err("refusing to run as root: give --user NAME to drop privileges after startup");
		return 2;
	}
	if (dropping && opal_lookup_user(o.user, &uid, &gid) < 0) {
		opal_err("unknown user '%s'", o.user);
		return 2;
	}
	/* Secret files may be readable by root only: read before the drop. */
	struct opal_services *svc = opal_services_new(&o.svc);
	if (!svc)
		return 2;
	raise_nofile();
	if ((err = opal_notify_init()) < 0)
		opal_warn("NOTIFY_SOCKET unusable (%s): no readiness notifications", strerror(-err));
	state_dir = hold_dir(o.state_dir, dropping, uid, gid);
	out_dir = state_dir ? hold_dir(o.out_dir, dropping, uid, gid) : NULL;
	if (!state_dir || !out_dir)
		return 1;
	snprintf(intervals, sizeof(intervals), "%s/intervals", o.out_dir);
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
		lfd = listen_unix(o.socket_path);
	if (lfd < 0) {
		opal_err("cannot listen on %s: %s", o.socket_path, strerror(-lfd));
		return 1;
	}
	snprintf(sock_dir, sizeof(sock_dir), "%s", o.socket_path);
	if (dropping && (err = opal_drop_privileges(uid, gid)) < 0) {
		opal_err("dropping privileges to %s failed: %s", o.user, strerror(-err));
		return 1;
	}

	snprintf(db_path, sizeof(db_path), "%s/state.db", state_dir);
	if (opal_sqlite_vfs_register() < 0) {
		opal_err("SQLite has no default VFS");
		return 1;
	}
	struct opal_cache *cache = opal_cache_open(db_path);
	struct opal_ledger *ledger = opal_ledger_open(db_path);
	struct opal_symbolizer *sym = opal_symbolizer_new(cache, o.max_open_files);
	struct opal_otlp_kv *attrs = NULL;
	size_t n_attrs = 0;
	if (!cache || !ledger || !sym) {
		opal_err("cannot initialise state in %s", o.state_dir);
		return 1;
	}
	const char *env_attrs = getenv("OTEL_RESOURCE_ATTRIBUTES");
	if (env_attrs && opal_otlp_parse_resource_attributes(env_attrs, &attrs, &n_attrs) < 0) {
		opal_err("OTEL_RESOURCE_ATTRIBUTES is malformed (expected key=value,key=value)");
		return 2;
	}
	struct opal_otlp_options otlp = { .resource_attributes = attrs,
					  .n_resource_attributes = n_attrs };
	struct opal_output out = { .dir = out_dir, .keep_intervals = o.keep_intervals,
				   .otlp = &otlp };
	if ((err = opal_output_init(&out)) < 0) {
		opal_err("cannot prepare %s: %s", o.out_dir, strerror(-err));
		return 1;
	}

	if ((err = opal_services_open(svc, sym, state_dir, db_path)) < 0) {
		opal_err("cannot open the debuginfo store in %s: %s", o.state_dir, strerror(-err));
		return 1;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_sighup;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* Everything opened by privilege is held now, and no collector input
	 * has been read yet. */
	const char *rw_dirs[] = { state_dir, out_dir };
	struct opal_sandbox_config sbc = { .prog = "opal-symbolizer", .rw_dirs = rw_dirs,
					   .n_rw_dirs = 2,
					   .unlink_dir = inherited ? NULL : dirname(sock_dir) };
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
	/* Threads (HTTP API, fleet) only once the sandbox covers them. */
	if ((err = opal_services_start(svc)) < 0) {
		opal_err("cannot start the HTTP API / upstream: %s", strerror(-err));
		return 1;
	}

	struct interval_tally tally = { 0 };
	struct opal_server_config cfg = { .listen_fd = lfd, .sym = sym, .ledger = ledger,
					  .out = &out, .whole_run = o.whole_run,
					  .n_allow = o.n_allow, .on_interval = report_interval,
					  .on_interval_arg = &tally };
	memcpy(cfg.allow_uids, o.allow_uids, sizeof(o.allow_uids));
	opal_info("listening on %s%s; state %s; profiles in %s%s", o.socket_path,
		  inherited ? " (socket activation)" : "", o.state_dir, o.out_dir,
		  dropping ? "; privileges dropped" : "");
	opal_notify("READY=1");
	opal_notify_status("listening on %s for collectors", o.socket_path);
	err = opal_server_run(&cfg, &stop_flag);

	opal_services_stop(svc);
	opal_symbolizer_free(sym);
	opal_ledger_close(ledger);
	opal_cache_close(cache);
	opal_otlp_kv_free(attrs, n_attrs);
	close(lfd);
	if (!inherited)   /* an activated socket belongs to its socket unit */
		unlink(o.socket_path);
	if (opal_seccomp_denials())
		opal_warn("seccomp denied %llu system calls in this run (the first are logged above)",
			  (unsigned long long)opal_seccomp_denials());
	opal_notify_close();
	opal_info("stopped");
	return err < 0 ? 1 : 0;
}
