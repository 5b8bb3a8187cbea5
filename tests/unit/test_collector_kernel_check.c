/* Unit tests of collector/kernel_check.c: the verdict sentences on probe
 * results (older kernel, lockdown, optional features), the lockdown and
 * sysctl files and a missing BTF under a fake root, the causes named for
 * perf_event_open errors, and (as root) the privilege check for root and
 * for a child running as nobody, and the real probes on this kernel. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/sampler/kernel_check.h"

static void all_present(struct opal_kernel_probe *p)
{
	for (int i = 0; i < OPAL_KFEAT_MAX; i++)
		p->have[i] = 1;
}

static void test_verdict(void **state)
{
	(void)state;
	struct opal_kernel_probe p;
	char why[1024], note[512];

	all_present(&p);
	assert_int_equal(opal_kernel_verdict(&p, "6.18.0", "none", why, sizeof(why), note,
					     sizeof(note)), 0);
	assert_string_equal(note, "");

	/* before 6.7: runs, naming what it does without */
	p.have[OPAL_KFEAT_VMA_ITER] = 0;
	assert_int_equal(opal_kernel_verdict(&p, "6.1.0-57-amd64", NULL, why, sizeof(why), note,
					     sizeof(note)), 0);
	assert_string_equal(note, "the VMA-iterator kfuncs (exit-time mappings) (Linux 6.7)");

	/* 5.15: one sentence naming each missing feature and the minimum */
	p.have[OPAL_KFEAT_LOOP] = p.have[OPAL_KFEAT_FIND_VMA] = 0;
	assert_int_equal(opal_kernel_verdict(&p, "5.15.0-91-generic", "none", why, sizeof(why),
					     note, sizeof(note)), -EOPNOTSUPP);
	assert_string_equal(why, "this kernel (Linux 5.15.0-91-generic) lacks bpf_loop (Linux 5.17) "
				 "and bpf_find_vma (Linux 5.17): opal needs Linux 5.17 or newer with "
				 "BTF (tested on " OPAL_TESTED_KERNELS ")");
	p.have[OPAL_KFEAT_RINGBUF] = 0;
	assert_int_equal(opal_kernel_verdict(&p, "5.4.0", NULL, why, sizeof(why), note,
					     sizeof(note)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "lacks the BPF ring buffer (Linux 5.8), bpf_loop (Linux 5.17) "
				    "and bpf_find_vma (Linux 5.17)"));

	/* an unknown probe result does not stop it: the load will tell */
	all_present(&p);
	p.have[OPAL_KFEAT_TASK_PT_REGS] = -1;
	assert_int_equal(opal_kernel_verdict(&p, "6.1.0", NULL, why, sizeof(why), note,
					     sizeof(note)), 0);

	/* lockdown=confidentiality withholds bpf_probe_read_kernel */
	all_present(&p);
	p.have[OPAL_KFEAT_PROBE_READ_KERNEL] = 0;
	assert_int_equal(opal_kernel_verdict(&p, "6.1.0", "confidentiality", why, sizeof(why),
					     note, sizeof(note)), -EOPNOTSUPP);
	assert_true(!strncmp(why, "the kernel's lockdown (confidentiality, "
			     "/sys/kernel/security/lockdown) refuses bpf_probe_read_kernel", 96));
	assert_null(strstr(why, "also lacks"));
	p.have[OPAL_KFEAT_LOOP] = 0;
	assert_int_equal(opal_kernel_verdict(&p, "5.15.0", "confidentiality", why, sizeof(why),
					     note, sizeof(note)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "; this kernel (Linux 5.15.0) also lacks bpf_loop (Linux 5.17): "
				    "opal needs Linux 5.17 or newer"));
	/* without lockdown the same result is a missing helper */
	assert_int_equal(opal_kernel_verdict(&p, "5.15.0", "none", why, sizeof(why), note,
					     sizeof(note)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "lacks bpf_probe_read_kernel (Linux 5.5) and bpf_loop (Linux 5.17)"));
}

/* Writes `text` to ROOT/REL, creating the folders on the way. */
static void write_file(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", root, rel);
	for (char *slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
		*slash = '/';
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_fake_root(void **state)
{
	(void)state;
	char root[] = "/tmp/opal-kcheck.XXXXXX", buf[32], why[1024], cmd[64];

	assert_non_null(mkdtemp(root));
	/* no lockdown file: unknown */
	assert_null(opal_kernel_lockdown(root, buf, sizeof(buf)));
	write_file(root, "/sys/kernel/security/lockdown", "none [integrity] confidentiality\n");
	assert_string_equal(opal_kernel_lockdown(root, buf, sizeof(buf)), "integrity");
	write_file(root, "/sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
	assert_string_equal(opal_kernel_lockdown(root, buf, sizeof(buf)), "none");

	assert_int_equal(opal_kernel_sysctl(root, "perf_event_paranoid"), INT_MIN);
	write_file(root, "/proc/sys/kernel/perf_event_paranoid", "3\n");
	assert_int_equal(opal_kernel_sysctl(root, "perf_event_paranoid"), 3);

	/* a kernel without BTF */
	assert_int_equal(opal_kernel_check(root, NULL, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, ") has no BTF: "));
	assert_non_null(strstr(why, "/sys/kernel/btf/vmlinux: No such file or directory "
				    "(a kernel built without CONFIG_DEBUG_INFO_BTF"));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static void test_perf_causes(void **state)
{
	(void)state;
	char buf[256];

	assert_non_null(strstr(opal_perf_open_cause(-ENOENT, 2, buf, sizeof(buf)),
			       "offers no CPU-clock perf event"));
	assert_non_null(strstr(opal_perf_open_cause(-ENODEV, 2, buf, sizeof(buf)),
			       "offers no CPU-clock perf event"));
	assert_non_null(strstr(opal_perf_open_cause(-EOPNOTSUPP, 2, buf, sizeof(buf)),
			       "offers no CPU-clock perf event"));
	assert_non_null(strstr(opal_perf_open_cause(-ENOSYS, 2, buf, sizeof(buf)),
			       "CONFIG_PERF_EVENTS"));
	assert_non_null(strstr(opal_perf_open_cause(-EACCES, 3, buf, sizeof(buf)),
			       "CAP_PERFMON (or CAP_SYS_ADMIN) at kernel.perf_event_paranoid=3"));
	assert_non_null(strstr(opal_perf_open_cause(-EPERM, INT_MIN, buf, sizeof(buf)),
			       "kernel.perf_event_paranoid=unknown"));
	assert_non_null(strstr(opal_perf_open_cause(-EMFILE, 2, buf, sizeof(buf)),
			       "RLIMIT_NOFILE"));
	assert_string_equal(opal_perf_open_cause(-EBADF, 2, buf, sizeof(buf)), "");
}

static void test_privileges(void **state)
{
	(void)state;
	char why[1024];
	int status;
	pid_t child;

	if (geteuid() != 0)
		fail_msg("this test drops root in a child: run it as root (make test does)");
	assert_int_equal(opal_kernel_privileges("", why, sizeof(why)), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		int r = opal_kernel_privileges("", why, sizeof(why));
		_exit(r == -EPERM && strstr(why, "opal-collector must run as root: it runs as uid "
					    "65534 (") &&
			      strstr(why, "without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN") ? 0 : 1);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The kernel running the tests has every required feature. */
static void test_probes(void **state)
{
	(void)state;
	struct opal_kernel_probe p;

	if (geteuid() != 0)
		fail_msg("the probes load BPF programs: run it as root (make test does)");
	opal_kernel_probe_run(OPAL_BTF_PATH, &p);
	for (int i = 0; i < OPAL_KFEAT_MAX; i++)
		if (opal_kernel_features[i].required && p.have[i] != 1)
			fail_msg("%s: probe gave %d", opal_kernel_features[i].name, p.have[i]);
	opal_kernel_probe_run("/nonexistent/vmlinux", &p);
	assert_int_equal(p.have[OPAL_KFEAT_BTF], 0);
	assert_int_equal(p.have[OPAL_KFEAT_TP_BTF], -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdict),
		cmocka_unit_test(test_fake_root),
		cmocka_unit_test(test_perf_causes),
		cmocka_unit_test(test_privileges),
		cmocka_unit_test(test_probes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
