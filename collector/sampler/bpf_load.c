/* BPF skeleton loading with the verifier's log kept (bpf_load.h). The
 * message formats parsed are libbpf's own (libbpf 1.1 src/libbpf.c,
 * bpf_object_load_prog): "prog 'NAME': BPF program load failed: ...",
 * "prog 'NAME': -- BEGIN PROG LOAD LOG --\n<log>-- END PROG LOAD LOG --\n"
 * (libbpf grows its buffer until the whole log fits). */
#include "sampler/bpf_load.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sampler/kernel_check.h"
#include "shared/log.h"

#define BEGIN_MARK "-- BEGIN PROG LOAD LOG --"
#define END_MARK   "-- END PROG LOAD LOG --"
#define NAME_MAX_LEN 64

/* The last OPAL_BPF_LOG_LINES lines of the last program's load log, a
 * ring: line (total - 1) % N is the newest. */
static struct {
	char lines[OPAL_BPF_LOG_LINES][OPAL_BPF_LOG_LINE_MAX];
	size_t total;
	char prog[NAME_MAX_LEN];          /* the program the log is of */
	char failed[NAME_MAX_LEN];        /* last program libbpf named in a warning */
	char joined[OPAL_BPF_LOG_LINES * OPAL_BPF_LOG_LINE_MAX];
} kept;

static void keep_line(const char *s, size_t len)
{
	char *dst = kept.lines[kept.total % OPAL_BPF_LOG_LINES];

	if (len >= OPAL_BPF_LOG_LINE_MAX) {
		len = OPAL_BPF_LOG_LINE_MAX - 4;
		memcpy(dst, s, len);
		memcpy(dst + len, "...", 4);
	} else {
		memcpy(dst, s, len);
		dst[len] = '\0';
	}
	kept.total++;
}

/* The NAME of "prog 'NAME': ..." at the start of `msg` (after "libbpf: ")
 * into `out`; false when msg names no program. */
static bool prog_name(const char *msg, char out[NAME_MAX_LEN])
{
	const char *p = strstr(msg, "prog '"), *end;

	if (!p || p - msg > 16)
		return false;
	p += 6;
	end = strchr(p, '\'');
	if (!end || end - p >= NAME_MAX_LEN)
		return false;
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
	return true;
}

/* Keeps the lines of a load log message (from after BEGIN_MARK's line to
 * END_MARK). */
static void keep_log(const char *msg)
{
	const char *p = strstr(msg, BEGIN_MARK), *nl;

	kept.total = 0;
	if (!prog_name(msg, kept.prog))
		snprintf(kept.prog, sizeof(kept.prog), "?");
	p = strchr(p, '\n');
	while (p && *++p) {
		if (!strncmp(p, END_MARK, strlen(END_MARK)))
			break;
		nl = strchr(p, '\n');
		keep_line(p, nl ? (size_t)(nl - p) : strlen(p));
		p = nl;
	}
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char *msg = NULL, *line, *save = NULL;
	char name[NAME_MAX_LEN];

	if (vasprintf(&msg, fmt, ap) < 0)
		return 0;
	if (strstr(msg, BEGIN_MARK)) {
		keep_log(msg);
		free(msg);
		return 0;
	}
	if (level == LIBBPF_WARN && prog_name(msg, name))
		memcpy(kept.failed, name, sizeof(name));
	for (line = strtok_r(msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (level == LIBBPF_WARN)
			opal_warn("%s", line);
		else
			opal_debug("%s", line);
	}
	free(msg);
	return 0;
}

void opal_bpf_log_install(void)
{
	libbpf_set_print(libbpf_print);
}

const char *opal_bpf_load_log(size_t *n_lines)
{
	size_t n = kept.total < OPAL_BPF_LOG_LINES ? kept.total : OPAL_BPF_LOG_LINES;
	size_t used = 0;

	kept.joined[0] = '\0';
	for (size_t i = kept.total - n; i < kept.total; i++) {
		const char *l = kept.lines[i % OPAL_BPF_LOG_LINES];
		size_t len = strlen(l);
		memcpy(kept.joined + used, l, len);
		used += len;
		kept.joined[used++] = i + 1 < kept.total ? '\n' : '\0';
	}
	if (n_lines)
		*n_lines = kept.total;
	return kept.joined;
}

const char *opal_bpf_load_cause(int err, const char *log, const char *lockdown)
{
	bool locked = lockdown && strcmp(lockdown, "none") != 0;

	/* libbpf poisons an instruction whose CO-RE relocation failed with a
	 * call to helper 0xbad2310 */
	if (strstr(log, "unknown#195896080"))
		return "a CO-RE relocation failed: this kernel's BTF lacks a type or field the "
		       "program reads (libbpf's warnings above name it)";
	if (strstr(log, "unknown func") || strstr(log, "invalid func"))
		return locked ? "the kernel refuses a BPF helper the program calls: its lockdown "
				"refuses some helpers (see " OPAL_LOCKDOWN_PATH ")"
			      : "this kernel lacks a BPF helper the program calls: it is older than "
				"Linux " OPAL_MIN_KERNEL " or built without it";
	if (strstr(log, "too large") || strstr(log, "too complex") ||
	    strstr(log, "processed 1000001 insns"))
		return "the program is too complex for this kernel's verifier (it gave up at its "
		       "limit): please report it with this log";
	if (log[0] && (err == -EACCES || err == -EINVAL))
		return "this kernel's verifier could not prove the program safe (an older "
		       "verifier's limit, not a permission problem): please report it to opal's "
		       "developers with this log and the kernel release";
	if (err == -EPERM)
		return locked ? "not permitted: the kernel's lockdown or an LSM (SELinux, "
				"AppArmor) refuses it, or CAP_BPF/CAP_PERFMON are missing"
			      : "not permitted: CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) are "
				"missing, or an LSM (SELinux, AppArmor) refuses it";
	if (err == -E2BIG)
		return "the kernel rejects the program's attributes: it is probably older than "
		       "Linux " OPAL_MIN_KERNEL;
	return "the kernel refused the program without a verifier log";
}

/* Logs each program's verified instruction count on one line. */
static void log_counts(struct bpf_object_skeleton *skel, const char *release)
{
	char line[512];
	size_t used = 0;

	line[0] = '\0';
	for (int i = 0; i < skel->prog_cnt && used < sizeof(line); i++) {
		struct bpf_program *prog = *skel->progs[i].prog;
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int w;

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) < 0)
			info.verified_insns = 0;
		w = snprintf(line + used, sizeof(line) - used, "%s%s %u", i ? ", " : "",
			     bpf_program__name(prog), info.verified_insns);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	opal_info("BPF programs verified on Linux %s (instructions processed): %s", release, line);
}

int opal_bpf_load(struct bpf_object_skeleton *skel, char *why, size_t why_len)
{
	char mode[32];
	const char *lockdown, *log, *name;
	struct utsname u;
	size_t n_lines, shown;
	int err;

	if (uname(&u) < 0)
		snprintf(u.release, sizeof(u.release), "unknown");
	kept.total = 0;
	kept.prog[0] = kept.failed[0] = '\0';
	err = bpf_object__load_skeleton(skel);
	if (err == 0) {
		log_counts(skel, u.release);
		return 0;
	}
	log = opal_bpf_load_log(&n_lines);
	name = kept.prog[0] ? kept.prog : kept.failed[0] ? kept.failed : skel->name;
	lockdown = opal_kernel_lockdown("", mode, sizeof(mode));
	opal_err("BPF program %s failed to load on Linux %s: %s; likely cause: %s", name,
		 u.release, strerror(-err), opal_bpf_load_cause(err, log, lockdown));
	shown = n_lines < OPAL_BPF_LOG_LINES ? n_lines : OPAL_BPF_LOG_LINES;
	if (shown) {
		opal_err("the verifier's log of %s (its last %zu of %zu lines):", name, shown,
			 n_lines);
		for (size_t i = n_lines - shown; i < n_lines; i++)
			opal_log(LOG_NOTICE, "verifier: %s", kept.lines[i % OPAL_BPF_LOG_LINES]);
	}
	snprintf(why, why_len, "BPF program %s failed to load: %s (%s)", name, strerror(-err),
		 shown ? "the verifier's log is above" : "the kernel gave no verifier log");
	return err;
}
