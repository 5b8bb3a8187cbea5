/* The symbolizer's collector-facing side: accepts collector connections on
 * a Unix socket, takes their files and intervals, writes profiles and
 * acknowledges each interval once written. */
#ifndef OPAL_SERVER_H
#define OPAL_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "interp/code_table.h"
#include "interp/jit_table.h"
#include "ledger.h"
#include "output.h"
#include "symbolize/symbolize.h"

#define OPAL_SERVER_MAX_CONNS 4         /* concurrent collector connections */
#define OPAL_SERVER_MAX_ALLOW 16
#define OPAL_SERVER_TICK_MS   200       /* poll timeout: on_tick's period when idle */

/* One interval after it was written and acknowledged (on_written). */
struct opal_server_written {
	const struct opal_profile *p;
	struct opal_output_interval *enc;   /* its encodings; the hook may take enc->otlp
					     * over by setting it to NULL */
	uint64_t run_id, seq;
	uint64_t start_unix_ns, end_unix_ns;
	const char *host_name;              /* the collector's host ("" when unknown) */
};

struct opal_server_config {
	int listen_fd;                      /* bound, listening AF_UNIX SOCK_STREAM */
	uid_t allow_uids[OPAL_SERVER_MAX_ALLOW];   /* peers allowed besides uid 0 */
	size_t n_allow;
	struct opal_symbolizer *sym;        /* borrowed */
	struct opal_ledger *ledger;         /* borrowed */
	struct opal_output *out;            /* borrowed */
	struct opal_code_table *codes;      /* borrowed; NULL: interpreter frames unnamed */
	struct opal_jit_table *jits;        /* borrowed; NULL: JIT frames unnamed */
	bool whole_run;                     /* also keep and write the whole-run profile */
	/* Called after each interval is written and acknowledged, with its
	 * sequence number and sample count; may be NULL. */
	void (*on_interval)(void *arg, uint64_t seq, uint64_t samples);
	void *on_interval_arg;
	/* Hooks for what follows the files (recent profiles, export); each
	 * may be NULL and runs on the serving thread with `hook_arg`.
	 * want_otlp: whether on_written needs the OTLP encoding even when no
	 * interval files are written. settle: after an interval is
	 * symbolized, before it is written; may wait (bounded) for better
	 * frames from elsewhere (the upstream) and returns > 0 when they came,
	 * so the interval is symbolized again. on_written: after the
	 * acknowledgement; must not block (export goes through queues).
	 * on_tick: once per poll round, so every OPAL_SERVER_TICK_MS when idle
	 * and after each batch of messages otherwise, also while draining
	 * (SIGHUP reloads, metrics). */
	bool (*want_otlp)(void *arg);
	int (*settle)(void *arg);
	void (*on_written)(void *arg, const struct opal_server_written *w);
	void (*on_tick)(void *arg);
	void *hook_arg;
};

/* Serves until *stop becomes non-zero, then keeps serving connected
 * collectors until they disconnect (bounded: 3 s), writes the whole-run profile and
 * returns 0; -errno on a fatal error of the listening socket. `cfg` is
 * read at each use, so a hook may change cfg->out settings (SIGHUP). */
int opal_server_run(const struct opal_server_config *cfg, volatile sig_atomic_t *stop);

#endif
