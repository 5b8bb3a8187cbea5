/* Unit tests of collector/bpf_load.c: the likely causes named for failed
 * loads, the bound on the kept verifier log, and (as root) a program the
 * verifier rejects (tests/bpf/unverifiable.bpf.c) loaded through
 * opal_bpf_load: its name, the kernel release, the cause and the
 * verifier's log are printed. */
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
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "collector/sampler/bpf_load.h"
#include "shared/log.h"
#include "tests/unverifiable.skel.h"

static void test_causes(void **state)
{
	(void)state;
	assert_non_null(strstr(opal_bpf_load_cause(-EINVAL, "0: (85) call unknown#195896080\n"
						   "invalid func unknown#195896080", "none"),
			       "CO-RE relocation failed"));
	assert_non_null(strstr(opal_bpf_load_cause(-EINVAL, "unknown func bpf_loop#181", "none"),
			       "lacks a BPF helper"));
	assert_non_null(strstr(opal_bpf_load_cause(-EINVAL, "unknown func bpf_probe_read_kernel#113",
						   "confidentiality"),
			       "lockdown"));
	assert_non_null(strstr(opal_bpf_load_cause(-E2BIG, "BPF program is too large. Processed "
						   "1000001 insn", NULL),
			       "too complex"));
	assert_non_null(strstr(opal_bpf_load_cause(-EACCES, "R3 unbounded memory access, use "
						   "'var &= const'", NULL),
			       "could not prove the program safe"));
	assert_non_null(strstr(opal_bpf_load_cause(-EPERM, "", "none"), "CAP_BPF"));
	assert_non_null(strstr(opal_bpf_load_cause(-EPERM, "", "integrity"), "lockdown"));
	assert_non_null(strstr(opal_bpf_load_cause(-EINVAL, "", NULL), "without a verifier log"));
}

/* Calls libbpf's current print callback (opal's) with a message. */
static void libbpf_say(enum libbpf_print_level level, const char *fmt, ...)
{
	libbpf_print_fn_t fn = libbpf_set_print(NULL);
	va_list ap;

	libbpf_set_print(fn);
	va_start(ap, fmt);
	fn(level, fmt, ap);
	va_end(ap);
}

/* A 250-line log keeps its last 200 lines; a long line is cut. */
static void test_log_bound(void **state)
{
	(void)state;
	size_t cap = 64 * 1024, used = 0, n;
	char *log = malloc(cap), *long_line = malloc(2000);
	const char *kept;

	assert_non_null(log);
	assert_non_null(long_line);
	memset(long_line, 'x', 1999);
	long_line[1999] = '\0';
	for (int i = 0; i < 249; i++)
		used += (size_t)snprintf(log + used, cap - used, "line %d\n", i);
	snprintf(log + used, cap - used, "%s\n", long_line);
	opal_bpf_log_install();
	libbpf_say(LIBBPF_WARN, "libbpf: prog '%s': -- BEGIN PROG LOAD LOG --\n%s-- END PROG LOAD LOG --\n",
		   "opal_test", log);
	kept = opal_bpf_load_log(&n);
	assert_int_equal(n, 250);
	assert_true(!strncmp(kept, "line 50\n", 8));   /* lines 50..249 */
	assert_non_null(strstr(kept, "line 248\nxxx"));
	const char *last = strrchr(kept, '\n') + 1;
	assert_int_equal(strlen(last), OPAL_BPF_LOG_LINE_MAX - 1);
	assert_string_equal(last + strlen(last) - 3, "...");
	free(log);
	free(long_line);
}

/* Reads the file `path` into a NUL-terminated buffer (caller frees). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_unverifiable_program(void **state)
{
	(void)state;
	char path[] = "/tmp/opal-bpf-load.XXXXXX", why[512], want[256];
	struct unverifiable_bpf *skel;
	struct utsname u;
	int fd, saved, err;
	char *out;

	if (geteuid() != 0)
		fail_msg("this test loads a BPF program: run it as root (make test does)");
	assert_int_equal(uname(&u), 0);
	opal_log_init("test", 0);
	opal_bpf_log_install();
	skel = unverifiable_bpf__open();
	assert_non_null(skel);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	err = opal_bpf_load(skel->skeleton, why, sizeof(why));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	out = slurp(path);
	unlink(path);
	unverifiable_bpf__destroy(skel);

	assert_true(err < 0);
	assert_non_null(strstr(why, "BPF program opal_unverifiable failed to load"));
	assert_non_null(strstr(why, "the verifier's log is above"));
	snprintf(want, sizeof(want), "<3>test: BPF program opal_unverifiable failed to load on Linux %s: ",
		 u.release);
	if (!strstr(out, want))
		fail_msg("no line '%s' in:\n%s", want, out);
	assert_non_null(strstr(out, "likely cause: this kernel's verifier could not prove"));
	assert_non_null(strstr(out, "<3>test: the verifier's log of opal_unverifiable (its last "));
	/* the log itself, ending in the verifier's statistics */
	assert_non_null(strstr(out, "<5>test: verifier: "));
	assert_non_null(strstr(out, "<5>test: verifier: processed "));
	if (!strstr(out, "unbounded memory access") && !strstr(out, "invalid access to map value"))
		fail_msg("the verifier's complaint is not in the output:\n%s", out);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_causes),
		cmocka_unit_test(test_log_bound),
		cmocka_unit_test(test_unverifiable_program),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
