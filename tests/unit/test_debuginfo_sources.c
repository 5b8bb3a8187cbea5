/* Tests of the debug-info sources (symbolizer/debuginfo/debuginfo_sources.h) through the
 * symbolizer: uploads, the debug root's .build-id layout, .gnu_debuglink
 * candidates with CRC checks, the ELF itself (MiniDebugInfo, zstd DWARF
 * degrading to .symtab with the reason recorded), DWARF 4 and 5, zlib,
 * dwz, the keep-debug writer, libc6-dbg, better data replacing cached
 * frames, and debuginfod through a fake server (tests/unit/fake_http.h):
 * downloads made without the symbolizer's lock, shared by concurrent
 * lookups, bounded in number, remembered when missing. Every variant's
 * answers are compared with what the symbolizer finds in di_full, the
 * unstripped reference build. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "debuginfo_helpers.h"
#include "fake_http.h"
#include "symbolizer/base/sym_result.h"
#include "symbolizer/debuginfo/debuginfo_keep.h"
#include "symbolizer/debuginfo/debuginfo_probe.h"
#include "symbolizer/debuginfo/debuginfo_sources.h"
#include "symbolizer/symbolize/sym_sqlite.h"

struct env {
	char dir[PATH_MAX];
	char root[PATH_MAX + 16];     /* the debug root */
	struct opal_debuginfo_store *st;
	struct opal_cache *cache;
	struct opal_symbolizer *s;
	uint8_t next_id;
};

static void configure(struct env *e, const char *root)
{
	struct opal_sym_sources_config c = { .store = e->st, .debug_root = root };
	assert_int_equal(opal_sym_sources_init(&c), 0);
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	di_mktemp(e->dir, sizeof(e->dir));
	snprintf(e->root, sizeof(e->root), "%s/debugroot", e->dir);
	assert_int_equal(mkdir(e->root, 0755), 0);
	e->st = di_store(e->dir, 0, 0);
	char db[PATH_MAX + 16];
	snprintf(db, sizeof(db), "%s/state.db", e->dir);
	e->cache = opal_cache_open(db);
	assert_non_null(e->cache);
	e->s = opal_symbolizer_new(e->cache, 8);
	assert_non_null(e->s);
	configure(e, e->root);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	unsetenv("DEBUGINFOD_URLS");
	opal_symbolizer_free(e->s);
	opal_sym_sources_reset();
	opal_cache_close(e->cache);
	opal_debuginfo_store_close(e->st);
	di_rmtree(e->dir);
	free(e);
	return 0;
}

/* Registers fixture `name` (as seen at `path`, or its fixture path) under
 * a fresh file ID. */
static opal_file_id add(struct env *e, const char *name, const char *path)
{
	opal_file_id id;
	char hex[OPAL_DI_ID_HEX_MAX + 1];
	uint8_t bid[OPAL_BUILD_ID_MAX];
	memset(&id, 0, sizeof(id));
	id.b[0] = 0xd1;
	id.b[1] = ++e->next_id;
	di_build_id(name, hex);
	int n = hex[0] ? opal_hex_decode(hex, bid, sizeof(bid)) : 0;
	assert_int_equal(opal_symbolizer_add_file(e->s, &id, di_open(name), bid, (size_t)n,
						  path ? path : di_path(name)), 0);
	return id;
}

static void lookup(struct env *e, const opal_file_id *id, uint64_t addr,
		   struct opal_sym_result *r)
{
	assert_int_equal(opal_symbolize_native(e->s, id, addr, false, r), 0);
}

/* The answer must equal the reference's (names, files, lines, inlined). */
static void assert_same(const struct opal_sym_result *a, const struct opal_sym_result *ref)
{
	assert_int_equal(a->n, ref->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct opal_sym_frame *x = &a->frames[i], *y = &ref->frames[i];
		assert_non_null(x->function);
		assert_string_equal(x->function, y->function);
		assert_int_equal(x->line, y->line);
		assert_int_equal(x->inlined, y->inlined);
		assert_true((x->file && y->file && !strcmp(x->file, y->file)) || x->file == y->file);
	}
}

/* Reference answers from di_full at its two marks. */
static void reference(struct env *e, struct opal_sym_result *leaf, struct opal_sym_result *stat)
{
	opal_file_id id = add(e, "di_full", NULL);
	lookup(e, &id, di_sym_addr("di_full", "di_mark_leaf"), leaf);
	lookup(e, &id, di_sym_addr("di_full", "di_mark_static"), stat);
	assert_int_equal(leaf->n, 3);
	assert_string_equal(leaf->frames[0].function, "di_leaf");
	assert_true(leaf->frames[0].inlined);
	assert_string_equal(leaf->frames[1].function, "di_mid");
	assert_string_equal(leaf->frames[2].function, "di_outer");
	assert_int_equal(stat->n, 1);
	assert_string_equal(stat->frames[0].function, "di_static_work");
}

/* `variant` (a stripped build of the same source at the same addresses
 * as `addr_of`) answers as the reference does. */
static void check_variant(struct env *e, const opal_file_id *id, const char *addr_of)
{
	struct opal_sym_result ref_leaf, ref_stat, r;
	opal_file_id rid = add(e, addr_of, NULL);
	lookup(e, &rid, di_sym_addr(addr_of, "di_mark_leaf"), &ref_leaf);
	lookup(e, &rid, di_sym_addr(addr_of, "di_mark_static"), &ref_stat);
	lookup(e, id, di_sym_addr(addr_of, "di_mark_leaf"), &r);
	assert_same(&r, &ref_leaf);
	opal_sym_result_free(&r);
	lookup(e, id, di_sym_addr(addr_of, "di_mark_static"), &r);
	assert_same(&r, &ref_stat);
	opal_sym_result_free(&r);
	opal_sym_result_free(&ref_leaf);
	opal_sym_result_free(&ref_stat);
}

static enum opal_debug_quality quality(struct env *e, const opal_file_id *id)
{
	enum opal_debug_quality q;
	assert_int_equal(opal_symbolizer_file_quality(e->s, id, &q), 0);
	return q;
}

/* The reason recorded in the cache's files table for `id`. */
static void recorded_reason(struct env *e, const opal_file_id *id, char *out, size_t len)
{
	char db[PATH_MAX + 16];
	sqlite3 *h;
	sqlite3_stmt *st;
	snprintf(db, sizeof(db), "%s/state.db", e->dir);
	assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT reason FROM files WHERE file_id = ?1", -1,
					    &st, NULL), SQLITE_OK);
	sqlite3_bind_blob(st, 1, id->b, OPAL_FILE_ID_LEN, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(h);
}

static void upload_as(struct env *e, const char *fixture, const char *id_of)
{
	char hex[OPAL_DI_ID_HEX_MAX + 1];
	di_build_id(id_of, hex);
	struct opal_di_answer a = di_upload(e->st, fixture, hex, OPAL_DI_ID_GNU,
					    OPAL_DI_DEBUGINFO, false);
	assert_int_equal(a.status, 200);
}

static void test_reference_and_nothing(void **state)
{
	struct env *e = *state;
	struct opal_sym_result leaf, stat, r;
	reference(e, &leaf, &stat);
	opal_sym_result_free(&leaf);
	opal_sym_result_free(&stat);
	/* Stripped, no sources: nothing. */
	opal_file_id id = add(e, "di_stripped", NULL);
	lookup(e, &id, di_sym_addr("di_full", "di_mark_static"), &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DYNSYM);
}

/* A stripped file symbolized only through an upload (DWARF 5). */
static void test_upload_dwarf5(void **state)
{
	struct env *e = *state;
	upload_as(e, "di_full.debug", "di_full");
	opal_file_id id = add(e, "di_stripped", NULL);
	check_variant(e, &id, "di_full");
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DWARF_INLINE);
	char why[512];
	recorded_reason(e, &id, why, sizeof(why));
	assert_non_null(strstr(why, "uploaded debuginfo"));
}

static void test_upload_dwarf4(void **state)
{
	struct env *e = *state;
	upload_as(e, "di_dwarf4.debug", "di_dwarf4");
	opal_file_id id = add(e, "di_dwarf4_stripped", NULL);
	check_variant(e, &id, "di_dwarf4");
}

static void test_upload_zlib(void **state)
{
	struct env *e = *state;
	upload_as(e, "di_zlib.debug", "di_full");
	opal_file_id id = add(e, "di_stripped", NULL);
	check_variant(e, &id, "di_full");
}

/* zstd DWARF (objcopy --compress-debug-sections=zstd, which elfutils
 * 0.188 cannot read) is decompressed by opal (debuginfo_bound.h): an
 * uploaded zstd debug file gives the inline chain and lines of di_full,
 * as the zlib one does (test_upload_zlib; issue 15, item 8). */
static void test_upload_zstd(void **state)
{
	struct env *e = *state;
	upload_as(e, "di_zstd.debug", "di_full");
	opal_file_id id = add(e, "di_stripped", NULL);
	check_variant(e, &id, "di_full");
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DWARF_INLINE);
}

/* A file whose own DWARF is zstd-compressed: the same frames as di_full. */
static void test_zstd_own_dwarf(void **state)
{
	struct env *e = *state;
	opal_file_id id = add(e, "di_zstd", NULL);
	check_variant(e, &id, "di_full");
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DWARF_INLINE);
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char buf[65536];
	ssize_t n;
	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

static void mkdirs(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

static void test_debug_root_build_id(void **state)
{
	struct env *e = *state;
	char hex[OPAL_DI_ID_HEX_MAX + 1], dir[PATH_MAX + 32], file[PATH_MAX + 192];
	di_build_id("di_full", hex);
	snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", e->root, hex);
	mkdirs(dir);
	snprintf(file, sizeof(file), "%s/%s.debug", dir, hex + 2);
	copy_file(di_path("di_full.debug"), file);
	opal_file_id id = add(e, "di_stripped", NULL);
	check_variant(e, &id, "di_full");
	char why[512];
	recorded_reason(e, &id, why, sizeof(why));
	assert_non_null(strstr(why, ".build-id"));

	/* The same lookup without a collector descriptor (remote requests). */
	opal_file_id key;
	assert_int_equal(opal_symbolizer_ensure_build_id(e->s, hex, &key), 0);
	struct opal_sym_result r;
	lookup(e, &key, di_sym_addr("di_full", "di_mark_static"), &r);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "di_static_work");
	opal_sym_result_free(&r);
	char where[200];
	assert_true(opal_sym_sources_elsewhere(NULL, hex, where, sizeof(where)));
	assert_int_equal(opal_symbolizer_ensure_build_id(e->s, "00112233", &key), -ENOENT);
	assert_int_equal(opal_symbolizer_ensure_build_id(e->s, "../x", &key), -EINVAL);
}

/* .gnu_debuglink candidates opened by the collector next to the binary:
 * the right one is used; one whose CRC-32 differs is skipped and said. */
static void test_debuglink_candidates(void **state)
{
	struct env *e = *state;
	/* The right debug file with bytes appended: same build ID, other CRC. */
	char bad[PATH_MAX + 16];
	snprintf(bad, sizeof(bad), "%s/bad.debug", e->dir);
	copy_file(di_path("di_link.debug"), bad);
	int bfd = open(bad, O_WRONLY | O_APPEND);
	assert_int_equal(write(bfd, "x", 1), 1);
	close(bfd);
	opal_file_id id = add(e, "di_link", "/opt/app/di_link");
	assert_int_equal(opal_symbolizer_add_debuglink(e->s, &id, open(bad, O_RDONLY | O_CLOEXEC),
						       "/opt/app/di_link.debug"), 0);
	struct opal_sym_result r;
	lookup(e, &id, di_sym_addr("di_full", "di_mark_static"), &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DYNSYM);
	char why[512];
	recorded_reason(e, &id, why, sizeof(why));
	if (!strstr(why, "CRC"))
		fail_msg("reason '%s' does not mention the CRC", why);

	/* The right candidate reopens the session. */
	assert_int_equal(opal_symbolizer_add_debuglink(e->s, &id, di_open("di_link.debug"),
						       "/opt/app/.debug/di_link.debug"), 0);
	opal_file_id ref = add(e, "di_full", NULL);
	struct opal_sym_result want;
	lookup(e, &ref, di_sym_addr("di_full", "di_mark_static"), &want);
	lookup(e, &id, di_sym_addr("di_full", "di_mark_static"), &r);
	assert_same(&r, &want);
	opal_sym_result_free(&r);
	opal_sym_result_free(&want);
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DWARF_INLINE);
	opal_file_id unknown = { { 1, 2, 3 } };
	assert_int_equal(opal_symbolizer_add_debuglink(e->s, &unknown, di_open("di_link.debug"),
						       NULL), -ENOENT);
}

/* .gnu_debuglink under the debug root, by the binary's directory. */
static void test_debuglink_debug_root(void **state)
{
	struct env *e = *state;
	char dir[PATH_MAX + 32], file[PATH_MAX + 64];
	snprintf(dir, sizeof(dir), "%s/opt/app", e->root);
	mkdirs(dir);
	snprintf(file, sizeof(file), "%s/di_link.debug", dir);
	copy_file(di_path("di_link.debug"), file);
	opal_file_id id = add(e, "di_link", "/opt/app/di_link");
	struct opal_sym_result r;
	lookup(e, &id, di_sym_addr("di_full", "di_mark_static"), &r);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "di_static_work");
	assert_true(r.frames[0].line > 0);
	opal_sym_result_free(&r);
	/* A path that would leave the debug root is not followed. */
	opal_file_id bad = add(e, "di_link", "/opt/../opt/app/di_link");
	lookup(e, &bad, di_sym_addr("di_full", "di_mark_static"), &r);
	assert_int_equal(r.n, 0);
}

/* dwz: the debug file names its shared DWARF by .gnu_debugaltlink; the
 * alt file is found by its build ID among the uploads. */
static void test_dwz(void **state)
{
	struct env *e = *state;
	upload_as(e, "di_dwz_a.debug", "di_dwz_a");
	upload_as(e, "di_dwz.multi", "di_dwz.multi");
	opal_file_id id = add(e, "di_dwz_a_stripped", NULL);
	struct opal_sym_result ref_leaf, ref_stat, r;
	reference(e, &ref_leaf, &ref_stat);
	lookup(e, &id, di_sym_addr("di_dwz_a", "di_mark_leaf"), &r);
	assert_same(&r, &ref_leaf);
	opal_sym_result_free(&r);
	lookup(e, &id, di_sym_addr("di_dwz_a", "di_mark_static"), &r);
	assert_same(&r, &ref_stat);
	opal_sym_result_free(&r);
	opal_sym_result_free(&ref_leaf);
	opal_sym_result_free(&ref_stat);
}

/* dwz as Debian ships it: the debug file found under .build-id, the dwz
 * file under .dwz/ by the absolute /usr/lib/debug/... path the altlink
 * records (Debian makes no .build-id entry for it). Without it the inline
 * chain and the names in the multifile are lost. */
static void test_dwz_debian_layout(void **state)
{
	struct env *e = *state;
	char hex[OPAL_DI_ID_HEX_MAX + 1], dir[PATH_MAX + 32], file[PATH_MAX + 192];
	char dwz_dir[PATH_MAX + 64], dwz_file[PATH_MAX + 96];
	di_build_id("di_deb_ref", hex);
	snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", e->root, hex);
	mkdirs(dir);
	snprintf(file, sizeof(file), "%s/%s.debug", dir, hex + 2);
	copy_file(di_path("di_deb_a.debug"), file);
	snprintf(dwz_dir, sizeof(dwz_dir), "%s/.dwz/x86_64-linux-gnu", e->root);
	mkdirs(dwz_dir);
	snprintf(dwz_file, sizeof(dwz_file), "%s/opal-di.debug", dwz_dir);
	copy_file(di_path("di_deb.multi"), dwz_file);

	opal_file_id id = add(e, "di_deb_a_stripped", NULL);
	check_variant(e, &id, "di_deb_ref");
	struct opal_sym_result ref, r;
	opal_file_id rid = add(e, "di_deb_ref", NULL);
	uint64_t main_at = di_sym_addr("di_deb_ref", "main");
	lookup(e, &rid, main_at, &ref);
	assert_int_equal(ref.n, 1);
	assert_string_equal(ref.frames[0].function, "main");
	lookup(e, &id, main_at, &r);
	assert_same(&r, &ref);
	opal_sym_result_free(&r);
	opal_sym_result_free(&ref);
	lookup(e, &id, di_sym_addr("di_deb_ref", "di_mark_leaf"), &r);
	assert_int_equal(r.n, 3);
	opal_sym_result_free(&r);
}

/* MiniDebugInfo: the stripped file's .gnu_debugdata names functions that
 * .dynsym lacks (a static one here). */
static void test_minidebuginfo(void **state)
{
	struct env *e = *state;
	FILE *f = fopen(di_path("di_mini.nm"), "r");
	char line[256];
	unsigned long long addr = 0;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, " di_static_work\n"))
			addr = strtoull(line, NULL, 16);
	fclose(f);
	assert_true(addr != 0);
	struct opal_elf_probe p;
	int fd = di_open("di_mini");
	assert_int_equal(opal_elf_probe_fd(fd, &p, NULL, 0), 0);
	close(fd);
	assert_true(p.has_debugdata);
	assert_true(p.debugdata_symtab);
	opal_file_id id = add(e, "di_mini", NULL);
	struct opal_sym_result r;
	lookup(e, &id, addr + 1, &r);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].function, "di_static_work");
	opal_sym_result_free(&r);
	assert_int_equal(quality(e, &id), OPAL_DEBUG_SYMTAB);
}

/* The keep-debug writer's output serves as the debug file, like
 * objcopy --only-keep-debug's, and holds no code. */
static void test_keepdebug(void **state)
{
	struct env *e = *state;
	char out[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/kd.debug", e->dir);
	int in = di_open("di_full");
	int o = open(out, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char why[256] = "";
	assert_int_equal(opal_keep_debug_write(in, o, why, sizeof(why)), 0);
	close(in);
	struct opal_elf_probe p, full;
	assert_int_equal(opal_elf_probe_fd(o, &p, NULL, 0), 0);
	int fd = di_open("di_full");
	assert_int_equal(opal_elf_probe_fd(fd, &full, NULL, 0), 0);
	close(fd);
	assert_false(p.has_text);
	assert_true(p.has_debug_info && p.has_symtab);
	assert_int_equal(p.build_id_len, full.build_id_len);
	assert_memory_equal(p.build_id, full.build_id, p.build_id_len);
	char hex[OPAL_DI_ID_HEX_MAX + 1];
	di_build_id("di_full", hex);
	struct opal_di_answer a = di_upload_fd(e->st, o, hex, OPAL_DI_ID_GNU, OPAL_DI_DEBUGINFO,
					       false);
	close(o);
	assert_int_equal(a.status, 200);
	assert_int_equal(a.quality, OPAL_DEBUG_DWARF_INLINE);
	opal_file_id id = add(e, "di_stripped", NULL);
	check_variant(e, &id, "di_full");
	/* Not an ELF: refused with a reason. */
	in = di_open("not_elf");
	o = open(out, O_RDWR | O_TRUNC);
	assert_int_equal(opal_keep_debug_write(in, o, why, sizeof(why)), -ENOEXEC);
	close(in);
	close(o);
	/* A kept section aligned to 2^40 (a crafted binary any user can run):
	 * refused, not 1 TiB of padding written. */
	char crafted[PATH_MAX + 16];
	snprintf(crafted, sizeof(crafted), "%s/aligned.elf", e->dir);
	in = di_open("di_full");
	int c = open(crafted, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(c, buf, (size_t)n), n);
	close(in);
	Elf64_Ehdr eh;
	assert_int_equal(pread(c, &eh, sizeof(eh), 0), sizeof(eh));
	bool patched = false;
	for (unsigned i = 1; i < eh.e_shnum && !patched; i++) {
		Elf64_Shdr sh;
		off_t at = (off_t)(eh.e_shoff + (uint64_t)i * eh.e_shentsize);
		assert_int_equal(pread(c, &sh, sizeof(sh), at), sizeof(sh));
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		sh.sh_addralign = 1ull << 40;
		assert_int_equal(pwrite(c, &sh, sizeof(sh), at), sizeof(sh));
		patched = true;
	}
	assert_true(patched);
	o = open(out, O_RDWR | O_TRUNC);
	assert_int_equal(opal_keep_debug_write(c, o, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "alignment"));
	struct stat st;
	assert_int_equal(fstat(o, &st), 0);
	assert_true(st.st_size < (1 << 20));
	close(c);
	close(o);
}

/* Debian's libc6-dbg: a file-local libc function, absent from .dynsym,
 * named through /usr/lib/debug/.build-id. */
static void test_libc6_dbg(void **state)
{
	struct env *e = *state;
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	struct opal_elf_probe p;
	int fd = open(libc, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(opal_elf_probe_fd(fd, &p, NULL, 0), 0);
	char hex[OPAL_DI_ID_HEX_MAX + 1], dbg[PATH_MAX];
	opal_hex_encode(p.build_id, p.build_id_len, hex);
	snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	int dfd = open(dbg, O_RDONLY | O_CLOEXEC);
	if (dfd < 0)
		fail_msg("%s missing: install libc6-dbg (scripts/install-deps.sh)", dbg);
	/* A local function of some size, from the debug file's .symtab. */
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(dfd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	char name[128] = "";
	uint64_t addr = 0;
	while (!addr && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && !addr; i++) {
			GElf_Sym s;
			gelf_getsym(d, (int)i, &s);
			const char *n = elf_strptr(elf, sh.sh_link, s.st_name);
			if (GELF_ST_TYPE(s.st_info) == STT_FUNC &&
			    GELF_ST_BIND(s.st_info) == STB_LOCAL && s.st_size > 64 && n &&
			    strlen(n) < sizeof(name) && strchr(n, '.') == NULL) {
				snprintf(name, sizeof(name), "%s", n);
				addr = s.st_value;
			}
		}
	}
	elf_end(elf);
	close(dfd);
	assert_true(addr != 0);

	configure(e, "/usr/lib/debug");
	opal_file_id id = { { 0x1c } };
	assert_int_equal(opal_symbolizer_add_file(e->s, &id, fd, p.build_id, p.build_id_len, libc),
			 0);
	struct opal_sym_result r;
	lookup(e, &id, addr + 4, &r);
	assert_true(r.n >= 1);
	/* The innermost frame may be inlined into `name`; the real function
	 * (last frame) is the local symbol. */
	if (strcmp(r.frames[r.n - 1].function, name) != 0)
		fail_msg("libc %s+4 answered %s", name, r.frames[r.n - 1].function);
	assert_true(r.frames[r.n - 1].line > 0);
	opal_sym_result_free(&r);
	assert_true(quality(e, &id) >= OPAL_DEBUG_DWARF_LINES);
}

/* ---- debuginfod, through a fake server ------------------------------------------- */

/* Serves the fixtures below by build ID at /buildid/ID/debuginfo, after
 * delay_ms; anything else gets 404 after miss_delay_ms. */
struct dfd {
	struct fake_http http;
	struct {
		char build_id[OPAL_DI_ID_HEX_MAX + 1];
		const char *fixture;
	} files[2];
	size_t n;
	unsigned delay_ms, miss_delay_ms;
	char fixdir[PATH_MAX];
};

/* Runs on a server thread: no cmocka asserts. */
static void dfd_handle(void *arg, const char *method, const char *path, const char *body,
		       size_t body_len, struct fake_http_answer *a)
{
	struct dfd *d = arg;
	(void)body;
	(void)body_len;
	a->status = 404;
	a->delay_ms = d->miss_delay_ms;
	for (size_t i = 0; i < d->n && strcmp(method, "GET") == 0; i++) {
		char want[OPAL_DI_ID_HEX_MAX + 32], file[PATH_MAX + 64];
		snprintf(want, sizeof(want), "/buildid/%s/debuginfo", d->files[i].build_id);
		if (strcmp(path, want) != 0)
			continue;
		snprintf(file, sizeof(file), "%s/%s", d->fixdir, d->files[i].fixture);
		FILE *f = fopen(file, "rb");
		long len = -1;
		if (f && fseek(f, 0, SEEK_END) == 0)
			len = ftell(f);
		a->status = 500;
		if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (a->body = malloc((size_t)len)) &&
		    fread(a->body, 1, (size_t)len, f) == (size_t)len) {
			a->status = 200;
			a->len = (size_t)len;
			a->delay_ms = d->delay_ms;
		}
		if (f)
			fclose(f);
		break;
	}
}

static void dfd_serve(struct dfd *d, const char *fixture, const char *id_of)
{
	assert_true(d->n < 2);
	di_build_id(id_of, d->files[d->n].build_id);
	d->files[d->n++].fixture = fixture;
}

/* Starts the server and makes it the sources' DEBUGINFOD_URLS, with the
 * libdebuginfod cache in the test's folder. */
static void use_debuginfod(struct env *e, struct dfd *d)
{
	char url[64], cache[PATH_MAX + 32];
	snprintf(d->fixdir, sizeof(d->fixdir), "%s", di_fixdir);
	fake_http_start(&d->http, dfd_handle, d);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", d->http.port);
	assert_int_equal(setenv("DEBUGINFOD_URLS", url, 1), 0);
	snprintf(cache, sizeof(cache), "%s/debuginfod", e->dir);
	struct opal_sym_sources_config c = { .store = e->st, .debug_root = e->root,
					     .debuginfod_cache = cache };
	assert_int_equal(opal_sym_sources_init(&c), 0);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits up to `secs` for the server to have received `n` requests. */
static bool wait_requests(struct dfd *d, unsigned n, double secs)
{
	double until = now_s() + secs;
	while (fake_http_requests(&d->http) < n && now_s() < until)
		usleep(10000);
	return fake_http_requests(&d->http) >= n;
}

/* One lookup on a thread of its own: of (id, addr), or with `build_id`
 * set, of addr in the file known only by that build ID (/symbolize/v1's
 * path). */
struct bg_lookup {
	struct env *e;
	opal_file_id id;
	const char *build_id;
	uint64_t addr;
	struct opal_sym_result r;
	int rc;
	double secs;
	atomic_bool done;
};

static void *bg_lookup_main(void *argp)
{
	struct bg_lookup *b = argp;
	double t0 = now_s();
	b->rc = 0;
	if (b->build_id)
		b->rc = opal_symbolizer_ensure_build_id(b->e->s, b->build_id, &b->id);
	if (b->rc == 0)
		b->rc = opal_symbolize_native(b->e->s, &b->id, b->addr, false, &b->r);
	b->secs = now_s() - t0;
	atomic_store(&b->done, true);
	return NULL;
}

/* A slow debuginfod server stalls only the lookups that need its answer:
 * while a download runs (3 s), a lookup of another, local file that has
 * to open its session (which needs the symbolizer's lock) finishes at
 * once; a second lookup of the same file and a build-ID-only lookup of
 * the same build ID wait for that download instead of asking again; all
 * three get the DWARF answer. */
static void test_debuginfod_unlocked(void **state)
{
	struct env *e = *state;
	struct opal_sym_result ref_leaf, ref_stat, r;
	reference(e, &ref_leaf, &ref_stat);
	struct dfd d = { .delay_ms = 3000 };
	dfd_serve(&d, "di_full.debug", "di_full");
	use_debuginfod(e, &d);
	opal_file_id far = add(e, "di_stripped", NULL);
	opal_file_id near = add(e, "di_dwarf4", NULL);

	struct bg_lookup t1 = { .e = e, .id = far, .addr = di_sym_addr("di_full", "di_mark_leaf") };
	pthread_t th1, th2, th3;
	assert_int_equal(pthread_create(&th1, NULL, bg_lookup_main, &t1), 0);
	assert_true(wait_requests(&d, 1, 10));   /* the download is under way */

	double t0 = now_s();
	lookup(e, &near, di_sym_addr("di_dwarf4", "di_mark_leaf"), &r);
	double near_s = now_s() - t0;
	assert_int_equal(r.n, 3);
	assert_string_equal(r.frames[0].function, "di_leaf");
	opal_sym_result_free(&r);
	if (near_s >= 1.5)
		fail_msg("a local lookup took %.2f s while a debuginfod download ran", near_s);
	assert_false(atomic_load(&t1.done));

	char hex[OPAL_DI_ID_HEX_MAX + 1];
	di_build_id("di_full", hex);
	uint64_t stat_addr = di_sym_addr("di_full", "di_mark_static");
	struct bg_lookup t2 = { .e = e, .id = far, .addr = stat_addr };
	struct bg_lookup t3 = { .e = e, .build_id = hex, .addr = stat_addr };
	assert_int_equal(pthread_create(&th2, NULL, bg_lookup_main, &t2), 0);
	assert_int_equal(pthread_create(&th3, NULL, bg_lookup_main, &t3), 0);
	pthread_join(th1, NULL);
	pthread_join(th2, NULL);
	pthread_join(th3, NULL);

	assert_int_equal(t1.rc, 0);
	assert_same(&t1.r, &ref_leaf);
	assert_true(t1.secs > 1.8);   /* it did wait for the slow server */
	assert_int_equal(t2.rc, 0);
	assert_same(&t2.r, &ref_stat);
	assert_int_equal(t3.rc, 0);
	assert_same(&t3.r, &ref_stat);
	assert_int_equal(fake_http_requests(&d.http), 1);
	assert_int_equal(quality(e, &far), OPAL_DEBUG_DWARF_INLINE);
	char why[512];
	recorded_reason(e, &far, why, sizeof(why));
	if (!strstr(why, "debuginfod"))
		fail_msg("reason '%s' does not name debuginfod", why);
	/* The download is kept: a session reopened later needs no server. */
	fake_http_stop(&d.http);
	assert_true(opal_symbolizer_debug_data_changed(e->s, NULL, 0, &far,
						       OPAL_DEBUG_DWARF_INLINE) >= 1);
	lookup(e, &far, di_sym_addr("di_full", "di_mark_leaf") + 1, &r);
	assert_true(r.n >= 1);
	assert_true(r.frames[0].line > 0);
	opal_sym_result_free(&r);
	opal_sym_result_free(&t1.r);
	opal_sym_result_free(&t2.r);
	opal_sym_result_free(&t3.r);
	opal_sym_result_free(&ref_leaf);
	opal_sym_result_free(&ref_stat);
}

/* A build ID the server lacks: the file keeps its own symbols, and the
 * miss is remembered (another registration asks no server). */
static void test_debuginfod_not_found(void **state)
{
	struct env *e = *state;
	struct opal_sym_result r;
	struct dfd d = { .miss_delay_ms = 500 };
	use_debuginfod(e, &d);
	uint64_t a = di_sym_addr("di_full", "di_mark_static");
	opal_file_id id = add(e, "di_stripped", NULL);
	lookup(e, &id, a, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(quality(e, &id), OPAL_DEBUG_DYNSYM);
	assert_int_equal(fake_http_requests(&d.http), 1);
	opal_file_id again = add(e, "di_stripped", NULL);
	lookup(e, &again, a, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(quality(e, &again), OPAL_DEBUG_DYNSYM);
	assert_int_equal(fake_http_requests(&d.http), 1);
	fake_http_stop(&d.http);
}

/* dwz through debuginfod: the debug file first, then (named by its
 * .gnu_debugaltlink) the shared file, each downloaded without the lock. */
static void test_debuginfod_dwz(void **state)
{
	struct env *e = *state;
	struct opal_sym_result ref_leaf, ref_stat, r;
	reference(e, &ref_leaf, &ref_stat);
	struct dfd d = { .delay_ms = 0 };
	dfd_serve(&d, "di_dwz_a.debug", "di_dwz_a");
	dfd_serve(&d, "di_dwz.multi", "di_dwz.multi");
	use_debuginfod(e, &d);
	opal_file_id id = add(e, "di_dwz_a_stripped", NULL);
	lookup(e, &id, di_sym_addr("di_dwz_a", "di_mark_leaf"), &r);
	assert_same(&r, &ref_leaf);
	opal_sym_result_free(&r);
	lookup(e, &id, di_sym_addr("di_dwz_a", "di_mark_static"), &r);
	assert_same(&r, &ref_stat);
	opal_sym_result_free(&r);
	assert_int_equal(fake_http_requests(&d.http), 2);
	fake_http_stop(&d.http);
	opal_sym_result_free(&ref_leaf);
	opal_sym_result_free(&ref_stat);
}

struct bg_fetch {
	char build_id[OPAL_DI_ID_HEX_MAX + 1];
	int rc;
};

static void *bg_fetch_main(void *argp)
{
	struct bg_fetch *f = argp;
	char *path = NULL;
	f->rc = opal_sym_sources_fetch_debuginfo(f->build_id, &path);
	free(path);
	return NULL;
}

/* Downloads of different build IDs run at most
 * OPAL_SYM_DEBUGINFOD_MAX_FETCHES at once; the others wait their turn. */
static void test_debuginfod_fetch_bound(void **state)
{
	struct env *e = *state;
	enum { N = OPAL_SYM_DEBUGINFOD_MAX_FETCHES + 2 };
	struct dfd d = { .miss_delay_ms = 1000 };
	use_debuginfod(e, &d);
	struct bg_fetch f[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		snprintf(f[i].build_id, sizeof(f[i].build_id), "%02x00112233445566778899aabbccddeeff0011",
			 i);
		assert_int_equal(pthread_create(&t[i], NULL, bg_fetch_main, &f[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(f[i].rc, -ENOENT);
	}
	assert_int_equal(fake_http_requests(&d.http), N);
	if (fake_http_max_active(&d.http) > OPAL_SYM_DEBUGINFOD_MAX_FETCHES)
		fail_msg("%u downloads at once", fake_http_max_active(&d.http));
	char *path = NULL;
	assert_int_equal(opal_sym_sources_fetch_debuginfo("../x", &path), -EINVAL);
	fake_http_stop(&d.http);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reference_and_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upload_dwarf5, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upload_dwarf4, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upload_zlib, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upload_zstd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zstd_own_dwarf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debug_root_build_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuglink_candidates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuglink_debug_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dwz, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dwz_debian_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_minidebuginfo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepdebug, setup, teardown),
		cmocka_unit_test_setup_teardown(test_libc6_dbg, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuginfod_unlocked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuginfod_not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuginfod_dwz, setup, teardown),
		cmocka_unit_test_setup_teardown(test_debuginfod_fetch_bound, setup, teardown),
	};
	return cmocka_run_group_tests(tests, di_setup_fixtures, NULL);
}
