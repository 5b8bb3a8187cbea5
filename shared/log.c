/* journald-friendly stderr logging with a per-format rate limit. */
#include "log.h"

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
	if (rate_allow(prio, fmt))
		fprintf(stderr, "<%d>%s: %s\n", prio, log_prog, msg);
	pthread_mutex_unlock(&log_lock);
}
