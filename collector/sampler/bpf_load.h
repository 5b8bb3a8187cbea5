/* Loading a BPF skeleton so that a failure says what happened: libbpf's
 * messages go to the log line by line (libbpf 1.1 hands its print callback
 * whole, multi-line messages), the verifier's log of the program that
 * failed is kept (its last OPAL_BPF_LOG_LINES lines) and printed with the
 * program's name, the kernel release and the likely cause; after a load
 * each program's verified instruction count is logged. */
#ifndef OPAL_COLLECTOR_BPF_LOAD_H
#define OPAL_COLLECTOR_BPF_LOAD_H

#include <stddef.h>

struct bpf_object_skeleton;

#define OPAL_BPF_LOG_LINES    200   /* verifier log lines kept (the last ones) */
#define OPAL_BPF_LOG_LINE_MAX 512   /* bytes per kept line, NUL included (cut beyond) */

/* Makes libbpf print through opal's log (libbpf_set_print): warnings at
 * LOG_WARNING, the rest at LOG_DEBUG, one log line per message line; a
 * program's load log is kept instead of printed (opal_bpf_load prints it). */
void opal_bpf_log_install(void);

/* Loads `skel` (bpf_object__load_skeleton). On success logs, at LOG_INFO,
 * each program's verified instruction count (struct bpf_prog_info's
 * verified_insns, Linux 5.16+) and returns 0. On failure prints at LOG_ERR
 * the failing program's name, the kernel release, the error and the likely
 * cause (opal_bpf_load_cause), then the verifier log's last lines at
 * LOG_NOTICE (not rate-limited), writes a one-line summary into `why`
 * (`why_len` bytes) and returns libbpf's negative errno. */
int opal_bpf_load(struct bpf_object_skeleton *skel, char *why, size_t why_len);

/* The likely cause of a failed program load, as a sentence: from libbpf's
 * error `err` (negative errno), the verifier's log `log` (kept lines joined
 * with '\n'; "" when the kernel gave none) and the lockdown mode `lockdown`
 * ("none", "integrity", "confidentiality"; NULL when unknown). Static
 * storage. */
const char *opal_bpf_load_cause(int err, const char *log, const char *lockdown);

/* The kept log of the last program load (lines joined with '\n', NUL
 * terminated; "" when none): the last OPAL_BPF_LOG_LINES lines. Owned by
 * this module, valid until the next load. `n_lines` (may be NULL) gets the
 * number of lines the log had in all. */
const char *opal_bpf_load_log(size_t *n_lines);

#endif
