/* Export queue and worker thread (export_queue.h). The mutex guards the
 * FIFO, the counters and the stopping state; the worker never holds it
 * while preparing, delivering or waiting, so push only ever waits for
 * another short critical section. */
#include "export/export_queue.h"
#include "shared/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct item {
	struct item *next;
	uint8_t *data;
	size_t len;
};

struct opal_export_queue {
	struct opal_export_queue_config cfg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* signalled on push and on stop */
	struct item *head, *tail;
	struct opal_export_stats st;
	bool stopping;              /* no more pushes; flush until `deadline` */
	struct timespec deadline;   /* CLOCK_MONOTONIC */
	atomic_bool cancel;         /* flush time over: abort the attempt in flight */
	uint64_t rng;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec ns_to_ts(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };
}

static uint64_t ts_to_ns(struct timespec ts)
{
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: jitter only, no security role. */
static double next_rnd(struct opal_export_queue *q)
{
	q->rng ^= q->rng >> 12;
	q->rng ^= q->rng << 25;
	q->rng ^= q->rng >> 27;
	return (double)((q->rng * 2685821657736338717ull) >> 11) / (double)(1ull << 53);
}

uint64_t opal_export_backoff_ms(unsigned retry, int64_t retry_after_ms, unsigned initial_ms,
				unsigned max_ms, double rnd)
{
	uint64_t d = initial_ms;

	if (retry_after_ms >= 0)
		return (uint64_t)retry_after_ms < max_ms ? (uint64_t)retry_after_ms : max_ms;
	for (unsigned i = 1; i < retry && d < max_ms; i++)
		d *= 2;
	if (d > max_ms)
		d = max_ms;
	if (rnd < 0)
		rnd = 0;
	if (rnd >= 1)
		rnd = 0.999999;
	return d / 2 + (uint64_t)((double)(d - d / 2) * rnd);
}

/* Removes the oldest item; caller holds the mutex. */
static struct item *pop_locked(struct opal_export_queue *q)
{
	struct item *it = q->head;

	if (!it)
		return NULL;
	q->head = it->next;
	if (!q->head)
		q->tail = NULL;
	q->st.queued_items--;
	q->st.queued_bytes -= it->len;
	return it;
}

static void free_item(struct item *it)
{
	free(it->data);
	free(it);
}

/* Waits until `until_ns` (monotonic) or until the flush deadline passes.
 * Returns false when the queue is past its flush deadline. Caller holds the
 * mutex. */
static bool wait_until_locked(struct opal_export_queue *q, uint64_t until_ns)
{
	for (;;) {
		uint64_t now = now_ns();
		if (q->stopping && now >= ts_to_ns(q->deadline))
			return false;
		if (now >= until_ns)
			return true;
		uint64_t wake = until_ns;
		if (q->stopping && ts_to_ns(q->deadline) < wake)
			wake = ts_to_ns(q->deadline);
		struct timespec ts = ns_to_ts(wake);
		pthread_cond_timedwait(&q->cv, &q->mu, &ts);
	}
}

/* Delivers one item with retries. Called without the mutex. */
static void deliver_item(struct opal_export_queue *q, struct item *it)
{
	const struct opal_export_queue_config *c = &q->cfg;
	enum opal_export_status s = OPAL_EXPORT_FAILED;
	int err;

	if (c->prepare && (err = c->prepare(c->arg, &it->data, &it->len)) < 0) {
		opal_warn("%s export: preparing %zu bytes failed: %s; dropped", c->name, it->len,
			  strerror(-err));
		pthread_mutex_lock(&q->mu);
		q->st.failed++;
		pthread_mutex_unlock(&q->mu);
		return;
	}
	for (unsigned attempt = 1; attempt <= c->max_attempts; attempt++) {
		int64_t retry_after = -1;

		s = c->deliver(c->arg, it->data, it->len, &q->cancel, &retry_after);
		if (s != OPAL_EXPORT_RETRY)
			break;
		if (attempt == c->max_attempts) {
			opal_warn("%s export: giving up after %u attempts", c->name, attempt);
			break;
		}
		pthread_mutex_lock(&q->mu);
		uint64_t delay = opal_export_backoff_ms(attempt, retry_after, c->backoff_initial_ms,
							c->backoff_max_ms, next_rnd(q));
		opal_debug("%s export: retry %u in %llu ms", c->name, attempt,
			   (unsigned long long)delay);
		bool go_on = wait_until_locked(q, now_ns() + delay * 1000000ull);
		if (go_on)
			q->st.retries++;
		pthread_mutex_unlock(&q->mu);
		if (!go_on) {
			opal_warn("%s export: stopped while waiting to retry; %zu bytes dropped",
				  c->name, it->len);
			break;
		}
	}
	pthread_mutex_lock(&q->mu);
	if (s == OPAL_EXPORT_OK || s == OPAL_EXPORT_PARTIAL) {
		q->st.sent++;
		if (s == OPAL_EXPORT_PARTIAL)
			q->st.partial++;
	} else {
		q->st.failed++;
	}
	pthread_mutex_unlock(&q->mu);
}

static void *worker(void *arg)
{
	struct opal_export_queue *q = arg;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->head && !q->stopping)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->head || (q->stopping && now_ns() >= ts_to_ns(q->deadline)))
			break;
		struct item *it = pop_locked(q);
		pthread_mutex_unlock(&q->mu);
		deliver_item(q, it);
		free_item(it);
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int opal_export_queue_start(const struct opal_export_queue_config *cfg,
			    struct opal_export_queue **out)
{
	struct opal_export_queue *q;
	pthread_condattr_t ca;
	int err;

	if (!cfg->deliver || !cfg->max_bytes || !cfg->max_items || !cfg->max_attempts ||
	    !cfg->backoff_initial_ms || cfg->backoff_max_ms < cfg->backoff_initial_ms)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cfg = *cfg;
	if (!q->cfg.name)
		q->cfg.name = "export";
	atomic_init(&q->cancel, false);
	if (getrandom(&q->rng, sizeof(q->rng), GRND_NONBLOCK) != sizeof(q->rng) || !q->rng)
		q->rng = now_ns() | 1;
	pthread_mutex_init(&q->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((err = pthread_create(&q->thread, NULL, worker, q)) != 0) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return -err;
	}
	*out = q;
	return 0;
}

int opal_export_queue_push(struct opal_export_queue *q, uint8_t *data, size_t len)
{
	struct item *it = malloc(sizeof(*it)), *old;
	uint64_t n_drop = 0, drop_bytes = 0;
	int err = 0;

	pthread_mutex_lock(&q->mu);
	if (!it || q->stopping || len > q->cfg.max_bytes) {
		err = !it ? -ENOMEM : q->stopping ? -ESHUTDOWN : -E2BIG;
		q->st.dropped++;
		q->st.dropped_bytes += len;
		pthread_mutex_unlock(&q->mu);
		opal_warn("%s export: %zu bytes dropped: %s", q->cfg.name, len,
			  err == -E2BIG ? "larger than the queue" : strerror(-err));
		free(it);
		free(data);
		return err;
	}
	while (q->head && (q->st.queued_bytes + len > q->cfg.max_bytes ||
			   q->st.queued_items + 1 > q->cfg.max_items)) {
		old = pop_locked(q);
		n_drop++;
		drop_bytes += old->len;
		free_item(old);
	}
	q->st.dropped += n_drop;
	q->st.dropped_bytes += drop_bytes;
	*it = (struct item){ .data = data, .len = len };
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->st.queued_items++;
	q->st.queued_bytes += len;
	q->st.enqueued++;
	q->st.enqueued_bytes += len;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (n_drop)
		opal_warn("%s export: queue full; dropped the %llu oldest (%llu bytes)", q->cfg.name,
			  (unsigned long long)n_drop, (unsigned long long)drop_bytes);
	return 0;
}

void opal_export_queue_stats(struct opal_export_queue *q, struct opal_export_stats *out)
{
	pthread_mutex_lock(&q->mu);
	*out = q->st;
	pthread_mutex_unlock(&q->mu);
}

void opal_export_queue_stop(struct opal_export_queue *q, unsigned flush_ms,
			    struct opal_export_stats *final)
{
	struct item *it;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stopping = true;
	q->deadline = ns_to_ts(now_ns() + (uint64_t)flush_ms * 1000000ull);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	/* The worker exits once the queue is empty, or at the deadline after
	 * its attempt in flight; that attempt is told to end at the deadline.
	 * (pthread_timedjoin_np takes a CLOCK_REALTIME time.) */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t now = now_ns(), dl = ts_to_ns(q->deadline);
	struct timespec join_by = ns_to_ts(ts_to_ns(rt) + (dl > now ? dl - now : 0));
	if (pthread_timedjoin_np(q->thread, NULL, &join_by) != 0) {
		atomic_store(&q->cancel, true);
		pthread_mutex_lock(&q->mu);
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mu);
		pthread_join(q->thread, NULL);
	}
	pthread_mutex_lock(&q->mu);
	while ((it = pop_locked(q))) {
		q->st.dropped++;
		q->st.dropped_bytes += it->len;
		free_item(it);
	}
	if (final)
		*final = q->st;
	pthread_mutex_unlock(&q->mu);
	if (final && (final->dropped || final->failed))
		opal_info("%s export: %llu sent, %llu failed, %llu dropped", q->cfg.name,
			  (unsigned long long)final->sent, (unsigned long long)final->failed,
			  (unsigned long long)final->dropped);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
