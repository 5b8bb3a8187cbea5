/* Sample -> frames translation (samples.h). */
#include "samples.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "opal/wire.pb-c.h"
#include "unwind_proc.h"

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

/* The wire's UnwindError for an unwinder error, counted by reason. */
static int wire_error(struct opal_counters *c, uint64_t err)
{
	switch (err) {
	case OPAL_UERR_NO_MAPPING:
	case OPAL_UERR_NO_PROCESS:
		c->frames_no_mapping++;
		return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING;
	case OPAL_UERR_TRUNCATED:
		c->frames_truncated++;
		return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_TRUNCATED;
	case OPAL_UERR_UNREADABLE:
		c->frames_unreadable_stack++;
		return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_UNREADABLE_STACK;
	case OPAL_UERR_NO_REGS:
		c->stack_errors++;
		return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_UNREADABLE_STACK;
	}
	/* no FDE, unrepresentable CFI, a lost register, a CFA that did not move */
	c->frames_no_unwind_info++;
	return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_UNWIND_INFO;
}

void opal_stack_add_user(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			 const uint64_t *pcs, const uint8_t *flags, size_t n)
{
	size_t n_addr = 0;

	if (n > OPAL_USTACK_SLOTS)
		n = OPAL_USTACK_SLOTS;
	while (n_addr < n && !(flags[n_addr] & OPAL_UFRAME_ERROR))
		n_addr++;
	opal_procs_refresh_for(t, p, pcs, n_addr);
	for (size_t i = 0; i < n; i++) {
		if (flags[i] & OPAL_UFRAME_ERROR) {
			opal_stack_add_error(s, wire_error(t->ctr, pcs[i]));
			return;
		}
		ssize_t idx = opal_procs_mapping_of(p, pcs[i]);
		/* Code runs only from executable mappings: anything else is a
		 * walk gone astray, so the stack ends there. */
		if (idx < 0 || !p->maps[idx].executable) {
			t->ctr->frames_no_mapping++;
			opal_stack_add_error(s, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);
			return;
		}
		struct opal_file *f;
		const struct opal_map_res *r = opal_procs_resolve(t, p, (size_t)idx, &f);
		const struct opal_map_entry *m = &p->maps[idx];
		uint64_t addr = pcs[i];
		if (r->state == OPAL_MAP_FILE &&
		    opal_elf_offset_to_vaddr(&f->elf, pcs[i] - m->start + m->offset, &addr) < 0)
			addr = pcs[i] - r->load_bias;   /* same result when a PT_LOAD holds it */
		const struct opal_mapping_desc *d = desc_for(s, p, (size_t)idx, r, f);
		if (!d || s->n_frames == OPAL_MAX_FRAMES)
			return;
		if (flags[i] & OPAL_UFRAME_FP)
			t->ctr->frames_fp_fallback++;
		s->frames[s->n_frames++] = (struct opal_frame){
			.address = addr,
			.mapping = d,
			.kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE,
			.return_address = (flags[i] & OPAL_UFRAME_RETURN) != 0,
		};
	}
}

bool opal_sample_event_valid(const void *data, size_t size)
{
	const struct opal_sample_event *ev = data;

	if (size < OPAL_SAMPLE_FIXED_SIZE)
		return false;
	if (!(ev->flags & OPAL_SAMPLE_DEFERRED))
		return true;
	return ev->stack_len <= OPAL_STACK_COPY &&
	       size >= OPAL_SAMPLE_FIXED_SIZE + (size_t)ev->stack_len;
}

/* A sample waiting for a table: its record, copied. */
struct parked {
	struct opal_list node;        /* in t->parked, oldest first */
	struct opal_proc *p;          /* held through p->n_parked */
	struct opal_unwind_file *uf;  /* the table waited for (a reference), or
				       * NULL: p's exit event with its VMAs */
	uint64_t since_ns;
	size_t size;
	union {
		struct opal_sample_event ev;   /* first `size` bytes valid */
		uint8_t bytes[1];
	} rec;
};

static size_t record_size(const struct opal_sample_event *ev)
{
	return OPAL_SAMPLE_FIXED_SIZE + (ev->flags & OPAL_SAMPLE_DEFERRED ? ev->stack_len : 0);
}

static bool park(struct opal_proc_table *t, struct opal_proc *p, struct opal_unwind_file *uf,
		 const struct opal_sample_event *ev)
{
	size_t size = record_size(ev);
	struct parked *k = malloc(offsetof(struct parked, rec) + size);

	if (!k)
		return false;
	k->p = p;
	k->uf = uf;
	k->since_ns = t->src->now_ns(t->src->ctx);
	k->size = size;
	memcpy(k->rec.bytes, ev, size);
	opal_list_add(t->parked.prev, &k->node);   /* at the tail */
	t->parked_bytes += size;
	p->n_parked++;
	return true;
}

/* Ends parked sample `k`: its references and memory. */
static void unpark_one(struct opal_proc_table *t, struct parked *k)
{
	opal_list_del(&k->node);
	t->parked_bytes -= k->size;
	if (t->unwind && k->uf)
		opal_unwind_file_put(t->unwind, k->uf, t->src->now_ns(t->src->ctx));
	opal_procs_unparked(t, k->p);
	free(k);
}

/* Translates `ev` of process `p`; may park it (returns 2) when `may_park`. */
static int translate_for(struct opal_proc_table *t, struct opal_proc *p,
			 const struct opal_sample_event *ev, struct opal_stack *out, bool may_park)
{
	size_t n;

	out->n_frames = 0;
	out->n_maps = 0;
	if (ev->kstack_n > 0)
		opal_stack_add_kernel(out, (const uint64_t *)ev->kstack,
				      ev->kstack_n > OPAL_MAX_STACK_DEPTH ? OPAL_MAX_STACK_DEPTH
									  : (size_t)ev->kstack_n);
	if (ev->ustack_n <= 0)
		return 0;   /* a kernel thread */
	n = ev->ustack_n > OPAL_USTACK_SLOTS ? OPAL_USTACK_SLOTS : (size_t)ev->ustack_n;
	memcpy(out->upcs, ev->ustack, n * sizeof(out->upcs[0]));
	memcpy(out->uflags, ev->uflags, n);
	if (ev->flags & (OPAL_SAMPLE_UNKNOWN_PROC | OPAL_SAMPLE_STALE))
		opal_procs_unwind_sync(t, p, ev);
	if ((ev->flags & OPAL_SAMPLE_DEFERRED) && !(out->uflags[n - 1] & OPAL_UFRAME_ERROR)) {
		/* gone before its maps could be read (no /proc/PID, or a
		 * zombie's empty maps): its exit event, right behind in the
		 * ring buffer, lists its VMAs */
		if (p->maps_read && p->n_maps == 0 && !p->gone && may_park && t->unwind && t->parked_bytes + record_size(ev) <= OPAL_PARK_MAX_BYTES &&
		    park(t, p, NULL, ev)) {
			p->await_exit = true;
			return 2;
		}
		struct opal_unwind_regs regs = ev->regs;
		struct opal_stack_copy copy = {
			.addr = ev->stack_addr,
			.data = ev->stack,
			.len = ev->stack_len,
			/* BPF copies pages until one is unreadable or the limit */
			.to_end = ev->stack_len < OPAL_STACK_COPY,
		};
		size_t n0 = n;
		bool may_wait = may_park && t->parked_bytes + record_size(ev) <= OPAL_PARK_MAX_BYTES;
		struct opal_unwind_file *uf = opal_procs_unwind_continue(t, p, &regs, &copy, out->upcs,
									 out->uflags, &n, may_wait);
		if (uf) {
			if (park(t, p, uf, ev))
				return 2;
			/* no memory to wait: finish the walk now */
			opal_unwind_file_put(t->unwind, uf, t->src->now_ns(t->src->ctx));
			regs = ev->regs;
			n = n0;
			opal_procs_unwind_continue(t, p, &regs, &copy, out->upcs, out->uflags, &n,
						   false);
		}
	}
	opal_stack_add_user(t, p, out, out->upcs, out->uflags, n);
	return 0;
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
	return translate_for(t, p, ev, out, true);
}

void opal_samples_unpark(struct opal_proc_table *t, bool all, int wait_ms,
			 opal_sample_emit_fn emit, void *ctx, struct opal_stack *scratch)
{
	struct opal_list *l, *next;

	if (!t->unwind)
		return;
	if (all)
		opal_unwind_maps_wait(t->unwind, wait_ms, t->src->now_ns(t->src->ctx));
	else
		opal_unwind_maps_poll(t->unwind, t->src->now_ns(t->src->ctx));
	/* a sample parked again goes to the tail, still BUILDING: skipped */
	for (l = t->parked.next; l != &t->parked; l = next) {
		struct parked *k = opal_container_of(l, struct parked, node);
		next = l->next;
		if (!all && k->uf && k->uf->state == OPAL_UFILE_BUILDING)
			continue;
		if (!all && !k->uf && k->p->await_exit &&
		    t->src->now_ns(t->src->ctx) - k->since_ns < OPAL_PARK_EXIT_WAIT_NS)
			continue;
		int r = translate_for(t, k->p, &k->rec.ev, scratch, !all);
		if (r == 0)
			emit(ctx, &k->rec.ev, k->p, scratch);
		unpark_one(t, k);
	}
}

void opal_samples_exit_maps(struct opal_proc_table *t, const void *data, size_t size)
{
	const struct opal_exit_event *e = data;
	struct opal_proc *p;

	if (size < sizeof(*e) || !(p = opal_procs_peek(t, (pid_t)e->pid)) || !p->await_exit)
		return;
	opal_procs_maps_from_vmas(t, p, e->vmas, e->n_vmas < OPAL_MAX_VMAS ? e->n_vmas
									: OPAL_MAX_VMAS);
	p->await_exit = false;
}

void opal_samples_drop_parked(struct opal_proc_table *t)
{
	struct opal_list *l;

	while ((l = opal_list_last(&t->parked)))
		unpark_one(t, opal_container_of(l, struct parked, node));
}
