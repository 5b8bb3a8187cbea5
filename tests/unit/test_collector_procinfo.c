/* Unit tests of collector/procinfo.c (container ID, OTEL_SERVICE_NAME,
 * opal's own programs, /proc/PID readers on a fake proc root) and
 * collector/hostinfo.c (kernel build ID note parsing). */
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

#include "collector/hostinfo.h"
#include "collector/procinfo.h"

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int cid(const char *text, char out[65])
{
	out[0] = '\0';
	return opal_cgroup_container_id(text, strlen(text), out);
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
	opal_proc_info_free(&info);

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_container_id),
		cmocka_unit_test(test_environ_value),
		cmocka_unit_test(test_is_opal_program),
		cmocka_unit_test(test_proc_info_read_fake_root),
		cmocka_unit_test(test_proc_info_read_self),
		cmocka_unit_test(test_kernel_notes),
		cmocka_unit_test(test_host_info_live),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
