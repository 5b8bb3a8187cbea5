/* The collector's side of the BPF unwinder's maps (bpf/sampler.bpf.c,
 * docs/unwinding.md "The BPF unwinder"):
 *   - per-file rule tables, keyed by file ID, each in a table slot
 *     (< OPAL_UNWIND_MAX_TABLES): unwind_info[slot], and two inner arrays
 *     sized to the file in unwind_rules[slot] / unwind_bodies[slot]. A
 *     table is shared by every process mapping the file, built on first
 *     need (lazily), and unloaded when no installed process mapping has
 *     referenced it for OPAL_UNWIND_IDLE_NS, or earlier when the byte
 *     budget or the slots are needed;
 *   - per-process mapping arrays in proc_maps[tgid] (bpf/unwind.h),
 *     replaced whole on every install.
 * Tables are built by a worker thread (unwind_worker.h) once it is
 * started, else in the caller's thread. With descriptors of -1 (unit
 * tests without BPF) tables are still built and kept in userspace, and
 * installs only count.
 *
 * Bounds: OPAL_UNWIND_MAX_TABLES loaded tables, `max_bytes` of loaded rules
 * and bodies, `max_files` table entries of any state; no descriptor per
 * loaded table (its two arrays stay mapped read-only, not open). */
#ifndef OPAL_COLLECTOR_UNWIND_MAPS_H
#define OPAL_COLLECTOR_UNWIND_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/counters.h"
#include "base/htab.h"
#include "base/list.h"
#include "bpf/unwind.h"
#include "shared/fileid.h"
#include "unwind/table/unwind_table.h"
#include "unwind/unwind_worker.h"

#define OPAL_UNWIND_DEFAULT_MAX_BYTES (128ull << 20)
#define OPAL_UNWIND_DEFAULT_MAX_FILES 16384
#define OPAL_UNWIND_IDLE_NS           30000000000ull  /* unreferenced tables kept 30 s */
#define OPAL_UNWIND_RETRY_NS          10000000000ull  /* a table refused for lack of
							 * room is retried after 10 s */
#define OPAL_UNWIND_INLINE_BYTES      (4ull << 20)    /* files up to this size are built
							 * by the caller (libc: 11 ms), larger
							 * ones on the builder thread */
#define OPAL_UNWIND_AHEAD_REFS        8               /* a file mapped by this many
							 * installed processes is busy */

enum opal_unwind_file_state {
	OPAL_UFILE_PENDING = 0,   /* not built yet */
	OPAL_UFILE_BUILDING,      /* queued or in construction on the worker */
	OPAL_UFILE_LOADED,        /* in a slot */
	OPAL_UFILE_FAILED,        /* no table: build error, no CFI, or no room */
};

/* The table state of one file ID. */
struct opal_unwind_file {
	struct opal_hnode node;     /* by file ID */
	struct opal_list idle;      /* on the idle list while refs == 0 */
	opal_file_id id;
	uint8_t state;              /* enum opal_unwind_file_state */
	int err;                    /* FAILED: -errno (-ENOSPC: no room, retried) */
	uint32_t slot;              /* LOADED */
	const void *rules;          /* LOADED with BPF: its arrays, mapped read-only
				     * (rules: n_elems paged elements, bpf/unwind_rule.h),
				     * else NULL */
	const struct opal_unwind_body *bodies;
	uint32_t n_elems;
	struct opal_unwind_table_info info;   /* LOADED with BPF: as BPF has it */
	struct opal_unwind_table table;   /* LOADED without BPF (tests): the rules */
	uint64_t base;              /* LOADED: table base */
	uint64_t entry;             /* LOADED: ELF entry point, 0 if none */
	uint32_t n_rules, n_bodies; /* LOADED */
	uint64_t bytes;             /* LOADED: with BPF the paged rules (4 KiB
				     * elements) + bodies * 16, else the table's */
	uint32_t refs;              /* process mappings holding it */
	uint64_t idle_since_ns;     /* refs == 0 since */
	uint64_t failed_ns;         /* FAILED since */
};

struct opal_unwind_maps {
	int info_fd, rules_fd, bodies_fd, procs_fd;   /* outer maps, -1 without BPF */
	struct opal_htab by_id;
	struct opal_list idle;      /* refs == 0, most recently released first */
	size_t n_files, max_files;
	uint32_t free_slots[OPAL_UNWIND_MAX_TABLES];
	uint32_t n_free;
	uint64_t bytes, max_bytes;  /* loaded table bytes and their budget */
	size_t n_loaded;
	struct opal_unwind_limits lim;
	const char *debug_root;     /* debug files by build ID (proc/debugfile.h):
				     * OPAL_DEBUGFILE_ROOT; NULL: none looked up */
	struct opal_unwind_store *store;   /* the on-disk table cache, borrowed;
					    * NULL: none */
	uint32_t build_pct;         /* the builder's CPU budget, percent of one CPU */
	struct opal_unwind_builder builder;
	bool threaded;              /* the builder thread runs */
	size_t n_building;          /* files BUILDING */
	struct opal_counters *ctr;
};

/* Descriptors are the BPF object's unwind_info, unwind_rules,
 * unwind_bodies and proc_maps (borrowed), or all -1. max_bytes 0 means
 * OPAL_UNWIND_DEFAULT_MAX_BYTES, max_files 0 OPAL_UNWIND_DEFAULT_MAX_FILES.
 * Returns 0 or -ENOMEM. */
int opal_unwind_maps_init(struct opal_unwind_maps *m, int info_fd, int rules_fd, int bodies_fd,
			  int procs_fd, uint64_t max_bytes, size_t max_files,
			  struct opal_counters *ctr);

/* Starts the builder thread, its jobs reading and writing tables in
 * `store` (borrowed, outliving `m`; NULL: no cache) within a CPU budget of
 * `build_pct` percent of one CPU (0: OPAL_UNWIND_DEFAULT_BUILD_PCT), the
 * caller's small builds included; without the thread tables are built by
 * the caller of opal_unwind_file_request, unbudgeted. Returns 0 or
 * -errno. */
int opal_unwind_maps_start_builder(struct opal_unwind_maps *m, struct opal_unwind_store *store,
				   uint32_t build_pct);

/* Stops the builder and unloads every table (BPF entries deleted), frees
 * everything. */
void opal_unwind_maps_destroy(struct opal_unwind_maps *m);

/* The entry of file `id`, created PENDING when missing (NULL on ENOMEM).
 * Takes a reference; release it with opal_unwind_file_put. */
struct opal_unwind_file *opal_unwind_file_get(struct opal_unwind_maps *m, const opal_file_id *id,
					      uint64_t now_ns);
void opal_unwind_file_put(struct opal_unwind_maps *m, struct opal_unwind_file *f,
			  uint64_t now_ns);
/* Takes another reference on `f`. */
void opal_unwind_file_hold(struct opal_unwind_maps *m, struct opal_unwind_file *f);

/* What a process mapping of `f` gets as its slot: the table slot,
 * OPAL_SLOT_PENDING or OPAL_SLOT_NONE. A FAILED -ENOSPC entry older than
 * OPAL_UNWIND_RETRY_NS becomes PENDING again here. */
uint32_t opal_unwind_file_slot(struct opal_unwind_file *f, uint64_t now_ns);

/* Whether PENDING `f` is busy enough to be built before a sample needs
 * it: mapped by at least OPAL_UNWIND_AHEAD_REFS installed process
 * mappings (libc, ld.so, a shared interpreter), so that the next new
 * process's samples in it unwind in BPF instead of being deferred. Only
 * while the loaded tables take under half of max_bytes: tables built
 * ahead must not crowd out tables samples need. */
bool opal_unwind_file_wants_ahead(const struct opal_unwind_maps *m,
				  const struct opal_unwind_file *f);

/* Asks for the table of PENDING file `f`, built from the ELF open on `fd`
 * (the descriptor stays the caller's): for a file larger than
 * OPAL_UNWIND_INLINE_BYTES, or any while the build budget is spent,
 * queued on the builder thread (`f` becomes BUILDING and is held until
 * done), else (or without the thread) built or read from the cache and
 * loaded at once. Loading makes room by unloading idle tables, least
 * recently used first; `f` ends LOADED or FAILED (counted in
 * unwind_tables_built / unwind_table_errors; -ENOSPC: no slot or byte
 * budget left, retried after OPAL_UNWIND_RETRY_NS). Returns 1 while
 * BUILDING, 0 when `f` is LOADED or FAILED, or -EAGAIN when the queue is
 * full (`f` stays PENDING). */
int opal_unwind_file_request(struct opal_unwind_maps *m, struct opal_unwind_file *f, int fd,
			     uint64_t now_ns);

/* Loads the tables the builder finished. Returns how many files left
 * BUILDING. */
size_t opal_unwind_maps_poll(struct opal_unwind_maps *m, uint64_t now_ns);

/* Waits up to `timeout_ms` for every queued build, then polls. Returns
 * true when nothing is BUILDING any more. */
bool opal_unwind_maps_wait(struct opal_unwind_maps *m, int timeout_ms, uint64_t now_ns);

/* The rule body for ELF virtual address `vaddr` in LOADED `f`, found by
 * the same search as BPF (opal_unwind_table_lookup over the mapped BPF
 * arrays, or the userspace copy without BPF). Returns 0 with *out set (possibly a GAP body), 1 for a GAP
 * within OPAL_UNWIND_ENTRY_SPAN bytes after the entry point (the outermost
 * frame), -ENOENT when `f` is not LOADED, or -errno from the map lookups. */
int opal_unwind_file_lookup(struct opal_unwind_maps *m, const struct opal_unwind_file *f,
			    uint64_t vaddr, struct opal_unwind_body *out);

/* Unloads tables idle for OPAL_UNWIND_IDLE_NS and forgets idle entries
 * of other states as old; then drops the oldest idle entries while over
 * max_files. */
void opal_unwind_maps_expire(struct opal_unwind_maps *m, uint64_t now_ns);

/* Replaces the mapping array of process `pid` with `n` mappings (sorted
 * by start, n <= OPAL_PROC_MAX_MAPPINGS): a new inner array holding the
 * header and the mappings, swapped in atomically. Returns 0 or -errno
 * (-E2BIG when proc_maps is full). */
int opal_unwind_proc_install(struct opal_unwind_maps *m, uint32_t pid,
			     const struct opal_unwind_mapping *maps, uint32_t n, uint64_t gen);

/* Deletes the mapping array of `pid` (no error when absent). */
void opal_unwind_proc_remove(struct opal_unwind_maps *m, uint32_t pid);

#endif
