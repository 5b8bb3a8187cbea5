/* libFuzzer target for the unwind table cache's reader
 * (collector/unwind/unwind_store.h): each input becomes one cache entry,
 * read back with opal_unwind_store_get. So that mutations get past the
 * checks a real entry passes anyway, the target makes the input's header
 * name the store's identity and, unless the first byte's low bit is set,
 * gives it a correct CRC; with bit 1 set it also sets the rule and body
 * counts from the input's size. A hit must be a table the BPF search can
 * use (sorted rules, bodies in range, GAP first and last), and its lookups
 * must be well formed; anything else must be a clean -EBADMSG or
 * -ENOENT. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/unwind/unwind_store.h"

static const char ident[] = "fuzz";
static char dir[64];
static struct opal_unwind_store store;
static const opal_file_id id = { { 0xfa, 0xce } };

static void require(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_unwind_store: %s\n", what);
		abort();
	}
}

static void check_table(const struct opal_unwind_table *t)
{
	require(t->n_rules >= 1 && t->n_bodies >= 1, "empty table");
	require(t->rules[t->n_rules - 1].body == 0, "last rule not a GAP");
	for (uint32_t i = 0; i < t->n_rules; i++) {
		require(t->rules[i].body < t->n_bodies, "body out of range");
		require(i == 0 || t->rules[i].addr > t->rules[i - 1].addr, "rules not sorted");
	}
	for (uint32_t i = 0; i < t->n_rules && i < 64; i++) {
		uint64_t start, end;
		const struct opal_unwind_body *b =
			opal_unwind_table_lookup(t, t->base + t->rules[i].addr, &start, &end);
		require(b != NULL && start <= t->base + t->rules[i].addr, "lookup");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct opal_unwind_store_hdr h;
	char path[128], hex[33];
	struct opal_unwind_table t;

	if (!dir[0]) {
		strcpy(dir, "/tmp/opal-fuzz-store-XXXXXX");
		require(mkdtemp(dir) != NULL, "mkdtemp");
		require(opal_unwind_store_open(&store, dir, ident, sizeof(ident) - 1, 0) == 0,
			"store open");
	}
	if (size > 1 << 20)
		return 0;
	uint8_t *buf = malloc(size > sizeof(h) ? size : sizeof(h));
	require(buf != NULL, "malloc");
	memset(buf, 0, sizeof(h));
	memcpy(buf, data, size);
	size_t len = size;
	if (size >= sizeof(h)) {
		uint8_t mode = data[0];
		memcpy(&h, buf, sizeof(h));
		memcpy(h.magic, "OPALUNWT", 8);
		h.version = OPAL_UNWIND_STORE_VERSION;
		h.ident_len = sizeof(ident) - 1;
		memset(h.ident, 0, sizeof(h.ident));
		memcpy(h.ident, ident, sizeof(ident) - 1);
		h.id = id;
		h.debug_seen = 0;
		size_t rest = size - sizeof(h);
		if (mode & 2) {
			h.n_bodies = 1 + (uint32_t)((rest / sizeof(struct opal_unwind_body)) % 4);
			size_t bb = (size_t)h.n_bodies * sizeof(struct opal_unwind_body);
			h.n_rules = bb <= rest ? (uint32_t)((rest - bb) / sizeof(struct opal_unwind_rule)) : 0;
			len = sizeof(h) + (size_t)h.n_rules * sizeof(struct opal_unwind_rule) + bb;
			if (len > size)
				len = size;
		}
		if (!(mode & 1)) {
			h.crc = 0;
			uLong crc = crc32(0L, Z_NULL, 0);
			crc = crc32(crc, (const Bytef *)&h, sizeof(h));
			crc = crc32_z(crc, buf + sizeof(h), len - sizeof(h));
			h.crc = (uint32_t)crc;
		}
		memcpy(buf, &h, sizeof(h));
	}
	opal_file_id_to_hex(&id, hex);
	snprintf(path, sizeof(path), "%s/%s.tab", dir, hex);
	FILE *f = fopen(path, "w");
	require(f != NULL, "fopen");
	require(fwrite(buf, 1, len, f) == len, "fwrite");
	fclose(f);
	free(buf);

	int rc = opal_unwind_store_get(&store, &id, false, &t);
	require(rc == 0 || rc == -EBADMSG || rc == -ENOENT, "get result");
	if (rc == 0)
		check_table(&t);
	else
		require(t.rules == NULL && t.bodies == NULL, "arrays left on a miss");
	opal_unwind_table_free(&t);
	unlink(path);
	return 0;
}
