/* Helpers shared by the debuginfo unit tests (test_debuginfo_*.c,
 * test_http_*.c): fixture paths (tests/fixtures/debuginfo, built into
 * $OPAL_FIXTURES/debuginfo), temporary folders, symbol addresses read with
 * libelf (not with the code under test), and uploads through the store.
 * Include after <cmocka.h>. */
#ifndef OPAL_TEST_DEBUGINFO_HELPERS_H
#define OPAL_TEST_DEBUGINFO_HELPERS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <openssl/evp.h>

#include "elf_symbol.h"
#include "symbolizer/debuginfo/debuginfo_store.h"
#include "symbolizer/symbolize/sym_dwfl.h"
#include "symbolizer/symbolize/symbolize.h"

static char di_fixdir[PATH_MAX];

static int di_setup_fixtures(void **state)
{
	(void)state;
	const char *base = getenv("OPAL_FIXTURES");
	snprintf(di_fixdir, sizeof(di_fixdir), "%s/debuginfo", base ? base : "build/fixtures");
	char probe[PATH_MAX + 16];
	snprintf(probe, sizeof(probe), "%s/di_full", di_fixdir);
	if (access(probe, R_OK) != 0) {
		fprintf(stderr, "fixture %s missing: run `make fixtures` (or set OPAL_FIXTURES)\n",
			probe);
		return -1;
	}
	return 0;
}

static __attribute__((unused)) const char *di_path(const char *name)
{
	static __thread char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/%s", di_fixdir, name);
	return p;
}

static __attribute__((unused)) int di_open(const char *name)
{
	int fd = open(di_path(name), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* A fresh folder under /tmp; removed by di_rmtree. */
static __attribute__((unused)) void di_mktemp(char *out, size_t len)
{
	snprintf(out, len, "/tmp/opal-test.XXXXXX");
	assert_non_null(mkdtemp(out));
}

static __attribute__((unused)) void di_rmtree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	if (!d) {
		unlink(path);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			di_rmtree(p);
		else
			unlink(p);
	}
	closedir(d);
	rmdir(path);
}

/* Value of .symtab symbol `sym` in fixture `name`. */
static __attribute__((unused)) uint64_t di_sym_addr(const char *name, const char *sym)
{
	int fd = di_open(name);
	uint64_t value = test_elf_symbol(fd, name, sym, NULL);
	close(fd);
	assert_true(value != 0);
	return value;
}

/* GNU build ID of a fixture as lowercase hex (empty when none). */
static __attribute__((unused)) void di_build_id(const char *name, char hex[OPAL_DI_ID_HEX_MAX + 1])
{
	int fd = di_open(name);
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	hex[0] = '\0';
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;
		while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0)
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)d->d_buf + name_off, "GNU", 4))
				opal_hex_encode((uint8_t *)d->d_buf + desc_off, nh.n_descsz, hex);
	}
	elf_end(elf);
	close(fd);
}

/* SHA-256 of a file as lowercase hex, and its size. */
static __attribute__((unused)) void di_sha256(int fd, char hex[65], uint64_t *size)
{
	unsigned char buf[65536], md[EVP_MAX_MD_SIZE];
	unsigned int n;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	off_t off = 0;
	ssize_t got;
	while ((got = pread(fd, buf, sizeof(buf), off)) > 0) {
		EVP_DigestUpdate(ctx, buf, (size_t)got);
		off += got;
	}
	EVP_DigestFinal_ex(ctx, md, &n);
	EVP_MD_CTX_free(ctx);
	opal_hex_encode(md, 32, hex);
	*size = (uint64_t)off;
}

/* Runs initiate + PUT (whole file) + finish on the store for the bytes of
 * `fd` announced as (id, id_type, type). Returns the finish answer; an
 * initiate refusal is returned as is. */
static __attribute__((unused)) struct opal_di_answer di_upload_fd(struct opal_debuginfo_store *st, int fd, const char *id,
					  enum opal_di_id_type id_type, enum opal_di_type type,
					  bool force)
{
	struct opal_di_request rq = { .id_type = id_type, .type = type, .force = force };
	struct opal_di_answer a;
	snprintf(rq.id, sizeof(rq.id), "%s", id);
	di_sha256(fd, rq.hash, &rq.size);
	assert_int_equal(opal_debuginfo_initiate(st, &rq, &a), 0);
	if (a.status != 200)
		return a;
	struct opal_di_upload *u;
	assert_int_equal(opal_debuginfo_upload_begin(st, a.upload_id, &u), 0);
	char buf[4096];
	off_t off = 0;
	ssize_t got;
	while ((got = pread(fd, buf, sizeof(buf), off)) > 0) {
		assert_int_equal(opal_debuginfo_upload_write(u, buf, (size_t)got), 0);
		off += got;
	}
	assert_int_equal(opal_debuginfo_upload_finish(u, &a), 0);
	return a;
}

static __attribute__((unused)) struct opal_di_answer di_upload(struct opal_debuginfo_store *st, const char *fixture,
				       const char *id, enum opal_di_id_type id_type,
				       enum opal_di_type type, bool force)
{
	int fd = di_open(fixture);
	struct opal_di_answer a = di_upload_fd(st, fd, id, id_type, type, force);
	close(fd);
	return a;
}

/* A store in a fresh folder `dir` (its database there too). */
static __attribute__((unused)) struct opal_debuginfo_store *di_store(const char *dir, uint64_t max_upload,
					      uint64_t expiry_s)
{
	char sdir[PATH_MAX], db[PATH_MAX];
	snprintf(sdir, sizeof(sdir), "%.4000s/debuginfo", dir);
	snprintf(db, sizeof(db), "%.4000s/state.db", dir);
	struct opal_debuginfo_store_config c = { .dir = sdir, .db_path = db,
						 .max_upload_bytes = max_upload,
						 .expiry_s = expiry_s, .rank = opal_dwfl_rank };
	struct opal_debuginfo_store *st = opal_debuginfo_store_open(&c);
	assert_non_null(st);
	return st;
}

#endif
