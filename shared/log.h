/* Logging for both daemons: stderr lines with a journald priority prefix
 * ("<3>opal-collector: ..."), so that systemd's journal keeps the level. */
#ifndef OPAL_LOG_H
#define OPAL_LOG_H

#include <syslog.h>

/* Sets the program name used in every line; `prog` must outlive the process
 * (a string literal or argv[0]). `verbose` enables LOG_DEBUG lines. */
void opal_log_init(const char *prog, int verbose);

/* printf-style; `prio` is a syslog priority (LOG_ERR, LOG_WARNING, LOG_INFO,
 * LOG_DEBUG). A message with the same format string as one of the last
 * repeated errors is rate-limited to 10 lines per 10 s per call site format;
 * suppressed lines are counted and reported when the window ends. */
void opal_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Lines that name `alias` (e.g. "/proc/self/fd/3", a held descriptor the
 * daemon reaches a folder through after dropping privileges) show `real`
 * (the folder's own path) instead, so that operators read paths they know.
 * At most OPAL_LOG_MAX_ALIASES pairs (more are ignored); both strings are
 * copied (up to 255 bytes each). */
#define OPAL_LOG_MAX_ALIASES 4
void opal_log_alias(const char *alias, const char *real);

#define opal_err(...)   opal_log(LOG_ERR, __VA_ARGS__)
#define opal_warn(...)  opal_log(LOG_WARNING, __VA_ARGS__)
#define opal_info(...)  opal_log(LOG_INFO, __VA_ARGS__)
#define opal_debug(...) opal_log(LOG_DEBUG, __VA_ARGS__)

#endif
