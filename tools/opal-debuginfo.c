/* opal-debuginfo: debug-data uploads from a CI pipeline to a symbolizer
 * (the upload flow of docs/http-api.md), and the IDs opal uses for a
 * file. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/fileid.h"
#include "shared/log.h"
#include "symbolizer/debuginfo/debuginfo_probe.h"
#include "symbolizer/debuginfo/debuginfo_store.h"
#include "symbolizer/http/http_client.h"
#include "symbolizer/http/http_server.h"

#define IN_PROGRESS_TRIES 4
#define IN_PROGRESS_PAUSE_S 5

/* Exit statuses, named as elfutils' eu-stack names its own (src/stack.c):
 * some files failed (the others were still tried), nothing could be tried,
 * and a bad command line (EX_USAGE of sysexits.h). */
#define EXIT_OK      0   /* every file uploaded, not needed, or its IDs printed */
#define EXIT_ERROR   1   /* at least one file failed */
#define EXIT_BAD     2   /* token or CA file unreadable, libcurl unusable */
#define EXIT_USAGE  64

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: opal-debuginfo upload --server URL [options] FILE...\n"
		"  or:  opal-debuginfo buildid FILE...\n\n"
		"upload: sends each file's debug data to an opal symbolizer (its HTTP API).\n"
		"  --server URL        the symbolizer, e.g. http://127.0.0.1:7412\n"
		"  --token-file F      bearer token for the symbolizer's write endpoints\n"
		"  --cacert F          CA bundle to trust for an https server\n"
		"  --type T            debuginfo (default: only the debug parts of the ELF, like\n"
		"                      objcopy --only-keep-debug), executable (the file as it is)\n"
		"                      or sources (a tar archive; needs --build-id)\n"
		"  --build-id HEX      upload under this GNU build ID instead of the file's own\n"
		"  --force             upload even when the server already has data\n"
		"buildid: prints, per file, its GNU build ID (or -) and its htlhash file ID.\n\n"
		"Exit status: 0 every file uploaded, not needed or identified; 1 some file\n"
		"failed (the others were still tried); 2 nothing could be tried (token or\n"
		"CA file unreadable, libcurl unusable); 64 bad usage.\n");
}

static int ids_of(const char *path, int fd, char *gnu, size_t gnu_len, char *htl)
{
	struct opal_elf_probe p;
	char why[256];
	opal_file_id fid;
	int r = opal_elf_probe_fd(fd, &p, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "opal-debuginfo: %s: %s\n", path,
			r == -ENOEXEC || r == -EBADMSG ? why : strerror(-r));
		return r;
	}
	if ((r = opal_file_id_from_fd(fd, &fid)) < 0) {
		fprintf(stderr, "opal-debuginfo: %s: %s\n", path, strerror(-r));
		return r;
	}
	opal_file_id_to_hex(&fid, htl);
	if (p.build_id_len && 2 * p.build_id_len < gnu_len)
		opal_hex_encode(p.build_id, p.build_id_len, gnu);
	else
		gnu[0] = '\0';
	return 0;
}

static int cmd_buildid(int argc, char **argv)
{
	int rc = EXIT_OK;
	if (argc < 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (int i = 0; i < argc; i++) {
		char gnu[OPAL_DI_ID_HEX_MAX + 1], htl[33];
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "opal-debuginfo: %s: %s\n", argv[i], strerror(errno));
			rc = EXIT_ERROR;
			continue;
		}
		if (ids_of(argv[i], fd, gnu, sizeof(gnu), htl) == 0)
			printf("%s gnu=%s htlhash=%s\n", argv[i], gnu[0] ? gnu : "-", htl);
		else
			rc = EXIT_ERROR;
		close(fd);
	}
	return rc;
}

static const char *outcome_name(enum opal_upload_outcome o)
{
	switch (o) {
	case OPAL_UPLOAD_OUT_DONE: return "uploaded";
	case OPAL_UPLOAD_OUT_NOT_NEEDED: return "not needed";
	case OPAL_UPLOAD_OUT_IN_PROGRESS: return "in progress elsewhere";
	case OPAL_UPLOAD_OUT_REJECTED: return "rejected";
	default: return "failed";
	}
}

struct upload_opts {
	struct opal_http_client client;
	enum opal_di_type type;
	const char *build_id;
	bool force;
	const char *tmp;
};

static enum opal_upload_outcome upload_one(const struct upload_opts *o, const char *path, int fd,
					   char *why, size_t len)
{
	char gnu[OPAL_DI_ID_HEX_MAX + 1] = "", htl[33] = "";
	if (o->type != OPAL_DI_SOURCES && ids_of(path, fd, gnu, sizeof(gnu), htl) < 0) {
		snprintf(why, len, "not an ELF file opal can use");
		return OPAL_UPLOAD_OUT_ERROR;
	}
	const char *id = o->build_id ? o->build_id : gnu[0] ? gnu : htl;
	enum opal_di_id_type idt = o->build_id || gnu[0] ? OPAL_DI_ID_GNU : OPAL_DI_ID_HTLHASH;
	printf("%s: %s %s\n", path, opal_di_id_type_name(idt), id);
	enum opal_upload_outcome out = OPAL_UPLOAD_OUT_ERROR;
	for (int t = 0; t < IN_PROGRESS_TRIES; t++) {
		if (t)
			sleep(IN_PROGRESS_PAUSE_S);
		if (o->type == OPAL_DI_DEBUGINFO)
			out = opal_http_client_upload_debug(&o->client, fd, id, idt, o->tmp, o->force,
							    why, len);
		else
			out = opal_http_client_upload(&o->client, fd, id, idt, o->type, o->force, why,
						      len);
		if (out != OPAL_UPLOAD_OUT_IN_PROGRESS)
			break;
	}
	return out;
}

static int cmd_upload(int argc, char **argv)
{
	enum { O_SERVER = 256, O_TOKEN, O_CACERT, O_TYPE, O_BUILD_ID, O_FORCE, O_HELP };
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, O_SERVER },
		{ "token-file", required_argument, NULL, O_TOKEN },
		{ "cacert", required_argument, NULL, O_CACERT },
		{ "type", required_argument, NULL, O_TYPE },
		{ "build-id", required_argument, NULL, O_BUILD_ID },
		{ "force", no_argument, NULL, O_FORCE },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	struct upload_opts o = { .type = OPAL_DI_DEBUGINFO };
	char *token = NULL, *ca = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_SERVER: o.client.base = optarg; break;
		case O_CACERT:
			free(ca);
			ca = opal_http_read_secret(optarg, 1u << 20, false);
			if (!ca) {
				fprintf(stderr, "opal-debuginfo: CA file %s: %s\n", optarg,
					strerror(errno));
				return EXIT_BAD;
			}
			o.client.ca_pem = ca;
			break;
		case O_FORCE: o.force = true; break;
		case O_BUILD_ID: o.build_id = optarg; break;
		case O_TOKEN:
			free(token);
			token = opal_http_read_secret(optarg, OPAL_HTTP_MAX_TOKEN, true);
			if (!token) {
				fprintf(stderr, "opal-debuginfo: token file %s: %s\n", optarg,
					strerror(errno));
				return EXIT_BAD;
			}
			break;
		case O_TYPE:
			if (!strcmp(optarg, "debuginfo"))
				o.type = OPAL_DI_DEBUGINFO;
			else if (!strcmp(optarg, "executable"))
				o.type = OPAL_DI_EXECUTABLE;
			else if (!strcmp(optarg, "sources"))
				o.type = OPAL_DI_SOURCES;
			else {
				fprintf(stderr, "opal-debuginfo: --type must be debuginfo, "
					"executable or sources\n");
				return EXIT_USAGE;
			}
			break;
		case O_HELP: usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (!o.client.base || optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (o.build_id && !opal_di_id_valid(o.build_id, OPAL_DI_ID_GNU)) {
		fprintf(stderr, "opal-debuginfo: --build-id must be lowercase hex\n");
		return EXIT_USAGE;
	}
	if (o.type == OPAL_DI_SOURCES && !o.build_id) {
		fprintf(stderr, "opal-debuginfo: --type sources needs --build-id\n");
		return EXIT_USAGE;
	}
	o.client.token = token;
	o.tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (opal_http_client_global_init() < 0) {
		fprintf(stderr, "opal-debuginfo: libcurl initialisation failed\n");
		return EXIT_BAD;
	}
	int rc = EXIT_OK;
	for (int i = optind; i < argc; i++) {
		char why[512] = "";
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "opal-debuginfo: %s: %s\n", argv[i], strerror(errno));
			rc = EXIT_ERROR;
			continue;
		}
		enum opal_upload_outcome out = upload_one(&o, argv[i], fd, why, sizeof(why));
		close(fd);
		printf("%s: %s: %s\n", argv[i], outcome_name(out), why);
		if (out != OPAL_UPLOAD_OUT_DONE && out != OPAL_UPLOAD_OUT_NOT_NEEDED)
			rc = EXIT_ERROR;
	}
	free(token);
	free(ca);
	return rc;
}

int main(int argc, char **argv)
{
	opal_log_init("opal-debuginfo", 0);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "buildid"))
		return cmd_buildid(argc - 2, argv + 2);
	if (!strcmp(argv[1], "upload"))
		return cmd_upload(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	usage(stderr);
	return EXIT_USAGE;
}
