/* opal-report: inspect a pprof file written by opal-symbolizer.
 *   opal-report top [-n N] FILE.pb.gz   top N functions by self and cumulative samples
 *   opal-report stacks FILE.pb.gz       one line per sample (see report.h)
 *   opal-report check FILE.pb.gz        exit 1 unless symbolized user and kernel frames exist
 *   opal-report flamegraph FILE.pb.gz -o OUT.html [--pid P] [--title TEXT]
 *                                       self-contained interactive flame graph page
 * Exit statuses: the EXIT_* below (also in --help and the man page). */
#include "symbolizer/base/atomic_file.h"
#include "symbolizer/profile/flamegraph.h"
#include "symbolizer/profile/profile.h"
#include "symbolizer/profile/report.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit statuses, named as elfutils' eu-stack names its own (src/stack.c):
 * a finding, an error that stopped the command, and a bad command line
 * (EX_USAGE of sysexits.h) each have their own. */
#define EXIT_OK            0
#define EXIT_CHECK_FAILED  1   /* check: user or kernel frames missing */
#define EXIT_BAD           2   /* unreadable or undecodable input, output not written */
#define EXIT_USAGE        64

static const char usage_text[] =
	"Usage: opal-report top [-n N] [--kind native|kernel|cpython] FILE.pb.gz\n"
	"  or:  opal-report stacks [--lines] FILE.pb.gz\n"
	"  or:  opal-report check FILE.pb.gz\n"
	"  or:  opal-report flamegraph FILE.pb.gz -o OUT.html [--pid P] [--title TEXT]\n"
	"Inspects a pprof profile written by opal-symbolizer: top N functions by self\n"
	"and cumulative samples (of one kind of frame with --kind: cpython lists the\n"
	"Python functions, self being the innermost Python frame), one line per sample\n"
	"(Python frames as FUNCTION (FILE:LINE), every frame with --lines), a check\n"
	"that symbolized user and kernel frames are present, or a self-contained\n"
	"flame graph page.\n\n"
	"Exit status: 0 done (check: frames present), 1 check found frames missing,\n"
	"2 the profile could not be read or the output not written, 64 bad usage.\n";

static int usage(void)
{
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

static int load(const char *path, Perftools__Profiles__Profile **p)
{
	char why[256] = "";

	if (opal_report_load(path, p, why, sizeof(why)) < 0) {
		fprintf(stderr, "opal-report: %s: %s\n", path, why);
		return EXIT_BAD;
	}
	return EXIT_OK;
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
		printf("%s: %llu %s, %zu frames%s\n", out,
		       (unsigned long long)opal_flamegraph_total(fg), opal_flamegraph_unit(fg),
		       opal_flamegraph_n_nodes(fg) - 1,
		       f.pid ? " (one pid)" : "");
	if (!err && opal_flamegraph_truncated(fg))
		fprintf(stderr, "opal-report: %llu samples counted in a shallower frame: the graph "
			"holds at most %u frames and stacks of at most %u\n",
			(unsigned long long)opal_flamegraph_truncated(fg),
			OPAL_FLAMEGRAPH_MAX_NODES - 1, OPAL_FLAMEGRAPH_MAX_DEPTH);
	opal_flamegraph_free(fg);
	perftools__profiles__profile__free_unpacked(p, NULL);
	return err ? EXIT_BAD : EXIT_OK;
}

int main(int argc, char **argv)
{
	Perftools__Profiles__Profile *p;
	size_t n = 20;
	int rc;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_text, stdout);
		return EXIT_OK;
	}
	if (argc < 3)
		return usage();
	const char *cmd = argv[1];
	if (strcmp(cmd, "flamegraph") == 0)
		return flamegraph_cmd(argc, argv);
	int argi = 2, kind = -1;
	static const char *const kinds[OPAL_FRAME_N_TYPES] = { "native", "kernel", "cpython",
							      "v8js", "jvm" };
	while (strcmp(cmd, "top") == 0 && argi + 2 < argc) {
		if (strcmp(argv[argi], "-n") == 0) {
			char *end;
			errno = 0;
			unsigned long v = strtoul(argv[argi + 1], &end, 10);
			if (errno || *end || end == argv[argi + 1] || v == 0 || v > 1000000)
				return usage();
			n = v;
		} else if (strcmp(argv[argi], "--kind") == 0) {
			for (kind = 0; kind < OPAL_FRAME_N_TYPES && strcmp(kinds[kind], argv[argi + 1]);
			     kind++)
				;
			if (kind == OPAL_FRAME_N_TYPES)
				return usage();
		} else {
			return usage();
		}
		argi += 2;
	}
	bool lines = false;
	if (strcmp(cmd, "stacks") == 0 && argc == 4 && strcmp(argv[2], "--lines") == 0) {
		lines = true;
		argi = 3;
	}
	if (argc != argi + 1)
		return usage();
	const char *path = argv[argi];

	if (strcmp(cmd, "top") == 0) {
		if ((rc = load(path, &p)))
			return rc;
		rc = opal_report_top(stdout, p, n, kind) ? EXIT_BAD : EXIT_OK;
	} else if (strcmp(cmd, "stacks") == 0) {
		if ((rc = load(path, &p)))
			return rc;
		rc = opal_report_stacks(stdout, p, lines) ? EXIT_BAD : EXIT_OK;
	} else if (strcmp(cmd, "check") == 0) {
		char why[256];
		if ((rc = load(path, &p)))
			return rc;
		int r = opal_report_check(p, why, sizeof(why));
		if (r < 0) {
			fprintf(stderr, "opal-report: %s: %s\n", path, why);
			rc = EXIT_BAD;
		} else if (r > 0) {
			fprintf(stderr, "opal-report: check failed: %s\n", why);
			rc = EXIT_CHECK_FAILED;
		} else {
			printf("ok: symbolized user frames and kernel frames present\n");
			rc = EXIT_OK;
		}
	} else {
		return usage();
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	if (fflush(stdout) != 0)
		return EXIT_BAD;
	return rc;
}
