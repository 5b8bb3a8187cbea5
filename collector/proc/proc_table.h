/* Per-process cache: /proc/PID/maps with each mapping's file resolution,
 * and the Process message facts (procinfo.h). Dropped on exec events,
 * and OPAL_EXIT_GRACE_NS after exit events. Bounded to `max_procs` entries
 * (least recently used dropped).
 * Modules above keep state of their own per process (the BPF unwinder:
 * unwind/unwind_proc.h) and learn of its changes through hooks; an entry
 * they still need after it left the table (parked samples) is pinned.
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
#include "base/counters.h"
#include "base/htab.h"
#include "base/list.h"
#include "bpf/unwind.h"
#include "proc/files.h"
#include "proc/procctx.h"
#include "proc/procinfo.h"
#include "proc/procmaps.h"
#include "proc/procsrc.h"

#define OPAL_DEFAULT_MAX_PROCS  8192
#define OPAL_MAPS_REREAD_NS     100000000ull   /* 100 ms */
#define OPAL_MAX_EXTRA_EXCLUDED 64             /* pids excluded by opal_procs_exclude */
#define OPAL_PROC_MAX_HOOKS     4              /* modules keeping per-process state */
/* How long an exited process's entry stays for the samples of its exit
 * path (taken after its exit event: closing files, exit_mm on kernels that
 * trace the exit before it, the last schedule). */
#define OPAL_EXIT_GRACE_NS      2000000000ull  /* 2 s */

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
};

struct opal_unwind_proc;
struct opal_interp_proc;

struct opal_proc {
	struct opal_hnode node;
	struct opal_list lru;
	pid_t pid;
	uint64_t serial;            /* unique per entry in this run (pid reuse, exec) */
	bool excluded;              /* opal's own: samples counted and dropped */
	struct opal_proc_info info;
	struct opal_proc_identity id;   /* when first seen (zero: unreadable) */
	struct opal_map_entry *maps;   /* sorted; n_maps entries */
	struct opal_map_res *res;      /* n_maps entries */
	size_t n_maps;
	bool maps_read;             /* at least one read attempted */
	int maps_err;               /* the last read's error (-ESRCH: process gone) */
	uint64_t maps_read_ns;      /* time of the last read (src->now_ns) */
	uint32_t pins;              /* holders keeping it past its drop (opal_procs_pin) */
	bool gone;                  /* dropped (exit, exec, bound) but kept, with
				     * its maps, for its pins */
	bool exited;                /* its exit event came: still in the table
				     * for OPAL_EXIT_GRACE_NS, on `exits` */
	uint64_t exited_ns;         /* when (src->now_ns) */
	struct opal_list exit_node; /* on the table's `exits` while exited */
	struct opal_unwind_proc *unwind;   /* the BPF unwinder's state, owned by
					    * it (its hooks free it), or NULL */
	struct opal_interp_proc *interp;   /* interpreter state (collector/interp/),
					    * owned likewise, or NULL */
	struct opal_procctx ctx;    /* its OTEP 4719 process context, as last copied */
};

/* What the modules above learn of an entry (any may be NULL):
 *  maps_dropped: p's cached maps (and p->res) are about to be freed or
 *    replaced: drop what refers to them;
 *  maps_reread: the table re-read p's maps by itself (an address fell in
 *    no cached mapping: opal_procs_refresh_for);
 *  forgotten: p left the table (exit, exec, the bound, clear); a pinned p
 *    stays readable, p->gone set, until its last unpin;
 *  freed: p is about to be freed (after forgotten and maps_dropped). */
struct opal_proc_hooks {
	void (*maps_dropped)(void *ctx, struct opal_proc *p);
	void (*maps_reread)(void *ctx, struct opal_proc *p);
	void (*forgotten)(void *ctx, struct opal_proc *p);
	void (*freed)(void *ctx, struct opal_proc *p);
	void *ctx;
};

struct opal_proc_table {
	struct opal_htab by_pid;
	struct opal_list lru;
	size_t n_procs, max_procs;
	const struct opal_proc_source *src;
	struct opal_file_table *files;
	struct opal_counters *ctr;
	bool include_self;
	bool command_line;   /* read each process's command line (opt-in: secrets) */
	pid_t extra_excluded[OPAL_MAX_EXTRA_EXCLUDED];
	size_t n_extra_excluded;
	/* Called once per newly excluded pid (e.g. to fill the BPF map). */
	void (*on_exclude)(void *ctx, pid_t pid);
	void *on_exclude_ctx;
	struct opal_proc_hooks hooks[OPAL_PROC_MAX_HOOKS];   /* opal_procs_add_hooks */
	size_t n_hooks;
	struct opal_file *vdso;            /* the vDSO image (vdso.h), or NULL */
	uint64_t next_serial;
	struct opal_list gone;             /* gone processes still pinned */
	struct opal_list exits;            /* exited entries, newest first */
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

/* Adds a module's hooks (copied), called in the order added. Returns 0,
 * or -ENOSPC past OPAL_PROC_MAX_HOOKS. */
int opal_procs_add_hooks(struct opal_proc_table *t, const struct opal_proc_hooks *h);
/* Removes the hooks added with context `ctx`. */
void opal_procs_remove_hooks(struct opal_proc_table *t, void *ctx);

/* Keeps `p` readable, with its maps, even after it leaves the table
 * (e.g. while a sample of it waits for an unwind table), until the
 * matching opal_procs_unpin; the last unpin of a gone `p` frees it. */
void opal_procs_pin(struct opal_proc *p);
void opal_procs_unpin(struct opal_proc_table *t, struct opal_proc *p);

/* True when one of p's cached mappings is JIT code (opal_maps_is_jit). */
bool opal_procs_has_jit(const struct opal_proc *p);

/* Forgets the cached entry of `pid` (exec: maps and facts changed). */
void opal_procs_forget(struct opal_proc_table *t, pid_t pid);

/* Exit of `pid`: drops it from the explicitly excluded pids, and keeps
 * its entry (maps, facts, process context) for OPAL_EXIT_GRACE_NS: the
 * samples of its exit path still belong to it. opal_procs_get gives it to
 * them while the pid shows this process or none; a process that reused
 * the pid gets a new entry. Returns true when it was an excluded pid. */
bool opal_procs_exited(struct opal_proc_table *t, pid_t pid);

/* Forgets the exited entries older than OPAL_EXIT_GRACE_NS (also done by
 * opal_procs_exited and opal_procs_get). */
void opal_procs_reap(struct opal_proc_table *t);

/* Forgets every entry. */
void opal_procs_clear(struct opal_proc_table *t);

/* After lost exec/exit events: checks every cached entry and every
 * explicitly excluded pid against the process now behind its pid (its
 * identity: start time and executable), and forgets those that are gone,
 * another process, or another executable at once (no exit grace: when they
 * exited is unknown) and drops them from the excluded pids, calling `gone`
 * (may be NULL) for each such pid. The others keep their maps; an exec of the same executable is left to BPF's address-space
 * check (OPAL_SAMPLE_UNKNOWN_PROC). Without src->identity every entry
 * is forgotten and the excluded pids are kept. Returns the number of pids
 * handled. */
size_t opal_procs_revalidate(struct opal_proc_table *t, void (*gone)(void *ctx, pid_t pid),
			     void *ctx);

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

/* Sets the maps of `p`, gone before they could be read, from the `n`
 * executable VMAs its exit event listed (bpf/unwind.h; at most
 * OPAL_MAX_VMAS used), in the order they were made (a later one replaces
 * the earlier ones it overlaps) or sorted: each file is found among the
 * files already known by device and inode; unknown ones stay unresolved
 * (their frames end the walk). */
void opal_procs_maps_from_vmas(struct opal_proc_table *t, struct opal_proc *p,
			       const struct opal_vma_rec *vmas, size_t n);

/* Re-reads p's maps now (no rate limit; nothing for a gone p). The
 * caller acts on the change (maps_reread is not called). */
void opal_procs_reread(struct opal_proc_table *t, struct opal_proc *p);

/* p's process context, copied again when the interval `seq` is the first
 * it is asked for in and the publisher updated it since (procctx.h); the
 * copy of an earlier interval when that read fails; one unpublished
 * (unmapped, or another header) is looked for again, its copy kept until
 * another is found. A process without one has its
 * maps scanned for one again, at the backoff of procctx.h. Counted in
 * process_ctx_reads / process_ctx_errors / process_ctx_scans. */
const struct opal_procctx *opal_procs_context(struct opal_proc_table *t, struct opal_proc *p,
					      uint64_t seq);

/* Index of p's cached mapping holding `addr`, or -1. */
ssize_t opal_procs_mapping_of(const struct opal_proc *p, uint64_t addr);

/* Resolves mapping `i` of `p` once (opening its file when it is an
 * executable file mapping) and returns its resolution; for OPAL_MAP_FILE
 * also sets *file (valid until the next file table call that adds a file).
 * A file whose table entry was dropped is resolved again. */
const struct opal_map_res *opal_procs_resolve(struct opal_proc_table *t, struct opal_proc *p,
					      size_t i, struct opal_file **file);

#endif
