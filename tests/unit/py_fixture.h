/* For unit tests: the CPython fixture files of tests/fixtures/python
 * (gen_lines.py, gen_code.py output) as built into
 * $OPAL_FIXTURES/python/{committed,fresh}, and where pyenv's CPythons
 * are. Include after <cmocka.h>. */
#ifndef OPAL_TEST_PY_FIXTURE_H
#define OPAL_TEST_PY_FIXTURE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PY_FIXTURE_MAX_FILES 64

struct py_fixture_file {
	char path[4096];
	char name[256];        /* file name, e.g. lines-3.12.1-release.txt */
	unsigned major, minor, micro;
	char build[16];        /* "release" or "debug" */
};

/* $OPAL_FIXTURES/python/<sub>; fails the test without OPAL_FIXTURES. */
static __attribute__((unused)) const char *py_fixture_dir(const char *sub)
{
	static char dir[4096];
	const char *env = getenv("OPAL_FIXTURES");
	if (!env || !*env)
		fail_msg("OPAL_FIXTURES is not set (run tests/run-unit.sh, after tests/fixtures/build.sh)");
	snprintf(dir, sizeof(dir), "%s/python/%s", env, sub);
	return dir;
}

/* pyenv's root: $PYENV_ROOT, else $HOME/.pyenv. */
static __attribute__((unused)) const char *py_pyenv_root(void)
{
	static char root[4096];
	const char *env = getenv("PYENV_ROOT"), *home = getenv("HOME");

	if (env && *env)
		snprintf(root, sizeof(root), "%s", env);
	else
		snprintf(root, sizeof(root), "%s/.pyenv", home ? home : "/root");
	return root;
}

static int py_fixture_cmp(const void *a, const void *b)
{
	return strcmp(((const struct py_fixture_file *)a)->name,
		      ((const struct py_fixture_file *)b)->name);
}

/* The files "<prefix>-X.Y.Z-BUILD.txt" of `dir`, sorted by name. */
static __attribute__((unused)) size_t py_fixture_list(const char *dir, const char *prefix,
						       struct py_fixture_file *out, size_t max)
{
	DIR *d = opendir(dir);
	if (!d)
		fail_msg("cannot open %s (run tests/fixtures/build.sh)", dir);
	size_t n = 0;
	struct dirent *e;
	size_t plen = strlen(prefix);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, plen) != 0 || e->d_name[plen] != '-')
			continue;
		if (n == max)
			fail_msg("more than %zu fixtures in %s", max, dir);
		struct py_fixture_file *f = &out[n];
		if (sscanf(e->d_name + plen + 1, "%u.%u.%u-%15[a-z].txt", &f->major, &f->minor,
			   &f->micro, f->build) != 4)
			continue;
		snprintf(f->name, sizeof(f->name), "%s", e->d_name);
		snprintf(f->path, sizeof(f->path), "%.3800s/%s", dir, e->d_name);
		n++;
	}
	closedir(d);
	qsort(out, n, sizeof(out[0]), py_fixture_cmp);
	return n;
}

/* Hex string -> malloc'd bytes ("-" is empty); fails the test on bad hex. */
static __attribute__((unused)) uint8_t *py_fixture_hex(const char *hex, size_t *len)
{
	if (strcmp(hex, "-") == 0) {
		*len = 0;
		return malloc(1);
	}
	size_t n = strlen(hex);
	if (n % 2)
		fail_msg("odd hex length %zu", n);
	uint8_t *b = malloc(n / 2 + 1);
	assert_non_null(b);
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			fail_msg("bad hex at %zu", 2 * i);
		b[i] = (uint8_t)v;
	}
	*len = n / 2;
	return b;
}

/* Whole file as a NUL-terminated malloc'd string. */
static __attribute__((unused)) char *py_fixture_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	size_t cap = 1 << 16, n = 0;
	char *s = malloc(cap);
	assert_non_null(s);
	size_t r;
	while ((r = fread(s + n, 1, cap - n - 1, f)) > 0) {
		n += r;
		if (n + 1 == cap) {
			cap *= 2;
			s = realloc(s, cap);
			assert_non_null(s);
		}
	}
	fclose(f);
	s[n] = '\0';
	return s;
}

#endif
