/* Seccomp part of the symbolizer's sandbox: an allow-list of the system
 * calls the symbolizer and its libraries make (SQLite, elfutils, protobuf-c,
 * zlib, OpenSSL, glibc threads and name resolution, libcurl, libdebuginfod
 * and libmicrohttpd), built with libseccomp. Some are allowed only
 * with safe arguments: clone only for threads (no new process, no
 * namespace), no writable+executable mappings, sockets only AF_UNIX,
 * AF_INET and AF_INET6, a few ioctl and prctl requests. clone3 fails with
 * ENOSYS so that glibc falls back to the checkable clone. Everything else
 * fails with EPERM — the error libraries already handle — and is logged
 * (see docs/deployment.md for why not SECCOMP_RET_KILL). */
#ifndef OPAL_SANDBOX_SECCOMP_H
#define OPAL_SANDBOX_SECCOMP_H

#include <stdint.h>

/* Denied calls logged one line each; later ones are only counted. */
#define OPAL_SECCOMP_LOG_MAX 8

/* Installs the filter on every thread of the process (TSYNC) and a SIGSYS
 * handler: on x86_64 a denied call traps, the handler makes it return
 * -EPERM and writes "<4>PROG: seccomp: denied system call NAME (NR) ..." to
 * stderr for the first OPAL_SECCOMP_LOG_MAX denials (async-signal-safe:
 * one write()). Elsewhere denied calls return EPERM unlogged. `prog` must
 * outlive the process. Requires no_new_privs. Irreversible. Returns 0 or
 * -errno (libseccomp's negative error codes are passed through). */
int opal_seccomp_install(const char *prog);

/* System calls denied so far (all threads). */
uint64_t opal_seccomp_denials(void);

#endif
