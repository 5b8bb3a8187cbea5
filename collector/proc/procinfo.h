/* Per-process facts for the Process message: comm, executable path,
 * OTEL_SERVICE_NAME and container ID, read from /proc/PID. The parsers are
 * separate from the readers so that they can be tested on fixed text. */
#ifndef OPAL_COLLECTOR_PROCINFO_H
#define OPAL_COLLECTOR_PROCINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "shared/wire.h"

#define OPAL_COMM_MAX          16          /* TASK_COMM_LEN, with the NUL */
#define OPAL_CONTAINER_ID_LEN  64          /* hex digits */
#define OPAL_SERVICE_NAME_MAX  256         /* bytes kept, with the NUL */
#define OPAL_ENVIRON_MAX       (1u << 20)  /* bytes of /proc/PID/environ scanned */
#define OPAL_CGROUP_MAX        (64u << 10) /* bytes of /proc/PID/cgroup scanned */
#define OPAL_CMDLINE_MAX       OPAL_WIRE_CMDLINE_MAX  /* bytes of /proc/PID/cmdline kept */
#define OPAL_POD_UID_LEN       36          /* a UUID: 8-4-4-4-12 hex digits */

struct opal_proc_info {
	char comm[OPAL_COMM_MAX];                    /* "" when unreadable */
	char *exe;                                   /* heap; "" for kernel threads */
	char *service_name;                          /* heap; "" when not set */
	char container_id[OPAL_CONTAINER_ID_LEN + 1];  /* "" when none */
	char pod_uid[OPAL_POD_UID_LEN + 1];          /* k8s.pod.uid, "" when none */
	char *command_line;   /* heap, process.command_line; NULL unless asked for (it can
			       * hold secrets: opal_proc_cmdline_read) */
};

/* Finds a Kubernetes pod UID in /proc/PID/cgroup text (`len` bytes): the
 * last "pod" followed by a UUID, as the kubelet names pod cgroups
 * ("/kubepods/burstable/pod<uid>/..." with the cgroupfs driver,
 * "kubepods-burstable-pod<uid with '_' for '-'>.slice" with systemd's).
 * Writes it in its '-' form with a NUL into `out`; returns 0 or -ENOENT. */
int opal_cgroup_pod_uid(const char *text, size_t len, char out[OPAL_POD_UID_LEN + 1]);

/* Finds a container ID in /proc/PID/cgroup text (`len` bytes, need not be
 * NUL-terminated): the last run of exactly 64 lowercase hex digits that
 * is not part of a longer alphanumeric word, as in
 * "0::/system.slice/docker-<id>.scope", "/docker/<id>" or
 * "cri-containerd-<id>.scope". Writes it with a NUL into `out`; returns 0,
 * or -ENOENT when there is none. */
int opal_cgroup_container_id(const char *text, size_t len, char out[OPAL_CONTAINER_ID_LEN + 1]);

/* Looks up `name` in a /proc/PID/environ image (`len` bytes of
 * NUL-separated NAME=VALUE entries; the last may lack its NUL). The first
 * match wins, as for getenv. Copies at most `cap`-1 bytes of the value plus
 * a NUL into `out` (cap >= 1) and returns the copied length, or -ENOENT. */
int opal_environ_value(const char *env, size_t len, const char *name, char *out, size_t cap);

/* True when the process is one of opal's own daemons: `comm` or the
 * basename of `exe` (a " (deleted)" suffix ignored) is opal-collector,
 * opal-symbolizer or opal-report. Either may be NULL or "". */
bool opal_is_opal_program(const char *comm, const char *exe);

/* Reads comm, exe, OTEL_SERVICE_NAME (from the first OPAL_ENVIRON_MAX
 * bytes of environ) and the container ID of `pid` under `proc_root`
 * (normally "/proc"). Missing pieces stay empty: a process that exited or a
 * kernel thread still yields 0. Returns 0 or -ENOMEM. Free with
 * opal_proc_info_free. */
int opal_proc_info_read(const char *proc_root, pid_t pid, struct opal_proc_info *out);

/* Turns a /proc/PID/cmdline image (`len` bytes of NUL-terminated
 * arguments) into process.command_line as the semantic conventions name
 * it: the arguments joined by spaces, trailing NULs dropped, at most
 * OPAL_CMDLINE_MAX - 1 bytes (cut at a UTF-8 character boundary). Returns
 * a heap string ("" for a kernel thread or a zombie) or NULL on ENOMEM. */
char *opal_cmdline_join(const char *img, size_t len);

/* Reads /proc/PID/cmdline under `proc_root` into *out (opal_cmdline_join;
 * the caller frees it). Returns 0, -ENOMEM, or the read's -errno. */
int opal_proc_cmdline_read(const char *proc_root, pid_t pid, char **out);

void opal_proc_info_free(struct opal_proc_info *info);

#endif
