/* Turns one BPF sample (bpf/sampler.h) into wire frames: kernel frames as
 * raw addresses, user frames as (mapping, ELF virtual address) through the
 * process and file tables. The user-stack part is the piece a DWARF
 * unwinder will replace: it only sees a list of user addresses. */
#ifndef OPAL_COLLECTOR_SAMPLES_H
#define OPAL_COLLECTOR_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/sampler.h"
#include "fileid.h"
#include "proc.h"
#include "opal/wire.pb-c.h"

/* kernel frames + user frames + one error frame */
#define OPAL_MAX_FRAMES (2 * OPAL_MAX_STACK_DEPTH + 1)

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
	const struct opal_mapping_desc *mapping;   /* NATIVE frames only, else NULL */
	uint8_t kind;         /* Opal__Wire__V1__FrameKind */
	bool return_address;
};

/* One translated stack, leaf first: kernel frames, then user frames. The
 * frames' mapping pointers point into `maps` (one entry per distinct
 * mapping) and stay valid until the next translation of the same process. */
struct opal_stack {
	struct opal_frame frames[OPAL_MAX_FRAMES];
	size_t n_frames;
	struct opal_mapping_desc maps[OPAL_MAX_STACK_DEPTH];
	size_t n_maps;
};

/* Appends the kernel frames of `ips` (`n` raw addresses, leaf first):
 * frame 0 is the interrupted PC, the rest return addresses. */
void opal_stack_add_kernel(struct opal_stack *s, const uint64_t *ips, size_t n);

/* Appends the user frames of process `p` for `ips` (`n` runtime addresses
 * from a frame-pointer walk, leaf first, n <= OPAL_MAX_STACK_DEPTH):
 * frame 0 is the interrupted PC, the rest return addresses. A file mapping
 * gives its ELF virtual address and file ID; other memory (vDSO, JIT,
 * anonymous, unreadable files) keeps the runtime address under a mapping
 * without file ID. An address in no mapping, or in one that is not
 * executable (no code can run there: the frame-pointer walk went astray),
 * ends the stack with an UNWIND_ERROR_NO_MAPPING frame (counted in
 * frames_no_mapping); a walk
 * that filled all OPAL_MAX_STACK_DEPTH slots ends with
 * UNWIND_ERROR_TRUNCATED. */
void opal_stack_add_user(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			 const uint64_t *ips, size_t n);

/* Appends an error frame with code `err` (Opal__Wire__V1__UnwindError). */
void opal_stack_add_error(struct opal_stack *s, int err);

/* Translates sample `ev`: looks up (creating) its process into *proc and
 * fills `out`. Returns 0, 1 when the process is excluded (the sample is
 * counted in samples_self and must be dropped), or -ENOMEM. */
int opal_translate_sample(struct opal_proc_table *t, const struct opal_sample_event *ev,
			  struct opal_proc **proc, struct opal_stack *out);

#endif
