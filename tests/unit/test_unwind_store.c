/* Unit tests of the on-disk unwind table cache (collector/unwind/unwind_store.c)
 * and the table builder's CPU budget (unwind_worker.c): a table read back
 * equals the one written; another identity, another debug-file state, a
 * damaged, truncated, lying or unsorted entry, a symlink and a folder
 * others may write are never used; the byte bound evicts the least
 * recently used entries; a job reads its table from the cache the second
 * time; the budget's arithmetic, and a builder that waits for it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/unwind/unwind_store.h"
#include "collector/unwind/unwind_worker.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static const char ident_a[] = "builder-a";
static const char ident_b[] = "builder-b";

struct fixture {
	char dir[64];
	struct opal_unwind_table libc;
	opal_file_id libc_id;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	int fd;

	strcpy(fx->dir, "/tmp/opal-store-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	fd = open(LIBC, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || opal_unwind_table_build(fd, NULL, &fx->libc) < 0 ||
	    opal_file_id_from_fd(fd, &fx->libc_id) < 0)
		return -1;
	close(fd);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		return -1;
	opal_unwind_table_free(&fx->libc);
	free(fx);
	return 0;
}

static void open_store(struct fixture *fx, struct opal_unwind_store *s, const char *ident,
		       uint64_t max_bytes)
{
	assert_int_equal(opal_unwind_store_open(s, fx->dir, ident, strlen(ident), max_bytes), 0);
}

static void entry_path(struct fixture *fx, const opal_file_id *id, char *out, size_t cap)
{
	char hex[33];

	opal_file_id_to_hex(id, hex);
	snprintf(out, cap, "%s/%s.tab", fx->dir, hex);
}

static void assert_same_table(const struct opal_unwind_table *a, const struct opal_unwind_table *b)
{
	assert_int_equal(a->base, b->base);
	assert_int_equal(a->n_rules, b->n_rules);
	assert_int_equal(a->n_bodies, b->n_bodies);
	assert_memory_equal(a->rules, b->rules, (size_t)a->n_rules * sizeof(*a->rules));
	assert_memory_equal(a->bodies, b->bodies, (size_t)a->n_bodies * sizeof(*a->bodies));
	assert_int_equal(a->stats.rules, b->stats.rules);
	assert_int_equal(a->stats.fdes_eh, b->stats.fdes_eh);
}

static void test_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_table t;

	open_store(fx, &s, ident_a, 0);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -ENOENT);
	assert_int_equal(s.misses, 1);
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &fx->libc), 0);
	assert_int_equal(s.writes, 1);
	assert_int_equal(s.n_files, 1);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), 0);
	assert_int_equal(s.hits, 1);
	assert_same_table(&fx->libc, &t);
	opal_unwind_table_free(&t);
	opal_unwind_store_close(&s);

	/* a new collector (same identity) finds it and counts it at open */
	open_store(fx, &s, ident_a, 0);
	assert_int_equal(s.n_files, 1);
	assert_true(s.bytes > (uint64_t)fx->libc.n_rules * sizeof(struct opal_unwind_rule));
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), 0);
	assert_same_table(&fx->libc, &t);
	opal_unwind_table_free(&t);
	opal_unwind_store_close(&s);
}

/* Other builders' tables and tables built without a debug file that now
 * exists are misses, not damage: the entry stays (until replaced). */
static void test_stale(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_table t;
	char path[128];

	open_store(fx, &s, ident_a, 0);
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &fx->libc), 0);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, true, &t), -ENOENT);
	assert_null(t.rules);
	opal_unwind_store_close(&s);

	open_store(fx, &s, ident_b, 0);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -ENOENT);
	assert_int_equal(s.errors, 0);
	entry_path(fx, &fx->libc_id, path, sizeof(path));
	assert_int_equal(access(path, F_OK), 0);
	/* its own build replaces the entry */
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &fx->libc), 0);
	assert_int_equal(s.n_files, 1);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), 0);
	opal_unwind_table_free(&t);
	opal_unwind_store_close(&s);
}

static void rewrite_at(const char *path, off_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

/* Puts libc's table, damages it with `damage`, and checks the get refuses
 * it, deletes it and counts it. */
static void check_damage(struct fixture *fx, void (*damage)(const char *path))
{
	struct opal_unwind_store s;
	struct opal_unwind_table t;
	char path[128];

	open_store(fx, &s, ident_a, 0);
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &fx->libc), 0);
	entry_path(fx, &fx->libc_id, path, sizeof(path));
	damage(path);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -EBADMSG);
	assert_null(t.rules);
	assert_int_equal(s.errors, 1);
	assert_int_equal(s.n_files, 0);
	assert_int_equal(access(path, F_OK), -1);
	opal_unwind_store_close(&s);
}

static void flip_rule_byte(const char *path)
{
	uint8_t b = 0x5a;

	rewrite_at(path, sizeof(struct opal_unwind_store_hdr) + 1001, &b, 1);
}

static void truncate_entry(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 16), 0);
}

static void lie_about_rules(const char *path)
{
	uint32_t n = OPAL_UNWIND_MAX_RULES + 1;

	rewrite_at(path, offsetof(struct opal_unwind_store_hdr, n_rules), &n, sizeof(n));
}

static void bad_magic(const char *path)
{
	rewrite_at(path, 0, "ELF", 3);
}

static void test_damaged(void **state)
{
	struct fixture *fx = *state;

	check_damage(fx, flip_rule_byte);
	check_damage(fx, truncate_entry);
	check_damage(fx, lie_about_rules);
	check_damage(fx, bad_magic);
}

/* A well-formed entry (right CRC) whose rules the BPF search could not
 * use: out of order, or naming a body that does not exist. */
static void test_bad_rules(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_table t, bad = fx->libc;
	size_t rb = (size_t)fx->libc.n_rules * sizeof(*fx->libc.rules);

	open_store(fx, &s, ident_a, 0);
	bad.rules = malloc(rb);
	memcpy(bad.rules, fx->libc.rules, rb);
	bad.rules[10].addr = bad.rules[9].addr;
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &bad), 0);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -EBADMSG);

	memcpy(bad.rules, fx->libc.rules, rb);
	bad.rules[10].body = bad.n_bodies;
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &bad), 0);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -EBADMSG);

	memcpy(bad.rules, fx->libc.rules, rb);
	bad.rules[bad.n_rules - 1].body = 1;   /* the last rule must be the GAP */
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &bad), 0);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -EBADMSG);
	assert_int_equal(s.errors, 3);
	free(bad.rules);
	opal_unwind_store_close(&s);
}

/* An entry name that is a symlink (to a good entry) is not followed, and
 * a file someone else owns is not read. */
static void test_links(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_table t;
	opal_file_id other = fx->libc_id;
	char path[128], link[128];

	other.b[0] ^= 1;
	open_store(fx, &s, ident_a, 0);
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &fx->libc), 0);
	entry_path(fx, &fx->libc_id, path, sizeof(path));
	entry_path(fx, &other, link, sizeof(link));
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(opal_unwind_store_get(&s, &other, false, &t), -ENOENT);
	assert_int_equal(s.errors, 0);
	opal_unwind_store_close(&s);
}

/* The folder must be the caller's and not writable by others: otherwise
 * the store is off (and gets miss, puts do nothing). */
static void test_folder_checks(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_table t;
	char sub[128];

	struct stat st;

	snprintf(sub, sizeof(sub), "%s/new/deeper", fx->dir);
	assert_int_equal(opal_unwind_store_open(&s, sub, "x", 1, 0), 0);   /* made, 0700 */
	opal_unwind_store_close(&s);
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(sub, sizeof(sub), "%s/new", fx->dir);
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(sub, sizeof(sub), "%s/file", fx->dir);
	close(open(sub, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(opal_unwind_store_open(&s, sub, "x", 1, 0), -ENOTDIR);
	opal_unwind_store_close(&s);
	snprintf(sub, sizeof(sub), "%s/new", fx->dir);
	assert_int_equal(chmod(sub, 0777), 0);
	assert_int_equal(opal_unwind_store_open(&s, sub, "x", 1, 0), -EPERM);
	assert_int_equal(opal_unwind_store_get(&s, &fx->libc_id, false, &t), -ENOENT);
	assert_int_equal(opal_unwind_store_put(&s, &fx->libc_id, false, &fx->libc), -ENOENT);
	opal_unwind_store_close(&s);
	assert_int_equal(opal_unwind_store_open(&s, fx->dir, "", 0, 0), -EINVAL);
	opal_unwind_store_close(&s);
}

/* Temporary files of a crashed writer go at open; files that are not
 * entries stay untouched. */
static void test_leftovers(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	char tmp[128], other[128];

	snprintf(tmp, sizeof(tmp), "%s/tmp.123.456", fx->dir);
	snprintf(other, sizeof(other), "%s/notes.txt", fx->dir);
	close(open(tmp, O_CREAT | O_WRONLY, 0600));
	close(open(other, O_CREAT | O_WRONLY, 0600));
	open_store(fx, &s, ident_a, 0);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(access(other, F_OK), 0);
	assert_int_equal(s.n_files, 0);
	opal_unwind_store_close(&s);
}

static void set_mtime(struct fixture *fx, const opal_file_id *id, time_t sec)
{
	char path[128];
	struct timespec ts[2] = { { sec, 0 }, { sec, 0 } };

	entry_path(fx, id, path, sizeof(path));
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* Five entries of ~170 KiB under a bound of four: writing the fifth
 * evicts the least recently used down to 3/4 of the bound, and a hit
 * makes an entry recently used. */
static void test_bound(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_table t;
	opal_file_id ids[5];
	uint64_t one = sizeof(struct opal_unwind_store_hdr) +
		       (uint64_t)fx->libc.n_rules * sizeof(struct opal_unwind_rule) +
		       (uint64_t)fx->libc.n_bodies * sizeof(struct opal_unwind_body);

	open_store(fx, &s, ident_a, one * 4 + one / 2);
	for (int i = 0; i < 4; i++) {
		ids[i] = fx->libc_id;
		ids[i].b[15] = (uint8_t)i;
		assert_int_equal(opal_unwind_store_put(&s, &ids[i], false, &fx->libc), 0);
		set_mtime(fx, &ids[i], 1000000 + i);   /* 0 oldest */
	}
	assert_int_equal(s.evicted, 0);
	/* a hit on 0 makes it the newest: 1 and 2 go */
	assert_int_equal(opal_unwind_store_get(&s, &ids[0], false, &t), 0);
	opal_unwind_table_free(&t);
	ids[4] = fx->libc_id;
	ids[4].b[15] = 4;
	assert_int_equal(opal_unwind_store_put(&s, &ids[4], false, &fx->libc), 0);
	assert_int_equal(s.evicted, 2);
	assert_int_equal(s.n_files, 3);
	assert_true(s.bytes <= (one * 4 + one / 2) / 4 * 3);
	int want[5] = { 0, -ENOENT, -ENOENT, 0, 0 };
	for (int i = 0; i < 5; i++) {
		assert_int_equal(opal_unwind_store_get(&s, &ids[i], false, &t), want[i]);
		opal_unwind_table_free(&t);
	}
	opal_unwind_store_close(&s);
}

/* A job writes a table it built (libc: over OPAL_UNWIND_STORE_MIN_BUILD_NS
 * of CPU) and the next job of the file reads it back. */
static void test_job_uses_store(void **state)
{
	struct fixture *fx = *state;
	struct opal_unwind_store s;
	struct opal_unwind_limits lim;

	opal_unwind_limits_default(&lim);
	open_store(fx, &s, ident_a, 0);
	for (int round = 0; round < 2; round++) {
		struct opal_unwind_job j = { .id = fx->libc_id, .store = &s };
		j.fd = open(LIBC, O_RDONLY | O_CLOEXEC);
		assert_true(j.fd >= 0);
		opal_unwind_job_run(&j, &lim);
		assert_int_equal(j.err, 0);
		assert_int_equal(j.cached, round == 1);
		assert_true(j.entry != 0);
		assert_true(j.cpu_ns > 0);
		assert_same_table(&fx->libc, &j.table);
		close(j.fd);
		opal_unwind_table_free(&j.table);
	}
	assert_int_equal(s.writes, 1);
	assert_int_equal(s.hits, 1);
	opal_unwind_store_close(&s);
}

static void test_budget(void **state)
{
	struct opal_build_budget bb;
	const uint64_t s = 1000000000ull;

	opal_build_budget_init(&bb, 10, 0);
	assert_int_equal(opal_build_budget_wait_ns(&bb, 0), 0);
	/* 3 s of CPU: 1 s over the burst, 10 s of wall time at 10% */
	opal_build_budget_charge(&bb, 3 * s);
	assert_true(opal_build_budget_wait_ns(&bb, 0) >= 10 * s);
	assert_true(opal_build_budget_wait_ns(&bb, 5 * s) >= 5 * s);
	assert_true(opal_build_budget_wait_ns(&bb, 5 * s) < 5 * s + 1000);
	assert_int_equal(opal_build_budget_wait_ns(&bb, 10 * s + 1000), 0);
	/* refills to the burst, not beyond */
	assert_int_equal(opal_build_budget_wait_ns(&bb, 1000 * s), 0);
	assert_int_equal(bb.tokens, (int64_t)OPAL_UNWIND_BUILD_BURST_NS);
	/* a percent out of range is clamped */
	opal_build_budget_init(&bb, 0, 0);
	assert_int_equal(bb.pct, 1);
}

/* A builder whose budget is spent starts no job (and the main loop may
 * not build either) until it refills; stopping returns the waiting job. */
static void test_builder_waits(void **state)
{
	struct opal_unwind_builder b;
	struct opal_unwind_limits lim;
	opal_file_id id = { { 1 } };
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	opal_unwind_limits_default(&lim);
	assert_int_equal(opal_unwind_builder_start(&b, &lim, NULL, NULL, 1), 0);
	assert_true(opal_unwind_builder_may_run(&b));
	/* 1 s over the burst: 100 s at 1% */
	opal_unwind_builder_charge(&b, OPAL_UNWIND_BUILD_BURST_NS + 1000000000ull);
	assert_false(opal_unwind_builder_may_run(&b));
	assert_int_equal(opal_unwind_builder_submit(&b, NULL, fd, &id), 0);
	assert_false(opal_unwind_builder_wait(&b, 300));
	assert_null(opal_unwind_builder_take(&b));
	assert_int_equal(b.throttled, 2);
	struct opal_unwind_job *j = opal_unwind_builder_stop(&b);
	assert_non_null(j);
	assert_int_equal(j->err, -ECANCELED);
	assert_null(j->next);
	opal_unwind_job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_folder_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leftovers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_uses_store, setup, teardown),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_builder_waits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
