/* Unit tests of opal_interp_file_entry (collector/interp/interp.c): the
 * entry by which BPF sets a new process of an interpreter file up itself
 * (bpf/interp_early.h). Its numbers are checked against the kernel's own
 * view of real processes, never against the formula: the device as
 * /proc/PID/maps prints it (MAJOR:MINOR of the inode's s_dev), the load
 * bias binfmt_elf chose as /proc/PID/stat's startcode (mm->start_code) and
 * the executable mapping's start and offset in /proc/PID/maps. Files: the
 * executables and libraries of the CPythons on the machine (Debian's
 * non-PIE /usr/bin/python3.11, pyenv's PIE launchers and their
 * libpython3.X.so), as the test process's children map them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/interp/interp.h"
#include "py_fixture.h"

/* One executable file mapping of a process, as /proc/PID/maps has it. */
struct text_map {
	uint64_t start, offset;
	unsigned major, minor;
	bool found;
};

/* The executable mapping of inode `ino` in /proc/`pid`/maps. */
static struct text_map text_of(pid_t pid, uint64_t ino)
{
	struct text_map t = { 0 };
	char path[64], line[4352], perms[8];
	unsigned long long start, end, off, inode;
	unsigned maj, min;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &off, &maj, &min,
			   &inode) == 7 &&
		    inode == ino && perms[2] == 'x') {
			t = (struct text_map){ start, off, maj, min, true };
			break;
		}
	fclose(f);
	return t;
}

/* Field 26 of /proc/PID/stat: mm->start_code. */
static uint64_t start_code_of(pid_t pid)
{
	char path[64], buf[4096];
	unsigned long long v = 0;
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	assert_non_null(f = fopen(path, "r"));
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	assert_non_null(p = strrchr(buf, ')'));
	p += 2;   /* field 3 on */
	for (int field = 3; field < 26; field++) {
		assert_non_null(p = strchr(p, ' '));
		p++;
	}
	assert_int_equal(sscanf(p, "%llu", &v), 1);
	return v;
}

/* The opal_file of `path`: its fstat key and its ELF layout. */
static void file_of(const char *path, struct opal_file *file)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	memset(file, 0, sizeof(*file));
	assert_int_equal(opal_file_key_from_fd(fd, &file->key), 0);
	assert_int_equal(opal_elf_info_from_fd(fd, &file->elf), 0);
	file->path = (char *)path;
	close(fd);
}

/* Starts `exe` (a CPython: -c code that sleeps) and waits until its
 * mapping of `lib_ino` (0: its own executable's) is there. */
static pid_t start_python(const char *exe, uint64_t ino)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		execl(exe, exe, "-c", "import time; time.sleep(30)", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		if (text_of(pid, ino).found)
			return pid;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	fail_msg("%s: no executable mapping of inode %" PRIu64 " in 3 s", exe, ino);
	return -1;
}

static void stop_python(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The walk an interpreter at load bias `bias` would have: only runtime
 * depends on the bias. */
static struct opal_py_walk walk_at(uint64_t bias)
{
	return (struct opal_py_walk){ .runtime = 0x5c1234 + bias, .version = 0x030b, .model = 2 };
}

/* The key names the file as the kernel does, and the walk is the file's. */
static void check_key(const struct opal_file *file, const struct text_map *t,
		      const struct opal_interp_file_key *k, const struct opal_interp_file *v)
{
	assert_int_equal(k->dev >> 20, t->major);
	assert_int_equal(k->dev & 0xfffff, t->minor);
	assert_int_equal(k->ino, file->key.ino);
	assert_int_equal(k->size, file->key.size);
	assert_int_equal(k->mtime_sec, file->key.mtime_sec);
	assert_int_equal(k->mtime_nsec, file->key.mtime_nsec);
	assert_int_equal(v->walk.runtime, 0x5c1234);
	assert_int_equal(v->walk.version, 0x030b);
}

/* At exec: mm->start_code - exec_vaddr is the bias the process's own
 * mapping of its executable shows. */
static void check_exec(const char *exe)
{
	struct opal_file file;
	struct opal_interp_file_key k;
	struct opal_interp_file v;

	file_of(exe, &file);
	pid_t pid = start_python(exe, file.key.ino);
	struct text_map t = text_of(pid, file.key.ino);
	uint64_t start_code = start_code_of(pid);
	stop_python(pid);
	/* the bias of the text mapping: its start is its file offset's vaddr */
	uint64_t bias = 0;
	for (size_t i = 0; i < file.elf.n_loads; i++)
		if ((file.elf.loads[i].flags & PF_X) &&
		    (file.elf.loads[i].offset & ~4095ull) == t.offset)
			bias = t.start - (file.elf.loads[i].vaddr & ~4095ull);
	struct opal_py_walk w = walk_at(bias);
	assert_int_equal(opal_interp_file_entry(&file, &w, bias, &k, &v), 0);
	check_key(&file, &t, &k, &v);
	assert_int_equal(start_code - v.exec_vaddr, bias);
	assert_int_equal(t.offset, v.text_offset);
	assert_int_equal(t.start - v.text_vaddr, bias);
}

static void test_debian_exe(void **state)
{
	if (access("/usr/bin/python3.11", X_OK) != 0)
		fail_msg("/usr/bin/python3.11 is not installed (apt-get install python3.11)");
	check_exec("/usr/bin/python3.11");
}

/* pyenv's launchers are PIE: a bias other than 0 */
static void test_pyenv_exe(void **state)
{
	char pattern[4200];
	glob_t g;
	size_t n = 0;

	snprintf(pattern, sizeof(pattern), "%s/versions/3.1[0-3].*/bin/python3.1[0-3]", py_pyenv_root());
	if (glob(pattern, 0, NULL, &g) != 0)
		fail_msg("no pyenv CPython 3.10-3.13: nothing matches %s", pattern);
	for (size_t i = 0; i < g.gl_pathc; i++, n++)
		check_exec(g.gl_pathv[i]);
	globfree(&g);
	assert_true(n > 0);
}

/* At a sample in libpython's text: the VMA's start - text_vaddr is the
 * bias ld.so chose, and text_offset its file offset. */
static void test_pyenv_libpython(void **state)
{
	char pattern[4200];
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/versions/3.1[0-3].*/lib/libpython3.1[0-3].so.1.0",
		 py_pyenv_root());
	if (glob(pattern, 0, NULL, &g) != 0)
		fail_msg("no pyenv libpython3.10-3.13: nothing matches %s", pattern);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char exe[4096];
		struct opal_file file;
		struct opal_interp_file_key k;
		struct opal_interp_file v;
		const char *lib = g.gl_pathv[i];

		/* .../3.X.Y/lib/libpython3.X.so.1.0 -> .../3.X.Y/bin/python3.X */
		const char *ver = strstr(lib, "/lib/libpython") + strlen("/lib/libpython");
		snprintf(exe, sizeof(exe), "%.*s/bin/python%.*s", (int)(strstr(lib, "/lib/libpython") - lib),
			 lib, (int)(strstr(ver, ".so") - ver), ver);
		file_of(lib, &file);
		pid_t pid = start_python(exe, file.key.ino);
		struct text_map t = text_of(pid, file.key.ino);
		stop_python(pid);
		uint64_t bias = 0;
		for (size_t j = 0; j < file.elf.n_loads; j++)
			if (file.elf.loads[j].flags & PF_X)
				bias = t.start - (file.elf.loads[j].vaddr & ~4095ull);
		struct opal_py_walk w = walk_at(bias);
		assert_int_equal(opal_interp_file_entry(&file, &w, bias, &k, &v), 0);
		check_key(&file, &t, &k, &v);
		assert_int_equal(v.text_offset, t.offset);
		assert_int_equal(t.start - v.text_vaddr, bias);
		assert_true(bias != 0);
	}
	globfree(&g);
}

/* A file without an executable PT_LOAD gives no entry. */
static void test_no_text(void **state)
{
	struct opal_file file = { 0 };
	struct opal_interp_file_key k;
	struct opal_interp_file v;
	struct opal_py_walk w = walk_at(0);

	file.elf.n_loads = 2;
	file.elf.loads[0] = (struct opal_load_segment){ .vaddr = 0, .flags = PF_R };
	file.elf.loads[1] = (struct opal_load_segment){ .vaddr = 0x3000, .offset = 0x2000,
							 .flags = PF_R | PF_W };
	assert_int_equal(opal_interp_file_entry(&file, &w, 0, &k, &v), -ENOENT);
	/* the lowest of two executable ones, rounded down to its page */
	file.elf.loads[0].flags = PF_R | PF_X;
	file.elf.loads[0].vaddr = 0x401234;
	file.elf.loads[0].offset = 0x1234;
	file.elf.loads[1].flags = PF_R | PF_X;
	file.elf.loads[1].vaddr = 0x500000;
	assert_int_equal(opal_interp_file_entry(&file, &w, 0, &k, &v), 0);
	assert_int_equal(v.exec_vaddr, 0x401234);
	assert_int_equal(v.text_vaddr, 0x401000);
	assert_int_equal(v.text_offset, 0x1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debian_exe),
		cmocka_unit_test(test_pyenv_exe),
		cmocka_unit_test(test_pyenv_libpython),
		cmocka_unit_test(test_no_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
