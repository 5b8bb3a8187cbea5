/* Unit tests of collector/proc/procinfo.c (container ID, OTEL_SERVICE_NAME,
 * opal's own programs, /proc/PID readers on a fake proc root),
 * collector/proc/hostinfo.c (kernel build ID note parsing) and the process
 * identity of collector/proc/procsrc.c (/proc/PID/stat's start time). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/proc/hostinfo.h"
#include "collector/proc/procinfo.h"
#include "collector/proc/procsrc.h"

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int cid(const char *text, char out[65])
{
	out[0] = '\0';
	return opal_cgroup_container_id(text, strlen(text), out);
}

static void test_pod_uid(void **state)
{
	char out[OPAL_POD_UID_LEN + 1];
	const char *systemd = "0::/kubepods.slice/kubepods-burstable.slice/"
			      "kubepods-burstable-pod0b6e8c1a_2f3d_4e5f_8a9b_0c1d2e3f4a5b.slice/"
			      "cri-containerd-" ID64 ".scope\n";
	const char *cgroupfs = "11:cpu:/kubepods/besteffort/pod0b6e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b/"
			       ID64 "\n";

	(void)state;
	assert_int_equal(opal_cgroup_pod_uid(systemd, strlen(systemd), out), 0);
	assert_string_equal(out, "0b6e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b");
	assert_int_equal(opal_cgroup_pod_uid(cgroupfs, strlen(cgroupfs), out), 0);
	assert_string_equal(out, "0b6e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b");
	static const char *const none[] = {
		"0::/system.slice/docker-" ID64 ".scope\n",
		"0::/kubepods/pod0b6e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5bx/\n",   /* longer word */
		"0::/kubepods/pod0b6e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5/\n",     /* short */
		"0::/kubepods/podXb6e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b/\n",
	};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		assert_int_equal(opal_cgroup_pod_uid(none[i], strlen(none[i]), out), -ENOENT);
}

static void test_machine_id(void **state)
{
	char out[33];

	(void)state;
	assert_int_equal(opal_machine_id_parse("0123456789abcdef0123456789abcdef\n", 33, out), 0);
	assert_string_equal(out, "0123456789abcdef0123456789abcdef");
	assert_int_equal(opal_machine_id_parse("0123456789abcdef0123456789abcdef", 32, out), 0);
	assert_int_equal(opal_machine_id_parse("0123456789ABCDEF0123456789abcdef", 32, out), -EINVAL);
	assert_int_equal(opal_machine_id_parse("uninitialized\n", 14, out), -EINVAL);
}

static void test_container_id(void **state)
{
	(void)state;
	char out[65];

	assert_int_equal(cid("0::/system.slice/docker-" ID64 ".scope\n", out), 0);
	assert_string_equal(out, ID64);
	assert_int_equal(cid("12:pids:/docker/" ID64 "\n11:cpu:/docker/" ID64 "\n", out), 0);
	assert_string_equal(out, ID64);
	assert_int_equal(
		cid("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b.slice/"
		    "cri-containerd-" ID64 ".scope", out),
		0);
	assert_string_equal(out, ID64);
	/* the innermost (last) ID wins */
	assert_int_equal(cid("0::/docker/" ID64 "/inner-ffffffffffffffffffffffffffffffffffffffffff"
			     "ffffffffffffffffffffff.scope",
			     out),
			 0);
	assert_string_equal(out, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
	/* no container */
	assert_int_equal(cid("0::/user.slice/user-0.slice/session-1.scope\n", out), -ENOENT);
	assert_int_equal(cid("4:memory:/process_api/261725457edc09ec6245b09d33c38907\n", out),
			 -ENOENT);
	/* 63 or 65 hex digits, uppercase, or part of a longer word: not an ID */
	assert_int_equal(cid("0::/docker/" ID64 "a\n", out), -ENOENT);
	assert_int_equal(cid("0::/docker/" ID64 "x\n", out), -ENOENT);
	assert_int_equal(cid("0::/docker/123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
			     out),
			 -ENOENT);
	assert_int_equal(cid("0::/docker/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n",
			     out),
			 -ENOENT);
	assert_int_equal(cid("", out), -ENOENT);
	/* only `len` bytes are looked at */
	const char *t = "0::/docker/" ID64;
	assert_int_equal(opal_cgroup_container_id(t, strlen(t) - 1, out), -ENOENT);
}

static void test_environ_value(void **state)
{
	(void)state;
	char out[16];
	const char env[] = "PATH=/bin\0OTEL_SERVICE_NAMEX=no\0OTEL_SERVICE_NAME=checkout\0"
			   "OTEL_SERVICE_NAME=second\0";

	assert_int_equal(opal_environ_value(env, sizeof(env) - 1, "OTEL_SERVICE_NAME", out,
					    sizeof(out)),
			 8);
	assert_string_equal(out, "checkout");
	assert_int_equal(opal_environ_value(env, sizeof(env) - 1, "HOME", out, sizeof(out)), -ENOENT);
	/* a prefix of a name is not the name */
	assert_int_equal(opal_environ_value(env, sizeof(env) - 1, "OTEL", out, sizeof(out)), -ENOENT);
	/* the last entry may lack its NUL */
	const char tail[] = "A=1\0OTEL_SERVICE_NAME=svc";
	assert_int_equal(opal_environ_value(tail, sizeof(tail) - 1, "OTEL_SERVICE_NAME", out,
					    sizeof(out)),
			 3);
	assert_string_equal(out, "svc");
	/* truncated to the buffer */
	const char lng[] = "OTEL_SERVICE_NAME=a-very-long-service-name\0";
	assert_int_equal(opal_environ_value(lng, sizeof(lng) - 1, "OTEL_SERVICE_NAME", out, 6), 5);
	assert_string_equal(out, "a-ver");
	/* empty value */
	const char empty[] = "OTEL_SERVICE_NAME=\0";
	assert_int_equal(opal_environ_value(empty, sizeof(empty) - 1, "OTEL_SERVICE_NAME", out,
					    sizeof(out)),
			 0);
	assert_string_equal(out, "");
}

static void test_is_opal_program(void **state)
{
	(void)state;
	assert_true(opal_is_opal_program("opal-collector", NULL));
	assert_true(opal_is_opal_program("opal-symbolizer", ""));
	assert_true(opal_is_opal_program("x", "/usr/local/bin/opal-report"));
	assert_true(opal_is_opal_program(NULL, "/build/opal-symbolizer (deleted)"));
	assert_true(opal_is_opal_program("", "opal-collector"));
	assert_false(opal_is_opal_program("opal-collectorx", "/bin/opal-collectorx"));
	assert_false(opal_is_opal_program("bash", "/usr/bin/bash"));
	assert_false(opal_is_opal_program("opal", "/opt/opal-collector/bin/app"));
	assert_false(opal_is_opal_program(NULL, NULL));
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void test_proc_info_read_fake_root(void **state)
{
	(void)state;
	char root[] = "/tmp/opal-procinfo-XXXXXX", p[256];
	struct opal_proc_info info;

	assert_non_null(mkdtemp(root));
	snprintf(p, sizeof(p), "%s/42", root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/42/comm", root);
	write_file(p, "worker\n", 7);
	const char env[] = "LANG=C\0OTEL_SERVICE_NAME=payments\0";
	snprintf(p, sizeof(p), "%s/42/environ", root);
	write_file(p, env, sizeof(env) - 1);
	snprintf(p, sizeof(p), "%s/42/cgroup", root);
	write_file(p, "0::/system.slice/docker-" ID64 ".scope\n",
		   strlen("0::/system.slice/docker-" ID64 ".scope\n"));
	snprintf(p, sizeof(p), "%s/42/exe", root);
	assert_int_equal(symlink("/usr/bin/worker", p), 0);

	assert_int_equal(opal_proc_info_read(root, 42, &info), 0);
	assert_string_equal(info.comm, "worker");
	assert_string_equal(info.exe, "/usr/bin/worker");
	assert_string_equal(info.service_name, "payments");
	assert_string_equal(info.container_id, ID64);
	assert_null(info.command_line);   /* never read unless asked for */
	opal_proc_info_free(&info);

	const char args[] = "/usr/bin/worker\0--token=x\0\0";
	char *cl;
	snprintf(p, sizeof(p), "%s/42/cmdline", root);
	write_file(p, args, sizeof(args) - 1);
	assert_int_equal(opal_proc_cmdline_read(root, 42, &cl), 0);
	assert_string_equal(cl, "/usr/bin/worker --token=x");
	free(cl);
	assert_true(opal_proc_cmdline_read(root, 43, &cl) < 0);
	assert_null(cl);

	/* a process that is gone: everything empty, still success */
	assert_int_equal(opal_proc_info_read(root, 43, &info), 0);
	assert_string_equal(info.comm, "");
	assert_string_equal(info.exe, "");
	assert_string_equal(info.service_name, "");
	assert_string_equal(info.container_id, "");
	opal_proc_info_free(&info);

	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

static void test_proc_info_read_self(void **state)
{
	(void)state;
	struct opal_proc_info info;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	assert_int_equal(opal_proc_info_read("/proc", getpid(), &info), 0);
	assert_string_equal(info.exe, exe);
	assert_true(strncmp(info.comm, "test_collector_", 15) == 0);
	opal_proc_info_free(&info);
}

static void test_cmdline_join(void **state)
{
	(void)state;
	static char big[OPAL_CMDLINE_MAX + 10];
	char *s;

	s = opal_cmdline_join("a\0b c\0", 6);
	assert_string_equal(s, "a b c");
	free(s);
	s = opal_cmdline_join("", 0);   /* a kernel thread */
	assert_string_equal(s, "");
	free(s);
	/* over the bound: cut before a character that would not fit whole */
	memset(big, 'x', sizeof(big));
	big[OPAL_CMDLINE_MAX - 2] = (char)0xc3;   /* "é" across the cut */
	big[OPAL_CMDLINE_MAX - 1] = (char)0xa9;
	s = opal_cmdline_join(big, sizeof(big));
	assert_int_equal(strlen(s), OPAL_CMDLINE_MAX - 2);
	free(s);
	big[OPAL_CMDLINE_MAX - 2] = 'x';
	big[OPAL_CMDLINE_MAX - 1] = 'x';
	s = opal_cmdline_join(big, sizeof(big));
	assert_int_equal(strlen(s), OPAL_CMDLINE_MAX - 1);
	free(s);
}

/* Appends one note (4-byte aligned) to buf at *off. */
static void put_note(uint8_t *buf, size_t *off, uint32_t type, const char *name, size_t namesz,
		     const uint8_t *desc, uint32_t descsz)
{
	uint32_t hdr[3] = { (uint32_t)namesz, descsz, type };
	memcpy(buf + *off, hdr, 12);
	*off += 12;
	memcpy(buf + *off, name, namesz);
	*off += (namesz + 3) & ~3u;
	memcpy(buf + *off, desc, descsz);
	*off += (descsz + 3) & ~3u;
}

static void test_kernel_notes(void **state)
{
	(void)state;
	uint8_t buf[256] = { 0 }, out[64];
	uint8_t id[20], other[6] = { 1, 2, 3, 4, 5, 6 };
	size_t off = 0;

	for (int i = 0; i < 20; i++)
		id[i] = (uint8_t)(0xa0 + i);
	/* a Xen note, a "GNU" note of another type, then the build ID */
	put_note(buf, &off, 3, "Xen", 4, other, 6);
	put_note(buf, &off, 1, "GNU", 4, other, 5);
	put_note(buf, &off, 3, "GNU", 4, id, 20);
	assert_int_equal(opal_notes_build_id(buf, off, out, sizeof(out)), 20);
	assert_memory_equal(out, id, 20);

	/* too small an output buffer */
	assert_int_equal(opal_notes_build_id(buf, off, out, 10), -E2BIG);
	/* the build ID note cut short */
	assert_int_equal(opal_notes_build_id(buf, off - 4, out, sizeof(out)), -EINVAL);
	/* no build ID note */
	size_t off2 = 0;
	uint8_t b2[64] = { 0 };
	put_note(b2, &off2, 1, "GNU", 4, other, 5);
	assert_int_equal(opal_notes_build_id(b2, off2, out, sizeof(out)), -ENOENT);
	/* a descriptor size beyond the data */
	uint32_t evil[3] = { 4, 0xfffffff0u, 3 };
	uint8_t b3[32] = { 0 };
	memcpy(b3, evil, 12);
	memcpy(b3 + 12, "GNU", 4);
	assert_int_equal(opal_notes_build_id(b3, sizeof(b3), out, sizeof(out)), -EINVAL);
	assert_int_equal(opal_notes_build_id(b3, 0, out, sizeof(out)), -ENOENT);
}

static void test_host_info_live(void **state)
{
	(void)state;
	struct opal_host_info h;

	assert_int_equal(opal_host_info_read(&h), 0);
	assert_true(h.hostname[0] != '\0');
	assert_true(h.kernel_release[0] != '\0');
	/* Debian kernels carry a 20-byte build ID in /sys/kernel/notes */
	if (access("/sys/kernel/notes", R_OK) == 0)
		assert_int_equal(h.kernel_build_id_len, 20);
}

static int stat_start(const char *text, uint64_t *v)
{
	return opal_proc_stat_start(text, strlen(text), v);
}

static void test_stat_start_time(void **state)
{
	(void)state;
	uint64_t v = 0;

	assert_int_equal(stat_start("1234 (bash) S 1 1234 1234 34816 1234 4194560 6062 0 0 0 9 3 0 "
				    "0 20 0 1 0 8812345 9691136 1279 18446744073709551615",
				    &v),
			 0);
	assert_int_equal(v, 8812345);
	/* a comm with spaces and parentheses: fields count from the last ')' */
	assert_int_equal(stat_start("77 (a) b (c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 42 0",
				    &v),
			 0);
	assert_int_equal(v, 42);
	/* cut before field 22, no parenthesis, no digits, overflow */
	assert_int_equal(stat_start("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", &v), -EINVAL);
	assert_int_equal(stat_start("1 x S 1 2 3", &v), -EINVAL);
	assert_int_equal(stat_start("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 z", &v),
			 -EINVAL);
	assert_int_equal(stat_start("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
				    "99999999999999999999999",
				    &v),
			 -EINVAL);
}

static void test_identity_live(void **state)
{
	(void)state;
	struct opal_proc_identity a, b;
	struct stat st;

	assert_int_equal(opal_proc_source_live.identity(NULL, getpid(), &a), 0);
	assert_true(a.start_ticks > 0);
	assert_int_equal(stat("/proc/self/exe", &st), 0);
	assert_int_equal(a.exe_ino, st.st_ino);
	assert_int_equal(opal_proc_source_live.identity(NULL, getpid(), &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	/* pid_max is at most 2^22: this pid cannot exist */
	assert_int_equal(opal_proc_source_live.identity(NULL, (1 << 22) + 1, &b), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_container_id),
		cmocka_unit_test(test_pod_uid),
		cmocka_unit_test(test_machine_id),
		cmocka_unit_test(test_environ_value),
		cmocka_unit_test(test_is_opal_program),
		cmocka_unit_test(test_proc_info_read_fake_root),
		cmocka_unit_test(test_proc_info_read_self),
		cmocka_unit_test(test_cmdline_join),
		cmocka_unit_test(test_kernel_notes),
		cmocka_unit_test(test_host_info_live),
		cmocka_unit_test(test_stat_start_time),
		cmocka_unit_test(test_identity_live),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
