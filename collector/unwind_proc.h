/* A process's part in the BPF unwinder: installing its executable
 * mappings (with their files' table slots and load biases) as its BPF
 * mapping array, acting on what a sample reports (a process BPF does not
 * know, a stale array, a table not built yet), and finishing deferred
 * walks in userspace (unwind_user.h), building tables on first need.
 * docs/unwinding.md, "The BPF unwinder". */
#ifndef OPAL_COLLECTOR_UNWIND_PROC_H
#define OPAL_COLLECTOR_UNWIND_PROC_H

#include <stddef.h>
#include <stdint.h>
#include "bpf/sampler.h"
#include "proc.h"
#include "unwind_user.h"

struct opal_sampling;

/* Attaches the BPF unwinder to `t`: `m` is initialized over the maps of
 * the loaded sampler `s` (unwind_maps.h defaults) and the vDSO is
 * registered in t->files (vdso.h; without it vDSO frames unwind with
 * frame pointers). Returns 0 or -ENOMEM. Detach with
 * opal_unwinder_detach before the sampler is destroyed. */
int opal_unwinder_attach(struct opal_proc_table *t, struct opal_unwind_maps *m,
			 const struct opal_sampling *s, struct opal_counters *ctr);

/* Forgets every installed process and table (t->unwind becomes NULL). */
void opal_unwinder_detach(struct opal_proc_table *t);

/* A failed install is retried after this long. */
#define OPAL_INSTALL_RETRY_NS 1000000000ull

/* Installs (or replaces) p's mapping array in BPF: its executable
 * mappings (at most OPAL_PROC_MAX_MAPPINGS, lowest first), each file
 * mapping resolved and holding a reference on its table entry. No-op
 * without t->unwind or for an excluded process. Returns 0 or -errno; on
 * error BPF holds no array for p. */
int opal_procs_install(struct opal_proc_table *t, struct opal_proc *p);

/* Removes p's BPF mapping array (when installed). */
void opal_procs_uninstall(struct opal_proc_table *t, struct opal_proc *p);

/* Releases the table references of p's cached mappings (before its maps
 * are dropped). */
void opal_procs_release_tables(struct opal_proc_table *t, struct opal_proc *p);

/* Acts on sample `ev`'s OPAL_SAMPLE_UNKNOWN_PROC / _STALE flags: re-reads
 * p's maps when they may be older than what the sample saw (rate limited
 * by OPAL_MAPS_REREAD_NS) and (re)installs p (failures retried after
 * OPAL_INSTALL_RETRY_NS). */
void opal_procs_unwind_sync(struct opal_proc_table *t, struct opal_proc *p,
			    const struct opal_sample_event *ev);

/* Sets the maps of `p`, gone before they could be read, from the `n`
 * executable VMAs its exit event listed (sorted, disjoint): each file is
 * found among the files already known by device and inode; unknown ones
 * stay unresolved (their frames end the walk). */
void opal_procs_maps_from_vmas(struct opal_proc_table *t, struct opal_proc *p,
			       const struct opal_vma_rec *vmas, size_t n);

/* Finishes a deferred walk: pcs/flags (OPAL_USTACK_SLOTS entries, *n
 * used, the last one the frame of `regs`) get the rest of the stack from
 * `stack` (unwind_user.h), with p's cached mappings. A PENDING table met
 * on the way is requested (unwind_maps.h); while it is being built the
 * walk stops and, with `may_wait`, returns that file (a new reference,
 * for the caller to park the sample and retry), else the frame gets an
 * OPAL_UERR_NO_UNWIND_INFO error. Reinstalls p afterwards when a slot it
 * has in BPF changed. Returns NULL when the walk is complete. */
struct opal_unwind_file *opal_procs_unwind_continue(struct opal_proc_table *t,
						    struct opal_proc *p,
						    struct opal_unwind_regs *regs,
						    const struct opal_stack_copy *stack,
						    uint64_t *pcs, uint8_t *flags, size_t *n,
						    bool may_wait);

#endif
