/* What both daemons do alike as services (their man pages and unit
 * files promise it): SIGINT/SIGTERM stop them cleanly and tell the service
 * manager STOPPING=1, SIGHUP reloads their configuration, SIGPIPE is
 * ignored (a peer that goes away is an EPIPE), and the descriptor limit
 * is raised to what the system allows (both hold one descriptor per ELF
 * file they read). */
#ifndef OPAL_SERVICE_H
#define OPAL_SERVICE_H

#include <signal.h>
#include <sys/resource.h>

/* SIGINT and SIGTERM received so far (a second one cuts the clean stop
 * short), and whether a SIGHUP came since the main loop last cleared it.
 * Written by the handlers only (the reload flag is cleared by its
 * reader). */
extern volatile sig_atomic_t opal_stop_signals;
extern volatile sig_atomic_t opal_reload_signal;

/* Installs the handlers above: SIGINT/SIGTERM without SA_RESTART (so that
 * a blocking poll() returns EINTR and the loop sees the stop), SIGHUP
 * with it; SIGPIPE ignored. Call once at start-up, after opal_log_init
 * and before threads start (they inherit the dispositions). */
void opal_service_signals(void);

/* Raises the soft RLIMIT_NOFILE to the hard limit. Returns the soft limit
 * in force afterwards (RLIM_INFINITY when unlimited; the old one when the
 * raise was refused), or 0 when getrlimit fails. */
rlim_t opal_raise_nofile(void);

#endif
