/* otlp-receiver: the test OTLP/HTTP receiver as a program, for integration
 * tests (receiver.h describes behaviour scripts and control endpoints).
 *   otlp-receiver [--port N] [--log FILE] [--script STEPS] [--port-file FILE]
 *                 [--save-dir DIR]
 * Listens on 127.0.0.1 until SIGTERM/SIGINT. --port 0 (default) picks a
 * free port, written to --port-file once listening. */
#include "receiver.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: otlp-receiver [--port N] [--log FILE] [--script STEPS] "
			"[--port-file FILE] [--save-dir DIR]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *log = NULL, *script = NULL, *port_file = NULL, *save_dir = NULL;
	long port = 0;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		if (strcmp(argv[i], "--port") == 0) {
			char *end;
			port = strtol(argv[++i], &end, 10);
			if (*end || port < 0 || port > 65535)
				return usage();
		} else if (strcmp(argv[i], "--log") == 0) {
			log = argv[++i];
		} else if (strcmp(argv[i], "--script") == 0) {
			script = argv[++i];
		} else if (strcmp(argv[i], "--port-file") == 0) {
			port_file = argv[++i];
		} else if (strcmp(argv[i], "--save-dir") == 0) {
			save_dir = argv[++i];
		} else {
			return usage();
		}
	}
	struct otlp_receiver *r = otlp_receiver_start((uint16_t)port, log);
	if (!r)
		return 1;
	if (save_dir && otlp_receiver_save_dir(r, save_dir) < 0) {
		otlp_receiver_stop(r);
		return 1;
	}
	if (script && otlp_receiver_script(r, script) < 0) {
		fprintf(stderr, "otlp-receiver: bad --script '%s'\n", script);
		otlp_receiver_stop(r);
		return 2;
	}
	if (port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%u\n", otlp_receiver_port(r)) < 0 || fclose(f) != 0 ||
		    rename(tmp, port_file) < 0) {
			fprintf(stderr, "otlp-receiver: %s: %s\n", port_file, strerror(errno));
			otlp_receiver_stop(r);
			return 1;
		}
	}
	fprintf(stderr, "otlp-receiver: listening on 127.0.0.1:%u\n", otlp_receiver_port(r));
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop)
		pause();
	otlp_receiver_stop(r);
	return 0;
}
