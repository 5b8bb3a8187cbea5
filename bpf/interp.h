/* Interpreter frames shared by the BPF sampler and the collector: the walk
 * parameters the collector installs per process, and the frames BPF
 * records. Included by BPF code after vmlinux.h and by userspace C, so
 * only __u8/__u16/__u32/__u64-style types and plain macros are used.
 * Design: docs/interpreters.md. */
#ifndef OPAL_BPF_INTERP_H
#define OPAL_BPF_INTERP_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Interpreter frames recorded per sample, innermost first, plus one slot
 * for a final truncation or error entry. */
#define OPAL_MAX_INTERP_FRAMES 256
#define OPAL_INTERP_SLOTS      (OPAL_MAX_INTERP_FRAMES + 1)

/* Processes with interpreter walk parameters (interp_procs entries). */
#define OPAL_INTERP_MAX_PROCS  4096
/* Threads whose thread state BPF remembers (interp_threads entries). */
#define OPAL_INTERP_MAX_THREADS 16384
/* Thread states looked at when searching a thread's own (its thread_id
 * is the thread's FS base): the list of the main interpreter, newest
 * first. */
#define OPAL_PY_MAX_THREADS    256
/* A thread found without a thread state is searched again (it may create
 * one later: a process set up at exec is sampled before its interpreter
 * has one) after OPAL_PY_RETRY_MIN_NS, doubled at each miss up to
 * OPAL_PY_RETRY_MIN_NS << OPAL_PY_RETRY_DOUBLINGS (~1 s). */
#define OPAL_PY_RETRY_MIN_NS   8000000ull
#define OPAL_PY_RETRY_DOUBLINGS 7u

/* How a version chains its frames (struct opal_py_walk.model). */
enum opal_py_model {
	/* 3.8-3.10: PyFrameObject via f_back, one per C-level evaluation */
	OPAL_PY_FRAME_OBJECTS = 1,
	/* 3.11: _PyInterpreterFrame via previous; the frame that entered the
	 * evaluation loop has is_entry set */
	OPAL_PY_ENTRY_FLAG = 2,
	/* 3.12+: the evaluation loop pushes a shim frame owned by the C stack
	 * (owner == FRAME_OWNED_BY_CSTACK) below the frames it runs */
	OPAL_PY_CSTACK_OWNER = 3,
};

/* Where the thread state keeps its innermost frame (ts_frame). */
#define OPAL_PY_NO_OFFSET 0xffffu   /* field absent in this version */

/* Walk parameters of one CPython process, written by the collector
 * (collector/interp/) into interp_procs[tgid]. Addresses are the
 * process's own; offsets are bytes into the structure named. */
struct opal_py_walk {
	__u64 runtime;              /* address of _PyRuntime */
	__u32 version;              /* PY_VERSION_HEX >> 16: 0x030b for 3.11 */
	__u8 model;                 /* enum opal_py_model */
	__u8 lasti_units;           /* FRAME_OBJECTS: f_lasti counts code units (3.10), else bytes */
	__u16 rt_interp_main;       /* _PyRuntime -> main PyInterpreterState * */
	__u16 interp_threads;       /* PyInterpreterState -> newest PyThreadState * */
	__u16 ts_next;              /* PyThreadState -> next (older) thread state */
	__u16 ts_thread_id;         /* PyThreadState -> thread_id: pthread_self(),
				     * which is the thread pointer (FS base) on
				     * x86-64 */
	__u16 ts_cframe;            /* PyThreadState -> _PyCFrame * (3.11, 3.12), else NO_OFFSET */
	__u16 ts_frame;             /* innermost frame: in PyThreadState, or in the
				     * _PyCFrame when ts_cframe is set */
	__u16 f_previous;           /* frame -> older frame (f_back / previous) */
	__u16 f_code;               /* frame -> code object (f_code / f_executable) */
	__u16 f_instr;              /* FRAME_OBJECTS: int f_lasti; else the
				     * instruction pointer (prev_instr / instr_ptr) */
	__u16 f_entry;              /* ENTRY_FLAG: is_entry (u8); CSTACK_OWNER: owner (u8) */
	__u16 code_units;           /* code object -> first code unit (co_code_adaptive), 3.11+ */
	__u16 code_firstlineno;     /* code object -> co_firstlineno (int) */
	__u16 code_name;            /* code object -> co_name (for the check value) */
	__u8 cstack_owner;          /* CSTACK_OWNER: FRAME_OWNED_BY_CSTACK's value */
	__u8 pad[3];
};

/* Interpreter files whose processes BPF sets up itself (interp_files
 * entries): at exec, at fork, or at a sample, before the collector has
 * read the new process's maps (bpf/interp_early.h). */
#define OPAL_INTERP_BPF_FILES  256

/* An interpreter file as the kernel names its inode. Size and mtime too,
 * so that a file rewritten in place, or a new file given a freed inode
 * number, is not taken for it. */
struct opal_interp_file_key {
	__u32 dev;                  /* i_sb->s_dev: major << 20 | minor */
	__u32 mtime_nsec;
	__u64 ino;
	__u64 size;                 /* i_size, bytes */
	__s64 mtime_sec;
};

/* How BPF sets up a process of an interpreter file (interp_files value):
 * the walk parameters with ELF virtual addresses (walk.runtime is
 * _PyRuntime's st_value), made the process's own by adding the load bias
 * it finds at exec (mm->start_code - exec_vaddr) or from the VMA of the
 * file's text a sample's PC is in (its start - text_vaddr). */
struct opal_interp_file {
	struct opal_py_walk walk;
	__u64 exec_vaddr;           /* lowest p_vaddr of an executable PT_LOAD:
				     * what binfmt_elf adds the load bias to for
				     * mm->start_code */
	__u64 text_vaddr;           /* that PT_LOAD's p_vaddr and p_offset, both */
	__u64 text_offset;          /* rounded down to the page: its VMA's start
				     * and file offset (ld.so maps it so) */
};

/* One recorded interpreter frame. `code` is the code object's address;
 * `lasti` the code unit index of the instruction executing in it (in the
 * low 24 bits; OPAL_IFRAME_* in the high 8); `check` a value derived from
 * the code object (co_firstlineno and co_name's address) so that a code
 * object freed and another allocated at the same address is noticed.
 * For an OPAL_IFRAME_ERROR entry `code` holds an enum opal_interp_err. */
struct opal_interp_frame {
	__u64 code;
	__u32 lasti;
	__u32 check;
};

#define OPAL_IFRAME_LASTI_MASK 0x00ffffffu
#define OPAL_IFRAME_FLAGS(lasti) ((lasti) >> 24)
/* The last frame run by one C-level evaluation (the native frame of the
 * evaluation function that runs it comes next on the native stack). */
#define OPAL_IFRAME_ENTRY 1u
#define OPAL_IFRAME_ERROR 2u   /* not a frame: `code` holds the reason */
#define OPAL_IFRAME_NO_LASTI 4u /* the frame has not started executing */
/* Not a frame: the end of one C-level evaluation's frames (3.12+: its
 * shim frame), which may have run none yet. */
#define OPAL_IFRAME_BOUNDARY 8u

/* Why interpreter frames stopped early (an OPAL_IFRAME_ERROR entry). */
enum opal_interp_err {
	OPAL_IERR_READ = 1,         /* a read of the interpreter's memory failed */
	OPAL_IERR_TRUNCATED = 2,    /* more than OPAL_MAX_INTERP_FRAMES frames */
	OPAL_IERR_BAD_FRAME = 3,    /* an implausible frame (loop, offset out of range) */
	OPAL_IERR_MAX,
};

/* A thread's state as BPF last found it (interp_threads[tid]). */
struct opal_py_thread {
	__u64 tstate;      /* PyThreadState address, 0: none found */
	__u64 found_ns;    /* when it was looked for */
	__u32 pid;         /* the process it was found in */
	__u32 misses;      /* searches in a row that found none */
};

#endif
