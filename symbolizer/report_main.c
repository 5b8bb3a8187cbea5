/* opal-report: inspect a pprof file written by opal-symbolizer.
 *   opal-report top [-n N] FILE.pb.gz   top N functions by self and cumulative samples
 *   opal-report stacks FILE.pb.gz       one line per sample (see report.h)
 *   opal-report check FILE.pb.gz        exit 1 unless symbolized user and kernel frames exist
 *   opal-report flamegraph FILE.pb.gz -o OUT.html [--pid P] [--title TEXT]
 *                                       self-contained interactive flame graph page
 * Exit status: 0 success, 1 check failed, 2 usage or unreadable file. */
#include "flamegraph.h"
#include "outfile.h"
#include "report.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
	fprintf(stderr,
		"usage: opal-report top [-n N] FILE.pb.gz\n"
		"       opal-report stacks FILE.pb.gz\n"
		"       opal-report check FILE.pb.gz\n"
		"       opal-report flamegraph FILE.pb.gz -o OUT.html [--pid P] [--title TEXT]\n");
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

/* opal-report flamegraph: argv[2..] = FILE -o OUT [--pid P] [--title T] in any
 * order after FILE. The page is written atomically. */
static int flamegraph_cmd(int argc, char **argv)
{
	const char *in = NULL, *out = NULL, *title = NULL;
	struct opal_fg_filter f = { 0 };
	Perftools__Profiles__Profile *p;
	struct opal_flamegraph *fg;
	char *html, *end;
	size_t len;
	int rc, err;

	for (int i = 2; i < argc; i++) {
		if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--pid") == 0 ||
		     strcmp(argv[i], "--title") == 0) && i + 1 < argc) {
			const char *opt = argv[i++];
			if (opt[1] == 'o') {
				out = argv[i];
			} else if (opt[2] == 't') {
				title = argv[i];
			} else {
				errno = 0;
				unsigned long v = strtoul(argv[i], &end, 10);
				if (errno || *end || end == argv[i] || v == 0 || v > UINT32_MAX)
					return usage();
				f.pid = (uint32_t)v;
			}
		} else if (!in && argv[i][0] != '-') {
			in = argv[i];
		} else {
			return usage();
		}
	}
	if (!in || !out)
		return usage();
	if ((rc = load(in, &p)))
		return rc;
	fg = opal_flamegraph_new();
	err = fg ? opal_flamegraph_add_pprof(fg, p, &f) : -ENOMEM;
	if (!err)
		err = opal_flamegraph_html_buf(fg, title ? title : in, &html, &len);
	if (!err) {
		err = opal_outfile_write(out, (const uint8_t *)html, len);
		free(html);
	}
	if (err)
		fprintf(stderr, "opal-report: flame graph %s: %s\n", out, strerror(-err));
	else
		printf("%s: %llu samples, %zu frames%s\n", out,
		       (unsigned long long)opal_flamegraph_total(fg), opal_flamegraph_n_nodes(fg) - 1,
		       f.pid ? " (one pid)" : "");
	opal_flamegraph_free(fg);
	perftools__profiles__profile__free_unpacked(p, NULL);
	return err ? 2 : 0;
}

int main(int argc, char **argv)
{
	Perftools__Profiles__Profile *p;
	size_t n = 20;
	int rc;

	if (argc < 3)
		return usage();
	const char *cmd = argv[1];
	if (strcmp(cmd, "flamegraph") == 0)
		return flamegraph_cmd(argc, argv);
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
