/* opal-collector command line (options.h). */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

enum { OPT_SOCKET = 256, OPT_FREQ, OPT_INTERVAL, OPT_BUFFER, OPT_MAX_FDS, OPT_SELF };

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "frequency", required_argument, NULL, OPT_FREQ },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "buffer-bytes", required_argument, NULL, OPT_BUFFER },
	{ "max-fds", required_argument, NULL, OPT_MAX_FDS },
	{ "include-self", no_argument, NULL, OPT_SELF },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

void opal_options_usage(FILE *f)
{
	fprintf(f,
		"Usage: opal-collector [OPTION]...\n"
		"Samples on-CPU stacks of every process with eBPF and sends them to opal-symbolizer.\n"
		"Runs as root.\n\n"
		"  --socket PATH         symbolizer's Unix socket (default %s)\n"
		"  --frequency HZ        samples per second per CPU, 1..%u (default %u)\n"
		"  --interval SECONDS    reporting interval, 1..%u (default %u)\n"
		"  --buffer-bytes N      serialized intervals kept until acknowledged,\n"
		"                        %u..%llu (default %u)\n"
		"  --max-fds N           ELF descriptors kept open, %u..%u (default %u)\n"
		"  --include-self        also sample opal's own processes (default: excluded)\n"
		"  --verbose             debug logging (default: off)\n"
		"  --help                show this help\n",
		OPAL_DEFAULT_SOCKET, OPAL_MAX_FREQUENCY, OPAL_DEFAULT_FREQUENCY, OPAL_MAX_INTERVAL,
		OPAL_DEFAULT_INTERVAL, OPAL_MIN_BUFFER_BYTES, OPAL_MAX_BUFFER_BYTES,
		OPAL_DEFAULT_BUFFER_BYTES, OPAL_MIN_MAX_FDS, OPAL_MAX_MAX_FDS, OPAL_DEFAULT_MAX_FDS);
}

/* Decimal unsigned in [lo, hi]; rejects signs, blanks and trailing text. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int opal_options_parse(int argc, char **argv, struct opal_collector_options *o, FILE *out,
		       FILE *err)
{
	uint64_t v;
	int c;

	*o = (struct opal_collector_options){
		.socket_path = OPAL_DEFAULT_SOCKET,
		.frequency_hz = OPAL_DEFAULT_FREQUENCY,
		.interval_s = OPAL_DEFAULT_INTERVAL,
		.buffer_bytes = OPAL_DEFAULT_BUFFER_BYTES,
		.max_fds = OPAL_DEFAULT_MAX_FDS,
	};
	optind = 0;   /* GNU: full reinitialisation */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		const char *bad = NULL;
		switch (c) {
		case OPT_SOCKET:
			if (!optarg[0] || strlen(optarg) >= sizeof(((struct sockaddr_un *)0)->sun_path))
				bad = "--socket needs a path shorter than 108 bytes";
			o->socket_path = optarg;
			break;
		case OPT_FREQ:
			if (parse_u64(optarg, 1, OPAL_MAX_FREQUENCY, &v))
				bad = "--frequency must be an integer in 1..100000";
			o->frequency_hz = (uint32_t)v;
			break;
		case OPT_INTERVAL:
			if (parse_u64(optarg, 1, OPAL_MAX_INTERVAL, &v))
				bad = "--interval must be an integer in 1..3600";
			o->interval_s = (uint32_t)v;
			break;
		case OPT_BUFFER:
			if (parse_u64(optarg, OPAL_MIN_BUFFER_BYTES, OPAL_MAX_BUFFER_BYTES, &v))
				bad = "--buffer-bytes must be an integer in 65536..1073741824";
			o->buffer_bytes = v;
			break;
		case OPT_MAX_FDS:
			if (parse_u64(optarg, OPAL_MIN_MAX_FDS, OPAL_MAX_MAX_FDS, &v))
				bad = "--max-fds must be an integer in 16..1048576";
			o->max_fds = (uint32_t)v;
			break;
		case OPT_SELF:
			o->include_self = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			opal_options_usage(out);
			return 1;
		default:
			fprintf(err, "opal-collector: unknown option or missing argument: %s\n",
				argv[optind - 1]);
			fprintf(err, "Try 'opal-collector --help'.\n");
			return -EINVAL;
		}
		if (bad) {
			fprintf(err, "opal-collector: %s (got '%s')\n", bad, optarg);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(err, "opal-collector: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}
