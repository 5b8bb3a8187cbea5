/* Start-up checks of privileges and kernel features (kernel_check.h). */
#include "sampler/kernel_check.h"

#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "shared/log.h"

const struct opal_kernel_feature opal_kernel_features[OPAL_KFEAT_MAX] = {
	[OPAL_KFEAT_BTF] = { "kernel BTF (" OPAL_BTF_PATH ")", "5.4", true },
	[OPAL_KFEAT_TP_BTF] = { "BTF-typed tracepoints (tp_btf)", "5.5", true },
	[OPAL_KFEAT_PROBE_READ_USER] = { "bpf_probe_read_user", "5.5", true },
	[OPAL_KFEAT_PROBE_READ_KERNEL] = { "bpf_probe_read_kernel", "5.5", true },
	[OPAL_KFEAT_RINGBUF] = { "the BPF ring buffer", "5.8", true },
	[OPAL_KFEAT_INNER_MAP] = { "inner maps of their own size (BPF_F_INNER_MAP)", "5.10", true },
	[OPAL_KFEAT_TASK_BTF] = { "bpf_get_current_task_btf", "5.11", true },
	[OPAL_KFEAT_TASK_PT_REGS] = { "bpf_task_pt_regs", "5.15", true },
	[OPAL_KFEAT_LOOP] = { "bpf_loop", "5.17", true },
	[OPAL_KFEAT_FIND_VMA] = { "bpf_find_vma", "5.17", true },
	[OPAL_KFEAT_VMA_ITER] = { "the VMA-iterator kfuncs (exit-time mappings)", "6.7", false },
};

int opal_kernel_sysctl(const char *root, const char *name)
{
	char path[PATH_MAX];
	int v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/sys/kernel/%s", root, name);
	f = fopen(path, "re");
	if (!f)
		return INT_MIN;
	if (fscanf(f, "%d", &v) != 1)
		v = INT_MIN;
	fclose(f);
	return v;
}

/* "N" or "unknown" for a sysctl value. */
static const char *sysctl_text(int v, char *buf, size_t len)
{
	if (v == INT_MIN)
		return "unknown";
	snprintf(buf, len, "%d", v);
	return buf;
}

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return (d[cap / 32].effective >> (cap % 32)) & 1u;
}

int opal_kernel_privileges(const char *root, char *why, size_t why_len)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	char ubpf[16], paranoid[16];
	const char *missing;
	uid_t uid = geteuid();

	if (syscall(SYS_capget, &h, d) < 0) {
		int err = errno;
		snprintf(why, why_len, "cannot read this process's capabilities (capget): %s",
			 strerror(err));
		return -err;
	}
	if (has_cap(d, CAP_SYS_ADMIN) || (has_cap(d, CAP_BPF) && has_cap(d, CAP_PERFMON)))
		return 0;
	if (!has_cap(d, CAP_BPF) && !has_cap(d, CAP_PERFMON))
		missing = "CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN";
	else if (!has_cap(d, CAP_BPF))
		missing = "CAP_BPF and CAP_SYS_ADMIN";
	else
		missing = "CAP_PERFMON and CAP_SYS_ADMIN";
	sysctl_text(opal_kernel_sysctl(root, "unprivileged_bpf_disabled"), ubpf, sizeof(ubpf));
	sysctl_text(opal_kernel_sysctl(root, "perf_event_paranoid"), paranoid, sizeof(paranoid));
	if (uid != 0) {
		struct passwd *pw = getpwuid(uid);
		snprintf(why, why_len,
			 "opal-collector must run as root: it runs as uid %u (%s) without %s, and "
			 "tracing BPF programs and perf events on every CPU need CAP_BPF and "
			 "CAP_PERFMON (or CAP_SYS_ADMIN) whatever kernel.unprivileged_bpf_disabled "
			 "(%s) and kernel.perf_event_paranoid (%s) allow others",
			 (unsigned)uid, pw ? pw->pw_name : "no passwd entry", missing, ubpf, paranoid);
	} else {
		snprintf(why, why_len,
			 "opal-collector must run as root with its capabilities: it runs as root "
			 "but without %s in its effective set (removed by a container or a "
			 "service's CapabilityBoundingSet=?); it needs CAP_BPF and CAP_PERFMON, or "
			 "CAP_SYS_ADMIN", missing);
	}
	return -EPERM;
}

const char *opal_kernel_lockdown(const char *root, char *buf, size_t len)
{
	char path[PATH_MAX], line[128];
	char *open, *close;
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", root, OPAL_LOCKDOWN_PATH);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	open = fgets(line, sizeof(line), f) ? strchr(line, '[') : NULL;
	fclose(f);
	close = open ? strchr(open, ']') : NULL;
	if (!close || close == open + 1)
		return NULL;
	*close = '\0';
	snprintf(buf, len, "%s", open + 1);
	return buf;
}

/* 1 present, 0 absent, -1 unknown, from a libbpf probe's return value. */
static int probe_result(int r)
{
	return r > 0 ? 1 : r == 0 ? 0 : -1;
}

static int probe_helper(enum bpf_func_id id)
{
	return probe_result(libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, id, NULL));
}

/* The flags of bpf/sampler.bpf.c's inner arrays; 5.10 and later accept
 * BPF_F_INNER_MAP (older kernels: EINVAL). */
static int probe_inner_map(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "opal_probe", 4, 8, 1, &opts);

	if (fd >= 0) {
		close(fd);
		return 1;
	}
	return errno == EINVAL ? 0 : -1;
}

void opal_kernel_probe_run(const char *btf_path, struct opal_kernel_probe *p)
{
	struct btf *btf = btf__parse(btf_path, NULL);

	for (int i = 0; i < OPAL_KFEAT_MAX; i++)
		p->have[i] = -1;
	p->have[OPAL_KFEAT_BTF] = btf ? 1 : access(btf_path, F_OK) == 0 ? -1 : 0;
	if (btf) {
		p->have[OPAL_KFEAT_TP_BTF] =
			btf__find_by_name_kind(btf, "btf_trace_sched_process_exec", BTF_KIND_TYPEDEF) >= 0 &&
			btf__find_by_name_kind(btf, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF) >= 0;
		p->have[OPAL_KFEAT_VMA_ITER] =
			btf__find_by_name_kind(btf, "bpf_iter_task_vma_new", BTF_KIND_FUNC) >= 0;
		btf__free(btf);
	}
	p->have[OPAL_KFEAT_PROBE_READ_USER] = probe_helper(BPF_FUNC_probe_read_user);
	p->have[OPAL_KFEAT_PROBE_READ_KERNEL] = probe_helper(BPF_FUNC_probe_read_kernel);
	p->have[OPAL_KFEAT_RINGBUF] = probe_result(libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL));
	p->have[OPAL_KFEAT_INNER_MAP] = probe_inner_map();
	p->have[OPAL_KFEAT_TASK_BTF] = probe_helper(BPF_FUNC_get_current_task_btf);
	p->have[OPAL_KFEAT_TASK_PT_REGS] = probe_helper(BPF_FUNC_task_pt_regs);
	p->have[OPAL_KFEAT_LOOP] = probe_helper(BPF_FUNC_loop);
	p->have[OPAL_KFEAT_FIND_VMA] = probe_helper(BPF_FUNC_find_vma);
}

/* Appends "NAME (Linux SINCE)" for each feature i with have[i] == 0 and
 * required == `required`, joined with ", " and a final " and ", into `out`
 * (`len` bytes), skipping `skip` (-1: none). Returns how many. */
static int list_missing(const struct opal_kernel_probe *p, bool required, int skip, char *out,
			size_t len)
{
	int idx[OPAL_KFEAT_MAX], n = 0;
	size_t used = 0;

	for (int i = 0; i < OPAL_KFEAT_MAX; i++)
		if (p->have[i] == 0 && opal_kernel_features[i].required == required && i != skip)
			idx[n++] = i;
	out[0] = '\0';
	for (int k = 0; k < n && used < len; k++) {
		const struct opal_kernel_feature *f = &opal_kernel_features[idx[k]];
		int w = snprintf(out + used, len - used, "%s%s (Linux %s)",
				 k == 0 ? "" : k == n - 1 ? " and " : ", ", f->name, f->since);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return n;
}

int opal_kernel_verdict(const struct opal_kernel_probe *p, const char *release,
			const char *lockdown, char *why, size_t why_len, char *note,
			size_t note_len)
{
	bool locked = lockdown && strcmp(lockdown, "none") != 0;
	bool refused = locked && p->have[OPAL_KFEAT_PROBE_READ_KERNEL] == 0;
	char others[512];
	int n;

	list_missing(p, false, -1, note, note_len);
	n = list_missing(p, true, refused ? OPAL_KFEAT_PROBE_READ_KERNEL : -1, others, sizeof(others));
	if (refused) {
		int w = snprintf(why, why_len,
				 "the kernel's lockdown (%s, " OPAL_LOCKDOWN_PATH ") refuses "
				 "bpf_probe_read_kernel, which opal's BPF programs need to read kernel "
				 "structures: boot with lockdown=integrity or none (Secure Boot on "
				 "Debian sets integrity, which opal runs under)", lockdown);
		if (n && w > 0 && (size_t)w < why_len)
			snprintf(why + w, why_len - (size_t)w, "; this kernel (Linux %s) also lacks "
				 "%s: opal needs Linux " OPAL_MIN_KERNEL " or newer", release, others);
		return -EOPNOTSUPP;
	}
	if (n) {
		snprintf(why, why_len,
			 "this kernel (Linux %s) lacks %s: opal needs Linux " OPAL_MIN_KERNEL
			 " or newer with BTF (tested on " OPAL_TESTED_KERNELS ")", release, others);
		return -EOPNOTSUPP;
	}
	return 0;
}

int opal_kernel_check(const char *root, struct opal_kernel_probe *out, char *why, size_t why_len)
{
	char btf[PATH_MAX], mode[32], note[512];
	const char *lockdown = opal_kernel_lockdown(root, mode, sizeof(mode));
	struct opal_kernel_probe p;
	struct utsname u;
	int r;

	if (uname(&u) < 0)
		snprintf(u.release, sizeof(u.release), "unknown");
	snprintf(btf, sizeof(btf), "%s%s", root, OPAL_BTF_PATH);
	if (access(btf, R_OK) < 0) {
		int err = errno;
		snprintf(why, why_len,
			 "this kernel (Linux %s) has no BTF: %s: %s (a kernel built without "
			 "CONFIG_DEBUG_INFO_BTF, Linux 5.4+); opal's CO-RE BPF programs need it: use "
			 "a distribution kernel that has it, such as Debian 12's", u.release, btf,
			 strerror(err));
		return -err;
	}
	opal_kernel_probe_run(btf, &p);
	if (out)
		*out = p;
	r = opal_kernel_verdict(&p, u.release, lockdown, why, why_len, note, sizeof(note));
	if (r == 0 && note[0])
		opal_info("Linux %s: optional kernel features missing: %s", u.release, note);
	return r;
}

const char *opal_perf_open_cause(int err, int paranoid, char *buf, size_t len)
{
	char value[16];

	switch (err) {
	case -ENOENT:
	case -ENODEV:
	case -EOPNOTSUPP:
		return "this kernel or virtual machine offers no CPU-clock perf event (some "
		       "hypervisors and sandboxes hide perf events)";
	case -ENOSYS:
		return "this kernel was built without perf events (CONFIG_PERF_EVENTS)";
	case -EACCES:
	case -EPERM:
		snprintf(buf, len,
			 "perf events on every CPU need CAP_PERFMON (or CAP_SYS_ADMIN) at "
			 "kernel.perf_event_paranoid=%s, unless an LSM (SELinux, AppArmor, "
			 "lockdown) refuses them", sysctl_text(paranoid, value, sizeof(value)));
		return buf;
	case -EMFILE:
	case -ENFILE:
		return "too many open files (RLIMIT_NOFILE)";
	default:
		return "";
	}
}
