/* A process's part in the BPF unwinder: installing its executable
 * mappings (with their files' table slots and load biases) as its BPF
 * mapping array, acting on what a sample reports (a process BPF does not
 * know, a stale array, a table not built yet), and finishing deferred
 * walks in userspace (unwind_user.h), building tables on first need.
 * Its per-process state hangs off each process table entry
 * (opal_proc.unwind) and follows the entry through the table's hooks.
 * docs/unwinding.md, "The BPF unwinder". */
#ifndef OPAL_COLLECTOR_UNWIND_PROC_H
#define OPAL_COLLECTOR_UNWIND_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/sampler.h"
#include "proc/proc_table.h"
#include "unwind/unwind_maps.h"
#include "unwind/unwind_user.h"

struct opal_sampling;

struct opal_unwinder {
	struct opal_proc_table *procs;
	struct opal_unwind_maps *maps;
	struct opal_counters *ctr;
	uint64_t install_gen;   /* installs so far (for logs) */
};

/* Sets `u` up over the process table `procs` and the table maps `m`
 * (initialized by the caller; borrowed, like `procs` and `ctr`), and
 * adds its hooks to the table. Returns 0 or -ENOSPC. */
int opal_unwinder_init(struct opal_unwinder *u, struct opal_proc_table *procs,
		       struct opal_unwind_maps *m, struct opal_counters *ctr);

/* opal_unwinder_init over `m` initialized on the maps of the loaded
 * sampler `s` (unwind_maps.h defaults), with the table builder thread
 * started over the table cache `store` (borrowed, may be NULL) and a
 * budget of `build_pct` percent of one CPU (opal_unwind_maps_start_builder).
 * Returns 0 or -ENOMEM. Detach with opal_unwinder_detach before the
 * sampler is destroyed. */
int opal_unwinder_attach(struct opal_unwinder *u, struct opal_proc_table *procs,
			 struct opal_unwind_maps *m, const struct opal_sampling *s,
			 struct opal_unwind_store *store, uint32_t build_pct,
			 struct opal_counters *ctr);

/* Forgets every installed process and table reference, removes its
 * hooks from the table and destroys the table maps. */
void opal_unwinder_detach(struct opal_unwinder *u);

/* A failed install is retried after this long. */
#define OPAL_INSTALL_RETRY_NS 1000000000ull

/* Installs (or replaces) p's mapping array in BPF: its executable
 * mappings (at most OPAL_PROC_MAX_MAPPINGS, lowest first), each file
 * mapping resolved and holding a reference on its table entry. No-op
 * for an excluded or gone process. Returns 0 or -errno; on error BPF
 * holds no array for p. */
int opal_unwinder_install(struct opal_unwinder *u, struct opal_proc *p);

/* The table slot last installed in BPF for p's mapping `i`, or
 * OPAL_SLOT_NONE when p is not installed or the mapping has none. */
uint32_t opal_unwinder_slot(const struct opal_proc *p, size_t i);

/* Re-reads of a process's maps that BPF asks for (a mapping they lack)
 * sooner than OPAL_MAPS_REREAD_NS after the last, per process entry: a
 * process living a few ms maps its libraries after its first sample, and
 * only a read that finds it gone sends its samples to wait for the
 * mappings its exit event lists. */
#define OPAL_QUICK_REREADS 4

/* Acts on sample `ev`'s OPAL_SAMPLE_UNKNOWN_PROC / _STALE flags: re-reads
 * p's maps when they are older than what the sample saw (at most once per
 * OPAL_MAPS_REREAD_NS after OPAL_QUICK_REREADS sooner ones) and
 * (re)installs p (failures retried after OPAL_INSTALL_RETRY_NS). */
void opal_unwinder_sync(struct opal_unwinder *u, struct opal_proc *p,
			const struct opal_sample_event *ev);

/* Finishes a deferred walk: pcs/flags (OPAL_USTACK_SLOTS entries, *n
 * used, the last one the frame of `regs`) get the rest of the stack from
 * `stack` (unwind_user.h), with p's cached mappings. A PENDING table met
 * on the way is requested (unwind_maps.h); while it is being built the
 * walk stops and, with `may_wait`, returns that file (a new reference,
 * for the caller to park the sample and retry), else the frame gets an
 * OPAL_UERR_NO_UNWIND_INFO error. Reinstalls p afterwards when a slot it
 * has in BPF changed. Returns NULL when the walk is complete. */
struct opal_unwind_file *opal_unwinder_continue(struct opal_unwinder *u, struct opal_proc *p,
						struct opal_unwind_regs *regs,
						const struct opal_stack_copy *stack,
						uint64_t *pcs, uint8_t *flags, size_t *n,
						bool may_wait);

#endif
