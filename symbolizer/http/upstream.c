/* Fleet mode (upstream.h): one batching thread for remote symbolization
 * and OPAL_UPLOAD_WORKERS upload threads, fed by the symbolizer's hooks.
 * The hooks run under the symbolizer's lock, so they only copy into the
 * bounded queues here and signal; the threads call back into the
 * symbolizer (opal_symbolizer_put_remote, then opal_symbolizer_flush per
 * batch) without holding this module's lock. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/metrics.h"
#include "base/sym_result.h"
#include "http/http_client.h"
#include "http/upstream.h"
#include "shared/log.h"
#include "symbolize/symbolize.h"

#define RETRY_PAUSE_S     5      /* after a failed batch */
#define UPLOAD_BACKOFF_S  30     /* times the try count, after "in progress" */

struct pending {
	opal_file_id key;            /* the symbolizer's cache key */
	bool by_build_id;
	char id[2 * OPAL_BUILD_ID_MAX + 1];
	uint64_t addr;               /* lookup address */
	uint8_t local_n;             /* frames found locally */
	bool local_line;             /* the local innermost frame had a line */
	uint8_t tries;
};

struct upload_job {
	char id[2 * OPAL_BUILD_ID_MAX + 1];
	enum opal_di_id_type id_type;
	int main_fd, debug_fd;
	int tries;
	time_t not_before;
};

struct opal_upstream {
	struct opal_symbolizer *sym;
	struct opal_http_client client;
	char *url, *token, *ca_pem, *tmp_dir;
	bool uploads;
	pthread_mutex_t lock;
	pthread_cond_t batch_cond, upload_cond;
	bool stopping;
	struct pending *q;           /* ring of OPAL_UPSTREAM_MAX_PENDING */
	size_t q_head, q_n;
	struct timespec oldest;      /* when the oldest pending address came */
	/* Settling (opal_upstream_settle): addresses ever queued and ever
	 * answered or failed, in queue order, so that "everything queued so
	 * far is done" is done_seq >= a queued_seq seen before. */
	uint64_t queued_seq, done_seq;
	uint64_t improved;           /* answers that replaced local frames */
	bool flush_now;              /* send the queue without the flush delay */
	bool fresh;                  /* a file's first address was queued since the last settle */
	bool last_failed;            /* the last batch failed */
	pthread_cond_t done_cond;    /* done_seq moved */
	uint64_t asked[OPAL_UPSTREAM_ASKED_MAX];   /* FNV-1a hashes of files asked about, ring */
	size_t asked_next;
	struct upload_job jobs[OPAL_UPLOAD_QUEUE_MAX];
	size_t n_jobs;
	uint64_t seen[OPAL_UPLOAD_SEEN_MAX];   /* FNV-1a hashes of handled IDs, ring */
	size_t seen_next;
	pthread_t batch_thread, workers[OPAL_UPLOAD_WORKERS];
	size_t n_workers;
	bool batch_started;
};

/* ---- hooks (symbolizer lock held) ------------------------------------------------ */

static void id_hex(const opal_file_id *id, const uint8_t *bid, size_t len, char *out, bool *by_bid)
{
	*by_bid = len > 0;
	if (len)
		opal_hex_encode(bid, len, out);
	else
		opal_file_id_to_hex(id, out);
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* Whether file `hex` was asked about before; remembers it. Lock held. */
static bool asked_before(struct opal_upstream *u, const char *hex)
{
	uint64_t h = fnv1a(hex);
	for (size_t i = 0; i < OPAL_UPSTREAM_ASKED_MAX; i++)
		if (u->asked[i] == h)
			return true;
	u->asked[u->asked_next++ % OPAL_UPSTREAM_ASKED_MAX] = h;
	return false;
}

static void on_poor_result(void *arg, const opal_file_id *id, const uint8_t *build_id,
			   size_t build_id_len, uint64_t addr, const struct opal_sym_result *local)
{
	struct opal_upstream *u = arg;
	pthread_mutex_lock(&u->lock);
	if (u->q_n == OPAL_UPSTREAM_MAX_PENDING) {
		pthread_mutex_unlock(&u->lock);
		opal_metrics_upstream(OPAL_UPSTREAM_DROPPED);
		return;
	}
	struct pending *p = &u->q[(u->q_head + u->q_n) % OPAL_UPSTREAM_MAX_PENDING];
	memset(p, 0, sizeof(*p));
	p->key = *id;
	id_hex(id, build_id, build_id_len, p->id, &p->by_build_id);
	p->addr = addr;
	p->local_n = local->n > 255 ? 255 : (uint8_t)local->n;
	p->local_line = local->n > 0 && local->frames[0].line > 0;
	if (!asked_before(u, p->id))
		u->fresh = true;
	u->queued_seq++;
	bool first = u->q_n++ == 0;
	if (first)
		clock_gettime(CLOCK_MONOTONIC, &u->oldest);
	opal_metrics_queue_depth(OPAL_QUEUE_UPSTREAM_ADDRESSES, u->q_n);
	/* The first address starts the flush clock; a full batch goes at once. */
	if (first || u->q_n >= OPAL_UPSTREAM_BATCH)
		pthread_cond_signal(&u->batch_cond);
	pthread_mutex_unlock(&u->lock);
}

static void on_new_file(void *arg, const opal_file_id *id, const uint8_t *build_id,
			size_t build_id_len, int main_fd, int debug_fd, enum opal_debug_quality q)
{
	struct opal_upstream *u = arg;
	struct upload_job j = { .main_fd = -1, .debug_fd = -1 };
	bool by_bid;
	(void)q;
	id_hex(id, build_id, build_id_len, j.id, &by_bid);
	j.id_type = by_bid ? OPAL_DI_ID_GNU : OPAL_DI_ID_HTLHASH;
	uint64_t h = fnv1a(j.id);
	pthread_mutex_lock(&u->lock);
	for (size_t i = 0; i < OPAL_UPLOAD_SEEN_MAX; i++)
		if (u->seen[i] == h) {
			pthread_mutex_unlock(&u->lock);
			return;
		}
	if (u->n_jobs == OPAL_UPLOAD_QUEUE_MAX) {
		pthread_mutex_unlock(&u->lock);
		opal_metrics_upstream(OPAL_UPSTREAM_DROPPED);
		return;
	}
	j.main_fd = fcntl(main_fd, F_DUPFD_CLOEXEC, 0);
	if (debug_fd >= 0)
		j.debug_fd = fcntl(debug_fd, F_DUPFD_CLOEXEC, 0);
	if (j.main_fd < 0) {
		if (j.debug_fd >= 0)
			close(j.debug_fd);
		pthread_mutex_unlock(&u->lock);
		return;
	}
	u->seen[u->seen_next++ % OPAL_UPLOAD_SEEN_MAX] = h;
	u->jobs[u->n_jobs++] = j;
	opal_metrics_queue_depth(OPAL_QUEUE_UPSTREAM_UPLOADS, u->n_jobs);
	pthread_cond_signal(&u->upload_cond);
	pthread_mutex_unlock(&u->lock);
}

/* ---- batches of addresses ----------------------------------------------------------- */

struct order {
	const struct pending *p;
	size_t idx;
};

static int cmp_order(const void *a, const void *b)
{
	const struct order *x = a, *y = b;
	if (x->p->by_build_id != y->p->by_build_id)
		return x->p->by_build_id ? -1 : 1;
	int c = strcmp(x->p->id, y->p->id);
	if (c)
		return c;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Remote frames of one location, or n = 0. Returns 0 or -ENOMEM. */
static int frames_from_json(json_t *frames, struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	size_t n = json_array_size(frames);
	if (n > OPAL_SYM_MAX_FRAMES)
		n = OPAL_SYM_MAX_FRAMES;
	if (n == 0)
		return 0;
	out->frames = calloc(n, sizeof(*out->frames));
	if (!out->frames)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *f = json_array_get(frames, i);
		struct opal_sym_frame *d = &out->frames[i];
		const char *fn = json_string_value(json_object_get(f, "function"));
		const char *file = json_string_value(json_object_get(f, "file"));
		json_t *line = json_object_get(f, "line");
		d->function = fn ? opal_sym_strdup(fn) : NULL;
		d->file = file ? opal_sym_strdup(file) : NULL;
		if (json_is_integer(line) && json_integer_value(line) > 0 &&
		    json_integer_value(line) <= UINT32_MAX)
			d->line = (uint32_t)json_integer_value(line);
		d->inlined = json_is_true(json_object_get(f, "inlined"));
		out->n++;
	}
	return 0;
}

static bool better(const struct pending *p, const struct opal_sym_result *r)
{
	if (r->n == 0 || !r->frames[0].function)
		return false;
	if (p->local_n == 0)
		return true;
	return (r->frames[0].line > 0 && !p->local_line) || r->n > p->local_n;
}

/* Sends `n` pending addresses; 0 when the upstream answered, with
 * *improved the number of answers that replaced local frames. */
static int send_batch(struct opal_upstream *u, struct pending *batch, size_t n, size_t *improved)
{
	struct order *ord = calloc(n, sizeof(*ord));
	json_t *reqs = json_array();
	if (!ord || !reqs) {
		free(ord);
		json_decref(reqs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		ord[i] = (struct order){ &batch[i], i };
	qsort(ord, n, sizeof(*ord), cmp_order);
	json_t *cur = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct pending *p = ord[i].p;
		if (!cur || i == 0 || cmp_order(&(struct order){ ord[i - 1].p, 0 },
						&(struct order){ p, 0 }) != 0) {
			json_t *addrs = json_array();
			cur = json_pack("{s:s,s:o}", p->by_build_id ? "build_id" : "file_id", p->id,
					"addresses", addrs);
			json_array_append_new(reqs, cur);
		}
		char a[24];
		snprintf(a, sizeof(a), "0x%" PRIx64, p->addr);
		json_array_append_new(json_object_get(cur, "addresses"), json_string(a));
	}
	json_t *body = json_pack("{s:o}", "requests", reqs), *ans = NULL;
	long status = 0;
	char why[256];
	int r = body ? opal_http_client_post_json(&u->client, "/symbolize/v1", body, &status, &ans,
						  why, sizeof(why)) : -ENOMEM;
	json_decref(body);
	if (r == 0 && status != 200) {
		snprintf(why, sizeof(why), "status %ld", status);
		r = -EIO;
	}
	json_t *results = json_object_get(ans, "results");
	if (r == 0 && !json_is_array(results)) {
		snprintf(why, sizeof(why), "answer without results");
		r = -EIO;
	}
	if (r < 0) {
		opal_warn("upstream: symbolizing %zu addresses at %s failed: %s", n, u->url, why);
		json_decref(ans);
		free(ord);
		return r;
	}
	/* Results and locations come back in request order: walk both. */
	size_t ri = 0, li = 0, replaced = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && cmp_order(&(struct order){ ord[i - 1].p, 0 },
				       &(struct order){ ord[i].p, 0 }) != 0) {
			ri++;
			li = 0;
		}
		json_t *loc = json_array_get(json_object_get(json_array_get(results, ri),
							     "locations"), li++);
		struct opal_sym_result res;
		if (!loc || frames_from_json(json_object_get(loc, "frames"), &res) < 0)
			continue;
		if (better(ord[i].p, &res) &&
		    opal_symbolizer_put_remote(u->sym, &ord[i].p->key, ord[i].p->addr, &res) == 0)
			replaced++;
		opal_sym_result_free(&res);
	}
	/* put_remote only queues the SQLite rows: write this batch's now, in
	 * one transaction, rather than with the next interval's (a failure is
	 * logged by the symbolizer; the answers stay in its memory cache). */
	if (replaced > 0)
		opal_symbolizer_flush(u->sym);
	opal_debug("upstream: %zu addresses symbolized remotely, %zu improved", n, replaced);
	json_decref(ans);
	free(ord);
	*improved = replaced;
	return 0;
}

static int64_t ms_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* Waits on `cond` at most `ms` milliseconds (CLOCK_REALTIME deadline). */
static void wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cond, lock, &ts);
}

static void *batch_main(void *arg)
{
	struct opal_upstream *u = arg;
	struct pending *batch = calloc(OPAL_UPSTREAM_BATCH, sizeof(*batch));
	if (!batch)
		return NULL;
	pthread_mutex_lock(&u->lock);
	while (!u->stopping) {
		if (u->q_n == 0) {
			pthread_cond_wait(&u->batch_cond, &u->lock);
			continue;
		}
		int64_t age = ms_since(&u->oldest);
		if (u->q_n < OPAL_UPSTREAM_BATCH && age < OPAL_UPSTREAM_FLUSH_MS && !u->flush_now) {
			wait_ms(&u->batch_cond, &u->lock, OPAL_UPSTREAM_FLUSH_MS - age);
			continue;
		}
		size_t n = u->q_n < OPAL_UPSTREAM_BATCH ? u->q_n : OPAL_UPSTREAM_BATCH;
		for (size_t i = 0; i < n; i++)
			batch[i] = u->q[(u->q_head + i) % OPAL_UPSTREAM_MAX_PENDING];
		u->q_head = (u->q_head + n) % OPAL_UPSTREAM_MAX_PENDING;
		u->q_n -= n;
		clock_gettime(CLOCK_MONOTONIC, &u->oldest);
		opal_metrics_queue_depth(OPAL_QUEUE_UPSTREAM_ADDRESSES, u->q_n);
		pthread_mutex_unlock(&u->lock);

		size_t improved = 0;
		int r = send_batch(u, batch, n, &improved);
		opal_metrics_upstream(r == 0 ? OPAL_UPSTREAM_BATCH_OK : OPAL_UPSTREAM_BATCH_FAILED);

		pthread_mutex_lock(&u->lock);
		u->done_seq += n;
		u->improved += improved;
		u->last_failed = r < 0;
		if (u->q_n == 0)
			u->flush_now = false;
		pthread_cond_broadcast(&u->done_cond);
		if (r < 0) {
			/* Back into the queue (if room) for a later try, as new
			 * addresses: a settle in progress does not wait for them. */
			for (size_t i = 0; i < n; i++) {
				if (++batch[i].tries >= OPAL_UPSTREAM_MAX_TRIES ||
				    u->q_n == OPAL_UPSTREAM_MAX_PENDING) {
					opal_metrics_upstream(OPAL_UPSTREAM_DROPPED);
					continue;
				}
				u->q[(u->q_head + u->q_n++) % OPAL_UPSTREAM_MAX_PENDING] = batch[i];
				u->queued_seq++;
			}
			u->flush_now = false;
			if (!u->stopping)
				wait_ms(&u->batch_cond, &u->lock, RETRY_PAUSE_S * 1000);
		}
	}
	pthread_mutex_unlock(&u->lock);
	free(batch);
	return NULL;
}

int opal_upstream_settle(struct opal_upstream *u, int timeout_ms)
{
	struct timespec until;
	int r = 0;

	pthread_mutex_lock(&u->lock);
	bool hold = u->fresh && !u->last_failed && !u->stopping;
	u->fresh = false;
	uint64_t target = u->queued_seq, improved = u->improved;
	if (hold && u->done_seq < target) {
		opal_metrics_upstream(OPAL_UPSTREAM_FIRST_WAITED);
		u->flush_now = true;
		pthread_cond_signal(&u->batch_cond);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (u->done_seq < target && !u->stopping &&
		       pthread_cond_timedwait(&u->done_cond, &u->lock, &until) != ETIMEDOUT)
			;
		bool late = u->done_seq < target;
		if (late)
			opal_metrics_upstream(OPAL_UPSTREAM_FIRST_WAIT_EXCEEDED);
		r = u->improved != improved ? 1 : late ? -ETIMEDOUT : 0;
	}
	pthread_mutex_unlock(&u->lock);
	return r;
}

/* ---- uploads ------------------------------------------------------------------------ */

static void close_job(struct upload_job *j)
{
	if (j->main_fd >= 0)
		close(j->main_fd);
	if (j->debug_fd >= 0)
		close(j->debug_fd);
	j->main_fd = j->debug_fd = -1;
}

static void run_job(struct opal_upstream *u, struct upload_job *j)
{
	char why[512] = "";
	int src = j->debug_fd >= 0 ? j->debug_fd : j->main_fd;
	enum opal_upload_outcome out = opal_http_client_upload_debug(
		&u->client, src, j->id, j->id_type, u->tmp_dir, false, why, sizeof(why));
	switch (out) {
	case OPAL_UPLOAD_OUT_DONE:
		opal_metrics_upstream(OPAL_UPSTREAM_UPLOADED);
		opal_info("upstream: uploaded debug data of %s: %s", j->id, why);
		break;
	case OPAL_UPLOAD_OUT_NOT_NEEDED:
		opal_metrics_upstream(OPAL_UPSTREAM_UPLOAD_SKIPPED);
		opal_debug("upstream: no upload needed for %s: %s", j->id, why);
		break;
	case OPAL_UPLOAD_OUT_IN_PROGRESS:
		pthread_mutex_lock(&u->lock);
		if (j->tries + 1 < OPAL_UPLOAD_MAX_TRIES && u->n_jobs < OPAL_UPLOAD_QUEUE_MAX &&
		    !u->stopping) {
			j->tries++;
			j->not_before = time(NULL) + (time_t)UPLOAD_BACKOFF_S * j->tries;
			u->jobs[u->n_jobs++] = *j;
			j->main_fd = j->debug_fd = -1;   /* moved into the queue */
			opal_metrics_upstream(OPAL_UPSTREAM_UPLOAD_RETRIED);
		} else {
			opal_metrics_upstream(OPAL_UPSTREAM_UPLOAD_FAILED);
			opal_warn("upstream: upload of %s still refused after %d tries: %s", j->id,
				  j->tries + 1, why);
		}
		pthread_mutex_unlock(&u->lock);
		break;
	default:
		opal_metrics_upstream(OPAL_UPSTREAM_UPLOAD_FAILED);
		opal_warn("upstream: upload of %s failed: %s", j->id, why);
		break;
	}
	close_job(j);
}

static void *upload_main(void *arg)
{
	struct opal_upstream *u = arg;
	pthread_mutex_lock(&u->lock);
	while (!u->stopping) {
		time_t now = time(NULL), soonest = 0;
		size_t pick = SIZE_MAX;
		for (size_t i = 0; i < u->n_jobs && pick == SIZE_MAX; i++) {
			if (u->jobs[i].not_before <= now)
				pick = i;
			else if (!soonest || u->jobs[i].not_before < soonest)
				soonest = u->jobs[i].not_before;
		}
		if (pick == SIZE_MAX) {
			if (soonest)
				wait_ms(&u->upload_cond, &u->lock, (int64_t)(soonest - now) * 1000);
			else
				pthread_cond_wait(&u->upload_cond, &u->lock);
			continue;
		}
		struct upload_job j = u->jobs[pick];
		u->jobs[pick] = u->jobs[--u->n_jobs];
		opal_metrics_queue_depth(OPAL_QUEUE_UPSTREAM_UPLOADS, u->n_jobs);
		pthread_mutex_unlock(&u->lock);
		run_job(u, &j);
		pthread_mutex_lock(&u->lock);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* ---- start / stop ------------------------------------------------------------------- */

static char *dup_or_null(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

struct opal_upstream *opal_upstream_start(const struct opal_upstream_config *c,
					  struct opal_symbolizer *sym)
{
	struct opal_upstream *u = calloc(1, sizeof(*u));
	bool fail = false;
	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->sym = sym;
	u->url = dup_or_null(c->url, &fail);
	u->token = dup_or_null(c->token, &fail);
	u->ca_pem = dup_or_null(c->ca_pem, &fail);
	u->tmp_dir = dup_or_null(c->tmp_dir ? c->tmp_dir : "/tmp", &fail);
	u->q = calloc(OPAL_UPSTREAM_MAX_PENDING, sizeof(*u->q));
	if (fail || !u->q || !u->url) {
		opal_upstream_stop(u);
		errno = ENOMEM;
		return NULL;
	}
	size_t l = strlen(u->url);
	while (l && u->url[l - 1] == '/')
		u->url[--l] = '\0';
	u->client = (struct opal_http_client){ .base = u->url, .token = u->token,
					       .ca_pem = u->ca_pem };
	u->uploads = c->upload_debuginfo;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->batch_cond, NULL);
	pthread_cond_init(&u->upload_cond, NULL);
	pthread_cond_init(&u->done_cond, NULL);
	if (pthread_create(&u->batch_thread, NULL, batch_main, u) != 0) {
		opal_upstream_stop(u);
		errno = EAGAIN;
		return NULL;
	}
	u->batch_started = true;
	for (size_t i = 0; u->uploads && i < OPAL_UPLOAD_WORKERS; i++)
		if (pthread_create(&u->workers[i], NULL, upload_main, u) == 0)
			u->n_workers++;
	struct opal_symbolizer_hooks h = { .poor_result = on_poor_result,
					   .new_file = u->uploads ? on_new_file : NULL, .arg = u };
	opal_symbolizer_set_hooks(sym, &h);
	opal_info("upstream: %s%s", u->url,
		  u->uploads ? "; uploading debug data of new files" : "");
	return u;
}

void opal_upstream_stop(struct opal_upstream *u)
{
	if (!u)
		return;
	if (u->sym)
		opal_symbolizer_set_hooks(u->sym, NULL);
	if (u->batch_started) {
		pthread_mutex_lock(&u->lock);
		u->stopping = true;
		pthread_cond_broadcast(&u->batch_cond);
		pthread_cond_broadcast(&u->upload_cond);
		pthread_cond_broadcast(&u->done_cond);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->batch_thread, NULL);
		for (size_t i = 0; i < u->n_workers; i++)
			pthread_join(u->workers[i], NULL);
		pthread_cond_destroy(&u->batch_cond);
		pthread_cond_destroy(&u->upload_cond);
		pthread_cond_destroy(&u->done_cond);
		pthread_mutex_destroy(&u->lock);
	}
	for (size_t i = 0; i < u->n_jobs; i++)
		close_job(&u->jobs[i]);
	free(u->q);
	free(u->url);
	free(u->token);
	free(u->ca_pem);
	free(u->tmp_dir);
	free(u);
}
