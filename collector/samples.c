/* Sample -> frames translation (samples.h). */
#include "samples.h"

#include <errno.h>
#include <string.h>
#include "opal/wire.pb-c.h"

void opal_stack_add_kernel(struct opal_stack *s, const uint64_t *ips, size_t n)
{
	for (size_t i = 0; i < n && s->n_frames < OPAL_MAX_FRAMES; i++)
		s->frames[s->n_frames++] = (struct opal_frame){
			.address = ips[i],
			.kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL,
			.return_address = i > 0,
		};
}

void opal_stack_add_error(struct opal_stack *s, int err)
{
	if (s->n_frames < OPAL_MAX_FRAMES)
		s->frames[s->n_frames++] = (struct opal_frame){
			.address = (uint64_t)err,
			.kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_ERROR,
		};
}

/* The stack's description of mapping `idx` of `p`, added on first use.
 * Frames of one mapping share one description. */
static const struct opal_mapping_desc *desc_for(struct opal_stack *s, const struct opal_proc *p,
						size_t idx, const struct opal_map_res *r,
						const struct opal_file *f)
{
	const struct opal_map_entry *m = &p->maps[idx];

	for (size_t i = 0; i < s->n_maps; i++)
		if (s->maps[i].start == m->start && s->maps[i].path == m->path)
			return &s->maps[i];
	if (s->n_maps == OPAL_MAX_STACK_DEPTH)
		return NULL;   /* unreachable: at most one per user frame */
	struct opal_mapping_desc *d = &s->maps[s->n_maps++];
	memset(d, 0, sizeof(*d));
	d->start = m->start;
	d->limit = m->limit;
	d->file_offset = m->offset;
	d->path = m->path;
	if (r->state == OPAL_MAP_FILE && f) {
		d->has_file_id = true;
		d->file_id = f->id;
		d->load_bias = r->load_bias;
		d->build_id_len = f->elf.build_id_len;
		memcpy(d->build_id, f->elf.build_id, f->elf.build_id_len);
	}
	return d;
}

void opal_stack_add_user(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			 const uint64_t *ips, size_t n)
{
	if (n > OPAL_MAX_STACK_DEPTH)
		n = OPAL_MAX_STACK_DEPTH;
	opal_procs_refresh_for(t, p, ips, n);
	for (size_t i = 0; i < n; i++) {
		ssize_t idx = opal_procs_mapping_of(p, ips[i]);
		/* Code runs only from executable mappings: anything else is a
		 * frame-pointer walk gone astray (code built without frame
		 * pointers), so the stack ends there. */
		if (idx < 0 || !p->maps[idx].executable) {
			t->ctr->frames_no_mapping++;
			opal_stack_add_error(s, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);
			return;
		}
		struct opal_file *f;
		const struct opal_map_res *r = opal_procs_resolve(t, p, (size_t)idx, &f);
		const struct opal_map_entry *m = &p->maps[idx];
		uint64_t addr = ips[i];
		if (r->state == OPAL_MAP_FILE &&
		    opal_elf_offset_to_vaddr(&f->elf, ips[i] - m->start + m->offset, &addr) < 0)
			addr = ips[i] - r->load_bias;   /* same result when a PT_LOAD holds it */
		const struct opal_mapping_desc *d = desc_for(s, p, (size_t)idx, r, f);
		if (!d || s->n_frames == OPAL_MAX_FRAMES)
			return;
		s->frames[s->n_frames++] = (struct opal_frame){
			.address = addr,
			.mapping = d,
			.kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE,
			.return_address = i > 0,
		};
	}
	if (n == OPAL_MAX_STACK_DEPTH)
		opal_stack_add_error(s, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_TRUNCATED);
}

int opal_translate_sample(struct opal_proc_table *t, const struct opal_sample_event *ev,
			  struct opal_proc **proc, struct opal_stack *out)
{
	struct opal_proc *p = opal_procs_get(t, (pid_t)ev->pid);

	out->n_frames = 0;
	out->n_maps = 0;
	*proc = p;
	if (!p)
		return -ENOMEM;
	if (p->excluded) {
		t->ctr->samples_self++;
		return 1;
	}
	if (ev->kstack_n > 0)
		opal_stack_add_kernel(out, (const uint64_t *)ev->kstack,
				      ev->kstack_n > OPAL_MAX_STACK_DEPTH ? OPAL_MAX_STACK_DEPTH
									  : (size_t)ev->kstack_n);
	if (ev->ustack_n < 0) {
		t->ctr->stack_errors++;
		opal_stack_add_error(out, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_UNREADABLE_STACK);
	} else if (ev->ustack_n > 0) {
		opal_stack_add_user(t, p, out, (const uint64_t *)ev->ustack, (size_t)ev->ustack_n);
	}
	return 0;
}
