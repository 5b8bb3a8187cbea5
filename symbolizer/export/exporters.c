/* Configured OTLP exporters with replacement on SIGHUP (exporters.h).
 *
 * A replaced or unwanted exporter becomes a "retiree": a thread stops it
 * (opal_otlp_exporter_stop, bounded flush) and adds its last counters to
 * its slot's totals. The slot's mutex guards only those totals; the
 * running exporter pointers belong to the main thread. */
#include "export/exporters.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "base/metrics.h"
#include "export/otlp_http.h"
#include "profile/otlp_logs.h"
#include "profile/profile.h"
#include "shared/log.h"

struct slot {
	const char *name;                 /* "otlp", "otlp-logs" */
	enum opal_metric_exporter metric;
	enum opal_otlp_signal signal;
	struct opal_otlp_exporter *ex;    /* running one, or NULL */
	/* its settings, to tell whether a new configuration changes them */
	char *url, *headers;
	unsigned timeout_ms;
	bool gzip;
	uint64_t queue_bytes;
	struct opal_export_stats retired; /* counters of retired exporters (under `mu`) */
};

struct retiree {
	struct retiree *next;
	struct opal_exporters *x;
	struct slot *slot;
	struct opal_otlp_exporter *ex;
	struct opal_export_stats at_retire;   /* already added to slot->retired */
	unsigned flush_ms;
	pthread_t thread;
	bool done;                            /* under `mu` */
};

struct opal_exporters {
	struct slot slots[2];
	struct retiree *retirees;
	pthread_mutex_t mu;
};

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The monotonic counters of `b` added to `a`; `sub` (may be NULL)
 * subtracted. */
static void add_stats(struct opal_export_stats *a, const struct opal_export_stats *b,
		      const struct opal_export_stats *sub)
{
	const struct opal_export_stats z = { 0 };

	if (!sub)
		sub = &z;
	a->enqueued += b->enqueued - sub->enqueued;
	a->enqueued_bytes += b->enqueued_bytes - sub->enqueued_bytes;
	a->sent += b->sent - sub->sent;
	a->partial += b->partial - sub->partial;
	a->failed += b->failed - sub->failed;
	a->retries += b->retries - sub->retries;
	a->dropped += b->dropped - sub->dropped;
	a->dropped_bytes += b->dropped_bytes - sub->dropped_bytes;
}

static void log_totals(const char *name, const char *what, const struct opal_export_stats *s)
{
	opal_info("%s export%s: %" PRIu64 " requests enqueued, %" PRIu64 " sent (%" PRIu64
		  " partial), %" PRIu64 " failed, %" PRIu64 " retries, %" PRIu64 " dropped",
		  name, what, s->enqueued, s->sent, s->partial, s->failed, s->retries, s->dropped);
}

struct opal_exporters *opal_exporters_new(void)
{
	struct opal_exporters *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	pthread_mutex_init(&x->mu, NULL);
	x->slots[0] = (struct slot){ .name = "otlp", .metric = OPAL_EXPORTER_OTLP,
				     .signal = OPAL_OTLP_SIGNAL_PROFILES };
	x->slots[1] = (struct slot){ .name = "otlp-logs", .metric = OPAL_EXPORTER_OTLP_LOGS,
				     .signal = OPAL_OTLP_SIGNAL_LOGS };
	return x;
}

static void *retire_main(void *arg)
{
	struct retiree *r = arg;
	struct opal_export_stats final;

	opal_otlp_exporter_stop(r->ex, r->flush_ms, &final);
	pthread_mutex_lock(&r->x->mu);
	add_stats(&r->slot->retired, &final, &r->at_retire);
	r->done = true;
	pthread_mutex_unlock(&r->x->mu);
	return NULL;   /* the queue logged what it dropped */
}

/* Hands the slot's running exporter to a retiree thread; stops it here
 * when no thread can be made. */
static void retire(struct opal_exporters *x, struct slot *s, unsigned flush_ms)
{
	struct opal_export_stats final;
	struct retiree *r;

	if (!s->ex)
		return;
	r = calloc(1, sizeof(*r));
	if (r) {
		r->x = x;
		r->slot = s;
		r->ex = s->ex;
		r->flush_ms = flush_ms;
		opal_otlp_exporter_stats(s->ex, &r->at_retire);
		if (pthread_create(&r->thread, NULL, retire_main, r) == 0) {
			/* the thread adds final - at_retire: the order does not matter */
			pthread_mutex_lock(&x->mu);
			add_stats(&s->retired, &r->at_retire, NULL);
			pthread_mutex_unlock(&x->mu);
			r->next = x->retirees;
			x->retirees = r;
			s->ex = NULL;
			return;
		}
		free(r);
	}
	opal_otlp_exporter_stop(s->ex, flush_ms, &final);
	pthread_mutex_lock(&x->mu);
	add_stats(&s->retired, &final, NULL);
	pthread_mutex_unlock(&x->mu);
	s->ex = NULL;
}

/* Joins the retirees that are done (all of them with `all`). */
static void reap(struct opal_exporters *x, bool all)
{
	struct retiree **pp = &x->retirees;

	while (*pp) {
		struct retiree *r = *pp;
		pthread_mutex_lock(&x->mu);
		bool done = r->done;
		pthread_mutex_unlock(&x->mu);
		if (!done && !all) {
			pp = &r->next;
			continue;
		}
		pthread_join(r->thread, NULL);
		*pp = r->next;
		free(r);
	}
}

static void clear_settings(struct slot *s)
{
	free(s->url);
	free(s->headers);
	s->url = s->headers = NULL;
}

int opal_exporter_start(const char *name, enum opal_otlp_signal signal,
			const struct opal_exporter_settings *e, uint64_t queue_bytes,
			struct opal_otlp_exporter **out)
{
	struct opal_otlp_kv *hdr = NULL;
	size_t n_hdr = 0;
	int err = opal_otlp_http_parse_headers(e->headers, &hdr, &n_hdr);

	*out = NULL;
	if (err < 0) {
		opal_err("%s export: OTLP headers unusable: %s", name, strerror(-err));
		return err;
	}
	struct opal_otlp_http_config hc = {
		.url = e->url, .headers = hdr, .n_headers = n_hdr, .timeout_ms = e->timeout_ms,
		.gzip = e->gzip, .signal = signal, .user_agent = "opal-symbolizer",
	};
	struct opal_export_queue_config qc = {
		.name = name, .max_bytes = queue_bytes,
		.max_items = OPAL_EXPORTERS_MAX_REQUESTS,
		.max_attempts = OPAL_EXPORTERS_MAX_ATTEMPTS,
		.backoff_initial_ms = OPAL_EXPORTERS_BACKOFF_MS,
		.backoff_max_ms = OPAL_EXPORTERS_BACKOFF_MAX_MS,
	};
	err = opal_otlp_exporter_start(&hc, &qc, out);
	opal_otlp_kv_free(hdr, n_hdr);
	if (err < 0) {
		*out = NULL;
		opal_err("%s export to %s cannot start: %s", name, e->url, strerror(-err));
		return err;
	}
	opal_info("%s export to %s (timeout %u ms, %s, queue %" PRIu64 " bytes)", name, e->url,
		  e->timeout_ms, e->gzip ? "gzip" : "uncompressed", queue_bytes);
	return 0;
}

static int start(struct slot *s, const struct opal_exporter_settings *e, uint64_t queue_bytes)
{
	clear_settings(s);
	int err = opal_exporter_start(s->name, s->signal, e, queue_bytes, &s->ex);
	if (err < 0)
		return err;
	s->url = strdup(e->url);
	s->headers = e->headers ? strdup(e->headers) : NULL;
	s->timeout_ms = e->timeout_ms;
	s->gzip = e->gzip;
	s->queue_bytes = queue_bytes;
	return 0;
}

static bool same_settings(const struct slot *s, const struct opal_exporter_settings *e,
			  uint64_t queue_bytes)
{
	return str_eq(s->url, e->url) && str_eq(s->headers, e->headers) &&
	       s->timeout_ms == e->timeout_ms && s->gzip == e->gzip &&
	       s->queue_bytes == queue_bytes;
}

int opal_exporters_configure(struct opal_exporters *x, const struct opal_exporters_config *c)
{
	const struct opal_exporter_settings *want[2] = { &c->profiles, &c->logs };
	int first = 0;

	reap(x, false);
	for (int i = 0; i < 2; i++) {
		struct slot *s = &x->slots[i];
		const struct opal_exporter_settings *e = want[i];
		if (s->ex && e->url && same_settings(s, e, c->queue_bytes))
			continue;
		if (s->ex) {
			opal_info("%s export to %s: %s; the old exporter flushes for at most %u ms",
				  s->name, s->url, e->url ? "settings changed" : "turned off",
				  OPAL_EXPORTERS_FLUSH_MS);
			retire(x, s, OPAL_EXPORTERS_FLUSH_MS);
		}
		clear_settings(s);
		if (!e->url)
			continue;
		int err = start(s, e, c->queue_bytes);
		if (err < 0 && !first)
			first = err;
	}
	opal_exporters_publish(x);
	return first;
}

bool opal_exporters_want_otlp(const struct opal_exporters *x)
{
	return x->slots[0].ex != NULL;
}

bool opal_exporters_want_logs(const struct opal_exporters *x)
{
	return x->slots[1].ex != NULL;
}

static void push_logs(struct slot *s, const struct opal_profile *p, const uint8_t *gz,
		      size_t gz_len, const struct opal_otlp_logs_options *lo)
{
	struct opal_otlp_logs_record r = { .pprof_gz = gz, .len = gz_len };
	uint64_t start, end;
	uint8_t *buf;
	size_t len;
	int err;

	opal_profile_time(p, &start, &end);
	r.start_unix_ns = start;
	r.duration_ns = end > start ? end - start : 0;
	r.period_ns = opal_profile_period_ns(p);
	r.samples = opal_profile_sample_count(p);
	if ((err = opal_otlp_logs_encode(&r, lo, &buf, &len)) < 0) {
		opal_err("%s export: encoding the interval failed: %s", s->name, strerror(-err));
		return;
	}
	opal_otlp_exporter_push(s->ex, buf, len);
}

void opal_exporters_push(struct opal_exporters *x, const struct opal_profile *p, uint8_t *otlp,
			 size_t otlp_len, const uint8_t *pprof_gz, size_t gz_len,
			 const struct opal_otlp_logs_options *lo)
{
	struct slot *prof = &x->slots[0], *logs = &x->slots[1];

	if (opal_profile_sample_count(p) == 0) {
		free(otlp);   /* an interval without samples is not sent */
		return;
	}
	if (prof->ex && otlp)
		opal_otlp_exporter_push(prof->ex, otlp, otlp_len);
	else
		free(otlp);
	if (logs->ex && pprof_gz)
		push_logs(logs, p, pprof_gz, gz_len, lo);
	opal_exporters_publish(x);
}

void opal_exporters_publish(struct opal_exporters *x)
{
	for (int i = 0; i < 2; i++) {
		struct slot *s = &x->slots[i];
		struct opal_export_stats now = { 0 }, total;
		if (s->ex)
			opal_otlp_exporter_stats(s->ex, &now);
		pthread_mutex_lock(&x->mu);
		total = s->retired;
		pthread_mutex_unlock(&x->mu);
		add_stats(&total, &now, NULL);
		total.queued_items = now.queued_items;
		total.queued_bytes = now.queued_bytes;
		opal_metrics_exporter(s->metric, &total);
	}
}

void opal_exporters_stop(struct opal_exporters *x, unsigned flush_ms)
{
	bool any[2];

	if (!x)
		return;
	for (int i = 0; i < 2; i++) {
		struct slot *s = &x->slots[i];
		any[i] = s->ex || s->retired.enqueued;
		if (s->ex)
			opal_info("%s export: stopping, flushing for at most %u ms", s->name,
				  flush_ms);
		retire(x, s, flush_ms);
	}
	reap(x, true);
	opal_exporters_publish(x);
	for (int i = 0; i < 2; i++) {
		struct slot *s = &x->slots[i];
		if (any[i])
			log_totals(s->name, " totals", &s->retired);
		clear_settings(s);
	}
	pthread_mutex_destroy(&x->mu);
	free(x);
}
