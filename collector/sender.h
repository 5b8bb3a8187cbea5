/* The collector's side of the socket (docs/wire-protocol.md): connects to
 * the symbolizer (retrying with backoff while it is not there), sends
 * Hello, the kallsyms descriptor, FileInfos with ELF descriptors (each
 * followed by its .gnu_debuglink candidates, debuglink.h) and the queued
 * intervals, and handles Ack and FileRequest. Never blocks longer
 * than the socket timeouts (send 5 s without progress, a started frame 1 s). */
#ifndef OPAL_COLLECTOR_SENDER_H
#define OPAL_COLLECTOR_SENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "counters.h"
#include "debuglink.h"
#include "files.h"
#include "hostinfo.h"
#include "sendq.h"
#include "wire.h"

#define OPAL_BACKOFF_MIN_NS 100000000ull    /* 100 ms */
#define OPAL_BACKOFF_MAX_NS 5000000000ull   /* 5 s */
#define OPAL_SEND_TIMEOUT_MS 5000
#define OPAL_RECV_TIMEOUT_MS 1000
#define OPAL_RECV_PER_SERVICE 64            /* messages read per opal_sender_service */

struct opal_sender {
	const char *path;
	int sock;                    /* -1 while disconnected */
	struct opal_wire_reader rd;
	uint64_t conn_gen;           /* 1, 2, ... per successful connect */
	uint64_t next_try_ns, backoff_ns;
	bool warned_down;            /* "not reachable" logged once per outage */
	struct opal_sendq *q;
	struct opal_file_table *files;
	/* Where .gnu_debuglink candidates are opened: the live /proc unless a
	 * test replaces it after opal_sender_init. */
	const struct opal_debuglink_source *debuglinks;
	struct opal_counters *ctr;
	const struct opal_host_info *host;
	uint64_t run_id, boot_time_unix_ns, period_ns;
	uint32_t frequency_hz;
	const uint64_t *next_seq;    /* the collector's next interval seq */
	/* Called with the symbolizer's pid (SO_PEERCRED) after each connect. */
	void (*on_peer)(void *ctx, pid_t pid);
	void *on_peer_ctx;
};

/* Next reconnect delay after a failed attempt that waited `cur_ns`:
 * doubles, from OPAL_BACKOFF_MIN_NS up to OPAL_BACKOFF_MAX_NS. */
uint64_t opal_backoff_next(uint64_t cur_ns);

/* Sets up a disconnected sender; every pointer must outlive it. */
void opal_sender_init(struct opal_sender *s, const char *path, struct opal_sendq *q,
		      struct opal_file_table *files, struct opal_counters *ctr,
		      const struct opal_host_info *host);

/* One round of socket work at CLOCK_MONOTONIC `now_ns`: connects when
 * disconnected and the backoff allows, sends every queued interval not yet
 * sent on this connection (each preceded by the FileInfos it needs), and
 * handles the Acks and FileRequests already received. Connection errors
 * close the socket; unacknowledged intervals stay queued for the next
 * connection. */
void opal_sender_service(struct opal_sender *s, uint64_t now_ns);

/* Waits up to `timeout_ms` for the symbolizer to have something to read
 * (or just sleeps while disconnected). Returns early on a signal. */
void opal_sender_wait(struct opal_sender *s, int timeout_ms);

bool opal_sender_connected(const struct opal_sender *s);

void opal_sender_close(struct opal_sender *s);

#endif
