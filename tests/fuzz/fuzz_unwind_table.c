/* libFuzzer target for the unwind table builder (collector/unwind_*.c):
 * arbitrary bytes are offered as an ELF file through a memfd (the path the
 * collector uses for /proc/PID/map_files descriptors) and as a memory
 * image; both must agree, and a successful table must be well formed.
 * Built and run by tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "collector/unwind/table/unwind_table.h"

/* Aborts (a libFuzzer crash) when `ok` is false. */
static void require(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_unwind_table: %s\n", what);
		abort();
	}
}

static void check_table(const struct opal_unwind_table *t)
{
	require(t->n_rules >= 1 && t->n_bodies >= 1, "empty table");
	require(t->rules[0].addr == 0, "first rule not at base");
	require(t->rules[t->n_rules - 1].body == 0, "last rule not a gap");
	for (uint32_t i = 0; i < t->n_rules; i++) {
		require(t->rules[i].body < t->n_bodies, "body index out of range");
		require(i == 0 || t->rules[i].addr > t->rules[i - 1].addr, "rules not sorted");
		require(i == 0 || t->rules[i].body != t->rules[i - 1].body, "equal neighbours");
		uint64_t start;
		const struct opal_unwind_body *b =
			opal_unwind_table_lookup(t, t->base + t->rules[i].addr, &start, NULL);
		require(b == &t->bodies[t->rules[i].body], "lookup of a rule start");
		require(start == t->base + t->rules[i].addr, "lookup range start");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct opal_unwind_limits lim;
	struct opal_unwind_table a, b;

	/* smaller work bounds keep each input fast; the limits logic is the
	 * same whatever their values */
	opal_unwind_limits_default(&lim);
	lim.max_work = 1u << 24;
	lim.max_rules = 1u << 16;

	int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	require(fd >= 0, "memfd_create");
	require(size == 0 || write(fd, data, size) == (ssize_t)size, "write");
	int rc_fd = opal_unwind_table_build(fd, &lim, &a);
	close(fd);
	int rc_mem = opal_unwind_table_build_mem(data, size, &lim, &b);

	require(rc_fd == rc_mem, "descriptor and memory builds disagree");
	if (rc_fd == 0) {
		check_table(&a);
		require(a.base == b.base && a.n_rules == b.n_rules && a.n_bodies == b.n_bodies &&
				memcmp(a.rules, b.rules, a.n_rules * sizeof(*a.rules)) == 0 &&
				memcmp(a.bodies, b.bodies, a.n_bodies * sizeof(*a.bodies)) == 0,
			"descriptor and memory tables differ");
	} else {
		require(a.rules == NULL && b.rules == NULL, "error left arrays behind");
	}
	opal_unwind_table_free(&a);
	opal_unwind_table_free(&b);
	return 0;
}
