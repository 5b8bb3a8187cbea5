/* The stop deadline's clock and watchdog (stop_deadline.h). */
#include "stop_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include "shared/log.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;   /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool started, running, done;
	uint64_t start_ms;
	_Atomic(const char *) step;
} dl = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *watchdog(void *arg)
{
	uint64_t at = dl.start_ms + OPAL_STOP_EXIT_MS;
	struct timespec ts = { .tv_sec = (time_t)(at / 1000), .tv_nsec = (long)(at % 1000) * 1000000 };
	int r = 0;

	(void)arg;
	pthread_mutex_lock(&dl.lock);
	while (!dl.done && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&dl.cond, &dl.lock, &ts);
	bool done = dl.done;
	pthread_mutex_unlock(&dl.lock);
	if (done)
		return NULL;
	opal_err("stop deadline: still %s after %u ms; exiting now (every acknowledged interval "
		 "is on disk; the rest of the stop sequence is skipped)", atomic_load(&dl.step),
		 OPAL_STOP_EXIT_MS);
	_exit(0);
}

void opal_stop_deadline_start(void)
{
	pthread_condattr_t ca;

	if (dl.started)
		return;
	dl.started = true;
	dl.start_ms = mono_ms();
	atomic_store(&dl.step, "starting to stop");
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&dl.cond, &ca);
	pthread_condattr_destroy(&ca);
	dl.running = pthread_create(&dl.thread, NULL, watchdog, NULL) == 0;
	if (!dl.running)
		opal_warn("stop deadline: no watchdog thread; only the waits are bounded");
}

void opal_stop_deadline_step(const char *what)
{
	atomic_store(&dl.step, what);
	opal_debug("stopping: %s", what);
}

unsigned opal_stop_deadline_wait_left_ms(void)
{
	if (!dl.started)
		return OPAL_STOP_WAIT_MS;
	uint64_t spent = mono_ms() - dl.start_ms;
	return spent >= OPAL_STOP_WAIT_MS ? 0 : (unsigned)(OPAL_STOP_WAIT_MS - spent);
}

void opal_stop_deadline_end(void)
{
	if (!dl.running)
		return;
	pthread_mutex_lock(&dl.lock);
	dl.done = true;
	pthread_cond_signal(&dl.cond);
	pthread_mutex_unlock(&dl.lock);
	pthread_join(dl.thread, NULL);
	dl.running = false;
}
