/* journald-friendly stderr logging with a per-format rate limit. */
#include "shared/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#define RATE_SLOTS      32   /* distinct formats tracked for rate limiting */
#define RATE_WINDOW_S   10
#define RATE_MAX_LINES  10

struct rate_slot {
	const char *fmt;       /* identity of the call site's format */
	time_t window_start;
	unsigned lines;
	unsigned suppressed;
};

static const char *log_prog = "opal";
static int log_verbose;
static struct rate_slot slots[RATE_SLOTS];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void opal_log_init(const char *prog, int verbose)
{
	const char *slash = strrchr(prog, '/');

	log_prog = slash ? slash + 1 : prog;
	log_verbose = verbose;
}

/* Returns false when this line must be suppressed; may print a summary of
 * lines suppressed in the window that just ended. Caller holds log_lock. */
static bool rate_allow(int prio, const char *fmt)
{
	time_t now = time(NULL);
	struct rate_slot *slot = NULL, *oldest = &slots[0];

	if (prio > LOG_WARNING)
		return true;
	for (int i = 0; i < RATE_SLOTS; i++) {
		if (slots[i].fmt == fmt) {
			slot = &slots[i];
			break;
		}
		if (slots[i].window_start < oldest->window_start)
			oldest = &slots[i];
	}
	if (!slot) {
		slot = oldest;
		*slot = (struct rate_slot){ .fmt = fmt, .window_start = now };
	}
	if (now - slot->window_start >= RATE_WINDOW_S) {
		if (slot->suppressed)
			fprintf(stderr, "<%d>%s: %u similar messages suppressed\n", LOG_WARNING,
				log_prog, slot->suppressed);
		slot->window_start = now;
		slot->lines = 0;
		slot->suppressed = 0;
	}
	if (slot->lines >= RATE_MAX_LINES) {
		slot->suppressed++;
		return false;
	}
	slot->lines++;
	return true;
}

static struct {
	char alias[256], real[256];
	size_t alias_len;
} aliases[OPAL_LOG_MAX_ALIASES];
static size_t n_aliases;

void opal_log_alias(const char *alias, const char *real)
{
	pthread_mutex_lock(&log_lock);
	if (n_aliases < OPAL_LOG_MAX_ALIASES && alias[0]) {
		snprintf(aliases[n_aliases].alias, sizeof(aliases[0].alias), "%s", alias);
		snprintf(aliases[n_aliases].real, sizeof(aliases[0].real), "%s", real);
		aliases[n_aliases].alias_len = strlen(aliases[n_aliases].alias);
		n_aliases++;
	}
	pthread_mutex_unlock(&log_lock);
}

/* Rewrites the aliases in `msg` (a NUL-terminated line of `cap` bytes)
 * into their real paths; a line that would not fit is cut. Lock held. An
 * alias matches only as a whole path element ("/proc/self/fd/3" not in
 * "/proc/self/fd/31"). */
static void unalias(char *msg, size_t cap)
{
	for (size_t a = 0; a < n_aliases; a++) {
		char *p = msg;
		while ((p = strstr(p, aliases[a].alias)) != NULL) {
			size_t al = aliases[a].alias_len, rl = strlen(aliases[a].real);
			char next = p[al];
			if (next != '\0' && next != '/' && next != ' ' && next != ':' && next != ')' &&
			    next != '\'' && next != ',') {
				p += al;
				continue;
			}
			size_t pos = (size_t)(p - msg), tail = strlen(p + al);
			if (pos + rl + 1 > cap)
				break;   /* no room for the real path: leave the rest */
			if (pos + rl + tail + 1 > cap)
				tail = cap - 1 - pos - rl;
			memmove(p + rl, p + al, tail);
			p[rl + tail] = '\0';
			memcpy(p, aliases[a].real, rl);
			p += rl;
		}
	}
}

void opal_log(int prio, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (prio >= LOG_DEBUG && !log_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_lock);
	unalias(msg, sizeof(msg));
	if (rate_allow(prio, fmt))
		fprintf(stderr, "<%d>%s: %s\n", prio, log_prog, msg);
	pthread_mutex_unlock(&log_lock);
}
