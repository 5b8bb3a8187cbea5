/* Unwind table builder thread (unwind_worker.h). */
#include "unwind/unwind_worker.h"

#include <elf.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "proc/debugfile.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void opal_build_budget_init(struct opal_build_budget *bb, uint32_t pct, uint64_t now_ns)
{
	bb->pct = pct < 1 ? 1 : pct > 100 ? 100 : pct;
	bb->tokens = (int64_t)OPAL_UNWIND_BUILD_BURST_NS;
	bb->last_ns = now_ns;
}

uint64_t opal_build_budget_wait_ns(struct opal_build_budget *bb, uint64_t now_ns)
{
	if (now_ns > bb->last_ns) {
		uint64_t add = (now_ns - bb->last_ns) / 100 * bb->pct;
		bb->tokens = bb->tokens + (int64_t)(add < OPAL_UNWIND_BUILD_BURST_NS * 2 ? add :
							OPAL_UNWIND_BUILD_BURST_NS * 2);
		if (bb->tokens > (int64_t)OPAL_UNWIND_BUILD_BURST_NS)
			bb->tokens = (int64_t)OPAL_UNWIND_BUILD_BURST_NS;
		bb->last_ns = now_ns;
	}
	return bb->tokens > 0 ? 0 : ((uint64_t)-bb->tokens + 1) * 100 / bb->pct;
}

void opal_build_budget_charge(struct opal_build_budget *bb, uint64_t cpu_ns)
{
	bb->tokens -= (int64_t)(cpu_ns < OPAL_UNWIND_BUILD_BURST_NS * 16 ? cpu_ns :
							     OPAL_UNWIND_BUILD_BURST_NS * 16);
}

/* e_entry of the ELF64 file on `fd`, or 0. */
static uint64_t elf_entry(int fd)
{
	Elf64_Ehdr eh;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
		return 0;
	return eh.e_entry;
}

void opal_unwind_job_run(struct opal_unwind_job *j, const struct opal_unwind_limits *lim)
{
	uint64_t t0 = mono_ns(), c0 = thread_cpu_ns();
	int dfd = j->debug_root ? opal_debugfile_open(j->fd, j->debug_root) : -1;
	bool debug_seen = dfd >= 0;

	j->cached = j->store && opal_unwind_store_get(j->store, &j->id, debug_seen, &j->table) == 0;
	if (j->cached) {
		j->err = 0;
	} else {
		j->err = opal_unwind_table_build_debug(j->fd, dfd, lim, &j->table);
		if (j->err == 0 && j->store &&
		    thread_cpu_ns() - c0 >= OPAL_UNWIND_STORE_MIN_BUILD_NS)
			opal_unwind_store_put(j->store, &j->id, debug_seen, &j->table);
	}
	if (dfd >= 0)
		close(dfd);
	j->entry = elf_entry(j->fd);
	j->build_ns = mono_ns() - t0;
	j->cpu_ns = thread_cpu_ns() - c0;
}

void opal_unwind_job_free(struct opal_unwind_job *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	opal_unwind_table_free(&j->table);
	free(j);
}

/* Waits, with mu held, until the budget lets a job start. Returns false
 * when the builder stops meanwhile. */
static bool wait_budget(struct opal_unwind_builder *b)
{
	bool waited = false;
	uint64_t ns;

	while (!b->stop && (ns = opal_build_budget_wait_ns(&b->budget, mono_ns())) > 0) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		uint64_t t = (uint64_t)until.tv_nsec + ns;
		until.tv_sec += (time_t)(t / 1000000000ull);
		until.tv_nsec = (long)(t % 1000000000ull);
		if (!waited)
			b->throttled++;
		waited = true;
		pthread_cond_timedwait(&b->cv, &b->mu, &until);
	}
	return !b->stop;
}

bool opal_unwind_builder_may_run(struct opal_unwind_builder *b)
{
	bool ok;

	pthread_mutex_lock(&b->mu);
	ok = opal_build_budget_wait_ns(&b->budget, mono_ns()) == 0;
	pthread_mutex_unlock(&b->mu);
	if (!ok)
		b->throttled++;
	return ok;
}

void opal_unwind_builder_charge(struct opal_unwind_builder *b, uint64_t cpu_ns)
{
	b->cpu_ns += cpu_ns;
	pthread_mutex_lock(&b->mu);
	opal_build_budget_charge(&b->budget, cpu_ns);
	pthread_mutex_unlock(&b->mu);
}

static void *worker(void *arg)
{
	struct opal_unwind_builder *b = arg;

	pthread_mutex_lock(&b->mu);
	for (;;) {
		while (!b->stop && !b->todo)
			pthread_cond_wait(&b->cv, &b->mu);
		if (b->stop)
			break;
		struct opal_unwind_job *j = b->todo;
		b->todo = j->next;
		if (!b->todo)
			b->todo_tail = NULL;
		b->n_todo--;
		b->busy = true;
		if (!wait_budget(b)) {
			/* stopping: the job goes back to the head of the queue */
			j->next = b->todo;
			b->todo = j;
			if (!b->todo_tail)
				b->todo_tail = j;
			b->n_todo++;
			b->busy = false;
			break;
		}
		pthread_mutex_unlock(&b->mu);

		opal_unwind_job_run(j, &b->lim);
		close(j->fd);
		j->fd = -1;
		/* a large file leaves megabytes of freed libdw and builder
		 * memory in this thread's arena: give it back */
		malloc_trim(0);

		b->cpu_ns += j->cpu_ns;
		pthread_mutex_lock(&b->mu);
		opal_build_budget_charge(&b->budget, j->cpu_ns);
		b->busy = false;
		j->next = NULL;
		/* append: the main thread loads them in submission order */
		struct opal_unwind_job **pp = &b->done;
		while (*pp)
			pp = &(*pp)->next;
		*pp = j;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

int opal_unwind_builder_start(struct opal_unwind_builder *b, const struct opal_unwind_limits *lim,
			      const char *debug_root, struct opal_unwind_store *store,
			      uint32_t pct)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	int err;

	memset(b, 0, sizeof(*b));
	b->lim = *lim;
	b->debug_root = debug_root;
	b->store = store;
	opal_build_budget_init(&b->budget, pct, mono_ns());
	pthread_mutex_init(&b->mu, NULL);
	/* budget waits are on CLOCK_MONOTONIC; builder_wait's too */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* signals (SIGTERM, SIGHUP) stay with the main thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&b->thread, NULL, worker, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		pthread_cond_destroy(&b->cv);
		pthread_mutex_destroy(&b->mu);
		return -err;
	}
	b->running = true;
	return 0;
}

int opal_unwind_builder_submit(struct opal_unwind_builder *b, void *cookie, int fd,
			       const opal_file_id *id)
{
	struct opal_unwind_job *j;

	pthread_mutex_lock(&b->mu);
	if (b->n_todo >= OPAL_UNWIND_MAX_JOBS || !(j = calloc(1, sizeof(*j)))) {
		pthread_mutex_unlock(&b->mu);
		close(fd);
		return -EAGAIN;
	}
	j->cookie = cookie;
	j->fd = fd;
	j->id = *id;
	j->debug_root = b->debug_root;
	j->store = b->store;
	if (b->todo_tail)
		b->todo_tail->next = j;
	else
		b->todo = j;
	b->todo_tail = j;
	b->n_todo++;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	return 0;
}

struct opal_unwind_job *opal_unwind_builder_take(struct opal_unwind_builder *b)
{
	struct opal_unwind_job *j;

	pthread_mutex_lock(&b->mu);
	j = b->done;
	b->done = NULL;
	pthread_mutex_unlock(&b->mu);
	return j;
}

bool opal_unwind_builder_wait(struct opal_unwind_builder *b, int timeout_ms)
{
	struct timespec until;
	bool idle;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&b->mu);
	while ((b->todo || b->busy) &&
	       pthread_cond_timedwait(&b->cv, &b->mu, &until) != ETIMEDOUT)
		;
	idle = !b->todo && !b->busy;
	pthread_mutex_unlock(&b->mu);
	return idle;
}

struct opal_unwind_job *opal_unwind_builder_stop(struct opal_unwind_builder *b)
{
	struct opal_unwind_job *rest;

	if (!b->running)
		return NULL;
	pthread_mutex_lock(&b->mu);
	b->stop = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	pthread_join(b->thread, NULL);
	b->running = false;
	/* finished first, then the never-started ones */
	rest = b->done;
	struct opal_unwind_job **pp = &rest;
	while (*pp)
		pp = &(*pp)->next;
	*pp = b->todo;
	for (struct opal_unwind_job *j = b->todo; j; j = j->next)
		j->err = -ECANCELED;
	b->done = b->todo = b->todo_tail = NULL;
	b->n_todo = 0;
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	return rest;
}
