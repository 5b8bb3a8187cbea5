/* What the collector needs of the kernel and of its own privileges,
 * checked before any BPF program is loaded so that a missing privilege,
 * a kernel without BTF, an older kernel or a lockdown that refuses BPF is
 * named in one sentence (docs/deployment.md, "Kernel"). Versions are those
 * of mainline Linux that introduced each feature (bcc's
 * docs/kernel-versions.md lists the commits). Paths are read under `root`
 * ("" for the running system; tests pass a folder of their own). */
#ifndef OPAL_COLLECTOR_KERNEL_CHECK_H
#define OPAL_COLLECTOR_KERNEL_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* The oldest kernel with every required feature (bpf_loop, bpf_find_vma). */
#define OPAL_MIN_KERNEL     "5.17"
/* The kernels the test matrix runs opal on (tests/kernel). */
#define OPAL_TESTED_KERNELS "6.1 (Debian 12) and 6.18"

#define OPAL_BTF_PATH      "/sys/kernel/btf/vmlinux"
#define OPAL_LOCKDOWN_PATH "/sys/kernel/security/lockdown"

enum opal_kfeat {
	OPAL_KFEAT_BTF,               /* /sys/kernel/btf/vmlinux: CO-RE, 5.4 */
	OPAL_KFEAT_TP_BTF,            /* BTF-typed sched_process_exec/exit tracepoints, 5.5 */
	OPAL_KFEAT_PROBE_READ_USER,   /* 5.5 */
	OPAL_KFEAT_PROBE_READ_KERNEL, /* 5.5; refused under lockdown=confidentiality */
	OPAL_KFEAT_RINGBUF,           /* BPF_MAP_TYPE_RINGBUF, 5.8 */
	OPAL_KFEAT_INNER_MAP,         /* BPF_F_INNER_MAP | BPF_F_MMAPABLE arrays, 5.10 */
	OPAL_KFEAT_TASK_BTF,          /* bpf_get_current_task_btf, 5.11 */
	OPAL_KFEAT_TASK_PT_REGS,      /* bpf_task_pt_regs, 5.15 */
	OPAL_KFEAT_LOOP,              /* bpf_loop, 5.17 */
	OPAL_KFEAT_FIND_VMA,          /* bpf_find_vma, 5.17 */
	OPAL_KFEAT_VMA_ITER,          /* bpf_iter_task_vma_* kfuncs, 6.7: optional
				       * (without them exit-time mappings come from
				       * the fexit of vm_mmap_pgoff) */
	OPAL_KFEAT_MAX,
};

struct opal_kernel_feature {
	const char *name;    /* as the sentence names it */
	const char *since;   /* mainline release, e.g. "5.17" */
	bool required;       /* false: opal runs without it, doing less */
};

/* Indexed by enum opal_kfeat. */
extern const struct opal_kernel_feature opal_kernel_features[OPAL_KFEAT_MAX];

/* Feature probe results: 1 present, 0 absent, -1 unknown (the probe
 * itself failed; the program load will tell). */
struct opal_kernel_probe {
	int have[OPAL_KFEAT_MAX];
};

/* 0 when this process may load tracing BPF programs and open system-wide
 * perf events: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN, in its effective
 * set. Else -EPERM with a sentence saying opal-collector must run as root,
 * the uid and the capabilities it lacks and the sysctls that decide it for
 * others (ROOT/proc/sys/kernel/unprivileged_bpf_disabled and
 * perf_event_paranoid) in `why` (`why_len` bytes). */
int opal_kernel_privileges(const char *root, char *why, size_t why_len);

/* The active mode of ROOT/sys/kernel/security/lockdown (the bracketed word
 * of e.g. "none [integrity] confidentiality") into `buf` (`len` bytes);
 * returns buf, or NULL when the file is missing or unreadable (no lockdown
 * LSM, or securityfs not mounted). */
const char *opal_kernel_lockdown(const char *root, char *buf, size_t len);

/* Probes every feature on the running kernel (libbpf's helper and map
 * probes load tiny programs: needs the privileges above) with the kernel
 * BTF at `btf_path` for the BTF-only ones. */
void opal_kernel_probe_run(const char *btf_path, struct opal_kernel_probe *p);

/* The verdict on probe results `p` for kernel `release` under lockdown
 * mode `lockdown` (NULL: unknown). Returns 0 when every required feature is
 * there (or unknown), writing into `note` (`note_len` bytes) the optional
 * features missing ("" when none); else -EOPNOTSUPP with one sentence in
 * `why` naming what is missing with the release that brought it, or the
 * lockdown that refuses it, and the minimum kernel. */
int opal_kernel_verdict(const struct opal_kernel_probe *p, const char *release,
			const char *lockdown, char *why, size_t why_len, char *note,
			size_t note_len);

/* The whole start-up check, after opal_kernel_privileges: the BTF file
 * under `root` (-ENOENT and a sentence when missing: no probe can tell
 * more), then the probes (into *out when not NULL) and the verdict,
 * logging the optional features missing at LOG_INFO. Returns 0, or a
 * negative errno with `why` filled. */
int opal_kernel_check(const char *root, struct opal_kernel_probe *out, char *why, size_t why_len);

/* Why perf_event_open of a CPU-clock event failed with `err` (negative
 * errno), as a clause to follow strerror, given kernel.perf_event_paranoid
 * `paranoid` (INT_MIN: unknown); "" when errno says it all. Static storage
 * or `buf` (`len` bytes). */
const char *opal_perf_open_cause(int err, int paranoid, char *buf, size_t len);

/* ROOT/proc/sys/kernel/NAME as an integer, or INT_MIN when unreadable. */
int opal_kernel_sysctl(const char *root, const char *name);

#endif
