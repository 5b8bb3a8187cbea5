/* opal-report: inspect a pprof file written by opal-symbolizer.
 *   opal-report top [-n N] FILE.pb.gz   top N functions by self and cumulative samples
 *   opal-report stacks FILE.pb.gz       one line per sample (see report.h)
 *   opal-report check FILE.pb.gz        exit 1 unless symbolized user and kernel frames exist
 * Exit status: 0 success, 1 check failed, 2 usage or unreadable file. */
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
	fprintf(stderr,
		"usage: opal-report top [-n N] FILE.pb.gz\n"
		"       opal-report stacks FILE.pb.gz\n"
		"       opal-report check FILE.pb.gz\n");
	return 2;
}

static int load(const char *path, Perftools__Profiles__Profile **p)
{
	char why[256] = "";

	if (opal_report_load(path, p, why, sizeof(why)) < 0) {
		fprintf(stderr, "opal-report: %s: %s\n", path, why);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	Perftools__Profiles__Profile *p;
	size_t n = 20;
	int rc;

	if (argc < 3)
		return usage();
	const char *cmd = argv[1];
	int argi = 2;
	if (strcmp(cmd, "top") == 0 && argc == 5 && strcmp(argv[2], "-n") == 0) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(argv[3], &end, 10);
		if (errno || *end || end == argv[3] || v == 0 || v > 1000000)
			return usage();
		n = v;
		argi = 4;
	}
	if (argc != argi + 1)
		return usage();
	const char *path = argv[argi];

	if (strcmp(cmd, "top") == 0) {
		if ((rc = load(path, &p)))
			return rc;
		rc = opal_report_top(stdout, p, n) ? 2 : 0;
	} else if (strcmp(cmd, "stacks") == 0) {
		if ((rc = load(path, &p)))
			return rc;
		rc = opal_report_stacks(stdout, p) ? 2 : 0;
	} else if (strcmp(cmd, "check") == 0) {
		char why[256];
		if ((rc = load(path, &p)))
			return rc;
		rc = opal_report_check(p, why, sizeof(why));
		if (rc)
			fprintf(stderr, "opal-report: check failed: %s\n", why);
		else
			printf("ok: symbolized user frames and kernel frames present\n");
	} else {
		return usage();
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	if (fflush(stdout) != 0)
		return 2;
	return rc;
}
