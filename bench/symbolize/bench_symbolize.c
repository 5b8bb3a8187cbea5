/* Symbolization benchmark driver: resolves a fixed list of ELF virtual
 * addresses of one file through the symbolizer (symbolize.h) the way the
 * daemon does, and reports the time of each pass and the memory used.
 *
 *   bench_symbolize [--answers FILE] [--sqlite DB] [--flush-every N]
 *                   [--budget MIB] [--debug-root DIR] ELF ADDRESSES
 *
 * ADDRESSES holds one hexadecimal address per line. Passes, in order:
 *   cold     a new symbolizer, nothing cached: opening the file, finding
 *            its debug file, indexing the units the addresses fall in;
 *   warm     the same addresses again (in-memory result cache);
 *   restart  with --sqlite only: a new symbolizer over the reopened SQLite
 *            cache, without the descriptor (answers from disk).
 * With --sqlite each pass runs inside one transaction, into which the
 * rows go at once; with --flush-every N too, as the daemon runs: the
 * rows wait in the symbolizer's write queue and opal_symbolizer_flush
 * writes them, one transaction each, every N addresses (an interval's
 * new addresses) and at the end of the pass. --answers writes what the cold pass
 * found, one line per frame (run.sh compares it with other tools):
 *   ADDRESS <tab> DEPTH <tab> FUNCTION <tab> FILE <tab> LINE <tab> INLINED
 * with DEPTH "-" and empty fields for an unresolved address.
 * Prints "key=value" lines: seconds per pass, microseconds per address,
 * peak RSS, malloc'd bytes before and after freeing the symbolizer, and
 * the index pool's counters. Exits non-zero on any error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/debuginfo/debuginfo_sources.h"
#include "symbolizer/symbolize/sym_index.h"
#include "symbolizer/symbolize/sym_sqlite.h"
#include "symbolizer/symbolize/symbolize.h"

#define MAX_ADDRESSES 10000000

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* VmHWM/VmRSS of this process in KiB (0 when unreadable). */
static long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = 0;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ':')
			v = strtol(line + kl + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* Bytes malloc has handed out and not taken back, in KiB. */
static long heap_kib(void)
{
	struct mallinfo2 m = mallinfo2();
	return (long)((m.uordblks + m.hblkhd) >> 10);
}

static uint64_t *read_addresses(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return NULL;
	}
	size_t cap = 1024;
	uint64_t *a = malloc(cap * sizeof(*a));
	char line[128];
	*n = 0;
	while (a && fgets(line, sizeof(line), f)) {
		char *end;
		errno = 0;
		uint64_t v = strtoull(line, &end, 16);
		if (end == line || errno)
			continue;
		if (*n == MAX_ADDRESSES)
			break;
		if (*n == cap) {
			uint64_t *p = realloc(a, cap * 2 * sizeof(*a));
			if (!p) {
				free(a);
				a = NULL;
				break;
			}
			a = p;
			cap *= 2;
		}
		a[(*n)++] = v;
	}
	fclose(f);
	return a;
}

static void write_answer(FILE *out, uint64_t addr, const struct opal_sym_result *r)
{
	if (r->n == 0)
		fprintf(out, "0x%" PRIx64 "\t-\t\t\t0\t0\n", addr);
	for (size_t i = 0; i < r->n; i++) {
		const struct opal_sym_frame *fr = &r->frames[i];
		fprintf(out, "0x%" PRIx64 "\t%zu\t%s\t%s\t%u\t%d\n", addr, i,
			fr->function ? fr->function : "", fr->file ? fr->file : "", fr->line,
			fr->inlined);
	}
}

static size_t flush_every;   /* --flush-every: 0, one transaction per pass */

/* One pass over every address; returns seconds, or -1 on error. */
static double run_pass(struct opal_symbolizer *s, struct opal_cache *c, const opal_file_id *id,
		       const uint64_t *addrs, size_t n, FILE *answers, size_t *frames,
		       size_t *unresolved)
{
	*frames = *unresolved = 0;
	double t0 = now();
	if (c && !flush_every && opal_cache_begin(c) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct opal_sym_result r;
		int e = opal_symbolize_native(s, id, addrs[i], false, &r);
		if (e < 0) {
			fprintf(stderr, "bench_symbolize: 0x%" PRIx64 ": %s\n", addrs[i],
				strerror(-e));
			return -1;
		}
		*frames += r.n;
		*unresolved += r.n == 0;
		if (answers)
			write_answer(answers, addrs[i], &r);
		opal_sym_result_free(&r);
		if (c && flush_every && (i + 1) % flush_every == 0 && opal_symbolizer_flush(s) < 0)
			return -1;
	}
	if (c && (flush_every ? opal_symbolizer_flush(s) : opal_cache_commit(c)) < 0)
		return -1;
	return now() - t0;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_symbolize [--answers FILE] [--sqlite DB] [--flush-every N] "
			"[--budget MIB] [--debug-root DIR] ELF ADDRESSES\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *answers_path = NULL, *db = NULL, *debug_root = "/usr/lib/debug";
	unsigned long budget_mib = 0;
	static const struct option opts[] = {
		{ "answers", required_argument, NULL, 'a' },
		{ "sqlite", required_argument, NULL, 's' },
		{ "flush-every", required_argument, NULL, 'f' },
		{ "budget", required_argument, NULL, 'b' },
		{ "debug-root", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'a': answers_path = optarg; break;
		case 's': db = optarg; break;
		case 'f': flush_every = strtoul(optarg, NULL, 10); break;
		case 'b': budget_mib = strtoul(optarg, NULL, 10); break;
		case 'd': debug_root = optarg; break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	const char *elf = argv[optind], *addr_path = argv[optind + 1];
	size_t n;
	uint64_t *addrs = read_addresses(addr_path, &n);
	if (!addrs || n == 0) {
		fprintf(stderr, "bench_symbolize: no addresses in %s\n", addr_path);
		return 1;
	}
	if (budget_mib)
		opal_sym_index_set_budget((size_t)budget_mib << 20);
	struct opal_sym_sources_config cfg = { .debug_root = debug_root };
	if (opal_sym_sources_init(&cfg) < 0) {
		fprintf(stderr, "bench_symbolize: debug info sources: failed\n");
		return 1;
	}
	FILE *answers = answers_path ? fopen(answers_path, "w") : NULL;
	if (answers_path && !answers) {
		perror(answers_path);
		return 1;
	}
	struct opal_cache *cache = NULL;
	if (db) {
		unlink(db);
		if (!(cache = opal_cache_open(db))) {
			fprintf(stderr, "bench_symbolize: cannot open %s\n", db);
			return 1;
		}
	}
	long rss_start = status_kib("VmRSS");
	int fd = open(elf, O_RDONLY | O_CLOEXEC);
	opal_file_id id;
	if (fd < 0 || opal_file_id_from_fd(fd, &id) < 0) {
		perror(elf);
		return 1;
	}
	struct opal_symbolizer *s = opal_symbolizer_new(cache, 16);
	if (!s || opal_symbolizer_add_file(s, &id, fd, NULL, 0, elf) < 0) {
		fprintf(stderr, "bench_symbolize: cannot register %s\n", elf);
		return 1;
	}
	size_t frames, unresolved;
	double cold = run_pass(s, cache, &id, addrs, n, answers, &frames, &unresolved);
	if (cold < 0)
		return 1;
	printf("addresses=%zu\nframes=%zu\nunresolved=%zu\n", n, frames, unresolved);
	printf("cold_s=%.4f\ncold_us_per_address=%.3f\n", cold, cold * 1e6 / (double)n);
	double warm = run_pass(s, cache, &id, addrs, n, NULL, &frames, &unresolved);
	if (warm < 0)
		return 1;
	printf("warm_s=%.4f\nwarm_us_per_address=%.3f\n", warm, warm * 1e6 / (double)n);

	struct opal_sym_index_stats st;
	opal_sym_index_stats(&st);
	struct opal_symbolizer_stats ss;
	opal_symbolizer_stats(s, &ss);
	enum opal_debug_quality q = OPAL_DEBUG_NONE;
	opal_symbolizer_file_quality(s, &id, &q);
	printf("debug_quality=%d\n", (int)q);
	printf("index_bytes=%" PRIu64 "\nindex_peak_bytes=%" PRIu64 "\nindex_budget=%" PRIu64 "\n",
	       st.bytes, st.peak_bytes, st.budget);
	printf("units_built=%" PRIu64 "\nunits_evicted=%" PRIu64 "\nunits_refused=%" PRIu64 "\n",
	       st.units_built, st.units_evicted, st.units_refused);
	printf("mem_hits=%" PRIu64 "\nmisses=%" PRIu64 "\n", ss.mem_hits, ss.misses);
	printf("rss_start_kib=%ld\nrss_kib=%ld\nrss_peak_kib=%ld\nheap_kib=%ld\n", rss_start,
	       status_kib("VmRSS"), status_kib("VmHWM"), heap_kib());
	opal_symbolizer_free(s);
	/* What stays is the process's own (addresses, libraries' state). */
	printf("heap_after_free_kib=%ld\n", heap_kib());

	if (cache) {
		opal_cache_close(cache);
		if (!(cache = opal_cache_open(db)) || !(s = opal_symbolizer_new(cache, 16)))
			return 1;
		double restart = run_pass(s, cache, &id, addrs, n, NULL, &frames, &unresolved);
		if (restart < 0)
			return 1;
		printf("restart_s=%.4f\nrestart_us_per_address=%.3f\n", restart,
		       restart * 1e6 / (double)n);
		opal_symbolizer_free(s);
		opal_cache_close(cache);
	}
	if (answers && fclose(answers) != 0) {
		perror(answers_path);
		return 1;
	}
	free(addrs);
	return 0;
}
