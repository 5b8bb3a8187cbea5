/* Open-addressing hash table of shared result blocks plus a CLOCK list
 * (sym_memcache.h).
 *
 * Why this shape: a warm lookup should touch two cache lines, the slot
 * (which holds the key's full hash, so other keys in the probe run are
 * skipped without reading their entries) and the entry, whose block also
 * holds the frames and strings handed out by reference. The slot table
 * is read at random, so it is kept small: linear probing up to a load of
 * 7/8 (measured on the libc benchmark: a table twice as large made warm
 * lookups a third slower). Exact LRU would also write the list
 * neighbours of every hit; CLOCK only sets a bit in the entry being
 * read. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "symbolize/sym_memcache.h"
#include "base/sym_result.h"

#define MIN_SLOTS 1024          /* power of two */
#define HUGE_PAGE (2u << 20)    /* x86-64 transparent huge page */

/* One cached result: a single allocation, shared with the views handed
 * out; the frames array and the strings follow the header. What a hit
 * reads and writes comes first (64 bytes). */
struct entry {
	struct opal_sym_shared sh;    /* first: the last holder frees the block */
	bool referenced;              /* hit since the CLOCK last passed it */
	uint64_t addr;
	opal_file_id id;
	struct opal_sym_result res;   /* view into this block, res.shared = &sh */
	size_t bytes;                 /* accounted size */
	struct entry *newer, *older;  /* insertion order, newest at head */
};

struct slot {
	uint64_t hash;
	struct entry *e;              /* NULL: empty */
};

struct opal_sym_memcache {
	struct slot *slots;
	size_t mask;                  /* slot count - 1 (a power of two - 1) */
	size_t n, bytes;
	size_t max_entries, max_bytes;
	struct entry *head, *tail;    /* newest, oldest */
	uint64_t seed;                /* random: keys come from other users' files */
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t hash_key(const struct opal_sym_memcache *mc, const opal_file_id *id,
			 uint64_t addr)
{
	uint64_t a, b;
	memcpy(&a, id->b, 8);
	memcpy(&b, id->b + 8, 8);
	return mix(mix(mix(a ^ mc->seed) ^ b) ^ addr);
}

/* A zeroed slot table of `n` slots. Large tables are asked to live in
 * transparent huge pages: lookups hit it at random, and with 4 KiB pages
 * nearly every probe of a table of a few MiB also misses the TLB. */
static struct slot *slots_alloc(size_t n)
{
	size_t bytes = n * sizeof(struct slot);
	if (bytes < HUGE_PAGE)
		return calloc(n, sizeof(struct slot));
	void *p;
	if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);   /* advice only: fails harmlessly */
	return memset(p, 0, bytes);
}

struct opal_sym_memcache *opal_sym_memcache_new(size_t max_entries, size_t max_bytes)
{
	struct opal_sym_memcache *mc = calloc(1, sizeof(*mc));
	if (!mc)
		return NULL;
	mc->max_entries = max_entries ? max_entries : OPAL_SYM_MEMCACHE_MAX_ENTRIES;
	mc->max_bytes = max_bytes ? max_bytes : OPAL_SYM_MEMCACHE_MAX_BYTES;
	mc->slots = slots_alloc(MIN_SLOTS);
	if (!mc->slots) {
		free(mc);
		return NULL;
	}
	mc->mask = MIN_SLOTS - 1;
	if (getrandom(&mc->seed, sizeof(mc->seed), GRND_NONBLOCK) != sizeof(mc->seed))
		mc->seed = mix((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)mc);
	return mc;
}

static void list_unlink(struct opal_sym_memcache *mc, struct entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		mc->head = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		mc->tail = e->newer;
	e->newer = e->older = NULL;
}

static void list_push_head(struct opal_sym_memcache *mc, struct entry *e)
{
	e->newer = NULL;
	e->older = mc->head;
	if (mc->head)
		mc->head->newer = e;
	mc->head = e;
	if (!mc->tail)
		mc->tail = e;
}

/* Index of the slot holding the key, or of the empty slot ending its
 * probe run. The table always keeps an empty slot. */
static size_t find_slot(const struct opal_sym_memcache *mc, uint64_t h, const opal_file_id *id,
			uint64_t addr)
{
	size_t i = h & mc->mask;
	for (;;) {
		const struct slot *s = &mc->slots[i];
		/* memcmp of a constant size compiles to two word compares */
		if (!s->e || (s->hash == h && s->e->addr == addr &&
			      memcmp(s->e->id.b, id->b, OPAL_FILE_ID_LEN) == 0))
			return i;
		i = (i + 1) & mc->mask;
	}
}

/* Empties slot `i` by shifting later members of its probe run back
 * (linear probing without tombstones). */
static void clear_slot(struct opal_sym_memcache *mc, size_t i)
{
	size_t j = i;
	for (;;) {
		j = (j + 1) & mc->mask;
		if (!mc->slots[j].e)
			break;
		size_t home = mc->slots[j].hash & mc->mask;
		/* Slot j's entry may move to i when i lies cyclically in
		 * [home, j). */
		if (((j - home) & mc->mask) >= ((j - i) & mc->mask)) {
			mc->slots[i] = mc->slots[j];
			i = j;
		}
	}
	mc->slots[i].e = NULL;
}

/* Takes entry `e` (in slot `i`) out of the cache and drops the cache's
 * reference to its block. */
static void remove_at(struct opal_sym_memcache *mc, size_t i)
{
	struct entry *e = mc->slots[i].e;
	clear_slot(mc, i);
	list_unlink(mc, e);
	mc->n--;
	mc->bytes -= e->bytes;
	opal_sym_shared_unref(&e->sh);
}

static void remove_entry(struct opal_sym_memcache *mc, struct entry *e)
{
	remove_at(mc, find_slot(mc, hash_key(mc, &e->id, e->addr), &e->id, e->addr));
}

/* CLOCK: the oldest entry leaves unless hit since last considered, in
 * which case it becomes the newest with its bit cleared. Ends: every
 * pass clears a bit. */
static void evict_one(struct opal_sym_memcache *mc)
{
	struct entry *e;
	while ((e = mc->tail)->referenced) {
		e->referenced = false;
		list_unlink(mc, e);
		list_push_head(mc, e);
	}
	remove_entry(mc, e);
}

void opal_sym_memcache_free(struct opal_sym_memcache *mc)
{
	if (!mc)
		return;
	struct entry *e = mc->head;
	while (e) {
		struct entry *older = e->older;
		opal_sym_shared_unref(&e->sh);
		e = older;
	}
	free(mc->slots);
	free(mc);
}

/* The view handed out for `e`: no reference is needed when it points to
 * nothing. */
static void view_of(struct entry *e, struct opal_sym_result *out)
{
	if (e->res.n == 0 && !e->res.module) {
		memset(out, 0, sizeof(*out));
		return;
	}
	opal_sym_shared_ref(&e->sh);
	*out = e->res;
}

int opal_sym_memcache_get(struct opal_sym_memcache *mc, const opal_file_id *id, uint64_t addr,
			  struct opal_sym_result *out)
{
	struct entry *e = mc->slots[find_slot(mc, hash_key(mc, id, addr), id, addr)].e;
	if (!e)
		return 0;
	if (!e->referenced)   /* not written when set: keeps the line clean */
		e->referenced = true;
	view_of(e, out);
	return 1;
}

/* Doubles the slot table when the load would pass 7/8; a failed
 * allocation keeps the table, whose load may then rise towards full
 * (insertion refuses the last slot). */
static void maybe_grow(struct opal_sym_memcache *mc)
{
	size_t cap = mc->mask + 1;
	if ((mc->n + 1) * 8 <= cap * 7)
		return;
	size_t ncap = cap * 2;
	struct slot *ns = slots_alloc(ncap);
	if (!ns)
		return;
	for (size_t i = 0; i < cap; i++) {
		if (!mc->slots[i].e)
			continue;
		size_t k = mc->slots[i].hash & (ncap - 1);
		while (ns[k].e)
			k = (k + 1) & (ncap - 1);
		ns[k] = mc->slots[i];
	}
	free(mc->slots);
	mc->slots = ns;
	mc->mask = ncap - 1;
}

static size_t str_bytes(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static char *pack_str(char **p, const char *s)
{
	if (!s)
		return NULL;
	size_t len = strlen(s) + 1;
	char *d = memcpy(*p, s, len);
	*p += len;
	return d;
}

/* A new entry holding a copy of `r` in one block, or NULL. */
static struct entry *pack(const opal_file_id *id, uint64_t addr, const struct opal_sym_result *r)
{
	size_t strs = str_bytes(r->module);
	for (size_t i = 0; i < r->n; i++)
		strs += str_bytes(r->frames[i].function) + str_bytes(r->frames[i].file);
	size_t size = sizeof(struct entry) + r->n * sizeof(struct opal_sym_frame) + strs;
	struct entry *e = malloc(size);
	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->sh.refs = 1;   /* the cache's */
	e->id = *id;
	e->addr = addr;
	e->bytes = size + 2 * sizeof(struct slot);
	e->res.shared = &e->sh;
	e->res.n = r->n;
	struct opal_sym_frame *frames = (struct opal_sym_frame *)(e + 1);
	char *p = (char *)(frames + r->n);
	e->res.frames = r->n ? frames : NULL;
	e->res.module = pack_str(&p, r->module);
	for (size_t i = 0; i < r->n; i++) {
		frames[i].line = r->frames[i].line;
		frames[i].inlined = r->frames[i].inlined;
		frames[i].function = pack_str(&p, r->frames[i].function);
		frames[i].file = pack_str(&p, r->frames[i].file);
	}
	return e;
}

int opal_sym_memcache_put_view(struct opal_sym_memcache *mc, const opal_file_id *id,
			       uint64_t addr, const struct opal_sym_result *r,
			       struct opal_sym_result *view)
{
	struct entry *e = pack(id, addr, r);
	if (!e)
		return -ENOMEM;
	uint64_t h = hash_key(mc, id, addr);
	size_t i = find_slot(mc, h, id, addr);
	if (mc->slots[i].e)
		remove_at(mc, i);
	while (mc->tail && (mc->n + 1 > mc->max_entries || mc->bytes + e->bytes > mc->max_bytes))
		evict_one(mc);
	maybe_grow(mc);
	if (mc->n + 1 > mc->mask) {   /* could not grow: keep one slot empty */
		free(e);
		return -ENOMEM;
	}
	i = find_slot(mc, h, id, addr);
	mc->slots[i] = (struct slot){ .hash = h, .e = e };
	list_push_head(mc, e);
	mc->n++;
	mc->bytes += e->bytes;
	if (view)
		view_of(e, view);
	return 0;
}

void opal_sym_memcache_drop_file(struct opal_sym_memcache *mc, const opal_file_id *id)
{
	struct entry *e = mc->head;
	while (e) {
		struct entry *older = e->older;
		if (opal_file_id_eq(&e->id, id))
			remove_entry(mc, e);
		e = older;
	}
}

size_t opal_sym_memcache_count(const struct opal_sym_memcache *mc)
{
	return mc->n;
}
