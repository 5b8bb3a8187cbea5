/* Seccomp allow-list of the symbolizer (sandbox_seccomp.h). */
#include "sandbox/sandbox_seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <ucontext.h>
#include <unistd.h>
#include "shared/log.h"

/* si_code of a seccomp SIGSYS (asm-generic/siginfo.h; glibc's headers do
 * not name it and cannot be mixed with the kernel's). */
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif

/* System call numbers named in denial messages; x86_64 has ~460. */
#define MAX_NAMED_NR 512

/* Allowed with any arguments. Grouped by purpose. */
static const char *const allowed[] = {
	/* file I/O: SQLite, libelf (pread + mmap), output files */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
	"preadv2", "pwritev2", "lseek", "close", "close_range", "open", "openat", "fstat",
	"newfstatat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2",
	"readlink", "readlinkat", "getdents64", "fcntl", "dup", "dup2", "dup3", "flock",
	"fsync", "fdatasync", "ftruncate", "fallocate", "fadvise64", "fchmod", "umask",
	"getcwd",
	/* state and output folders: temporary files renamed into place, rotation,
	 * recent profiles linked to their interval files; libdebuginfod's cache
	 * also dates its files (utimensat) and walks its folders with fts
	 * (fchdir) when cleaning */
	"mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "rmdir",
	"link", "linkat", "utimensat", "fchdir",
	/* memory (mmap/mprotect have argument rules below); memfd_create for
	 * debug files whose zstd sections opal decompresses (debuginfo_bound.h) */
	"munmap", "mremap", "madvise", "brk", "msync", "memfd_create",
	/* threads and synchronisation (clone has a rule below) */
	"futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "gettid",
	"getpid", "getppid", "exit", "exit_group", "sched_yield", "sched_getaffinity", "getcpu",
	/* signals */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
	/* time */
	"clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
	/* event loops: server poll, libcurl, libmicrohttpd */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2", "pipe", "pipe2",
	/* sockets (socket/socketpair have rules below): collector connections with
	 * SCM_RIGHTS, DNS (sendmmsg), HTTP */
	"connect", "accept", "accept4", "bind", "listen", "getsockname", "getpeername",
	"getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
	"recvmmsg", "shutdown", "sendfile",
	/* identity and limits: glibc, OpenSSL, sysconf */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
	"uname", "sysinfo", "getrusage", "times", "getrlimit", "prlimit64", "getrandom",
};

static const char *log_prog = "opal";
static const char *nr_names[MAX_NAMED_NR];   /* owned by libseccomp's allocator, kept */
static uint64_t denials;                     /* updated atomically by the handler */

uint64_t opal_seccomp_denials(void)
{
	return __atomic_load_n(&denials, __ATOMIC_RELAXED);
}

#if defined(__x86_64__)
static size_t append(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

static size_t append_num(char *buf, size_t at, size_t cap, long v)
{
	char digits[24];
	size_t n = 0;
	unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;

	do
		digits[n++] = (char)('0' + u % 10);
	while ((u /= 10) && n < sizeof(digits));
	if (v < 0 && at + 1 < cap)
		buf[at++] = '-';
	while (n && at + 1 < cap)
		buf[at++] = digits[--n];
	return at;
}

/* SIGSYS from SECCOMP_RET_TRAP: the call was not made; make it return
 * -EPERM (rax holds the return value once the handler returns) and log
 * the first few. Only async-signal-safe operations: an atomic add, write. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	int saved_errno = errno;
	char line[256];
	size_t n = 0;

	(void)sig;
	if (si->si_code != SYS_SECCOMP)
		return;
	uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
	uint64_t count = __atomic_add_fetch(&denials, 1, __ATOMIC_RELAXED);
	if (count > OPAL_SECCOMP_LOG_MAX)
		return;
	int nr = si->si_syscall;
	n = append(line, n, sizeof(line), "<4>");
	n = append(line, n, sizeof(line), log_prog);
	n = append(line, n, sizeof(line), ": seccomp: denied system call ");
	n = append(line, n, sizeof(line),
		   nr >= 0 && nr < MAX_NAMED_NR && nr_names[nr] ? nr_names[nr] : "?");
	n = append(line, n, sizeof(line), " (");
	n = append_num(line, n, sizeof(line), nr);
	n = append(line, n, sizeof(line), ") with EPERM");
	if (count == OPAL_SECCOMP_LOG_MAX)
		n = append(line, n, sizeof(line), "; further denials are only counted");
	n = append(line, n, sizeof(line), "\n");
	ssize_t written = write(STDERR_FILENO, line, n);   /* nowhere to report a failure */
	(void)written;
	errno = saved_errno;
}

static int install_trap_handler(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

	for (int nr = 0; nr < MAX_NAMED_NR; nr++)
		nr_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGSYS, &sa, NULL) < 0 ? -errno : 0;
}

#define DENY_ACTION SCMP_ACT_TRAP
#else
static int install_trap_handler(void)
{
	return 0;
}

#define DENY_ACTION SCMP_ACT_ERRNO(EPERM)
#endif

/* Resolves `name` for this architecture; a name libseccomp does not know
 * (a call newer than it) is skipped: such a call stays denied. */
static int syscall_nr(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		opal_debug("seccomp: %s unknown to libseccomp; stays denied", name);
	return nr;
}

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_args,
	       const struct scmp_arg_cmp *args)
{
	int nr = syscall_nr(name), r;

	if (nr == __NR_SCMP_ERROR)
		return 0;
	r = seccomp_rule_add_array(ctx, action, nr, n_args, args);
	if (r < 0)
		opal_err("seccomp: rule for %s refused: %s", name, strerror(-r));
	return r;
}

/* Rules whose arguments matter. Returns 0 or a negative error. */
static int add_argument_rules(scmp_filter_ctx ctx)
{
	/* clone: a thread of this process only — CLONE_THREAD set and no new
	 * namespace (a plain fork or clone with CLONE_NEW* is denied). */
	const uint64_t ns_flags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
				  CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
	struct scmp_arg_cmp clone_thread =
		SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | ns_flags, CLONE_THREAD);
	/* No page both writable and executable, and none made executable later
	 * (what MemoryDenyWriteExecute= enforces). */
	struct scmp_arg_cmp not_exec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	struct scmp_arg_cmp not_write = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_WRITE, 0);
	static const int families[] = { AF_UNIX, AF_INET, AF_INET6 };
	/* isatty (TCGETS), non-blocking and close-on-exec toggles, bytes
	 * readable. The request is compared on its low 32 bits, as callers
	 * pass it as int or unsigned long. */
	static const unsigned long ioctls[] = { TCGETS, FIONBIO, FIONREAD, FIOCLEX, FIONCLEX };
	static const int prctls[] = { PR_SET_NAME, PR_GET_NAME };
	int r;

	if ((r = add(ctx, SCMP_ACT_ALLOW, "clone", 1, &clone_thread)) < 0 ||
	    (r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL)) < 0 ||
	    (r = add(ctx, SCMP_ACT_ALLOW, "mmap", 1, &not_exec)) < 0 ||
	    (r = add(ctx, SCMP_ACT_ALLOW, "mmap", 1, &not_write)) < 0 ||
	    (r = add(ctx, SCMP_ACT_ALLOW, "mprotect", 1, &not_exec)) < 0)
		return r;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		struct scmp_arg_cmp fam = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]);
		if ((r = add(ctx, SCMP_ACT_ALLOW, "socket", 1, &fam)) < 0)
			return r;
	}
	struct scmp_arg_cmp unix_only = SCMP_A0(SCMP_CMP_EQ, AF_UNIX);
	if ((r = add(ctx, SCMP_ACT_ALLOW, "socketpair", 1, &unix_only)) < 0)
		return r;
	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++) {
		struct scmp_arg_cmp req = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ioctls[i]);
		if ((r = add(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &req)) < 0)
			return r;
	}
	for (size_t i = 0; i < sizeof(prctls) / sizeof(prctls[0]); i++) {
		struct scmp_arg_cmp opt = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)prctls[i]);
		if ((r = add(ctx, SCMP_ACT_ALLOW, "prctl", 1, &opt)) < 0)
			return r;
	}
	/* Signals only to our own threads (raise, abort, pthread_kill). */
	struct scmp_arg_cmp self = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid());
	return add(ctx, SCMP_ACT_ALLOW, "tgkill", 1, &self);
}

int opal_seccomp_install(const char *prog)
{
	scmp_filter_ctx ctx;
	int r;

	log_prog = prog;
	if ((r = install_trap_handler()) < 0)
		return r;
	ctx = seccomp_init(DENY_ACTION);
	if (!ctx)
		return -ENOMEM;
	/* Every thread gets the filter; a foreign architecture's call (int 0x80)
	 * has no business here at all. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
		goto out;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if ((r = add(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL)) < 0)
			goto out;
	if ((r = add_argument_rules(ctx)) < 0)
		goto out;
	r = seccomp_load(ctx);
	if (r < 0)
		opal_err("seccomp: loading the filter failed: %s", strerror(-r));
out:
	seccomp_release(ctx);
	return r;
}
