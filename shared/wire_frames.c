/* A Stack's frames in either wire form (wire_frames.h). */
#include "shared/wire_frames.h"

#include <errno.h>

static bool packed(const Opal__Wire__V1__Stack *st)
{
	return st->n_frame_info || st->n_frame_address || st->n_frame_code_id;
}

size_t opal_wire_stack_n_frames(const Opal__Wire__V1__Stack *st)
{
	return packed(st) ? st->n_frame_info : st->n_frames;
}

int opal_wire_stack_frames_check(const Opal__Wire__V1__Stack *st)
{
	size_t interp = 0;

	if (!packed(st))
		return 0;
	if (st->n_frames || st->n_frame_address != st->n_frame_info)
		return -EBADMSG;
	for (size_t i = 0; i < st->n_frame_info; i++)
		interp += (st->frame_info[i] & OPAL_WIRE_FRAME_KIND_MASK) ==
			  OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED;
	return interp == st->n_frame_code_id ? 0 : -EBADMSG;
}

const Opal__Wire__V1__Frame *opal_wire_stack_frame(const Opal__Wire__V1__Stack *st, size_t i,
						   size_t *code_at, Opal__Wire__V1__Frame *out)
{
	if (!packed(st))
		return st->frames[i];
	uint32_t info = st->frame_info[i];
	opal__wire__v1__frame__init(out);
	out->kind = (Opal__Wire__V1__FrameKind)(info & OPAL_WIRE_FRAME_KIND_MASK);
	out->return_address = (info & OPAL_WIRE_FRAME_RETURN) != 0;
	out->mapping_index = info >> OPAL_WIRE_FRAME_MAPPING_SHIFT;
	out->address = st->frame_address[i];
	if (out->kind == OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED)
		out->code_id = st->frame_code_id[(*code_at)++];
	return out;
}
