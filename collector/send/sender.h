/* The collector's side of the socket (docs/wire-protocol.md): connects to
 * the symbolizer (retrying with backoff while it is not there), sends
 * Hello, the kallsyms descriptor, FileInfos with ELF descriptors (each
 * followed by its .gnu_debuglink candidates, debuglink.h), the raw code
 * objects interpreter frames name (interp/code_cache.h), the JIT files of
 * processes with JIT frames (proc/jitsrc.h) and the queued intervals, and
 * handles Ack and FileRequest. Sends nothing to a listener the peer policy
 * does not trust, nor on a socket whose folder another user could write
 * (peer.h). Never blocks on a send: frames go into a bounded output queue
 * written as the socket takes them (a symbolizer busy with a cold interval
 * is slow, not gone); reads block at most the receive timeout (1 s). */
#ifndef OPAL_COLLECTOR_SENDER_H
#define OPAL_COLLECTOR_SENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/counters.h"
#include "interp/code_cache.h"
#include "proc/debuglink.h"
#include "proc/files.h"
#include "proc/hostinfo.h"
#include "proc/jitsrc.h"
#include "send/peer.h"
#include "send/sendq.h"
#include "shared/wire.h"

#define OPAL_BACKOFF_MIN_NS 100000000ull    /* 100 ms */
#define OPAL_BACKOFF_MAX_NS 5000000000ull   /* 5 s */
#define OPAL_RECV_TIMEOUT_MS 1000
/* Output queue: frames serialized but not yet taken by the socket. Entries
 * (intervals and what they name) wait once it holds OPAL_SEND_OUT_BYTES or
 * OPAL_SEND_OUT_FDS descriptors (counted in send_waits); replies to the
 * symbolizer (Hello, kallsyms, FileRequest answers) always queue, up to
 * OPAL_SEND_OUT_MAX_FRAMES frames and OPAL_SEND_OUT_MAX_FDS descriptors,
 * past which the connection is dropped (its intervals are sent again). */
#define OPAL_SEND_OUT_BYTES     (4u << 20)
#define OPAL_SEND_OUT_FDS       32u
#define OPAL_SEND_OUT_MAX_FRAMES 4096u
#define OPAL_SEND_OUT_MAX_FDS   128u   /* of the collector's 256 kept free (main.c) */
#define OPAL_RECV_PER_SERVICE 64            /* messages read per opal_sender_service */

/* One serialized frame of the output queue; `fd` (a duplicate, or -1)
 * rides on its first byte. */
struct opal_out_frame {
	uint8_t *buf;
	size_t len, off;
	int fd;
};

struct opal_sender {
	const char *path;
	int sock;                    /* -1 while disconnected */
	struct opal_wire_reader rd;
	uint64_t conn_gen;           /* 1, 2, ... per successful connect */
	uint64_t next_try_ns, backoff_ns;
	bool warned_down;            /* "not reachable" logged once per outage */
	bool warned_refused;         /* an untrusted folder or peer logged once per outage */
	struct opal_peer_policy peer;   /* root only unless set after opal_sender_init */
	int max_block_ms;            /* 0, or a lower bound of the receive timeout (stop) */
	struct opal_out_frame *out;  /* ring of out_cap frames from out_head, out_n used */
	size_t out_cap, out_head, out_n, out_bytes;   /* out_bytes: not yet written */
	unsigned out_fds;
	struct opal_sendq *q;
	struct opal_file_table *files;
	struct opal_code_cache *codes;   /* NULL: no interpreter frames */
	struct opal_jit_table *jit;      /* NULL: no JIT files */
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
 * disconnected and the backoff allows (refusing, and counting in
 * peers_refused, a listener whose uid the peer policy does not trust, and
 * not connecting while the socket's folder fails opal_socket_dir_check),
 * sends every queued interval not yet
 * sent on this connection (each preceded by the FileInfos it needs), and
 * handles the Acks and FileRequests already received. Connection errors
 * close the socket; unacknowledged intervals stay queued for the next
 * connection. */
void opal_sender_service(struct opal_sender *s, uint64_t now_ns);

/* Waits up to `timeout_ms` for the symbolizer to have something to read,
 * or for room in the socket while output is queued (or just sleeps while
 * disconnected). Returns early on a signal. */
void opal_sender_wait(struct opal_sender *s, int timeout_ms);

/* True while frames wait in the output queue (the caller polls sooner). */
bool opal_sender_pending(const struct opal_sender *s);

/* Lowers the receive timeout to `ms` (at least 1) on this and later
 * connections, so that no call blocks past a stop deadline. */
void opal_sender_limit_block(struct opal_sender *s, int ms);

void opal_sender_close(struct opal_sender *s);

#endif
