/* Command line of opal-collector. */
#ifndef OPAL_COLLECTOR_OPTIONS_H
#define OPAL_COLLECTOR_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define OPAL_DEFAULT_SOCKET       "/run/opal/collector.sock"
#define OPAL_DEFAULT_FREQUENCY    20u           /* Hz */
#define OPAL_DEFAULT_INTERVAL     5u            /* seconds */
#define OPAL_DEFAULT_BUFFER_BYTES (16u << 20)   /* unacknowledged intervals */
#define OPAL_DEFAULT_MAX_FDS      4096u         /* open ELF descriptors */

#define OPAL_MAX_FREQUENCY        100000u       /* 10 us period */
#define OPAL_MAX_INTERVAL         3600u
#define OPAL_MIN_BUFFER_BYTES     (64u << 10)
#define OPAL_MAX_BUFFER_BYTES     (1ull << 30)
#define OPAL_MIN_MAX_FDS          16u
#define OPAL_MAX_MAX_FDS          (1u << 20)

struct opal_collector_options {
	const char *socket_path;   /* points into argv or a literal */
	uint32_t frequency_hz;
	uint32_t interval_s;
	uint64_t buffer_bytes;
	uint32_t max_fds;
	bool include_self;
	bool verbose;
};

/* Parses argv into `o` (defaults first). Returns 0 to run, 1 when --help
 * was printed to `out` (exit 0), or -EINVAL after printing the problem and
 * a usage hint to `err` (exit 2). Resets getopt's state, so it may be
 * called more than once. */
int opal_options_parse(int argc, char **argv, struct opal_collector_options *o, FILE *out,
		       FILE *err);

/* Prints every option with its default. */
void opal_options_usage(FILE *f);

#endif
