/* For unit tests: the code-object dumps of tests/fixtures/python
 * (gen_code.py: per code object the values Python reports and the raw
 * bytes of the code object and of the objects it points to). */
#ifndef OPAL_TEST_PY_CODE_RECORDS_H
#define OPAL_TEST_PY_CODE_RECORDS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "py_fixture.h"
#include "symbolizer/interp/python_code.h"

enum { PY_B_CODE, PY_B_NAME, PY_B_QUALNAME, PY_B_FILENAME, PY_B_LINETABLE, PY_B_N };
static const char *const py_blob_names[PY_B_N] = { "code", "name", "qualname", "filename",
						   "linetable" };

struct py_code_record {
	char name[OPAL_PY_NAME_MAX], qualname[OPAL_PY_NAME_MAX], filename[OPAL_PY_FILENAME_MAX];
	int32_t firstlineno;
	uint32_t units;
	uint8_t *linetable;
	size_t linetable_len;
	uint8_t *blob[PY_B_N];
	size_t len[PY_B_N];
	uint64_t id[PY_B_N];   /* the object's address in the process */
};

static void py_code_record_free(struct py_code_record *r)
{
	free(r->linetable);
	for (int i = 0; i < PY_B_N; i++)
		free(r->blob[i]);
	memset(r, 0, sizeof(*r));
}

static void py_code_expect_str(char *dst, size_t cap, const char *hex)
{
	size_t n;
	uint8_t *b = py_fixture_hex(hex, &n);
	if (n >= cap)
		fail_msg("expected string of %zu bytes", n);
	memcpy(dst, b, n);
	dst[n] = '\0';
	free(b);
}

/* Calls `each` for every record of dump `f`; returns the count (a dump
 * with none fails the test). */
static __attribute__((unused)) size_t
py_code_records(const struct py_fixture_file *f,
		void (*each)(void *arg, const struct py_code_record *r), void *arg)
{
	char *text = py_fixture_slurp(f->path);
	char *save = NULL;
	struct py_code_record r = { 0 };
	size_t n = 0;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char what[32], hex[256];
		if (strncmp(line, "expect ", 7) == 0) {
			const char *value = strchr(line + 7, ' ');
			if (!value)
				fail_msg("%s: bad line %s", f->name, line);
			value++;
			if (sscanf(line, "expect %31s", what) != 1)
				fail_msg("%s: bad line", f->name);
			if (strcmp(what, "name") == 0)
				py_code_expect_str(r.name, sizeof(r.name), value);
			else if (strcmp(what, "qualname") == 0)
				py_code_expect_str(r.qualname, sizeof(r.qualname), value);
			else if (strcmp(what, "filename") == 0)
				py_code_expect_str(r.filename, sizeof(r.filename), value);
			else if (strcmp(what, "firstlineno") == 0)
				r.firstlineno = atoi(value);
			else if (strcmp(what, "units") == 0)
				r.units = (uint32_t)strtoul(value, NULL, 10);
			else if (strcmp(what, "linetable") == 0)
				r.linetable = py_fixture_hex(value, &r.linetable_len);
		} else if (strncmp(line, "blob ", 5) == 0) {
			unsigned long long id;
			if (sscanf(line, "blob %31s %llu %255s", what, &id, hex) != 3)
				fail_msg("%s: bad line", f->name);
			int k;
			for (k = 0; k < PY_B_N && strcmp(what, py_blob_names[k]); k++)
				;
			if (k == PY_B_N)
				fail_msg("%s: unknown blob %s", f->name, what);
			const char *h = strrchr(line, ' ') + 1;
			r.blob[k] = py_fixture_hex(h, &r.len[k]);
			r.id[k] = id;
		} else if (strcmp(line, "end") == 0) {
			each(arg, &r);
			py_code_record_free(&r);
			n++;
		}
	}
	free(text);
	if (n == 0)
		fail_msg("%s: no code objects", f->name);
	return n;
}

#endif
