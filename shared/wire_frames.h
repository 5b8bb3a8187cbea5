/* A Stack's frames in either of their wire forms (proto/opal/wire.proto,
 * Stack): Frame messages, or the packed frame_info / frame_address /
 * frame_code_id arrays the collector sends. */
#ifndef OPAL_WIRE_FRAMES_H
#define OPAL_WIRE_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "opal/wire.pb-c.h"

#define OPAL_WIRE_FRAME_KIND_MASK     0x1fu
#define OPAL_WIRE_FRAME_RETURN        (1u << 5)
#define OPAL_WIRE_FRAME_MAPPING_SHIFT 6
#define OPAL_WIRE_FRAME_MAX_MAPPING   ((1u << (32 - OPAL_WIRE_FRAME_MAPPING_SHIFT)) - 1)

/* frame_info of a frame; mapping_index at most OPAL_WIRE_FRAME_MAX_MAPPING,
 * kind below 32. */
static inline uint32_t opal_wire_frame_info(uint32_t kind, bool return_address,
					    uint32_t mapping_index)
{
	return (kind & OPAL_WIRE_FRAME_KIND_MASK) | (return_address ? OPAL_WIRE_FRAME_RETURN : 0) |
	       mapping_index << OPAL_WIRE_FRAME_MAPPING_SHIFT;
}

/* The number of frames of `st`, in whichever form it has them. */
size_t opal_wire_stack_n_frames(const Opal__Wire__V1__Stack *st);

/* 0 when `st`'s frames are well formed: not both forms, the packed arrays
 * of one length, and one code ID per INTERPRETED packed frame; else
 * -EBADMSG. */
int opal_wire_stack_frames_check(const Opal__Wire__V1__Stack *st);

/* Frame `i` of a checked `st`: st->frames[i], or *out filled from the
 * packed arrays (code_id included). *code_at is the caller's cursor into
 * frame_code_id: 0 before frame 0, advanced past each INTERPRETED frame,
 * so frames are read in order. */
const Opal__Wire__V1__Frame *opal_wire_stack_frame(const Opal__Wire__V1__Stack *st, size_t i,
						   size_t *code_at, Opal__Wire__V1__Frame *out);

#endif
