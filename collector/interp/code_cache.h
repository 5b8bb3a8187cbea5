/* The raw bytes of interpreter code objects, as copied from processes
 * (collector/interp/python_code_copy.c), kept for the sender: each goes
 * out once per connection, before the first interval that names it
 * (proto/opal/wire.proto CodeObject). Entries are found by code ID (the
 * sender) and by (process serial, code address, check value) (sample
 * translation). A process's exit or exec removes its entries from the
 * second index only: intervals not yet sent may still name them, so they
 * stay until the byte bound evicts them, least recently used first.
 *
 * Bounds: `max_bytes` of entries (OPAL_CODE_CACHE_DEFAULT_BYTES) and
 * OPAL_CODE_CACHE_MAX_ENTRIES entries; evictions counted in
 * opal_counters.interp_code_evicted. */
#ifndef OPAL_COLLECTOR_CODE_CACHE_H
#define OPAL_COLLECTOR_CODE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/counters.h"
#include "base/htab.h"
#include "base/list.h"
#include "opal/wire.pb-c.h"

#define OPAL_CODE_CACHE_DEFAULT_BYTES (32u << 20)
#define OPAL_CODE_CACHE_MAX_ENTRIES   (1u << 18)

/* One code object's bytes: `msg` points into the entry's own buffer. */
struct opal_code_entry {
	struct opal_hnode by_id, by_key;
	struct opal_list lru;        /* most recently used first */
	struct opal_list proc;       /* in its process's list while keyed */
	bool keyed;                  /* in by_key and proc (its process is alive) */
	uint64_t code_id;
	uint64_t serial, addr;       /* the process and address it was read at */
	uint32_t check;
	uint64_t sent_conn;          /* sender connection it last went out on */
	size_t bytes;                /* charged to the bound */
	Opal__Wire__V1__CodeObject msg;
	Opal__Wire__V1__CPythonLayout layout;
};

struct opal_code_cache {
	struct opal_htab by_id, by_key;
	struct opal_list lru;
	size_t n, bytes, max_bytes;
	struct opal_counters *ctr;
};

/* `ctr` is borrowed; max_bytes 0 means OPAL_CODE_CACHE_DEFAULT_BYTES.
 * Returns 0 or -ENOMEM. */
int opal_code_cache_init(struct opal_code_cache *c, size_t max_bytes, struct opal_counters *ctr);
void opal_code_cache_destroy(struct opal_code_cache *c);

/* The code ID of (process serial, address, check): a 64-bit mix, the same
 * in every run for the same inputs. */
uint64_t opal_code_id(uint64_t serial, uint64_t addr, uint32_t check);

/* The entry read for (serial, addr, check) while its process is alive, or
 * NULL; marks it most recently used. */
struct opal_code_entry *opal_code_cache_find(struct opal_code_cache *c, uint64_t serial,
					     uint64_t addr, uint32_t check);

/* The entry of `code_id`, or NULL (never read, or evicted). */
struct opal_code_entry *opal_code_cache_by_id(struct opal_code_cache *c, uint64_t code_id);

/* Adds a copy of `msg` (its byte fields and layout copied into one
 * buffer; the copy's code_id is set from the key) under (serial, addr,
 * check), linked into `proc_entries` (the process's list), evicting the
 * least recently used entries past the bounds. Returns the entry, or
 * NULL on ENOMEM. */
struct opal_code_entry *opal_code_cache_add(struct opal_code_cache *c, struct opal_list *proc_entries,
					    uint64_t serial, uint64_t addr, uint32_t check,
					    const Opal__Wire__V1__CodeObject *msg);

/* The process whose entries are listed in `proc_entries` exited or
 * exec'd: they can no longer be found by address (they stay for the
 * sender); the list is left empty. */
void opal_code_cache_forget_process(struct opal_code_cache *c, struct opal_list *proc_entries);

#endif
