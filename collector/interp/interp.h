/* Interpreter frames, the collector's part: which processes run an
 * interpreter opal knows (a runtime, struct opal_runtime: CPython in
 * python_proc.c), the walk parameters BPF needs for them (bpf/interp.h),
 * the evaluation function's ranges that place interpreter frames among
 * native ones, and the raw bytes of the code objects their frames name
 * (code_cache.h), which go to the symbolizer unparsed.
 *
 * A process is looked at once per read of its maps (the first sample
 * after): each executable file mapping's file is probed once per file ID
 * (results kept for OPAL_INTERP_MAX_FILES files, least recently used
 * forgotten). Per-process state follows the process table's entries
 * through its hooks. docs/interpreters.md. */
#ifndef OPAL_COLLECTOR_INTERP_H
#define OPAL_COLLECTOR_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/counters.h"
#include "base/htab.h"
#include "base/list.h"
#include "bpf/interp.h"
#include "interp/code_cache.h"
#include "proc/proc_table.h"

#define OPAL_INTERP_MAX_FILES 8192   /* probe results kept, by file ID */
#define OPAL_INTERP_MAX_EVAL  4      /* evaluation function ranges per process */
#define OPAL_PAGE_SIZE        4096u  /* x86-64's: how ld.so and binfmt_elf align segments */

/* What a runtime found in one process. */
struct opal_interp_setup {
	/* runtime address ranges of the evaluation function (its hot and
	 * cold parts), [start, limit) */
	uint64_t eval_start[OPAL_INTERP_MAX_EVAL], eval_limit[OPAL_INTERP_MAX_EVAL];
	size_t n_eval;
	struct opal_py_walk walk;     /* BPF walk parameters */
	void *state;                  /* the runtime's own, freed with free_state */
};

/* One interpreter runtime. */
struct opal_runtime {
	const char *name;             /* "cpython" (docs, logs) */
	/* Is the ELF file `fd` (borrowed) an interpreter of this runtime?
	 * Returns 0 and *info (the runtime's own, freed with free_info),
	 * -ENOENT when it is not, or another -errno (an interpreter whose
	 * layout is unknown: -ENOTSUP, with *why set to a static reason). */
	int (*probe_file)(int fd, void **info, const char **why);
	void (*free_info)(void *info);
	/* Sets process `pid` up, whose mapping of the probed file has load
	 * bias `bias` (runtime address = ELF vaddr + bias). May read the
	 * process's memory. Returns 0 or -errno (*why set). */
	int (*setup)(const void *info, pid_t pid, uint64_t bias, struct opal_interp_setup *out,
		     const char **why);
	void (*free_state)(void *state);
	/* Copies the code object at `addr` of `pid` into `msg` (byte fields
	 * pointing into `buf`, buf_len bytes; *capped set when a part was cut
	 * at its bound). Returns 0, -ESTALE when it no longer matches
	 * `check`, or -errno. */
	int (*copy_code)(const void *state, pid_t pid, uint64_t addr, uint32_t check,
			 Opal__Wire__V1__CodeObject *msg, uint8_t *buf, size_t buf_len,
			 bool *capped);
};

/* Scratch a runtime's copy_code may fill: the largest code object copy. */
#define OPAL_INTERP_CODE_COPY_MAX (96u << 10)

struct opal_interp {
	/* the runtimes probed, in order: opal_interp_init sets opal's own
	 * (CPython); tests may replace them before the first sync */
	const struct opal_runtime *const *runtimes;
	size_t n_runtimes;
	struct opal_proc_table *procs;
	int walk_map_fd;              /* BPF interp_procs, or -1 (tests) */
	struct opal_counters *ctr;
	struct opal_code_cache codes;
	struct opal_htab files;       /* probe results by file ID */
	struct opal_list files_lru;
	size_t n_files;
	uint8_t *copy_buf;            /* OPAL_INTERP_CODE_COPY_MAX bytes */
	int tctx_map_fd;              /* BPF tctx_procs (bpf/thread_ctx.h), or -1 */
	int files_map_fd;             /* BPF interp_files (bpf/interp_early.h), or -1 */
};

/* `procs` and `ctr` are borrowed; adds hooks to `procs`. Returns 0 or
 * -ENOMEM / -ENOSPC. */
int opal_interp_init(struct opal_interp *ip, struct opal_proc_table *procs, int walk_map_fd,
		     size_t code_cache_bytes, struct opal_counters *ctr);
void opal_interp_destroy(struct opal_interp *ip);

/* Looks at p's mappings once per read of them, and installs or removes
 * p's walk parameters in BPF: its interpreter's, and where its threads
 * keep an OTEP 4947 thread context (tctx.h; with tctx_map_fd set). With
 * files_map_fd set, an interpreter file it installs a walk from is
 * published for BPF to set the file's next processes up itself. */
void opal_interp_sync(struct opal_interp *ip, struct opal_proc *p);

/* The entry by which BPF sets up the next processes of interpreter file
 * `file` itself (bpf/interp.h, struct opal_interp_file; read by
 * bpf/interp_early.h): its inode key as the kernel has it (s_dev as
 * major << 20 | minor), and `walk`, a process's walk parameters at load
 * bias `bias`, with ELF virtual addresses, plus its lowest executable
 * PT_LOAD. Returns 0, or -ENOENT when the file has no executable PT_LOAD. */
int opal_interp_file_entry(const struct opal_file *file, const struct opal_py_walk *walk,
			   uint64_t bias, struct opal_interp_file_key *k, struct opal_interp_file *v);

/* True when runtime address `pc` of `p` lies in its interpreter's
 * evaluation function. */
bool opal_interp_is_eval(const struct opal_proc *p, uint64_t pc);

/* The code ID of interpreter frame `f` of `p` (not an error or boundary
 * entry), copying its code object on first sight. Returns 0, or -errno
 * when its bytes cannot be had (the frame stays unnamed). */
int opal_interp_code_id(struct opal_interp *ip, struct opal_proc *p,
			const struct opal_interp_frame *f, uint64_t *code_id);

#endif
