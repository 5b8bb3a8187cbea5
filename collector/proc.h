/* Per-process cache: /proc/PID/maps with each mapping's file resolution,
 * and the Process message facts (procinfo.h). Dropped on exec and exit
 * events. Bounded to `max_procs` entries (least recently used dropped).
 * With the BPF unwinder attached (`unwind`), each cached process may also
 * have its executable mappings installed in BPF (unwind_proc.c); dropping
 * the entry removes them.
 *
 * Maps are read when the process is first seen and re-read when an
 * address falls in no cached mapping or BPF reports them stale, at most
 * once per OPAL_MAPS_REREAD_NS per process. */
#ifndef OPAL_COLLECTOR_PROC_H
#define OPAL_COLLECTOR_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "counters.h"
#include "files.h"
#include "htab.h"
#include "list.h"
#include "procinfo.h"
#include "procmaps.h"
#include "procsrc.h"
#include "unwind_maps.h"

#define OPAL_DEFAULT_MAX_PROCS  8192
#define OPAL_MAPS_REREAD_NS     100000000ull   /* 100 ms */
#define OPAL_MAX_EXTRA_EXCLUDED 64             /* pids excluded by opal_procs_exclude */

enum opal_map_state {
	OPAL_MAP_UNRESOLVED = 0,
	OPAL_MAP_FILE,      /* executable file mapping with a file table entry */
	OPAL_MAP_NOFILE,    /* anonymous, [vdso], [stack], non-executable, ... */
	OPAL_MAP_ERROR,     /* file could not be opened or parsed: treated as NOFILE */
};

/* Resolution of one cached mapping, parallel to opal_proc.maps. */
struct opal_map_res {
	uint8_t state;              /* enum opal_map_state */
	bool no_inode_check;        /* BPF sees another inode than maps shows */
	struct opal_file_key key;   /* OPAL_MAP_FILE: the file table key */
	uint64_t load_bias;         /* OPAL_MAP_FILE */
	struct opal_unwind_file *uf;   /* installed executable file mapping: its
					* table entry (a reference), else NULL */
	uint32_t slot;              /* the slot last installed for it in BPF */
};

struct opal_proc {
	struct opal_hnode node;
	struct opal_list lru;
	pid_t pid;
	bool excluded;              /* opal's own: samples counted and dropped */
	struct opal_proc_info info;
	struct opal_map_entry *maps;   /* sorted; n_maps entries */
	struct opal_map_res *res;      /* n_maps entries */
	size_t n_maps;
	bool maps_read;             /* at least one read attempted */
	int maps_err;               /* the last read's error (-ESRCH: process gone) */
	uint64_t maps_read_ns;      /* time of the last read (src->now_ns) */
	bool installed;             /* BPF holds its current mapping array */
	uint64_t install_ns;        /* time of the last install attempt */
	int install_err;            /* its result */
	uint32_t n_parked;          /* samples waiting for a table (samples.h) */
	bool await_exit;            /* parked samples wait for its exit event's VMAs */
	bool gone;                  /* dropped (exit, exec, bound) but kept, with
				     * its maps, for its parked samples */
};

struct opal_proc_table {
	struct opal_htab by_pid;
	struct opal_list lru;
	size_t n_procs, max_procs;
	const struct opal_proc_source *src;
	struct opal_file_table *files;
	struct opal_counters *ctr;
	bool include_self;
	pid_t extra_excluded[OPAL_MAX_EXTRA_EXCLUDED];
	size_t n_extra_excluded;
	/* Called once per newly excluded pid (e.g. to fill the BPF map). */
	void (*on_exclude)(void *ctx, pid_t pid);
	void *on_exclude_ctx;
	struct opal_unwind_maps *unwind;   /* BPF unwinder tables, or NULL */
	struct opal_file *vdso;            /* the vDSO image (vdso.h), or NULL */
	uint64_t install_gen;              /* installs so far */
	struct opal_list parked;           /* parked samples (samples.h), oldest first */
	size_t parked_bytes;
	struct opal_list gone;             /* gone processes with parked samples */
};

/* `src`, `files` and `ctr` must outlive the table. With include_self false
 * a process whose comm or exe names an opal daemon (opal_is_opal_program)
 * is marked excluded. Returns 0 or -ENOMEM. */
int opal_procs_init(struct opal_proc_table *t, size_t max_procs, bool include_self,
		    const struct opal_proc_source *src, struct opal_file_table *files,
		    struct opal_counters *ctr);
void opal_procs_destroy(struct opal_proc_table *t);

/* The entry of `pid`, created (reading its facts and maps) when missing,
 * and marked most recently used. Valid until the next call that may create
 * or drop entries. NULL on ENOMEM. */
struct opal_proc *opal_procs_get(struct opal_proc_table *t, pid_t pid);

/* The entry of `pid` if cached (nothing read, LRU untouched), or NULL. */
struct opal_proc *opal_procs_peek(struct opal_proc_table *t, pid_t pid);

/* One parked sample of `p` was handled: frees a gone `p` with none left. */
void opal_procs_unparked(struct opal_proc_table *t, struct opal_proc *p);

/* Forgets the cached entry of `pid` (exec: maps and facts changed). */
void opal_procs_forget(struct opal_proc_table *t, pid_t pid);

/* Exit of `pid`: forgets it and drops it from the explicitly excluded
 * pids. Returns true when it was one of those. */
bool opal_procs_exited(struct opal_proc_table *t, pid_t pid);

/* Forgets every entry (after lost exec/exit events). */
void opal_procs_clear(struct opal_proc_table *t);

/* Calls on_exclude again for every explicitly excluded pid (after the
 * caller emptied the BPF excluded map). */
void opal_procs_renotify_excluded(struct opal_proc_table *t);

/* Excludes `pid` explicitly (the collector itself, the symbolizer peer);
 * ignored when include_self is set. Calls on_exclude for a pid not yet in
 * the explicit list (at most OPAL_MAX_EXTRA_EXCLUDED, oldest replaced). */
void opal_procs_exclude(struct opal_proc_table *t, pid_t pid);

/* Before translating the `n` user addresses of one stack: when any lies in
 * no cached mapping of `p` and the rate limit allows, re-reads p's maps
 * (once), so that indexes into p->maps stay valid for the whole stack.
 * Returns true when the maps were re-read. */
bool opal_procs_refresh_for(struct opal_proc_table *t, struct opal_proc *p, const uint64_t *addrs,
			    size_t n);

/* Replaces p's cached maps with `maps`/`res` (n entries, sorted, owned
 * by `p` from now on): for a process gone before its maps could be read
 * (unwind_proc.h). */
void opal_procs_set_maps(struct opal_proc_table *t, struct opal_proc *p,
			 struct opal_map_entry *maps, struct opal_map_res *res, size_t n);

/* Re-reads p's maps now (no rate limit) and, when p was installed in BPF,
 * installs it again (unwind_proc.h). */
void opal_procs_reread(struct opal_proc_table *t, struct opal_proc *p);

/* Index of p's cached mapping holding `addr`, or -1. */
ssize_t opal_procs_mapping_of(const struct opal_proc *p, uint64_t addr);

/* Resolves mapping `i` of `p` once (opening its file when it is an
 * executable file mapping) and returns its resolution; for OPAL_MAP_FILE
 * also sets *file (valid until the next file table call that adds a file).
 * A file whose table entry was dropped is resolved again. */
const struct opal_map_res *opal_procs_resolve(struct opal_proc_table *t, struct opal_proc *p,
					      size_t i, struct opal_file **file);

#endif
