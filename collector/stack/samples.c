/* Sample -> frames translation (samples.h). */
#include "stack/samples.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
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

/* The wire's UnwindError for an interpreter error entry, counted. */
static int wire_interp_error(struct opal_counters *c, uint64_t err)
{
	c->interp_frame_errors++;
	switch (err) {
	case OPAL_IERR_TRUNCATED:
		return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_TRUNCATED;
	case OPAL_IERR_BAD_FRAME:
		return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_BAD_FRAME;
	}
	return OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_UNREADABLE;
}

/* Where the placement of interpreter frames is. */
struct interp_cursor {
	const struct opal_stack_interp *in;
	size_t next;             /* first entry not placed */
	size_t evals_left;       /* native evaluation frames not reached yet */
};

/* Appends interpreter frames from c->next: one evaluation's, or with
 * `all` every one left. An error entry ends them all. Returns how many
 * evaluations' frames were appended (ended by an entry or a boundary). */
static size_t add_interp(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			 struct interp_cursor *c, bool all)
{
	const struct opal_stack_interp *in = c->in;
	size_t ended = 0;

	while (c->next < in->n && s->n_frames < OPAL_MAX_FRAMES) {
		const struct opal_interp_frame *f = &in->frames[c->next++];
		uint32_t fl = OPAL_IFRAME_FLAGS(f->lasti);
		uint64_t id = 0;
		if (fl & OPAL_IFRAME_ERROR) {
			opal_stack_add_error(s, wire_interp_error(t->ctr, f->code));
			c->next = in->n;
			return ended;
		}
		if (fl & OPAL_IFRAME_BOUNDARY) {
			ended++;
			if (!all)
				return ended;
			continue;
		}
		if (opal_interp_code_id(in->ip, p, f, &id) < 0)
			id = 0;   /* unnamed: its code object could not be copied */
		t->ctr->interp_frames++;
		s->frames[s->n_frames++] = (struct opal_frame){
			.address = fl & OPAL_IFRAME_NO_LASTI ? UINT32_MAX
							     : f->lasti & OPAL_IFRAME_LASTI_MASK,
			.code_id = id,
			.kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED,
		};
		ended += (fl & OPAL_IFRAME_ENTRY) != 0;
		if ((fl & OPAL_IFRAME_ENTRY) && !all)
			return ended;
	}
	return ended;
}

/* Interpreter frames no native evaluation frame took: before the
 * stack's end. */
static void add_interp_rest(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			    struct interp_cursor *c)
{
	if (c->in && c->next < c->in->n) {
		t->ctr->interp_unmatched++;
		add_interp(t, p, s, c, true);
	}
}

void opal_stack_add_user(struct opal_proc_table *t, struct opal_proc *p, struct opal_stack *s,
			 const uint64_t *pcs, const uint8_t *flags, size_t n,
			 const struct opal_stack_interp *interp)
{
	struct interp_cursor ic = { .in = interp && interp->n ? interp : NULL };
	size_t n_addr = 0;

	if (n > OPAL_USTACK_SLOTS)
		n = OPAL_USTACK_SLOTS;
	while (n_addr < n && !(flags[n_addr] & OPAL_UFRAME_ERROR))
		n_addr++;
	opal_procs_refresh_for(t, p, pcs, n_addr);
	for (size_t i = 0; ic.in && i < n_addr; i++)
		ic.evals_left += opal_interp_is_eval(p, pcs[i]);
	for (size_t i = 0; i < n; i++) {
		if (flags[i] & OPAL_UFRAME_ERROR) {
			add_interp_rest(t, p, s, &ic);
			opal_stack_add_error(s, wire_error(t->ctr, pcs[i]));
			return;
		}
		ssize_t idx = opal_procs_mapping_of(p, pcs[i]);
		/* Code runs only from executable mappings: anything else is a
		 * walk gone astray, so the stack ends there. */
		if (idx < 0 || !p->maps[idx].executable) {
			add_interp_rest(t, p, s, &ic);
			t->ctr->frames_no_mapping++;
			opal_stack_add_error(s, OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING);
			return;
		}
		if (ic.evals_left > 0 && opal_interp_is_eval(p, pcs[i])) {
			bool outermost = --ic.evals_left == 0;
			/* several evaluations at one native frame: one was missed */
			if (add_interp(t, p, s, &ic, outermost) > 1 && outermost)
				t->ctr->interp_unmatched++;
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
		bool jit = opal_maps_is_jit(m);
		if (jit) {
			t->ctr->jit_frames++;
			s->jit = true;
		}
		s->frames[s->n_frames++] = (struct opal_frame){
			.address = addr,
			.mapping = d,
			.kind = jit ? OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_JIT
				    : OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE,
			.return_address = (flags[i] & OPAL_UFRAME_RETURN) != 0,
		};
	}
	add_interp_rest(t, p, s, &ic);
}

bool opal_sample_event_valid(const void *data, size_t size)
{
	const struct opal_sample_event *ev = data;

	if (size < OPAL_SAMPLE_HEAD_SIZE)
		return false;
	if (!(ev->flags & OPAL_SAMPLE_DEFERRED))
		return ev->iframes_n <= OPAL_INTERP_SLOTS &&
		       size >= OPAL_SAMPLE_HEAD_SIZE + ev->iframes_n * sizeof(ev->iframes[0]);
	uint64_t sum = 0;
	for (size_t i = 0; i < OPAL_STACK_REGIONS; i++)
		sum += ev->regions[i].len;
	return ev->stack_len <= OPAL_STACK_COPY && sum == ev->stack_len &&
	       size >= OPAL_SAMPLE_FIXED_SIZE + (size_t)ev->stack_len;
}

void opal_stacks_init(struct opal_stacks *s, struct opal_proc_table *procs,
		      struct opal_unwinder *unwind, struct opal_interp *interp,
		      struct opal_counters *ctr)
{
	*s = (struct opal_stacks){ .procs = procs, .unwind = unwind, .interp = interp, .ctr = ctr };
	opal_list_init(&s->parked);
}

/* A sample waiting for a table or its process's exit event: its record,
 * copied. */
struct parked {
	struct opal_list node;        /* in s->parked, oldest first */
	struct opal_proc *p;          /* pinned */
	struct opal_unwind_file *uf;  /* the table waited for (a reference), or
				       * NULL: p's exit event with its VMAs */
	bool awaits_exit;             /* uf == NULL and the exit event not seen */
	uint64_t since_ns;
	size_t size;
	union {
		struct opal_sample_event ev;   /* first `size` bytes valid */
		uint8_t bytes[1];
	} rec;
};

static uint64_t now_ns(const struct opal_stacks *s)
{
	return s->procs->src->now_ns(s->procs->src->ctx);
}

static size_t record_size(const struct opal_sample_event *ev)
{
	if (ev->flags & OPAL_SAMPLE_DEFERRED)
		return OPAL_SAMPLE_FIXED_SIZE + ev->stack_len;
	return OPAL_SAMPLE_HEAD_SIZE + ev->iframes_n * sizeof(ev->iframes[0]);
}

static bool may_park(const struct opal_stacks *s, const struct opal_sample_event *ev)
{
	return s->parked_bytes + record_size(ev) <= OPAL_PARK_MAX_BYTES;
}

static bool park(struct opal_stacks *s, struct opal_proc *p, struct opal_unwind_file *uf,
		 const struct opal_sample_event *ev)
{
	size_t size = record_size(ev);
	struct parked *k = malloc(offsetof(struct parked, rec) + size);

	if (!k)
		return false;
	k->p = p;
	k->uf = uf;
	k->awaits_exit = uf == NULL;
	k->since_ns = now_ns(s);
	k->size = size;
	memcpy(k->rec.bytes, ev, size);
	opal_list_add(s->parked.prev, &k->node);   /* at the tail */
	s->parked_bytes += size;
	opal_procs_pin(p);
	return true;
}

/* Ends parked sample `k`: its references and memory. */
static void unpark_one(struct opal_stacks *s, struct parked *k)
{
	opal_list_del(&k->node);
	s->parked_bytes -= k->size;
	if (s->unwind && k->uf)
		opal_unwind_file_put(s->unwind->maps, k->uf, now_ns(s));
	opal_procs_unpin(s->procs, k->p);
	free(k);
}

/* The regions of deferred sample `ev` (checked by opal_sample_event_valid)
 * as the userspace walk reads them. */
static void stack_copy_of(const struct opal_sample_event *ev, struct opal_stack_copy *c)
{
	size_t at = 0;

	c->n = 0;
	for (size_t i = 0; i < OPAL_STACK_REGIONS; i++) {
		const struct opal_stack_region *r = &ev->regions[i];
		if (r->len == 0)
			continue;
		c->r[c->n++] = (struct opal_stack_copy_region){
			.addr = r->addr,
			.data = ev->stack + at,
			.len = r->len,
			.to_end = (r->flags & OPAL_REGION_END) != 0,
		};
		at += r->len;
	}
}

/* Translates `ev` of process `p`; may park it when `parking`. */
static int translate_for(struct opal_stacks *s, struct opal_proc *p,
			 const struct opal_sample_event *ev, struct opal_stack *out, bool parking)
{
	struct opal_stack_interp in = { .ip = s->interp, .frames = ev->iframes };
	size_t n;

	out->n_frames = 0;
	out->n_maps = 0;
	out->jit = false;
	if (ev->kstack_n > 0)
		opal_stack_add_kernel(out, (const uint64_t *)ev->kstack,
				      ev->kstack_n > OPAL_MAX_STACK_DEPTH ? OPAL_MAX_STACK_DEPTH
									  : (size_t)ev->kstack_n);
	if (ev->ustack_n <= 0)
		return OPAL_TRANSLATED;   /* a kernel thread */
	n = ev->ustack_n > OPAL_USTACK_SLOTS ? OPAL_USTACK_SLOTS : (size_t)ev->ustack_n;
	memcpy(out->upcs, ev->ustack, n * sizeof(out->upcs[0]));
	memcpy(out->uflags, ev->uflags, n);
	if (s->unwind && (ev->flags & (OPAL_SAMPLE_UNKNOWN_PROC | OPAL_SAMPLE_STALE)))
		opal_unwinder_sync(s->unwind, p, ev);
	/* gone before its maps could be read, or since they were (no
	 * /proc/PID, or a zombie's empty maps): its exit event, right behind
	 * in the ring buffer, lists its VMAs (unless it came already) */
	if (s->unwind && p->maps_read && (p->n_maps == 0 || p->maps_err == -ESRCH) && !p->gone &&
	    !p->exited &&
	    parking && may_park(s, ev) && park(s, p, NULL, ev))
		return OPAL_TRANSLATE_PARKED;
	if (s->interp) {
		opal_interp_sync(s->interp, p);
		in.n = ev->iframes_n < OPAL_INTERP_SLOTS ? ev->iframes_n : OPAL_INTERP_SLOTS;
	}
	if ((ev->flags & OPAL_SAMPLE_DEFERRED) && !(out->uflags[n - 1] & OPAL_UFRAME_ERROR)) {
		if (!s->unwind) {
			if (n < OPAL_USTACK_SLOTS) {
				out->upcs[n] = OPAL_UERR_NO_UNWIND_INFO;
				out->uflags[n++] = OPAL_UFRAME_ERROR;
			}
			opal_stack_add_user(s->procs, p, out, out->upcs, out->uflags, n, &in);
			return OPAL_TRANSLATED;
		}
		struct opal_unwind_regs regs = ev->regs;
		struct opal_stack_copy copy;
		stack_copy_of(ev, &copy);
		size_t n0 = n;
		bool may_wait = parking && may_park(s, ev);
		if (parking && !may_wait)
			s->ctr->samples_park_full++;
		struct opal_unwind_file *uf = opal_unwinder_continue(s->unwind, p, &regs, &copy,
								     out->upcs, out->uflags, &n,
								     may_wait);
		if (uf) {
			if (park(s, p, uf, ev))
				return OPAL_TRANSLATE_PARKED;
			/* no memory to wait: finish the walk now */
			opal_unwind_file_put(s->unwind->maps, uf, now_ns(s));
			regs = ev->regs;
			n = n0;
			opal_unwinder_continue(s->unwind, p, &regs, &copy, out->upcs, out->uflags, &n,
					       false);
		}
	}
	opal_stack_add_user(s->procs, p, out, out->upcs, out->uflags, n, &in);
	return OPAL_TRANSLATED;
}

int opal_translate_sample(struct opal_stacks *s, const struct opal_sample_event *ev,
			  struct opal_proc **proc, struct opal_stack *out)
{
	struct opal_proc *p = opal_procs_get(s->procs, (pid_t)ev->pid);

	out->n_frames = 0;
	out->n_maps = 0;
	out->jit = false;
	*proc = p;
	if (!p)
		return -ENOMEM;
	if (p->excluded) {
		s->ctr->samples_self++;
		return OPAL_TRANSLATE_EXCLUDED;
	}
	return translate_for(s, p, ev, out, true);
}

void opal_stacks_notice(struct opal_stacks *s, const struct opal_sample_event *ev)
{
	struct opal_proc *p = opal_procs_get(s->procs, (pid_t)ev->pid);

	if (!p || p->excluded || ev->ustack_n <= 0)
		return;
	if (s->unwind && (ev->flags & (OPAL_SAMPLE_UNKNOWN_PROC | OPAL_SAMPLE_STALE)))
		opal_unwinder_sync(s->unwind, p, ev);
	if (s->interp)
		opal_interp_sync(s->interp, p);
}

void opal_stacks_unpark(struct opal_stacks *s, bool all, int wait_ms, opal_sample_emit_fn emit,
			void *ctx, struct opal_stack *scratch)
{
	struct opal_list *l, *next;

	if (s->unwind && all)
		opal_unwind_maps_wait(s->unwind->maps, wait_ms, now_ns(s));
	else if (s->unwind)
		opal_unwind_maps_poll(s->unwind->maps, now_ns(s));
	/* a sample parked again goes to the tail, still BUILDING: skipped */
	for (l = s->parked.next; l != &s->parked; l = next) {
		struct parked *k = opal_container_of(l, struct parked, node);
		next = l->next;
		if (!all && k->uf && k->uf->state == OPAL_UFILE_BUILDING)
			continue;
		if (!all && k->awaits_exit && now_ns(s) - k->since_ns < OPAL_PARK_EXIT_WAIT_NS)
			continue;
		if (translate_for(s, k->p, &k->rec.ev, scratch, !all) == OPAL_TRANSLATED)
			emit(ctx, &k->rec.ev, k->p, scratch);
		unpark_one(s, k);
	}
}

void opal_stacks_exit_maps(struct opal_stacks *s, const void *data, size_t size)
{
	const struct opal_exit_event *e = data;
	struct opal_proc *p;
	bool awaited = false;

	/* only a pinned process can have samples waiting */
	if (size < sizeof(*e) || !(p = opal_procs_peek(s->procs, (pid_t)e->pid)) || p->pins == 0)
		return;
	for (struct opal_list *l = s->parked.next; l != &s->parked; l = l->next) {
		struct parked *k = opal_container_of(l, struct parked, node);
		if (k->p == p && k->awaits_exit) {
			k->awaits_exit = false;
			awaited = true;
		}
	}
	if (awaited && e->n_vmas > 0)
		opal_procs_maps_from_vmas(s->procs, p, e->vmas,
					  e->n_vmas < OPAL_MAX_VMAS ? e->n_vmas : OPAL_MAX_VMAS);
}

void opal_stacks_destroy(struct opal_stacks *s)
{
	struct opal_list *l;

	while ((l = opal_list_last(&s->parked)))
		unpark_one(s, opal_container_of(l, struct parked, node));
}
