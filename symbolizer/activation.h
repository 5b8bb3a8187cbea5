/* Socket activation: taking the collector socket that systemd (an
 * opal-symbolizer.socket unit) created and passed to us, following the
 * sd_listen_fds(3) protocol: $LISTEN_PID names the receiving process,
 * $LISTEN_FDS counts descriptors passed from SD_LISTEN_FDS_START (3) up. */
#ifndef OPAL_ACTIVATION_H
#define OPAL_ACTIVATION_H

#define OPAL_LISTEN_FDS_START 3

/* Looks for an inherited listening socket. Returns the descriptor (>= 3,
 * made close-on-exec) when exactly one was passed to this process and it
 * is a listening AF_UNIX SOCK_STREAM socket; 0 when nothing was passed
 * ($LISTEN_PID unset or naming another process); -EINVAL when the
 * variables are malformed or announce more than one descriptor, -ENOTSOCK
 * when the descriptor is not that kind of socket. In every case the
 * LISTEN_* variables are removed from the environment. */
int opal_activation_listen_fd(void);

#endif
