/* CPython as an opal runtime (python_proc.h). */
#include "interp/python_proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "interp/python_debug_offsets.h"
#include "interp/python_layout.h"
#include "interp/python_probe.h"

/* Bytes copied of each object a code object points to: a name or
 * qualified name, the file name, the line table (beyond: cut, counted). */
#define NAME_DATA_MAX     1024u
#define FILENAME_DATA_MAX 4096u
#define LINETABLE_MAX     (64u << 10)
/* Object headers read to learn an object's length (PyCompactUnicodeObject
 * and PyBytesObject are below this in every supported version). */
#define HEADER_MAX        128u

/* What a file's probe found. */
struct py_info {
	struct opal_py_probe probe;
	struct opal_py_offsets off;   /* from the table, or the file's _Py_DebugOffsets */
};

/* One process's interpreter. */
struct py_state {
	struct opal_py_offsets off;
	uint64_t code_type;           /* runtime address of PyCode_Type, 0 when unknown */
	Opal__Wire__V1__CPythonLayout layout;
};

static int probe_file(int fd, void **info, const char **why)
{
	static __thread char reason[256];
	struct py_info *pi = calloc(1, sizeof(*pi));
	uint8_t dbg[OPAL_PY_DEBUG_OFFSETS_313_SIZE];
	int err;

	if (!pi)
		return -ENOMEM;
	err = opal_py_probe_elf(fd, &pi->probe, reason, sizeof(reason));
	if (err == 0 && pi->probe.minor >= 13 &&
	    opal_py_read_vaddr(fd, pi->probe.runtime.vaddr, dbg, sizeof(dbg)) == 0)
		err = opal_py_offsets_from_debug(dbg, sizeof(dbg), pi->probe.runtime.size, &pi->off,
						 NULL, reason, sizeof(reason));
	else if (err == 0 &&
		 opal_py_offsets_for_build(pi->probe.major, pi->probe.minor, pi->probe.runtime.size,
					   &pi->off) < 0) {
		snprintf(reason, sizeof(reason), "no layout for CPython %u.%u with a %llu-byte "
			 "_PyRuntime", pi->probe.major, pi->probe.minor,
			 (unsigned long long)pi->probe.runtime.size);
		err = -ENOTSUP;
	}
	if (err < 0) {
		free(pi);
		*why = reason;
		return err == -ENOENT || err == -ENOEXEC ? -ENOENT : -ENOTSUP;
	}
	*info = pi;
	return 0;
}

static void free_info(void *info)
{
	free(info);
}

static int read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint16_t u16_or_none(uint32_t off)
{
	return off == OPAL_PY_NONE || off > UINT16_MAX ? UINT16_MAX : (uint16_t)off;
}

/* The offsets BPF walks with (bpf/interp.h), from `o`. */
static int walk_params(const struct opal_py_offsets *o, uint64_t runtime, struct opal_py_walk *w)
{
	memset(w, 0, sizeof(*w));
	w->runtime = runtime;
	w->version = (uint32_t)o->major << 8 | o->minor;
	w->rt_interp_main = u16_or_none(o->runtime.interpreters_main != OPAL_PY_NONE
						? o->runtime.interpreters_main
						: o->runtime.interpreters_head);
	w->interp_threads = u16_or_none(o->interp.threads_head);
	w->ts_next = u16_or_none(o->tstate.next);
	w->ts_thread_id = u16_or_none(o->tstate.thread_id);
	w->ts_cframe = OPAL_PY_NO_OFFSET;
	w->f_previous = u16_or_none(o->frame.previous);
	w->f_code = u16_or_none(o->frame.code);
	w->f_instr = u16_or_none(o->frame.instr);
	w->code_firstlineno = u16_or_none(o->code.firstlineno);
	w->code_name = u16_or_none(o->code.name);
	w->code_units = o->code.code_adaptive == OPAL_PY_NONE ? 0 : u16_or_none(o->code.code_adaptive);
	switch (o->frames) {
	case OPAL_PY_FRAMES_OBJECT:
		w->model = OPAL_PY_FRAME_OBJECTS;
		w->ts_frame = u16_or_none(o->tstate.frame);
		w->lasti_units = o->instr == OPAL_PY_INSTR_LASTI_UNITS;
		break;
	case OPAL_PY_FRAMES_CFRAME_ENTRY:
		w->model = OPAL_PY_ENTRY_FLAG;
		w->ts_cframe = u16_or_none(o->tstate.cframe);
		w->ts_frame = u16_or_none(o->cframe.current_frame);
		w->f_entry = u16_or_none(o->frame.is_entry);
		break;
	case OPAL_PY_FRAMES_CFRAME_CSTACK:
	case OPAL_PY_FRAMES_CURRENT_CSTACK:
		w->model = OPAL_PY_CSTACK_OWNER;
		if (o->frames == OPAL_PY_FRAMES_CFRAME_CSTACK) {
			w->ts_cframe = u16_or_none(o->tstate.cframe);
			w->ts_frame = u16_or_none(o->cframe.current_frame);
		} else {
			w->ts_frame = u16_or_none(o->tstate.current_frame);
		}
		w->f_entry = u16_or_none(o->frame.owner);
		w->cstack_owner = o->frame.owner_cstack;
		break;
	default:
		return -ENOTSUP;
	}
	/* every member the walk reads must exist */
	const uint16_t need[] = { w->rt_interp_main, w->interp_threads, w->ts_next,
				  w->ts_thread_id, w->ts_frame, w->f_previous, w->f_code,
				  w->f_instr, w->code_firstlineno, w->code_name };
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (need[i] == UINT16_MAX)
			return -ENOTSUP;
	if (w->model != OPAL_PY_FRAME_OBJECTS && (w->f_entry == UINT16_MAX || !w->code_units))
		return -ENOTSUP;
	return 0;
}

void opal_py_wire_layout(const struct opal_py_offsets *o, Opal__Wire__V1__CPythonLayout *l)
{
	opal__wire__v1__cpython_layout__init(l);
	l->major = o->major;
	l->minor = o->minor;
	l->firstlineno = u16_or_none(o->code.firstlineno);
	l->name = u16_or_none(o->code.name);
	l->qualname = u16_or_none(o->code.qualname);
	l->filename = u16_or_none(o->code.filename);
	l->linetable = u16_or_none(o->code.linetable);
	l->ob_size = u16_or_none(o->code.ob_size);
	l->unicode_length = u16_or_none(o->unicode.length);
	l->unicode_state = u16_or_none(o->unicode.state);
	l->unicode_ascii_size = u16_or_none(o->unicode.ascii_size);
	l->unicode_compact_size = u16_or_none(o->unicode.compact_size);
	l->kind_shift = o->unicode.kind_shift;
	l->compact_shift = o->unicode.compact_shift;
	l->ascii_shift = o->unicode.ascii_shift;
	l->bytes_ob_size = u16_or_none(o->bytes.ob_size);
	l->bytes_ob_sval = u16_or_none(o->bytes.ob_sval);
}

static int setup(const void *info, pid_t pid, uint64_t bias, struct opal_interp_setup *out,
		 const char **why)
{
	static __thread char reason[256];
	const struct py_info *pi = info;
	const struct opal_py_probe *pr = &pi->probe;
	struct py_state *st = calloc(1, sizeof(*st));
	uint64_t runtime = pr->runtime.vaddr + bias;
	uint8_t dbg[OPAL_PY_DEBUG_OFFSETS_313_SIZE];

	if (!st)
		return -ENOMEM;
	st->off = pi->off;
	/* an interpreter that publishes its layout: the process's own copy */
	if (pr->minor >= 13 && read_mem(pid, runtime, dbg, sizeof(dbg)) == 0 &&
	    opal_py_offsets_from_debug(dbg, sizeof(dbg), pr->runtime.size, &st->off, NULL, reason,
				       sizeof(reason)) < 0) {
		*why = reason;
		free(st);
		return -ENOTSUP;
	}
	memset(out, 0, sizeof(*out));
	if (walk_params(&st->off, runtime, &out->walk) < 0) {
		*why = "a member the frame walk needs is missing from the layout";
		free(st);
		return -ENOTSUP;
	}
	out->eval_start[0] = pr->eval.vaddr + bias;
	out->eval_limit[0] = pr->eval.vaddr + pr->eval.size + bias;
	out->n_eval = 1;
	if (pr->eval_cold.found) {
		out->eval_start[1] = pr->eval_cold.vaddr + bias;
		out->eval_limit[1] = pr->eval_cold.vaddr + pr->eval_cold.size + bias;
		out->n_eval = 2;
	}
	st->code_type = pr->code_type.found ? pr->code_type.vaddr + bias : 0;
	opal_py_wire_layout(&st->off, &st->layout);
	out->state = st;
	return 0;
}

static void free_state(void *state)
{
	free(state);
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Copies the object at `addr` into *at (advanced), at most `cap` bytes
 * of its data after its header: a str (`is_str`) or a bytes object, whose
 * length is read from its header (and nothing else of it). Sets *capped
 * when cut. An absent object (0) copies nothing. */
static int copy_object(const struct opal_py_offsets *o, pid_t pid, uint64_t addr, bool is_str,
		       size_t cap, uint8_t **at, const uint8_t *end, ProtobufCBinaryData *out,
		       bool *capped)
{
	uint8_t hdr[HEADER_MAX];
	uint64_t data_off, data_len;
	int err;

	out->len = 0;
	out->data = NULL;
	if (!addr)
		return 0;
	if ((err = read_mem(pid, addr, hdr, sizeof(hdr))) < 0)
		return err;
	if (is_str) {
		if (o->unicode.length + 8 > sizeof(hdr) || o->unicode.state + 4 > sizeof(hdr))
			return -EINVAL;
		uint32_t state;
		memcpy(&state, hdr + o->unicode.state, sizeof(state));
		uint64_t kind = (state >> o->unicode.kind_shift) & 7;
		bool ascii = (state >> o->unicode.ascii_shift) & 1;
		data_off = ascii ? o->unicode.ascii_size : o->unicode.compact_size;
		data_len = get_u64(hdr + o->unicode.length);
		if (kind != 1 && kind != 2 && kind != 4)
			return -EINVAL;
		if (data_len > (1u << 30))
			return -EINVAL;
		data_len = (data_len + 1) * kind;   /* with its NUL */
	} else {
		if (o->bytes.ob_size + 8 > sizeof(hdr))
			return -EINVAL;
		data_off = o->bytes.ob_sval;
		data_len = get_u64(hdr + o->bytes.ob_size);
		if (data_len > (1u << 30))
			return -EINVAL;
		data_len += 1;
	}
	if (data_len > cap) {
		data_len = cap;
		*capped = true;
	}
	size_t total = data_off + data_len;
	if (total > (size_t)(end - *at))
		return -ENOSPC;
	if ((err = read_mem(pid, addr, *at, total)) < 0)
		return err;
	out->data = *at;
	out->len = total;
	*at += total;
	return 0;
}

static int copy_code(const void *state, pid_t pid, uint64_t addr, uint32_t check,
		     Opal__Wire__V1__CodeObject *msg, uint8_t *buf, size_t buf_len, bool *capped)
{
	const struct py_state *st = state;
	const struct opal_py_offsets *o = &st->off;
	uint8_t *at = buf, *end = buf + buf_len;
	size_t size = o->code.copy_size;
	int32_t first_line;
	int err;

	if (size > buf_len || size < o->code.firstlineno + 4 || size < o->code.name + 8)
		return -EINVAL;
	if ((err = read_mem(pid, addr, at, size)) < 0)
		return err;
	memcpy(&first_line, at + o->code.firstlineno, sizeof(first_line));
	/* the check BPF computed (interp_python.h): another object at the address since */
	if (((uint32_t)first_line ^ (uint32_t)(get_u64(at + o->code.name) >> 4)) != check)
		return -ESTALE;
	if (st->code_type && o->object.ob_type != OPAL_PY_NONE &&
	    get_u64(at + o->object.ob_type) != st->code_type)
		return -ESTALE;   /* 3.13: f_executable need not be a code object */
	msg->runtime = OPAL__WIRE__V1__RUNTIME__RUNTIME_CPYTHON;
	msg->cpython = (Opal__Wire__V1__CPythonLayout *)&st->layout;
	msg->code.data = at;
	msg->code.len = size;
	at += size;
	const uint8_t *code = msg->code.data;
	struct {
		uint32_t off;
		bool is_str;
		size_t cap;
		ProtobufCBinaryData *out;
	} parts[] = {
		{ o->code.name, true, NAME_DATA_MAX, &msg->name },
		{ o->code.qualname, true, NAME_DATA_MAX, &msg->qualname },
		{ o->code.filename, true, FILENAME_DATA_MAX, &msg->filename },
		{ o->code.linetable, false, LINETABLE_MAX, &msg->line_table },
	};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if (parts[i].off == OPAL_PY_NONE || parts[i].off + 8 > size)
			continue;
		err = copy_object(o, pid, get_u64(code + parts[i].off), parts[i].is_str,
				  parts[i].cap, &at, end, parts[i].out, capped);
		if (err < 0)
			return err;
	}
	return 0;
}

const struct opal_runtime opal_runtime_cpython = {
	.name = "cpython",
	.probe_file = probe_file,
	.free_info = free_info,
	.setup = setup,
	.free_state = free_state,
	.copy_code = copy_code,
};
