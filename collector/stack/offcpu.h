/* Off-CPU samples waiting for their value: BPF sends the stack a thread
 * blocked with as it leaves the CPU (a sample record with
 * OPAL_SAMPLE_OFF_CPU) and the time it was off CPU when it runs again (a
 * struct opal_offcpu_end, later in the same ring); this table keeps each
 * thread's sample record until its end record arrives (docs/offcpu.md).
 * Bounded by OPAL_OFFCPU_MAX_THREADS records and OPAL_OFFCPU_PENDING_BYTES
 * bytes: past either the oldest record is dropped. Every record that finds
 * no partner (dropped, replaced by its thread's next block, an end without
 * its sample) is counted in offcpu_unmatched. */
#ifndef OPAL_COLLECTOR_OFFCPU_H
#define OPAL_COLLECTOR_OFFCPU_H

#include <stddef.h>
#include <stdint.h>
#include "base/counters.h"
#include "base/htab.h"
#include "base/list.h"
#include "bpf/sampler.h"

#define OPAL_OFFCPU_PENDING_BYTES (64u << 20)

struct opal_offcpu {
	struct opal_htab by_tid;
	struct opal_list order;      /* newest first */
	size_t n, bytes;
	struct opal_counters *ctr;   /* borrowed: offcpu_unmatched */
};

/* Returns 0 or -ENOMEM. */
int opal_offcpu_init(struct opal_offcpu *o, struct opal_counters *ctr);
/* Frees every waiting record (each counted as unmatched). */
void opal_offcpu_destroy(struct opal_offcpu *o);

/* Keeps a copy of off-CPU sample record `ev` (`size` bytes, checked with
 * opal_sample_event_valid) until its thread's end record. Returns 0 or
 * -ENOMEM (the record is then dropped and counted). */
int opal_offcpu_start(struct opal_offcpu *o, const struct opal_sample_event *ev, size_t size);

/* The waiting sample record of end record `e`'s thread, now with its value
 * (off_cpu_ns) and the time the thread ran again as its timestamp: owned
 * by the caller (free()), `*size` bytes. NULL when none waits (counted). */
struct opal_sample_event *opal_offcpu_end(struct opal_offcpu *o, const struct opal_offcpu_end *e,
					  size_t *size);

#endif
