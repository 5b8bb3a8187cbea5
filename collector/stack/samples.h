/* Turns one BPF sample (bpf/sampler.h) into wire frames: kernel frames as
 * raw addresses, user frames as (mapping, ELF virtual address) through the
 * process and file tables, error frames for walks that stopped early.
 * A deferred sample's walk is finished in userspace first
 * (unwind_proc.h). */
#ifndef OPAL_COLLECTOR_SAMPLES_H
#define OPAL_COLLECTOR_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/list.h"
#include "interp/interp.h"
#include "bpf/sampler.h"
#include "proc/proc_table.h"
#include "shared/fileid.h"
#include "unwind/unwind_proc.h"
#include "opal/wire.pb-c.h"

/* kernel frames + user frames (with their error frame) + interpreter
 * frames (with theirs) + one error frame */
#define OPAL_MAX_FRAMES (OPAL_MAX_STACK_DEPTH + OPAL_USTACK_SLOTS + OPAL_INTERP_SLOTS + 1)

/* What a Mapping message says about the mapping of a native frame. */
struct opal_mapping_desc {
	uint64_t start, limit, file_offset;
	uint64_t load_bias;                  /* 0 without a file ID */
	bool has_file_id;
	opal_file_id file_id;
	size_t build_id_len;
	uint8_t build_id[OPAL_BUILD_ID_MAX];
	const char *path;                    /* borrowed from the process's cached maps */
};

struct opal_frame {
	uint64_t address;     /* see Frame.address in wire.proto */
	const struct opal_mapping_desc *mapping;   /* NATIVE and JIT frames only, else NULL */
	uint64_t code_id;     /* INTERPRETED: its CodeObject, 0 when unknown */
	uint8_t kind;         /* Opal__Wire__V1__FrameKind */
	bool return_address;
};

/* The interpreter frames BPF recorded for a sample, placed among its
 * native frames by opal_stack_add_user. */
struct opal_stack_interp {
	struct opal_interp *ip;
	const struct opal_interp_frame *frames;   /* innermost first (bpf/interp.h) */
	size_t n;
};

/* One translated stack, leaf first: kernel frames, then user frames. The
 * frames' mapping pointers point into `maps` (one entry per distinct
 * mapping) and stay valid until the next translation of the same process.
 * upcs/uflags are scratch for the user walk. */
struct opal_stack {
	struct opal_frame frames[OPAL_MAX_FRAMES];
	size_t n_frames;
	bool jit;                  /* a frame is FRAME_KIND_JIT */
	struct opal_mapping_desc maps[OPAL_USTACK_SLOTS];
	size_t n_maps;
	uint64_t upcs[OPAL_USTACK_SLOTS];
	uint8_t uflags[OPAL_USTACK_SLOTS];
};

/* Appends the kernel frames of `ips` (`n` raw addresses, leaf first):
 * frame 0 is the interrupted PC, the rest return addresses. */
void opal_stack_add_kernel(struct opal_stack *s, const uint64_t *ips, size_t n);

/* Appends the user frames of process `p`: pcs[n] runtime addresses (or
 * enum opal_unwind_err codes) with flags[n] OPAL_UFRAME_* bits, leaf
 * first, n <= OPAL_USTACK_SLOTS, as a walk (BPF or unwind_user.h) left
 * them. A file mapping gives its ELF virtual address and file ID; other
 * memory (JIT, anonymous, unreadable files) keeps the runtime address
 * under a mapping without file ID. An error entry becomes an error frame
 * with the wire's UnwindError (counted by reason in `t->ctr`) and ends the
 * stack; so does an address in no executable mapping of p's cached maps
 * (UNWIND_ERROR_NO_MAPPING; the maps are re-read first, rate limited).
 * With `interp` (may be NULL), each C-level evaluation's interpreter
 * frames go right before (leafward of) the native frame of the
 * evaluation function running them, innermost first; the outermost such
 * native frame takes every evaluation left (one missed in the native walk
 * then shifts no frame out of order), and evaluations without any go
 * before the stack's end (both counted as interp_unmatched). */
void opal_stack_add_user(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			 const uint64_t *pcs, const uint8_t *flags, size_t n,
			 const struct opal_stack_interp *interp);

/* Appends an error frame with code `err` (Opal__Wire__V1__UnwindError). */
void opal_stack_add_error(struct opal_stack *s, int err);

/* True when the `size` bytes at `data` hold a whole sample record: its
 * head and the iframes_n interpreter frames it announces, or, deferred,
 * its whole fixed part and the stack_len bytes of stack its regions'
 * lengths add up to. */
bool opal_sample_event_valid(const void *data, size_t size);

/* Samples parked while a table they need is built take at most this many
 * bytes (records of up to sizeof(struct opal_sample_event)); past
 * it a walk ends with an error frame instead of waiting. */
#define OPAL_PARK_MAX_BYTES (16u << 20)
/* A sample of a process gone before its maps were read waits this long for
 * the process's exit event (with its VMAs). */
#define OPAL_PARK_EXIT_WAIT_NS 2000000000ull

/* The translation of samples into stacks: the process table, the BPF
 * unwinder (NULL: walks BPF deferred end with an error frame), the
 * interpreter frames' placement and code objects (NULL: none), and the
 * samples parked until what their walk needs is there. */
struct opal_stacks {
	struct opal_proc_table *procs;
	struct opal_unwinder *unwind;
	struct opal_interp *interp;
	struct opal_counters *ctr;
	struct opal_list parked;    /* oldest first */
	size_t parked_bytes;
};

/* `procs`, `unwind` and `interp` (may be NULL) and `ctr` are borrowed. */
void opal_stacks_init(struct opal_stacks *s, struct opal_proc_table *procs,
		      struct opal_unwinder *unwind, struct opal_interp *interp,
		      struct opal_counters *ctr);
/* Frees every parked sample without translating it. */
void opal_stacks_destroy(struct opal_stacks *s);

enum opal_translate_result {
	OPAL_TRANSLATED = 0,        /* `out` holds the stack */
	OPAL_TRANSLATE_EXCLUDED,    /* opal's own process: counted in samples_self, drop it */
	OPAL_TRANSLATE_PARKED,      /* copied; opal_stacks_unpark delivers it later */
};

/* Translates sample `ev` (checked with opal_sample_event_valid): looks up
 * (creating) its process into *proc, acts on what BPF reported about it
 * (unwind_proc.h), finishes a deferred walk, and fills `out`. A sample
 * whose walk needs a table being built, or whose process was gone before
 * its maps were read (until its exit event lists its VMAs), is parked.
 * Returns an enum opal_translate_result or -ENOMEM. */
int opal_translate_sample(struct opal_stacks *s, const struct opal_sample_event *ev,
			  struct opal_proc **proc, struct opal_stack *out);

/* Acts at once on what BPF reported about the process of sample `ev`
 * (checked with opal_sample_event_valid) without translating it: its maps
 * installed or re-read (unwind_proc.h), its interpreter found, so that its
 * next samples need not be deferred. For a sample translated later (an
 * off-CPU one waiting for its value). */
void opal_stacks_notice(struct opal_stacks *s, const struct opal_sample_event *ev);

/* Receives a translated sample: its record, process and frames. */
typedef void (*opal_sample_emit_fn)(void *ctx, const struct opal_sample_event *ev,
				    struct opal_proc *p, const struct opal_stack *s);

/* Loads the tables the builder finished (unwind_maps.h) and translates the
 * parked samples whose table is ready, oldest first, into `scratch`,
 * handing each to `emit`. With `all` (shutdown) it first waits up to
 * `wait_ms` for the builds, then finishes every parked sample (walks
 * without their table end with an error frame). */
void opal_stacks_unpark(struct opal_stacks *s, bool all, int wait_ms, opal_sample_emit_fn emit,
			void *ctx, struct opal_stack *scratch);

/* Exit record `data` (`size` bytes, struct opal_exit_event when long
 * enough): a process whose maps could not be read gets them from the
 * listed VMAs, so its parked samples can be unwound. Call before the
 * process is forgotten. */
void opal_stacks_exit_maps(struct opal_stacks *s, const void *data, size_t size);

#endif
