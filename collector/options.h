/* Configuration of opal-collector: command line, JSON config file
 * (--config FILE or OPAL_COLLECTOR_CONFIG) and defaults, through
 * shared/config.h (flags beat environment beat file beat defaults). */
#ifndef OPAL_COLLECTOR_OPTIONS_H
#define OPAL_COLLECTOR_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/un.h>

#define OPAL_DEFAULT_SOCKET       "/run/opal/collector.sock"
/* The symbolizer unit's User= (systemd/opal-symbolizer.service.in). */
#define OPAL_DEFAULT_SYMBOLIZER_USER "_opal"
#define OPAL_DEFAULT_FREQUENCY    20u           /* Hz */
#define OPAL_DEFAULT_INTERVAL     5u            /* seconds */
#define OPAL_DEFAULT_BUFFER_BYTES (16u << 20)   /* unacknowledged intervals */
#define OPAL_DEFAULT_MAX_FDS      4096u         /* open ELF descriptors */
#define OPAL_DEFAULT_LIFECYCLE    (2u << 20)    /* exec/exit event ring, bytes */

#define OPAL_MAX_FREQUENCY        100000u       /* 10 us period */
#define OPAL_MAX_INTERVAL         3600u
#define OPAL_MIN_BUFFER_BYTES     (64u << 10)
#define OPAL_MAX_BUFFER_BYTES     (1ull << 30)
#define OPAL_DEFAULT_OFFCPU_PPM   10000u        /* --off-cpu-threshold: 1% */
#define OPAL_DEFAULT_OFFCPU_MAX_RATE 100u     /* --off-cpu-max-rate */
#define OPAL_MAX_OFFCPU_PPM       1000000u
#define OPAL_MAX_OFFCPU_RATE      1000000u   /* --off-cpu-max-rate, per CPU per second */
#define OPAL_DEFAULT_UNWIND_CACHE "/var/cache/opal-collector/unwind"
#define OPAL_MIN_MAX_FDS          16u
#define OPAL_MAX_MAX_FDS          (1u << 20)

/* Variable naming the config file when --config is not given. */
#define OPAL_COLLECTOR_CONFIG_ENV "OPAL_COLLECTOR_CONFIG"

struct opal_collector_options {
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char symbolizer_user[64];     /* trusted as the socket's listener, besides root */
	uint32_t frequency_hz;
	uint32_t interval_s;          /* reloadable on SIGHUP */
	uint64_t buffer_bytes;
	uint32_t max_fds;
	uint64_t lifecycle_bytes;     /* rounded up to a power of two */
	bool include_self;
	bool off_cpu;                 /* off-CPU samples (docs/offcpu.md) */
	uint32_t off_cpu_ppm;         /* blocking switches recorded, per million */
	uint32_t off_cpu_max_rate;    /* ... per CPU per second at most (0: no bound) */
	bool command_line;            /* send process.command_line (opt-in) */
	bool native_only;             /* no interpreter frames (docs/interpreters.md) */
	char unwind_cache[256];       /* unwind table cache folder; "": none */
	uint64_t unwind_cache_bytes;  /* its bound */
	uint32_t unwind_build_pct;    /* table-building CPU, percent of one CPU */
	bool verbose;                 /* reloadable on SIGHUP */
};

/* Loads the configuration from argv, the environment and the config file
 * into `o`. Returns 0 to run, 1 when --help was printed to `out` (exit
 * 0), or -EINVAL (or another -errno of the config file) after printing the
 * problem and a usage hint to `err` (exit 2). */
int opal_options_parse(int argc, char **argv, struct opal_collector_options *o, FILE *out,
		       FILE *err);

/* SIGHUP: loads the configuration again from the same argv (the config
 * file may have changed). Options that can change at run time (verbose,
 * interval) are copied into `o` and logged; others that differ are logged
 * as needing a restart and keep their running value. On a load error `o`
 * is left as it was and the reason is logged. Returns the number of
 * options applied (0: nothing changed that could be applied), or the
 * load's -errno. */
int opal_options_reload(int argc, char **argv, struct opal_collector_options *o);

#endif
