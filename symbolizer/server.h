/* The symbolizer's collector-facing side: accepts collector connections on
 * a Unix socket, takes their files and intervals, writes profiles and
 * acknowledges each interval once written. */
#ifndef OPAL_SERVER_H
#define OPAL_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "ledger.h"
#include "output.h"
#include "symbolize.h"

#define OPAL_SERVER_MAX_CONNS 4         /* concurrent collector connections */
#define OPAL_SERVER_MAX_ALLOW 16

struct opal_server_config {
	int listen_fd;                      /* bound, listening AF_UNIX SOCK_STREAM */
	uid_t allow_uids[OPAL_SERVER_MAX_ALLOW];   /* peers allowed besides uid 0 */
	size_t n_allow;
	struct opal_symbolizer *sym;        /* borrowed */
	struct opal_ledger *ledger;         /* borrowed */
	struct opal_output *out;            /* borrowed */
	bool whole_run;                     /* also keep and write the whole-run profile */
	/* Called after each interval is written and acknowledged, with its
	 * sequence number and sample count; may be NULL. */
	void (*on_interval)(void *arg, uint64_t seq, uint64_t samples);
	void *on_interval_arg;
};

/* Serves until *stop becomes non-zero, then keeps serving connected
 * collectors until they disconnect (bounded: 3 s), writes the whole-run profile and
 * returns 0; -errno on a fatal error of the listening socket. */
int opal_server_run(const struct opal_server_config *cfg, volatile sig_atomic_t *stop);

#endif
