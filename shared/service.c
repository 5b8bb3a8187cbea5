/* Service signals and the descriptor limit (service.h). */
#include <string.h>

#include "shared/notify.h"
#include "shared/service.h"

volatile sig_atomic_t opal_stop_signals;
volatile sig_atomic_t opal_reload_signal;

static void on_stop(int sig)
{
	(void)sig;
	opal_stop_signals++;
	opal_notify("STOPPING=1");   /* async-signal-safe: one sendto() */
}

static void on_reload(int sig)
{
	(void)sig;
	opal_reload_signal = 1;
}

void opal_service_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;   /* no SA_RESTART: poll returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_reload;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

rlim_t opal_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) < 0)
			return 0;
	}
	return rl.rlim_cur;
}
