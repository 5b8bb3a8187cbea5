/* Unit tests of collector/interp/python_layout.c and python_debug_offsets.c.
 * Every offset and size of the table is compared with the DWARF (libdw:
 * struct member locations, sizes, bit-field positions, enumerators) of
 * every CPython build with DWARF on the machine: pyenv's
 * libpython3.X.so.1.0 under $(pyenv root)/versions and Debian's Py_DEBUG
 * build (python3.11-dbg: libpython3.11d.so.1.0, /usr/bin/python3.11d) and
 * Debian's release /usr/bin/python3.11 (its debug file, also in
 * python3.11-dbg);
 * members the table says are absent must be absent. The 3.13
 * _Py_DebugOffsets is read from libpython3.13's .PyRuntime section (its
 * static initial value) and must give the table's offsets.
 * Prerequisites: python3.11-dbg and at least one pyenv build
 * (scripts/install-deps.sh installs the former). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/interp/python_debug_offsets.h"
#include "collector/interp/python_layout.h"
#include "collector/interp/python_probe.h"
#include "collector/proc/elfinfo.h"
#include "py_fixture.h"

#define DEBUG_LIB "/usr/lib/x86_64-linux-gnu/libpython3.11d.so.1.0"
#define DEBUG_EXE "/usr/bin/python3.11d"
#define RELEASE_EXE "/usr/bin/python3.11"

/* /usr/lib/debug/.build-id/xx/yyyy.debug of `path`. */
static void release_debug_file(const char *path, char *out, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("%s missing (Debian's python3.11)", path);
	struct opal_elf_info info;
	assert_int_equal(opal_elf_info_from_fd(fd, &info), 0);
	close(fd);
	if (info.build_id_len < 2)
		fail_msg("%s has no build ID", path);
	size_t n = (size_t)snprintf(out, cap, "/usr/lib/debug/.build-id/%02x/", info.build_id[0]);
	for (size_t i = 1; i < info.build_id_len && n + 3 < cap; i++, n += 2)
		snprintf(out + n, cap - n, "%02x", info.build_id[i]);
	snprintf(out + n, cap - n, ".debug");
	if (access(out, R_OK) != 0)
		fail_msg("%s (debug file of %s) missing: install python3.11-dbg", out, path);
}

/* The typedefs looked up, and the struct tags they may name when the
 * typedef in the first unit seen points at a declaration only. */
static const char *const typedefs[][2] = {
	{ "_PyRuntimeState", "pyruntimestate" }, { "PyInterpreterState", "_is" },
	{ "PyThreadState", "_ts" }, { "PyFrameObject", "_frame" },
	{ "_PyCFrame", "_PyCFrame" }, { "_PyInterpreterFrame", "_PyInterpreterFrame" },
	{ "PyCodeObject", "PyCodeObject" }, { "PyASCIIObject", NULL },
	{ "PyCompactUnicodeObject", NULL }, { "PyBytesObject", NULL }, { "PyObject", "_object" },
};
#define NT (sizeof(typedefs) / sizeof(typedefs[0]))

struct dwtypes {
	Dwarf *dw;
	int fd;
	bool have[NT], have_tag[NT], have_enum;
	Dwarf_Die type[NT], tag[NT], owner_enum;
};

static void peel(Dwarf_Die *d)
{
	Dwarf_Attribute a;
	while ((dwarf_tag(d) == DW_TAG_typedef || dwarf_tag(d) == DW_TAG_const_type ||
		dwarf_tag(d) == DW_TAG_volatile_type) &&
	       dwarf_attr(d, DW_AT_type, &a) && dwarf_formref_die(&a, d))
		;
}

static bool complete(Dwarf_Die *d)
{
	Dwarf_Die child;
	return (dwarf_tag(d) == DW_TAG_structure_type) && !dwarf_hasattr(d, DW_AT_declaration) &&
	       dwarf_child(d, &child) == 0;
}

static void index_types(const char *path, struct dwtypes *t)
{
	memset(t, 0, sizeof(*t));
	t->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->fd < 0)
		fail_msg("cannot open %s", path);
	t->dw = dwarf_begin(t->fd, DWARF_C_READ);
	if (!t->dw)
		fail_msg("%s: no DWARF (%s)", path, dwarf_errmsg(-1));
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (dwarf_nextcu(t->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, d;
		if (dwarf_offdie(t->dw, off + hsize, &cu) && dwarf_child(&cu, &d) == 0) {
			do {
				const char *name = dwarf_diename(&d);
				int tag = dwarf_tag(&d);
				if (!name)
					continue;
				if (tag == DW_TAG_enumeration_type && !t->have_enum &&
				    strcmp(name, "_frameowner") == 0) {
					t->owner_enum = d;
					t->have_enum = true;
				}
				for (size_t i = 0; i < NT; i++) {
					if (tag == DW_TAG_typedef && !t->have[i] &&
					    strcmp(name, typedefs[i][0]) == 0) {
						Dwarf_Die target = d;
						peel(&target);
						if (complete(&target)) {
							t->type[i] = target;
							t->have[i] = true;
						}
					} else if (tag == DW_TAG_structure_type && !t->have_tag[i] &&
						   typedefs[i][1] && strcmp(name, typedefs[i][1]) == 0 &&
						   complete(&d)) {
						t->tag[i] = d;
						t->have_tag[i] = true;
					}
				}
			} while (dwarf_siblingof(&d, &d) == 0);
		}
		off = next;
	}
	for (size_t i = 0; i < NT; i++) {
		if (!t->have[i] && t->have_tag[i]) {
			t->type[i] = t->tag[i];
			t->have[i] = true;
		}
	}
}

static void close_types(struct dwtypes *t)
{
	dwarf_end(t->dw);
	close(t->fd);
}

static Dwarf_Die *type_of(struct dwtypes *t, const char *name)
{
	for (size_t i = 0; i < NT; i++)
		if (strcmp(typedefs[i][0], name) == 0)
			return t->have[i] ? &t->type[i] : NULL;
	fail_msg("type %s not indexed", name);
	return NULL;
}

/* Offset of member path "a.b.c" in `st`; false when a part is missing. */
static bool member(Dwarf_Die *st, const char *path, uint64_t *off, Dwarf_Die *last)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	Dwarf_Die cur = *st;
	*off = 0;
	char *save = NULL;
	for (char *part = strtok_r(buf, ".", &save); part; part = strtok_r(NULL, ".", &save)) {
		peel(&cur);
		Dwarf_Die m;
		bool found = false;
		if (dwarf_child(&cur, &m) == 0) {
			do {
				const char *n = dwarf_diename(&m);
				if (dwarf_tag(&m) == DW_TAG_member && n && strcmp(n, part) == 0) {
					found = true;
					break;
				}
			} while (dwarf_siblingof(&m, &m) == 0);
		}
		if (!found)
			return false;
		Dwarf_Attribute a;
		Dwarf_Word loc = 0;
		if (dwarf_attr(&m, DW_AT_data_member_location, &a))
			assert_int_equal(dwarf_formudata(&a, &loc), 0);
		*off += loc;
		*last = m;
		if (!dwarf_attr(&m, DW_AT_type, &a) || !dwarf_formref_die(&a, &cur))
			return false;
	}
	return true;
}

/* Bit position (from the least significant bit of the storage unit) of a
 * bit-field member: DWARF 4+ data_bit_offset, or DWARF 2 bit_offset. */
static int bit_of(Dwarf_Die *m)
{
	Dwarf_Attribute a;
	Dwarf_Word v, bytes, bits;
	if (dwarf_attr(m, DW_AT_data_bit_offset, &a) && dwarf_formudata(&a, &v) == 0)
		return (int)v;
	if (dwarf_attr(m, DW_AT_bit_offset, &a) && dwarf_formudata(&a, &v) == 0 &&
	    dwarf_attr(m, DW_AT_byte_size, &a) && dwarf_formudata(&a, &bytes) == 0 &&
	    dwarf_attr(m, DW_AT_bit_size, &a) && dwarf_formudata(&a, &bits) == 0)
		return (int)(bytes * 8 - v - bits);
	return -1;
}

static int64_t enumerator(struct dwtypes *t, const char *name)
{
	Dwarf_Die e;
	if (!t->have_enum || dwarf_child(&t->owner_enum, &e) != 0)
		return -1;
	do {
		const char *n = dwarf_diename(&e);
		Dwarf_Attribute a;
		Dwarf_Sword v;
		if (n && strcmp(n, name) == 0 && dwarf_attr(&e, DW_AT_const_value, &a) &&
		    dwarf_formsdata(&a, &v) == 0)
			return v;
	} while (dwarf_siblingof(&e, &e) == 0);
	return -1;
}

struct checker {
	const char *build;
	struct dwtypes *t;
	unsigned checked, wrong;
};

/* Table value `want` against DWARF type.path; OPAL_PY_NONE: must be absent. */
static void check_off(struct checker *c, const char *field, uint32_t want, const char *type,
		      const char *path)
{
	Dwarf_Die *st = type_of(c->t, type), m;
	uint64_t off;
	bool present = st && path && member(st, path, &off, &m);
	c->checked++;
	if (want == OPAL_PY_NONE) {
		if (present) {
			printf("%s %s: table says absent, DWARF %s.%s at %llu\n", c->build, field,
			       type, path, (unsigned long long)off);
			c->wrong++;
		}
		return;
	}
	if (!present) {
		printf("%s %s: table %u, DWARF has no %s.%s\n", c->build, field, want, type, path);
		c->wrong++;
	} else if (off != want) {
		printf("%s %s: table %u, DWARF %s.%s at %llu\n", c->build, field, want, type, path,
		       (unsigned long long)off);
		c->wrong++;
	}
}

static void check_val(struct checker *c, const char *field, int64_t want, int64_t dwarf,
		      const char *what)
{
	c->checked++;
	if (want != dwarf) {
		printf("%s %s: table %lld, DWARF %s %lld\n", c->build, field, (long long)want, what,
		       (long long)dwarf);
		c->wrong++;
	}
}

static int64_t size_of(struct checker *c, const char *type)
{
	Dwarf_Die *st = type_of(c->t, type);
	return st ? dwarf_bytesize(st) : -1;
}

static int64_t state_bit(struct checker *c, const char *bit)
{
	Dwarf_Die *st = type_of(c->t, "PyASCIIObject"), m;
	uint64_t off;
	char path[32];
	snprintf(path, sizeof(path), "state.%s", bit);
	return st && member(st, path, &off, &m) ? bit_of(&m) : -1;
}

/* Every table field of o against the DWARF of one build. */
static void check_build(struct checker *c, const struct opal_py_offsets *o)
{
	bool old = o->minor <= 10;
	const char *frame = old ? "PyFrameObject" : "_PyInterpreterFrame";

	check_val(c, "runtime.size", o->runtime.size, size_of(c, "_PyRuntimeState"), "sizeof");
	check_off(c, "runtime.interpreters_head", o->runtime.interpreters_head, "_PyRuntimeState",
		  "interpreters.head");
	check_off(c, "runtime.interpreters_main", o->runtime.interpreters_main, "_PyRuntimeState",
		  "interpreters.main");
	check_off(c, "interp.next", o->interp.next, "PyInterpreterState", "next");
	check_off(c, "interp.id", o->interp.id, "PyInterpreterState", "id");
	check_off(c, "interp.threads_head", o->interp.threads_head, "PyInterpreterState",
		  old ? "tstate_head" : "threads.head");
	check_off(c, "tstate.next", o->tstate.next, "PyThreadState", "next");
	check_off(c, "tstate.interp", o->tstate.interp, "PyThreadState", "interp");
	check_off(c, "tstate.thread_id", o->tstate.thread_id, "PyThreadState", "thread_id");
	check_off(c, "tstate.native_thread_id", o->tstate.native_thread_id, "PyThreadState",
		  "native_thread_id");
	check_off(c, "tstate.frame", o->tstate.frame, "PyThreadState", "frame");
	/* 3.10 has a cframe too (tracing only): the table leaves it out. */
	if (o->minor != 10)
		check_off(c, "tstate.cframe", o->tstate.cframe, "PyThreadState", "cframe");
	check_off(c, "tstate.current_frame", o->tstate.current_frame, "PyThreadState",
		  "current_frame");
	if (o->cframe.current_frame != OPAL_PY_NONE)
		check_off(c, "cframe.current_frame", o->cframe.current_frame, "_PyCFrame",
			  "current_frame");
	check_val(c, "frame.size", o->frame.size, size_of(c, frame), "sizeof");
	check_off(c, "frame.previous", o->frame.previous, frame, old ? "f_back" : "previous");
	check_off(c, "frame.code", o->frame.code, frame, o->minor >= 13 ? "f_executable" : "f_code");
	check_off(c, "frame.instr", o->frame.instr, frame,
		  old ? "f_lasti" : o->minor >= 13 ? "instr_ptr" : "prev_instr");
	check_off(c, "frame.is_entry", o->frame.is_entry, frame, "is_entry");
	check_off(c, "frame.owner", o->frame.owner, frame, "owner");
	if (!old) {
		check_val(c, "frame.owner_generator", o->frame.owner_generator,
			  enumerator(c->t, "FRAME_OWNED_BY_GENERATOR"), "FRAME_OWNED_BY_GENERATOR");
		check_val(c, "frame.owner_cstack", o->frame.owner_cstack,
			  o->minor >= 12 ? enumerator(c->t, "FRAME_OWNED_BY_CSTACK") : 0,
			  "FRAME_OWNED_BY_CSTACK");
	}
	if (old) {
		check_val(c, "code.copy_size", o->code.copy_size, size_of(c, "PyCodeObject"), "sizeof");
		check_off(c, "code.ob_size", o->code.ob_size, "PyCodeObject", "ob_base.ob_size");
	} else {
		check_off(c, "code.copy_size", o->code.copy_size, "PyCodeObject", "co_code_adaptive");
		check_off(c, "code.ob_size", o->code.ob_size, "PyCodeObject", "ob_base.ob_size");
	}
	check_off(c, "code.firstlineno", o->code.firstlineno, "PyCodeObject", "co_firstlineno");
	check_off(c, "code.name", o->code.name, "PyCodeObject", "co_name");
	check_off(c, "code.qualname", o->code.qualname, "PyCodeObject", "co_qualname");
	check_off(c, "code.filename", o->code.filename, "PyCodeObject", "co_filename");
	check_off(c, "code.linetable", o->code.linetable, "PyCodeObject",
		  o->minor <= 9 ? "co_lnotab" : "co_linetable");
	check_off(c, "code.code_adaptive", o->code.code_adaptive, "PyCodeObject",
		  "co_code_adaptive");
	check_off(c, "code.firsttraceable", o->code.firsttraceable, "PyCodeObject",
		  "_co_firsttraceable");
	check_off(c, "unicode.length", o->unicode.length, "PyASCIIObject", "length");
	check_off(c, "unicode.state", o->unicode.state, "PyASCIIObject", "state");
	check_val(c, "unicode.ascii_size", o->unicode.ascii_size, size_of(c, "PyASCIIObject"),
		  "sizeof");
	check_val(c, "unicode.compact_size", o->unicode.compact_size,
		  size_of(c, "PyCompactUnicodeObject"), "sizeof");
	check_val(c, "unicode.kind_shift", o->unicode.kind_shift, state_bit(c, "kind"), "bit");
	check_val(c, "unicode.compact_shift", o->unicode.compact_shift, state_bit(c, "compact"),
		  "bit");
	check_val(c, "unicode.ascii_shift", o->unicode.ascii_shift, state_bit(c, "ascii"), "bit");
	check_off(c, "bytes.ob_size", o->bytes.ob_size, "PyBytesObject", "ob_base.ob_size");
	check_off(c, "bytes.ob_sval", o->bytes.ob_sval, "PyBytesObject", "ob_sval");
	check_off(c, "object.ob_type", o->object.ob_type, "PyObject", "ob_type");
}

/* One build: its version from the probe of `path`, then every field
 * against the DWARF of `dwarf_path` (the file itself, or its separate
 * debug file). */
static void check_file(const char *path, const char *dwarf_path, char *summary, size_t cap)
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
	struct opal_py_offsets o;
	if (opal_py_offsets_for_build(p.major, p.minor, p.runtime.size, &o) != 0)
		fail_msg("%s: no offsets for %u.%u with _PyRuntime of %llu bytes", path, p.major,
			 p.minor, (unsigned long long)p.runtime.size);
	struct dwtypes t;
	index_types(dwarf_path, &t);
	char build[64];
	snprintf(build, sizeof(build), "%u.%u.%u", p.major, p.minor, p.micro);
	struct checker c = { .build = build, .t = &t };
	check_build(&c, &o);
	close_types(&t);
	printf("layout %s (%s, DWARF of %s): %u fields checked, %u differ\n", build, path,
	       dwarf_path, c.checked, c.wrong);
	if (c.wrong)
		fail_msg("%s: %u table fields disagree with DWARF", path, c.wrong);
	size_t len = strlen(summary);
	snprintf(summary + len, cap - len, "%s%s", len ? ", " : "", build);
}

static void test_table_matches_dwarf(void **state)
{
	char summary[1024] = "", pattern[4200];
	unsigned pyenv_builds = 0;
	for (unsigned minor = 8; minor <= 13; minor++) {
		snprintf(pattern, sizeof(pattern), "%s/versions/3.%u.*/lib/libpython3.%u.so.1.0",
			 py_pyenv_root(), minor, minor);
		glob_t g;
		if (glob(pattern, 0, NULL, &g) != 0)
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++, pyenv_builds++)
			check_file(g.gl_pathv[i], g.gl_pathv[i], summary, sizeof(summary));
		globfree(&g);
	}
	if (pyenv_builds == 0)
		fail_msg("no pyenv CPython 3.8-3.13 build under %s/versions (set PYENV_ROOT)",
			 py_pyenv_root());
	if (access(DEBUG_LIB, R_OK) != 0 || access(DEBUG_EXE, R_OK) != 0)
		fail_msg("%s or %s missing: install python3.11-dbg (scripts/install-deps.sh)",
			 DEBUG_LIB, DEBUG_EXE);
	check_file(DEBUG_LIB, DEBUG_LIB, summary, sizeof(summary));
	check_file(DEBUG_EXE, DEBUG_EXE, summary, sizeof(summary));
	/* Debian's stripped release python3.11: python3.11-dbg also ships its
	 * debug file, found by build ID. */
	char debug_file[256];
	release_debug_file(RELEASE_EXE, debug_file, sizeof(debug_file));
	check_file(RELEASE_EXE, debug_file, summary, sizeof(summary));
	printf("layout versions checked: %s (the last three: Debian's Py_DEBUG library and "
	       "executable, Debian's release python3.11)\n", summary);
}

/* libpython3.13's .PyRuntime holds _Py_DebugOffsets' initial value. */
static void read_debug_offsets(uint8_t *buf, uint64_t *runtime_size)
{
	char pattern[4200];
	snprintf(pattern, sizeof(pattern), "%s/versions/3.13.*/lib/libpython3.13.so.1.0",
		 py_pyenv_root());
	glob_t g;
	if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0)
		fail_msg("no pyenv 3.13 build (%s): the debug-offsets test reads its .PyRuntime",
			 pattern);
	int fd = open(g.gl_pathv[0], O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct opal_py_probe p;
	assert_int_equal(opal_py_probe_elf(fd, &p, NULL, 0), 0);
	assert_int_equal(opal_py_read_vaddr(fd, p.runtime.vaddr, buf,
					    OPAL_PY_DEBUG_OFFSETS_313_SIZE), 0);
	/* .bss and beyond the file are not readable from it. */
	assert_int_equal(opal_py_read_vaddr(fd, UINT64_MAX - 4, buf, 4), -ENOENT);
	close(fd);
	globfree(&g);
	*runtime_size = p.runtime.size;
}

static void put64(uint8_t *b, unsigned idx, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[8 + 8 * idx + i] = (uint8_t)(v >> (8 * i));
}

static int parse(const uint8_t *b, size_t len, uint64_t rs, struct opal_py_offsets *o)
{
	char why[256] = "";
	int rc = opal_py_offsets_from_debug(b, len, rs, o, NULL, why, sizeof(why));
	if (rc != 0)
		assert_true(why[0] != '\0');   /* a refusal always says why */
	return rc;
}

static void test_debug_offsets_313(void **state)
{
	uint8_t buf[OPAL_PY_DEBUG_OFFSETS_313_SIZE], b[sizeof(buf)];
	uint64_t rs;
	read_debug_offsets(buf, &rs);
	struct opal_py_offsets got, table;
	uint32_t hex = 0;
	assert_int_equal(opal_py_offsets_from_debug(buf, sizeof(buf), rs, &got, &hex, NULL, 0), 0);
	assert_int_equal(hex >> 16, 0x030d);
	assert_true(got.from_debug_offsets);
	assert_int_equal(opal_py_offsets_lookup(3, 13, &table), 0);
	got.from_debug_offsets = false;
	assert_memory_equal(&got, &table, sizeof(got));
	printf("3.13 _Py_DebugOffsets (version 0x%08x) gives the table's offsets\n", hex);

	/* Indexes of uint64_t members (v3.13.0 order): version 0,
	 * free_threaded 1, runtime size 2, thread-state size 18,
	 * current_frame 22, frame owner 32, code filename 34,
	 * firstlineno 38, co_code_adaptive 42, unicode size 66. */
	struct { unsigned idx; uint64_t value; int rc; } cases[] = {
		{ 0, 0x030e00f0, -ENOTSUP }, { 0, 0x030d00a1, -ENOTSUP }, { 0, 0x030d00b3, -ENOTSUP },
		{ 0, 0x020700f0, -EINVAL }, { 0, 0x030d0050, -EINVAL }, { 1, 1, -ENOTSUP },
		{ 1, 2, -EINVAL }, { 2, 12345, -EINVAL }, { 18, 0, -EINVAL },
		{ 18, 1u << 20, -EINVAL }, { 22, 4000, -EINVAL }, { 32, 56, -EINVAL },
		{ 34, 120, -EINVAL }, { 38, 400, -EINVAL }, { 42, 60, -EINVAL }, { 66, 100, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, buf, sizeof(b));
		put64(b, cases[i].idx, cases[i].value);
		int rc = parse(b, sizeof(b), rs, &got);
		if (rc != cases[i].rc)
			fail_msg("member %u = 0x%llx: %d, want %d", cases[i].idx,
				 (unsigned long long)cases[i].value, rc, cases[i].rc);
	}
	memcpy(b, buf, sizeof(b));
	b[0] = 'X';
	assert_int_equal(parse(b, sizeof(b), rs, &got), -EINVAL);
	assert_int_equal(parse(buf, sizeof(buf) - 1, rs, &got), -EINVAL);
	assert_int_equal(parse(buf, 8, rs, &got), -EINVAL);
	assert_int_equal(parse(buf, sizeof(buf), rs + 8, &got), -EINVAL);
	assert_int_equal(parse(buf, sizeof(buf), 0, &got), 0);   /* size unknown: not compared */
	/* Code offsets other than the table's: published ones are used, the
	 * unpublished _co_firsttraceable is dropped. */
	memcpy(b, buf, sizeof(b));
	put64(b, 38, 64);
	assert_int_equal(parse(b, sizeof(b), rs, &got), 0);
	assert_int_equal(got.code.firstlineno, 64);
	assert_int_equal(got.code.firsttraceable, OPAL_PY_NONE);
	/* Every cut and every single-byte change: no crash, a reason. */
	for (size_t len = 0; len < sizeof(buf); len++)
		assert_int_not_equal(parse(buf, len, rs, &got), 0);
	for (size_t i = 0; i < sizeof(buf); i++) {
		memcpy(b, buf, sizeof(b));
		b[i] ^= 0xa5;
		parse(b, sizeof(b), rs, &got);
	}
}

static void test_lookup_and_instr_unit(void **state)
{
	struct opal_py_offsets o;
	for (unsigned m = 8; m <= 13; m++) {
		assert_int_equal(opal_py_offsets_lookup(3, m, &o), 0);
		assert_int_equal(o.minor, m);
		assert_int_equal(opal_py_offsets_for_build(3, m, o.runtime.size, &o), 0);
		assert_int_equal(opal_py_offsets_for_build(3, m, o.runtime.size + 8, &o), -ENOTSUP);
	}
	assert_int_equal(opal_py_offsets_lookup(3, 7, &o), -ENOTSUP);
	assert_int_equal(opal_py_offsets_lookup(3, 14, &o), -ENOTSUP);
	assert_int_equal(opal_py_offsets_lookup(2, 7, &o), -ENOTSUP);

	int64_t u;
	assert_int_equal(opal_py_offsets_lookup(3, 9, &o), 0);   /* f_lasti in bytes */
	assert_int_equal(opal_py_instr_unit(&o, 0, 40, &u), 0);
	assert_int_equal(u, 20);
	assert_int_equal(opal_py_instr_unit(&o, 0, (uint64_t)-1, &u), 0);
	assert_int_equal(u, -1);
	assert_int_equal(opal_py_instr_unit(&o, 0, 41, &u), -EINVAL);
	assert_int_equal(opal_py_instr_unit(&o, 0, (uint64_t)-2, &u), -EINVAL);
	assert_int_equal(opal_py_offsets_lookup(3, 10, &o), 0);  /* f_lasti in code units */
	assert_int_equal(opal_py_instr_unit(&o, 0, 41, &u), 0);
	assert_int_equal(u, 41);
	assert_int_equal(opal_py_offsets_lookup(3, 12, &o), 0);  /* prev_instr */
	uint64_t code = 0x7f0000001000, first = code + o.code.code_adaptive;
	assert_int_equal(opal_py_instr_unit(&o, code, first + 10, &u), 0);
	assert_int_equal(u, 5);
	assert_int_equal(opal_py_instr_unit(&o, code, first - 2, &u), 0);   /* not started */
	assert_int_equal(u, -1);
	assert_int_equal(opal_py_instr_unit(&o, code, first - 4, &u), -EINVAL);
	assert_int_equal(opal_py_instr_unit(&o, code, first + 3, &u), -EINVAL);
	assert_int_equal(opal_py_instr_unit(&o, code, first + (UINT64_C(1) << 40), &u), -EINVAL);
	assert_int_equal(opal_py_offsets_lookup(3, 13, &o), 0);  /* instr_ptr */
	first = code + o.code.code_adaptive;
	assert_int_equal(opal_py_instr_unit(&o, code, first, &u), 0);
	assert_int_equal(u, 0);
	assert_int_equal(opal_py_instr_unit(&o, code, first - 2, &u), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_matches_dwarf),
		cmocka_unit_test(test_debug_offsets_313),
		cmocka_unit_test(test_lookup_and_instr_unit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
