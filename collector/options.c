/* opal-collector configuration (options.h): one option table for flags,
 * config file and --help. */
#include "options.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "sampler/sampling.h"
#include "shared/config.h"
#include "shared/log.h"

/* What opal_config_load fills; copied into struct opal_collector_options. */
struct loaded {
	char *socket, *symbolizer_user, *unwind_cache;
	uint64_t frequency, interval, buffer_bytes, max_fds, lifecycle_bytes, off_cpu_ppm,
		off_cpu_max_rate, unwind_cache_bytes, unwind_build_pct;
	bool include_self, off_cpu, command_line, native_only, verbose;
};

/* Defaults are written as on the command line; they equal the
 * OPAL_DEFAULT_* values of options.h (checked by the unit test). */
static const struct opal_opt opts[] = {
	{ .name = "socket", .type = OPAL_OPT_STRING, .offset = offsetof(struct loaded, socket),
	  .def = OPAL_DEFAULT_SOCKET, .arg = "PATH",
	  .help = "the symbolizer's Unix socket (shorter than 108 bytes)" },
	{ .name = "symbolizer-user", .type = OPAL_OPT_STRING,
	  .offset = offsetof(struct loaded, symbolizer_user), .def = OPAL_DEFAULT_SYMBOLIZER_USER,
	  .arg = "NAME",
	  .help = "the user, besides root, whose listener on --socket may receive the "
		  "collector's data and descriptors; the socket's folder must be writable by no "
		  "one else (a user that does not exist: root only)" },
	{ .name = "frequency", .type = OPAL_OPT_UINT, .offset = offsetof(struct loaded, frequency),
	  .def = "20", .arg = "HZ",
	  .help = "samples per second per CPU", .min = 1, .max = OPAL_MAX_FREQUENCY },
	{ .name = "interval", .type = OPAL_OPT_UINT, .offset = offsetof(struct loaded, interval),
	  .def = "5", .arg = "SECONDS",
	  .help = "reporting interval: stacks are aggregated and sent this often",
	  .min = 1, .max = OPAL_MAX_INTERVAL, .reloadable = true },
	{ .name = "buffer-bytes", .type = OPAL_OPT_SIZE,
	  .offset = offsetof(struct loaded, buffer_bytes), .def = "16m", .arg = "BYTES",
	  .help = "serialized intervals kept until acknowledged",
	  .min = OPAL_MIN_BUFFER_BYTES, .max = OPAL_MAX_BUFFER_BYTES },
	{ .name = "max-fds", .type = OPAL_OPT_UINT, .offset = offsetof(struct loaded, max_fds),
	  .def = "4096", .arg = "N", .help = "ELF descriptors kept open",
	  .min = OPAL_MIN_MAX_FDS, .max = OPAL_MAX_MAX_FDS },
	{ .name = "lifecycle-buffer", .type = OPAL_OPT_SIZE,
	  .offset = offsetof(struct loaded, lifecycle_bytes), .def = "2m", .arg = "BYTES",
	  .help = "ring buffer of exec/exit events (rounded up to a power of two)",
	  .min = OPAL_LIFECYCLE_MIN, .max = OPAL_LIFECYCLE_MAX },
	{ .name = "include-self", .type = OPAL_OPT_BOOL,
	  .offset = offsetof(struct loaded, include_self),
	  .help = "also sample opal's own processes (excluded by default)" },
	{ .name = "off-cpu", .type = OPAL_OPT_BOOL, .offset = offsetof(struct loaded, off_cpu),
	  .help = "also record off-CPU time: the stack of each thread that blocks, with the "
		  "nanoseconds until it runs again (docs/offcpu.md)" },
	{ .name = "off-cpu-threshold", .type = OPAL_OPT_UINT,
	  .offset = offsetof(struct loaded, off_cpu_ppm), .def = "10000", .arg = "PPM",
	  .help = "with --off-cpu: the blocking context switches recorded, per million "
		  "(chosen at random)", .min = 1, .max = OPAL_MAX_OFFCPU_PPM },
	{ .name = "off-cpu-max-rate", .type = OPAL_OPT_UINT,
	  .offset = offsetof(struct loaded, off_cpu_max_rate),
	  .def = "100", .arg = "N",
	  .help = "with --off-cpu: blocking switches recorded per CPU per second at most, "
		  "whatever the threshold picks (0: no bound)", .min = 0,
	  .max = OPAL_MAX_OFFCPU_RATE },
	{ .name = "command-line", .type = OPAL_OPT_BOOL,
	  .offset = offsetof(struct loaded, command_line),
	  .help = "send each process's command line (process.command_line, at most 4095 "
		  "bytes); off by default: arguments can hold secrets" },
	{ .name = "native-only", .type = OPAL_OPT_BOOL,
	  .offset = offsetof(struct loaded, native_only),
	  .help = "kernel and native frames only: no interpreter (CPython) frames, the code "
		  "objects they name not read (to compare the cost of interpreter frames)" },
	{ .name = "unwind-cache", .type = OPAL_OPT_STRING,
	  .offset = offsetof(struct loaded, unwind_cache), .def = OPAL_DEFAULT_UNWIND_CACHE,
	  .arg = "DIR",
	  .help = "folder of the unwind table cache, kept across restarts (made if missing; "
		  "root's, writable by no one else); \"none\": no cache (docs/unwinding.md)" },
	{ .name = "unwind-cache-bytes", .type = OPAL_OPT_SIZE,
	  .offset = offsetof(struct loaded, unwind_cache_bytes), .def = "256m", .arg = "BYTES",
	  .help = "bound of the unwind table cache: past it the least recently used tables "
		  "are deleted", .min = 1u << 20, .max = 64ull << 30 },
	{ .name = "unwind-build-cpu", .type = OPAL_OPT_UINT,
	  .offset = offsetof(struct loaded, unwind_build_pct), .def = "10", .arg = "PERCENT",
	  .help = "CPU that building unwind tables may take, in percent of one CPU, after a "
		  "first 2 s (tables wait past it)", .min = 1, .max = 100 },
	{ .name = "verbose", .type = OPAL_OPT_BOOL, .offset = offsetof(struct loaded, verbose),
	  .help = "debug logging", .reloadable = true },
};

static const struct opal_config_spec spec = {
	.prog = "opal-collector",
	.usage = "Samples on-CPU (and with --off-cpu off-CPU) stacks of every process with eBPF and sends them to "
		 "opal-symbolizer.\nRuns as root. SIGHUP re-reads the configuration: options "
		 "marked \"reloadable\" take\neffect, others need a restart.",
	.opts = opts,
	.n_opts = sizeof(opts) / sizeof(opts[0]),
	.config_env = OPAL_COLLECTOR_CONFIG_ENV,
};

static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	return false;
}

static int to_options(struct loaded *l, struct opal_collector_options *o, char *why,
		      size_t why_len)
{
	if (!l->socket || !l->socket[0] || strlen(l->socket) >= sizeof(o->socket_path)) {
		snprintf(why, why_len, "socket: '%s' is not a path shorter than %zu bytes",
			 l->socket ? l->socket : "", sizeof(o->socket_path));
		return -EINVAL;
	}
	if (!l->symbolizer_user || strlen(l->symbolizer_user) >= sizeof(o->symbolizer_user)) {
		snprintf(why, why_len, "symbolizer-user: not a user name shorter than %zu bytes",
			 sizeof(o->symbolizer_user));
		return -EINVAL;
	}
	if (!l->unwind_cache || strlen(l->unwind_cache) >= sizeof(o->unwind_cache) ||
	    (l->unwind_cache[0] != '/' && strcmp(l->unwind_cache, "none"))) {
		snprintf(why, why_len, "unwind-cache: not an absolute path shorter than %zu bytes, "
			 "or \"none\"", sizeof(o->unwind_cache));
		return -EINVAL;
	}
	memset(o, 0, sizeof(*o));
	strcpy(o->socket_path, l->socket);
	if (strcmp(l->unwind_cache, "none"))
		strcpy(o->unwind_cache, l->unwind_cache);
	o->unwind_cache_bytes = l->unwind_cache_bytes;
	o->unwind_build_pct = (uint32_t)l->unwind_build_pct;
	strcpy(o->symbolizer_user, l->symbolizer_user);
	o->frequency_hz = (uint32_t)l->frequency;
	o->interval_s = (uint32_t)l->interval;
	o->buffer_bytes = l->buffer_bytes;
	o->max_fds = (uint32_t)l->max_fds;
	o->lifecycle_bytes = l->lifecycle_bytes;
	o->include_self = l->include_self;
	o->off_cpu = l->off_cpu;
	o->off_cpu_ppm = (uint32_t)l->off_cpu_ppm;
	o->off_cpu_max_rate = (uint32_t)l->off_cpu_max_rate;
	o->command_line = l->command_line;
	o->native_only = l->native_only;
	o->verbose = l->verbose;
	return 0;
}

/* Loads into `l` and checks what the table cannot; on error `l` holds no
 * allocation and `why` the reason. */
static int load(int argc, char **argv, struct loaded *l, char *why, size_t why_len)
{
	struct opal_collector_options scratch;
	int r;

	memset(l, 0, sizeof(*l));
	r = opal_config_load(&spec, argc, argv, l, NULL, why, why_len);
	if (r == 0 && (r = to_options(l, &scratch, why, why_len)) < 0)
		opal_config_free(&spec, l);
	return r;
}

int opal_options_parse(int argc, char **argv, struct opal_collector_options *o, FILE *out,
		       FILE *err)
{
	struct loaded l;
	char why[512];
	int r;

	if (wants_help(argc, argv)) {
		opal_config_help(&spec, out);
		return 1;
	}
	r = load(argc, argv, &l, why, sizeof(why));
	if (r == 0)
		r = to_options(&l, o, why, sizeof(why));
	opal_config_free(&spec, &l);
	if (r < 0) {
		fprintf(err, "opal-collector: %s\n", why);
		fprintf(err, "Try 'opal-collector --help'.\n");
	}
	return r;
}

int opal_options_reload(int argc, char **argv, struct opal_collector_options *o)
{
	struct loaded cur = {
		.socket = strdup(o->socket_path), .symbolizer_user = strdup(o->symbolizer_user),
		.unwind_cache = strdup(o->unwind_cache[0] ? o->unwind_cache : "none"),
		.unwind_cache_bytes = o->unwind_cache_bytes, .unwind_build_pct = o->unwind_build_pct,
		.frequency = o->frequency_hz,
		.interval = o->interval_s, .buffer_bytes = o->buffer_bytes, .max_fds = o->max_fds,
		.lifecycle_bytes = o->lifecycle_bytes,
		.include_self = o->include_self, .off_cpu = o->off_cpu,
		.off_cpu_ppm = o->off_cpu_ppm, .off_cpu_max_rate = o->off_cpu_max_rate,
		.command_line = o->command_line,
		.native_only = o->native_only, .verbose = o->verbose,
	}, next;
	struct opal_config_plan plan;
	char why[512], was[64], now[64];
	int r;

	if (!cur.socket || !cur.symbolizer_user || !cur.unwind_cache) {
		free(cur.socket);
		free(cur.symbolizer_user);
		free(cur.unwind_cache);
		return -ENOMEM;
	}
	r = load(argc, argv, &next, why, sizeof(why));
	if (r < 0) {
		opal_err("SIGHUP: configuration not reloaded, keeping the running one: %s", why);
		opal_config_free(&spec, &cur);
		return r;
	}
	opal_config_apply_reload(&spec, &cur, NULL, &next, NULL, &plan);
	for (size_t i = 0; i < plan.n_applied; i++) {
		/* after the swap, `next` holds the old value */
		opal_config_value_text(plan.applied[i], &next, was, sizeof(was));
		opal_config_value_text(plan.applied[i], &cur, now, sizeof(now));
		opal_info("SIGHUP: %s: %s -> %s", plan.applied[i]->name, was, now);
	}
	for (size_t i = 0; i < plan.n_restart; i++)
		opal_warn("SIGHUP: %s changed in the configuration: needs a restart (the running "
			  "value stays)", plan.restart[i]->name);
	if (!plan.n_applied && !plan.n_restart)
		opal_info("SIGHUP: nothing to reload: configuration unchanged");
	to_options(&cur, o, why, sizeof(why));   /* cannot fail: the running socket is kept */
	opal_config_free(&spec, &cur);
	opal_config_free(&spec, &next);
	return (int)plan.n_applied;
}
