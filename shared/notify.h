/* Service readiness and status for systemd (Type=notify): the sd_notify
 * protocol of sd_notify(3) — newline-separated VARIABLE=value lines sent as
 * one datagram to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an
 * abstract name when it starts with '@'). Without $NOTIFY_SOCKET every call
 * is a no-op that returns 0, so the daemons behave the same outside
 * systemd. */
#ifndef OPAL_NOTIFY_H
#define OPAL_NOTIFY_H

/* Largest datagram sent (bytes, including the "STATUS=" prefix); longer
 * STATUS texts are truncated. */
#define OPAL_NOTIFY_MAX 512

/* Reads $NOTIFY_SOCKET, removes it from the environment (children must not
 * notify on our behalf) and opens the datagram socket used by later calls.
 * Call once, before sandboxing (it needs socket()). Returns 1 when
 * notifications are enabled, 0 when $NOTIFY_SOCKET is unset, -EINVAL for a
 * malformed or over-long address, or -errno from socket(). */
int opal_notify_init(void);

/* Sends `msg` (e.g. "READY=1" or "STOPPING=1"; at most OPAL_NOTIFY_MAX
 * bytes) as one datagram. Async-signal-safe: it only calls sendto() on the
 * socket opened by opal_notify_init, so a SIGTERM handler may send
 * "STOPPING=1". Returns 0 (also when disabled), -EMSGSIZE, or -errno from
 * sendto(). */
int opal_notify(const char *msg);

/* Sends "STATUS=<formatted text>" (printf-style; newlines in the text are
 * replaced by spaces so it stays one variable). Not async-signal-safe.
 * Returns like opal_notify. */
int opal_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Closes the socket; later calls are no-ops. */
void opal_notify_close(void);

#endif
