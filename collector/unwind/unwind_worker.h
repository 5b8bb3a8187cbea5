/* A worker thread that builds unwind tables (unwind_table.h), so the
 * collector's main loop never waits for one: a large file takes up to
 * seconds of CPU (libLLVM-15: 0.5 s), while the main loop must keep reading
 * the maps of new processes before they exit. Jobs are served in order;
 * finished ones wait for the main thread to take them (it loads them into
 * BPF). The thread only reads the job's descriptor and builds; all other
 * state stays with the main thread.
 *
 * A job first looks in the on-disk cache (unwind_store.h), and writes
 * what it built there.
 *
 * Bounds: OPAL_UNWIND_MAX_JOBS queued jobs; one table in construction
 * (unwind_table.h's memory bounds) plus the finished tables not taken yet;
 * CPU: the build budget below, shared with builds in the main loop. */
#ifndef OPAL_COLLECTOR_UNWIND_BUILDER_H
#define OPAL_COLLECTOR_UNWIND_BUILDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "shared/fileid.h"
#include "unwind/table/unwind_table.h"
#include "unwind/unwind_store.h"

#define OPAL_UNWIND_MAX_JOBS 4096
#define OPAL_UNWIND_BUILD_BURST_NS   2000000000ull  /* CPU the budget holds at most */
#define OPAL_UNWIND_DEFAULT_BUILD_PCT 10            /* --unwind-build-cpu */

/* How much CPU table building may take: a bucket of CPU time refilled at
 * `pct` percent of one CPU up to OPAL_UNWIND_BUILD_BURST_NS (a start-up
 * builds its first 2 s of tables at once), charged with each job's thread
 * CPU time. While it is empty, jobs wait. All times in ns. */
struct opal_build_budget {
	uint32_t pct;         /* 1..100 */
	int64_t tokens;       /* ns of CPU left; negative after a long build */
	uint64_t last_ns;     /* CLOCK_MONOTONIC of the last refill */
};

void opal_build_budget_init(struct opal_build_budget *bb, uint32_t pct, uint64_t now_ns);
/* Refills for the time since the last call; returns 0 when a job may
 * start now, else the ns until it may. */
uint64_t opal_build_budget_wait_ns(struct opal_build_budget *bb, uint64_t now_ns);
void opal_build_budget_charge(struct opal_build_budget *bb, uint64_t cpu_ns);

struct opal_unwind_job {
	struct opal_unwind_job *next;
	void *cookie;                     /* the submitter's */
	int fd;                           /* the ELF file, owned by the job */
	opal_file_id id;                  /* its file ID: the cache's key */
	struct opal_unwind_store *store;  /* the cache, borrowed; NULL: none */
	const char *debug_root;           /* where its debug file is looked up by build
					   * ID (proc/debugfile.h), borrowed; NULL: not */
	int err;                          /* result: 0 or a -errno of opal_unwind_table_build */
	uint64_t entry;                   /* the file's e_entry, 0 if unreadable */
	uint64_t build_ns;                /* wall time of the build */
	uint64_t cpu_ns;                  /* thread CPU time of the job */
	bool cached;                      /* the table came from the cache */
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
	struct opal_unwind_store *store;  /* given to every job */
	struct opal_build_budget budget;
	_Atomic uint64_t throttled;       /* jobs that waited for the budget, and
					   * main-loop builds sent to the thread for it */
	_Atomic uint64_t cpu_ns;          /* CPU time of all jobs, both threads */
};

/* Starts the thread with build limits `lim` and a budget of `pct` percent
 * of one CPU; its jobs look debug files up under `debug_root` and tables
 * in `store` (both borrowed, may be NULL). Returns 0 or -errno. */
int opal_unwind_builder_start(struct opal_unwind_builder *b, const struct opal_unwind_limits *lim,
			      const char *debug_root, struct opal_unwind_store *store,
			      uint32_t pct);

/* Queues a build of the ELF file on `fd` (the job takes the descriptor)
 * whose file ID is `id`. Returns 0, or -EAGAIN when OPAL_UNWIND_MAX_JOBS
 * are queued (fd closed). */
int opal_unwind_builder_submit(struct opal_unwind_builder *b, void *cookie, int fd,
			       const opal_file_id *id);

/* Whether the budget lets the main loop build a table now; when not,
 * counted in `throttled` (the caller queues the job instead). */
bool opal_unwind_builder_may_run(struct opal_unwind_builder *b);

/* Charges a job run outside the thread to the budget. */
void opal_unwind_builder_charge(struct opal_unwind_builder *b, uint64_t cpu_ns);

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
 * one exists there, or reads it from `j->store`; writes a table that took
 * at least OPAL_UNWIND_STORE_MIN_BUILD_NS of CPU to the store. For small
 * files, unit tests and when the thread cannot start. */
void opal_unwind_job_run(struct opal_unwind_job *j, const struct opal_unwind_limits *lim);

void opal_unwind_job_free(struct opal_unwind_job *j);

#endif
