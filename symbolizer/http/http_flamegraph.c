/* GET /flamegraph?seconds=N[&pid=P][&kind=offcpu]: the flame graph page
 * (flamegraph.h) of the recent interval profiles (recent.h) that overlap
 * the last N seconds, optionally of one process; kind=offcpu shows the
 * off-CPU profiles (docs/offcpu.md) weighed by time off CPU, and each
 * view links to the other.
 *
 * Bounds: N is clamped to the recent profiles' age limit; at most
 * OPAL_HTTP_FLAMEGRAPH_MAX_PROFILES profiles (the newest) are read, each
 * validated as opal-report does (opal_report_load); one page is built at a
 * time (another request meanwhile gets 503 with Retry-After); the call
 * tree has the flame graph's own node bounds. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http/http_internal.h"
#include "profile/flamegraph.h"
#include "profile/recent.h"
#include "profile/report.h"
#include "shared/log.h"

#define MAX_PID 4194304u   /* PID_MAX_LIMIT on 64-bit Linux */
#define CSP "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

/* A decimal in [1, max]; false otherwise. */
static bool parse_arg(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > max)
			return false;
	}
	if (v == 0)
		return false;
	*out = v;
	return true;
}

static uint64_t now_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static enum MHD_Result busy(struct MHD_Connection *c)
{
	return opal_http_send_error_with(c, 503, MHD_HTTP_HEADER_RETRY_AFTER, "1",
					 "another flame graph is being built; retry");
}

/* Adds the listed profiles to `fg`; returns how many were used, or
 * -ENOMEM. */
static int add_profiles(struct opal_flamegraph *fg, const char *dir,
			const struct opal_recent_entry *e, size_t n, const struct opal_fg_filter *f)
{
	char path[PATH_MAX + 256], why[256];
	int used = 0;

	for (size_t i = 0; i < n; i++) {
		Perftools__Profiles__Profile *p;
		snprintf(path, sizeof(path), "%s/%s", dir, e[i].name);
		int err = opal_report_load(path, &p, why, sizeof(why));
		if (err < 0) {
			if (err != -ENOENT)   /* ENOENT: rotated away since the listing */
				opal_warn("flamegraph: %s skipped: %s", e[i].name, why);
			continue;
		}
		err = opal_flamegraph_add_pprof(fg, p, f);
		perftools__profiles__profile__free_unpacked(p, NULL);
		if (err == -ENOMEM)
			return err;
		if (err < 0)
			opal_warn("flamegraph: %s skipped: %s", e[i].name, strerror(-err));
		else
			used++;
	}
	return used;
}

static enum MHD_Result build(struct opal_http_server *h, struct MHD_Connection *c,
			     uint64_t seconds, uint64_t pid, bool clamped, bool off_cpu)
{
	struct opal_recent *recent = off_cpu ? h->recent_offcpu : h->recent;
	uint64_t now = now_unix_ns(), from = now - seconds * 1000000000ull;
	struct opal_fg_filter f = { .start_unix_ns = from, .pid = (uint32_t)pid };
	struct opal_recent_entry *e;
	size_t n;
	char host[256] = "", title[512], *html;
	size_t len;
	int err = opal_recent_list(recent, from, 0, OPAL_HTTP_FLAMEGRAPH_MAX_PROFILES, &e, &n);

	if (err < 0)
		return opal_http_send_error(c, 500, "recent profiles unreadable: %s", strerror(-err));
	struct opal_flamegraph *fg = opal_flamegraph_new();
	int used = fg ? add_profiles(fg, opal_recent_dir(recent), e, n, &f) : -ENOMEM;
	free(e);
	if (used < 0) {
		opal_flamegraph_free(fg);
		return opal_http_send_error(c, 503, "out of memory building the flame graph");
	}
	gethostname(host, sizeof(host) - 1);
	char pidtext[32] = "";
	if (pid)
		snprintf(pidtext, sizeof(pidtext), ", pid %" PRIu64, pid);
	snprintf(title, sizeof(title), "opal: %s, %s, last %" PRIu64 " s%s%s: %d interval profiles",
		 host[0] ? host : "this host", off_cpu ? "off CPU" : "on CPU", seconds,
		 clamped ? " (the longest kept)" : "", pidtext, used);
	/* the other view of the same window and process */
	if (h->recent_offcpu) {
		char href[128], pidarg[32] = "";
		if (pid)
			snprintf(pidarg, sizeof(pidarg), "&pid=%" PRIu64, pid);
		snprintf(href, sizeof(href), "/flamegraph?seconds=%" PRIu64 "%s%s", seconds, pidarg,
			 off_cpu ? "" : "&kind=offcpu");
		opal_flamegraph_set_link(fg, off_cpu ? "on-CPU view" : "off-CPU view", href);
	}
	err = opal_flamegraph_html_buf(fg, title, &html, &len);
	opal_flamegraph_free(fg);
	if (err < 0)
		return opal_http_send_error(c, 500, "writing the page failed: %s", strerror(-err));
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, html, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(html);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	MHD_add_response_header(resp, "Content-Security-Policy", CSP);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return opal_http_queue(c, 200, resp);
}

enum MHD_Result opal_http_flamegraph(struct opal_http_server *h, struct MHD_Connection *c)
{
	const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
	const char *p = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
	const char *k = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "kind");
	bool off_cpu = k && strcmp(k, "offcpu") == 0;
	uint64_t seconds = OPAL_HTTP_FLAMEGRAPH_DEFAULT_S, pid = 0, max_age;
	bool clamped = false;

	if (!h->recent)
		return opal_http_send_error(c, 503, "this symbolizer keeps no recent profiles");
	if (k && !off_cpu && strcmp(k, "cpu") != 0)
		return opal_http_send_error(c, 400, "kind: want cpu or offcpu");
	if (off_cpu && !h->recent_offcpu)
		return opal_http_send_error(c, 503, "this symbolizer keeps no off-CPU profiles");
	max_age = opal_recent_max_age_s(h->recent);
	if (s && !parse_arg(s, UINT32_MAX, &seconds))
		return opal_http_send_error(c, 400, "seconds: want a whole number of seconds >= 1");
	if (p && !parse_arg(p, MAX_PID, &pid))
		return opal_http_send_error(c, 400, "pid: want a process id in 1..%u", MAX_PID);
	if (seconds > max_age) {
		seconds = max_age;
		clamped = true;
	}
	if (pthread_mutex_trylock(&h->flamegraph_lock) != 0)
		return busy(c);
	enum MHD_Result r = build(h, c, seconds, pid, clamped, off_cpu);
	pthread_mutex_unlock(&h->flamegraph_lock);
	return r;
}
