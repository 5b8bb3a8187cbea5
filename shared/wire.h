/* Framing of the collector -> symbolizer protocol (proto/opal/wire.proto,
 * docs/wire-protocol.md) over a SOCK_STREAM Unix socket, with descriptors
 * passed as SCM_RIGHTS. */
#ifndef OPAL_WIRE_H
#define OPAL_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "opal/wire.pb-c.h"

#define OPAL_WIRE_VERSION    1u
#define OPAL_WIRE_MAGIC      0x4c41504fu       /* "OPAL" as little-endian bytes */
#define OPAL_WIRE_HDR_LEN    8u
#define OPAL_WIRE_MAX_FRAME  (64u << 20)       /* bytes of payload */
#define OPAL_WIRE_MAX_FDS    8                 /* descriptors queued per reader */
#define OPAL_WIRE_CMDLINE_MAX 4096             /* Process.command_line: bytes, with a NUL */
/* Memory one frame may cost decoded: OPAL_WIRE_DECODE_FACTOR times its
 * payload plus OPAL_WIRE_DECODE_SLACK, at most OPAL_WIRE_DECODE_MAX (real
 * intervals take about 5 times; a frame of empty messages 40 to 60). */
#define OPAL_WIRE_DECODE_FACTOR 16u
#define OPAL_WIRE_DECODE_SLACK  (64u << 10)
#define OPAL_WIRE_DECODE_MAX    (512u << 20)

/* Serializes `env` (env->version is set to OPAL_WIRE_VERSION) and writes one
 * frame, passing `fd` with SCM_RIGHTS when fd >= 0 (the caller keeps its
 * copy). Blocks until written (each write at most the socket's SO_SNDTIMEO);
 * retries short writes, and EINTR unless a stop signal came
 * (opal_stop_signals: a send blocked on a stalled peer must not hold up the
 * stop; then the whole frame also gets one SO_SNDTIMEO, -EAGAIN after it).
 * Returns 0, -EMSGSIZE over OPAL_WIRE_MAX_FRAME, -EINTR when so
 * interrupted, -EPIPE/-errno on a dead peer. */
int opal_wire_send(int sock, Opal__Wire__V1__Envelope *env, int fd);

/* Serializes `env` (env->version set) into one malloc'd frame, header and
 * payload, for a sender that writes it itself (the collector's
 * non-blocking output, collector/send/sender.c): *frame (freed by the
 * caller) and *len in bytes. Returns 0, -EMSGSIZE over
 * OPAL_WIRE_MAX_FRAME, -ENOMEM. */
int opal_wire_frame(Opal__Wire__V1__Envelope *env, uint8_t **frame, size_t *len);

/* One sendmsg of up to `len` bytes of `buf` with `flags` (MSG_NOSIGNAL
 * added), passing `fd` with SCM_RIGHTS when >= 0 (it goes with the first
 * byte written). Returns the bytes written or -errno (-EAGAIN with
 * MSG_DONTWAIT on a full socket: nothing written, the descriptor not sent). */
ssize_t opal_wire_write(int sock, const uint8_t *buf, size_t len, int fd, int flags);

struct opal_wire_reader {
	int sock;
	int fds[OPAL_WIRE_MAX_FDS];   /* received, not yet claimed */
	size_t nfds;
	uint64_t frames_bad;          /* payloads that failed to unpack */
	uint64_t frames_too_large;    /* lengths over OPAL_WIRE_MAX_FRAME */
	uint64_t frames_over_budget;  /* payloads over the decode budget */
	uint64_t fds_dropped;         /* descriptors beyond OPAL_WIRE_MAX_FDS, closed */
	unsigned frame_timeout_ms;    /* 0: none; else the time one whole frame may take,
				       * from the call of opal_wire_recv */
	uint64_t deadline_ns;         /* CLOCK_MONOTONIC end of the frame being read */
};

void opal_wire_reader_init(struct opal_wire_reader *r, int sock);

/* Reads one frame (blocking; honours the socket's SO_RCVTIMEO, and with
 * r->frame_timeout_ms set gives the whole frame that long from this call,
 * so that a peer sending a byte at a time cannot hold a reader that serves
 * other peers too: call it when the socket is readable). On success
 * returns 1 and sets *env (unpacked into one arena: free with
 * opal_wire_free, never with protobuf-c's free_unpacked) and *fd: the descriptor that came with this frame, or -1
 * (ownership passes to the caller). Returns 0 at a clean EOF between frames,
 * -EBADMSG for a frame whose payload does not unpack or whose version is
 * not OPAL_WIRE_VERSION (the frame is consumed, its descriptor closed, the
 * stream stays usable), -E2BIG likewise for one whose decoding would take
 * more memory than the decode budget (OPAL_WIRE_DECODE_FACTOR), -EPROTO
 * for a bad magic or a length over
 * OPAL_WIRE_MAX_FRAME (the stream is unusable: close it), -ECONNRESET on EOF
 * inside a frame, -EAGAIN on timeout before a frame, -ETIMEDOUT when a
 * frame stalled or took longer than frame_timeout_ms (unusable: close), or
 * -errno. */
int opal_wire_recv(struct opal_wire_reader *r, Opal__Wire__V1__Envelope **env, int *fd);

/* Frees an envelope opal_wire_recv returned, and everything in it; NULL is
 * ignored. Aborts on any other pointer (a heap corruption averted). */
void opal_wire_free(Opal__Wire__V1__Envelope *env);

/* Closes descriptors still queued. */
void opal_wire_reader_close(struct opal_wire_reader *r);

#endif
