/* Unit tests of collector/interp/python_probe.c on every CPython file on
 * the machine: pyenv's libpython3.X.so.1.0 and bin/python3.X (a launcher
 * linked to the library: not an interpreter itself), Debian's stripped
 * /usr/bin/python3.11 and libpython3.11.so.1.0, python3.11-dbg's
 * python3.11d and libpython3.11d.so.1.0, a C program with libpython3.11.a
 * linked in and one linked to libpython3.12.so. Versions are checked
 * against the interpreter's own sys.hexversion, symbols against
 * `nm -S --defined-only` (and `nm -D`). Stand-ins built from
 * tests/fixtures/python/fake_interp.c cover the version-string rules;
 * non-Python and cut files must be refused.
 * Fixtures: $OPAL_FIXTURES/python (tests/fixtures/python/build.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/interp/python_layout.h"
#include "collector/interp/python_probe.h"
#include "py_fixture.h"

#define DEBIAN_EXE "/usr/bin/python3.11"
#define DEBIAN_LIB "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
#define DEBUG_EXE "/usr/bin/python3.11d"
#define DEBUG_LIB "/usr/lib/x86_64-linux-gnu/libpython3.11d.so.1.0"

static char fixtures[4096];

/* sys.hexversion of the interpreter at `python`. */
static uint32_t hexversion_of(const char *python)
{
	char cmd[4200], out[64] = "";
	snprintf(cmd, sizeof(cmd), "'%s' -c 'import sys; print(sys.hexversion)'", python);
	FILE *p = popen(cmd, "r");
	if (!p || !fgets(out, sizeof(out), p))
		fail_msg("cannot run %s", python);
	if (pclose(p) != 0)
		fail_msg("%s failed", python);
	return (uint32_t)strtoul(out, NULL, 10);
}

/* Address and size of `name` as nm prints them (defined symbols only;
 * dynamic: .dynsym). */
static bool nm_symbol(const char *path, bool dynamic, const char *name, uint64_t *addr,
		      uint64_t *size)
{
	char cmd[4200], line[1024];
	snprintf(cmd, sizeof(cmd), "nm %s -S --defined-only '%s' 2>/dev/null", dynamic ? "-D" : "",
		 path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	bool found = false;
	while (!found && fgets(line, sizeof(line), p)) {
		char a[32], s[32], type[4], n[512];
		if (sscanf(line, "%31s %31s %3s %511s", a, s, type, n) == 4 && strcmp(n, name) == 0) {
			*addr = strtoull(a, NULL, 16);
			*size = strtoull(s, NULL, 16);
			found = true;
		}
	}
	pclose(p);
	return found;
}

static void check_symbol(const char *path, const char *name, const struct opal_py_symbol *s)
{
	uint64_t a = 0, z = 0;
	bool in_nm = nm_symbol(path, true, name, &a, &z) || nm_symbol(path, false, name, &a, &z);
	if (s->found != in_nm)
		fail_msg("%s: %s found %d by the probe, %d by nm", path, name, s->found, in_nm);
	if (in_nm && (a != s->vaddr || z != s->size))
		fail_msg("%s: %s at 0x%" PRIx64 " size %" PRIu64 ", nm says 0x%" PRIx64 " size %" PRIu64,
			 path, name, s->vaddr, s->size, a, z);
}

/* An interpreter file: the probe's version equals `hex`, its symbols nm's,
 * and the layout answer is `layout_rc`. */
static void expect_interpreter(const char *path, uint32_t hex, int layout_rc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s", path);
	struct opal_py_probe p;
	char why[256];
	int rc = opal_py_probe_elf(fd, &p, why, sizeof(why));
	close(fd);
	if (rc != 0)
		fail_msg("%s: probe %d (%s)", path, rc, why);
	if (p.version_hex != hex)
		fail_msg("%s: version 0x%08x, the interpreter says 0x%08x", path, p.version_hex, hex);
	assert_int_equal(p.version_source, p.minor >= 11 ? OPAL_PY_VERSION_SYMBOL :
							   OPAL_PY_VERSION_STRING);
	check_symbol(path, "_PyRuntime", &p.runtime);
	check_symbol(path, "_PyEval_EvalFrameDefault", &p.eval);
	check_symbol(path, "_PyEval_EvalFrameDefault.cold", &p.eval_cold);
	check_symbol(path, "PyCode_Type", &p.code_type);
	check_symbol(path, "Py_Version", &p.py_version);
	struct opal_py_offsets o;
	assert_int_equal(opal_py_offsets_for_build(p.major, p.minor, p.runtime.size, &o), layout_rc);
	printf("probe %s: %u.%u.%u from %s, _PyRuntime 0x%" PRIx64 " (%" PRIu64 " bytes), "
	       "_PyEval_EvalFrameDefault 0x%" PRIx64 "+%" PRIu64 "%s, layout %s\n", path, p.major,
	       p.minor, p.micro, p.version_source == OPAL_PY_VERSION_SYMBOL ? "Py_Version" : "string",
	       p.runtime.vaddr, p.runtime.size, p.eval.vaddr, p.eval.size,
	       p.eval_cold.found ? " and .cold" : "", layout_rc == 0 ? "known" : "unknown");
}

static void expect_refused(const char *path, int want)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s", path);
	struct opal_py_probe p;
	char why[256] = "";
	int rc = opal_py_probe_elf(fd, &p, why, sizeof(why));
	close(fd);
	if (rc != want)
		fail_msg("%s: probe %d (%s), want %d", path, rc, why, want);
	assert_true(why[0] != '\0');
	printf("probe %s: refused (%s)\n", path, why);
}

static void test_pyenv_builds(void **state)
{
	char pattern[4200];
	snprintf(pattern, sizeof(pattern), "%s/versions/3.*/lib/libpython3.*.so.1.0", py_pyenv_root());
	glob_t g;
	if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0)
		fail_msg("no pyenv CPython build matches %s (set PYENV_ROOT)", pattern);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *lib = g.gl_pathv[i];
		unsigned minor;
		const char *base = strrchr(lib, '/') + 1;
		if (sscanf(base, "libpython3.%u", &minor) != 1)
			continue;
		char dir[4096], python[4200];
		snprintf(dir, sizeof(dir), "%.*s", (int)(base - lib - 5), lib);   /* minus "/lib/" */
		snprintf(python, sizeof(python), "%s/bin/python3.%u", dir, minor);
		if (minor < 7) {
			expect_refused(lib, -ENOENT);   /* _PyRuntime appeared in 3.7 */
		} else {
			/* 3.7 is read, but opal has no layout for it. */
			expect_interpreter(lib, hexversion_of(python),
					   minor >= 8 && minor <= 13 ? 0 : -ENOTSUP);
		}
		expect_refused(python, -ENOENT);   /* the launcher links the library */
	}
	globfree(&g);
}

static void test_debian_builds(void **state)
{
	if (access(DEBIAN_EXE, X_OK) != 0)
		fail_msg("%s missing (Debian's python3.11: scripts/install-deps.sh)", DEBIAN_EXE);
	if (access(DEBUG_EXE, X_OK) != 0 || access(DEBUG_LIB, R_OK) != 0)
		fail_msg("%s or %s missing: install python3.11-dbg (scripts/install-deps.sh)",
			 DEBUG_EXE, DEBUG_LIB);
	uint32_t hex = hexversion_of(DEBIAN_EXE);
	expect_interpreter(DEBIAN_EXE, hex, 0);
	expect_interpreter(DEBUG_EXE, hexversion_of(DEBUG_EXE), 0);
	expect_interpreter(DEBUG_LIB, hexversion_of(DEBUG_EXE), 0);
	if (access(DEBIAN_LIB, R_OK) == 0)
		expect_interpreter(DEBIAN_LIB, hex, 0);
}

static void test_embedded(void **state)
{
	char path[4352], line[256];
	snprintf(path, sizeof(path), "%s/embed.txt", fixtures);
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s (run tests/fixtures/build.sh)", path);
	bool statik = false;
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		if (sscanf(line, "%63s", name) != 1)
			continue;
		snprintf(path, sizeof(path), "%s/%s", fixtures, name);
		if (strcmp(name, "embed-static") == 0) {
			expect_interpreter(path, hexversion_of(DEBIAN_EXE), 0);
			statik = true;
		} else {
			expect_refused(path, -ENOENT);
		}
	}
	fclose(f);
	if (!statik)
		fail_msg("no embed-static fixture: it needs libpython3.11-dev (scripts/install-deps.sh)");
}

static int errno_of(const char *name)
{
	if (strcmp(name, "0") == 0)
		return 0;
	if (strcmp(name, "ENODATA") == 0)
		return -ENODATA;
	if (strcmp(name, "ENOENT") == 0)
		return -ENOENT;
	if (strcmp(name, "ENOTSUP") == 0)
		return -ENOTSUP;
	fail_msg("unknown result %s in fakes.txt", name);
	return 1;
}

static void test_version_rules(void **state)
{
	char path[4352], line[512];
	snprintf(path, sizeof(path), "%s/fakes.txt", fixtures);
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s (run tests/fixtures/build.sh)", path);
	unsigned n = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[128], result[16], hex[16], layout[16];
		if (sscanf(line, "%127s %15s %15s %15s", name, result, hex, layout) != 4)
			fail_msg("bad fakes.txt line %s", line);
		snprintf(path, sizeof(path), "%s/%s", fixtures, name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		struct opal_py_probe p;
		char why[256] = "";
		int rc = opal_py_probe_elf(fd, &p, why, sizeof(why));
		close(fd);
		if (rc != errno_of(result))
			fail_msg("%s: probe %d (%s), want %s", name, rc, why, result);
		if (rc == 0) {
			assert_int_equal(p.version_hex, strtoul(hex, NULL, 16));
			struct opal_py_offsets o;
			assert_int_equal(opal_py_offsets_for_build(p.major, p.minor, p.runtime.size, &o),
					 errno_of(layout));
		} else {
			assert_true(why[0] != '\0');
		}
		n++;
	}
	fclose(f);
	assert_true(n >= 10);
}

/* Not interpreters: another program, a text file, an empty file, the
 * first part of a libpython. None may crash the probe. */
static void test_not_interpreters(void **state)
{
	expect_refused("/bin/ls", -ENOENT);
	char tmp[] = "/tmp/opal-py-probe.XXXXXX";
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "#!/bin/sh\necho 3.9.18\n", 22), 22);
	close(fd);
	expect_refused(tmp, -ENOEXEC);
	fd = open(tmp, O_WRONLY | O_TRUNC);
	close(fd);
	expect_refused(tmp, -ENOEXEC);

	/* Cut copies of a real interpreter: any refusal, never a crash. */
	int src = open(DEBUG_LIB, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		fail_msg("%s missing: install python3.11-dbg", DEBUG_LIB);
	static uint8_t buf[1 << 20];
	ssize_t got = pread(src, buf, sizeof(buf), 0);
	assert_true(got == (ssize_t)sizeof(buf));
	close(src);
	const size_t cuts[] = { 16, 64, 4096, 65536, sizeof(buf) };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		fd = open(tmp, O_WRONLY | O_TRUNC);
		assert_int_equal(write(fd, buf, cuts[i]), (ssize_t)cuts[i]);
		close(fd);
		fd = open(tmp, O_RDONLY);
		struct opal_py_probe p;
		int rc = opal_py_probe_elf(fd, &p, NULL, 0);
		close(fd);
		assert_true(rc < 0);
	}
	unlink(tmp);
}

int main(void)
{
	const char *env = getenv("OPAL_FIXTURES");
	if (!env || !*env) {
		fprintf(stderr, "OPAL_FIXTURES is not set (run tests/run-unit.sh)\n");
		return 1;
	}
	snprintf(fixtures, sizeof(fixtures), "%s/python", env);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pyenv_builds),
		cmocka_unit_test(test_debian_builds),
		cmocka_unit_test(test_embedded),
		cmocka_unit_test(test_version_rules),
		cmocka_unit_test(test_not_interpreters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
