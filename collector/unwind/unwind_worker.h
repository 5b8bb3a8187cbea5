/* A worker thread that builds unwind tables (unwind_table.h), so the
 * collector's main loop never waits for one: a large file takes up to
 * seconds of CPU (libLLVM-15: 0.5 s), while the main loop must keep reading
 * the maps of new processes before they exit. Jobs are served in order;
 * finished ones wait for the main thread to take them (it loads them into
 * BPF). The thread only reads the job's descriptor and builds; all other
 * state stays with the main thread.
 *
 * Bounds: OPAL_UNWIND_MAX_JOBS queued jobs; one table in construction
 * (unwind_table.h's memory bounds) plus the finished tables not taken yet. */
#ifndef OPAL_COLLECTOR_UNWIND_BUILDER_H
#define OPAL_COLLECTOR_UNWIND_BUILDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "unwind/table/unwind_table.h"

#define OPAL_UNWIND_MAX_JOBS 4096

struct opal_unwind_job {
	struct opal_unwind_job *next;
	void *cookie;                     /* the submitter's */
	int fd;                           /* the ELF file, owned by the job */
	const char *debug_root;           /* where its debug file is looked up by build
					   * ID (proc/debugfile.h), borrowed; NULL: not */
	int err;                          /* result: 0 or a -errno of opal_unwind_table_build */
	uint64_t entry;                   /* the file's e_entry, 0 if unreadable */
	uint64_t build_ns;                /* wall time of the build */
	struct opal_unwind_table table;   /* on success */
};

struct opal_unwind_builder {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;                /* new job, stop, or a job done */
	struct opal_unwind_job *todo, *todo_tail, *done;
	size_t n_todo;
	bool busy;                        /* a job is being built */
	bool stop, running;
	struct opal_unwind_limits lim;
	const char *debug_root;           /* given to every job */
};

/* Starts the thread with build limits `lim`; its jobs look debug files up
 * under `debug_root` (borrowed, may be NULL). Returns 0 or -errno. */
int opal_unwind_builder_start(struct opal_unwind_builder *b, const struct opal_unwind_limits *lim,
			      const char *debug_root);

/* Queues a build of the ELF file on `fd` (the job takes the descriptor).
 * Returns 0, or -EAGAIN when OPAL_UNWIND_MAX_JOBS are queued (fd closed). */
int opal_unwind_builder_submit(struct opal_unwind_builder *b, void *cookie, int fd);

/* The finished jobs (a list linked by `next`, oldest first), or NULL;
 * free each with opal_unwind_job_free. */
struct opal_unwind_job *opal_unwind_builder_take(struct opal_unwind_builder *b);

/* Waits until no job is queued or being built, at most `timeout_ms`.
 * Returns true when idle. */
bool opal_unwind_builder_wait(struct opal_unwind_builder *b, int timeout_ms);

/* Stops the thread after the job in construction; finished jobs and the
 * queued ones (err -ECANCELED) are returned (list as for take) for the
 * caller to release. */
struct opal_unwind_job *opal_unwind_builder_stop(struct opal_unwind_builder *b);

/* Builds the table of `j->fd` in the calling thread (what the thread does
 * with a job), with the CFI of its debug file under `j->debug_root` when
 * one exists there: for small files, unit tests and when the thread cannot
 * start. */
void opal_unwind_job_run(struct opal_unwind_job *j, const struct opal_unwind_limits *lim);

void opal_unwind_job_free(struct opal_unwind_job *j);

#endif
