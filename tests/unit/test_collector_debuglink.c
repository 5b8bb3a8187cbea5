/* Unit tests of collector/proc/debuglink.c and of the DEBUGLINK FileInfos of
 * collector/send/sender.c. A fake source stands for /proc: a temp folder plays
 * the process's root directory (so the root-prefix stripping and the
 * openat2 walk run for real), with credentials chosen per test. One test
 * uses the live /proc on this process itself. The sender test plays the
 * symbolizer on a real socket with the debuglink fixture
 * ($OPAL_FIXTURES/debuglink, tests/fixtures/debuglink/build.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "collector/proc/debuglink.h"
#include "collector/send/sender.h"

static char base[64], root[128], app[192], fixtures[4096];

/* ---- the fake process ---------------------------------------------------- */

struct fake {
	char mapped[PATH_MAX];      /* the mapped file as the collector sees it */
	int mapped_err;             /* returned by mapped_file instead, when < 0 */
	struct opal_fs_creds creds, creds_later;
	bool creds_change;          /* the second read_creds returns creds_later */
	int creds_calls;
};

static struct fake fk;

static int fake_open_root(void *ctx, pid_t pid)
{
	(void)ctx;
	(void)pid;
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int fake_mapped_file(void *ctx, pid_t pid, uint64_t start, uint64_t limit, char *buf,
			    size_t cap, uint64_t *dev, uint64_t *ino)
{
	(void)ctx;
	(void)pid;
	(void)start;
	(void)limit;
	struct stat st;
	if (fk.mapped_err < 0)
		return fk.mapped_err;
	snprintf(buf, cap, "%s", fk.mapped);
	if (stat(fk.mapped, &st) < 0)
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

static int fake_read_creds(void *ctx, pid_t pid, struct opal_fs_creds *out)
{
	(void)ctx;
	(void)pid;
	*out = fk.creds_change && fk.creds_calls > 0 ? fk.creds_later : fk.creds;
	fk.creds_calls++;
	return 0;
}

static const struct opal_debuglink_source fake_src = {
	.open_root = fake_open_root,
	.mapped_file = fake_mapped_file,
	.read_creds = fake_read_creds,
};

/* ---- helpers ------------------------------------------------------------------ */

static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

/* `dir` + `rel` in a static buffer (valid until the next call). */
static const char *at(const char *dir, const char *rel)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s%s", dir, rel);
	return buf;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void read_all(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);
	assert_true(n >= 0);
	buf[n] = '\0';
}

/* Credentials of a user who owns nothing here and is in no group of ours. */
static struct opal_fs_creds stranger(void)
{
	struct opal_fs_creds c = { .fsuid = 54321, .fsgid = 54321 };
	return c;
}

/* root/app/prog (the mapped file), prog.debug next to it and in .debug/. */
static int setup_tree(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/opal-debuglink-XXXXXX");
	assert_non_null(mkdtemp(base));
	assert_int_equal(chmod(base, 0755), 0);
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(app, sizeof(app), "%s/app", root);
	sh("mkdir -p %s/.debug %s/outside && chmod 755 %s %s %s/.debug", app, base, root, app, app);
	write_file(at(app, "/prog"), "the binary\n", 0755);
	write_file(at(app, "/prog.debug"), "next to it\n", 0644);
	write_file(at(app, "/.debug/prog.debug"), "in .debug\n", 0644);
	write_file(at(base, "/outside/prog.debug"), "outside\n", 0644);
	memset(&fk, 0, sizeof(fk));
	snprintf(fk.mapped, sizeof(fk.mapped), "%s/prog", app);
	fk.creds = stranger();
	return 0;
}

static int teardown_tree(void **state)
{
	(void)state;
	sh("rm -rf %s", base);
	return 0;
}

/* Opens the candidates of `name` for the fake process; returns the error. */
static int open_for(const char *name, struct opal_debuglink_candidate *out, size_t *n)
{
	struct stat st;
	assert_int_equal(stat(fk.mapped, &st), 0);
	fk.creds_calls = 0;
	return opal_debuglink_open(&fake_src, 4242, 0x1000, 0x2000, st.st_dev, st.st_ino, name,
				   out, n);
}

static void close_all(struct opal_debuglink_candidate *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(c[i].fd);
}

/* ---- parsers ------------------------------------------------------------------- */

static void test_creds_parse(void **state)
{
	(void)state;
	static const char user[] = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\n"
				   "Uid:\t1000\t1001\t1002\t1003\nGid:\t100\t101\t102\t103\n"
				   "FDSize:\t256\nGroups:\t4 24 27 1000 \nNStgid:\t77\n"
				   "CapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
	struct opal_fs_creds c;

	assert_int_equal(opal_fs_creds_parse(user, sizeof(user) - 1, &c), 0);
	assert_int_equal(c.fsuid, 1003);   /* the fs id, the 4th */
	assert_int_equal(c.fsgid, 103);
	assert_int_equal(c.n_groups, 4);
	assert_int_equal(c.groups[0], 4);
	assert_int_equal(c.groups[3], 1000);
	assert_false(c.dac_override);      /* capabilities count for uid 0 only */

	static const char rootp[] = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n"
				    "CapEff:\t0000000000000004\n";
	assert_int_equal(opal_fs_creds_parse(rootp, sizeof(rootp) - 1, &c), 0);
	assert_int_equal(c.n_groups, 0);
	assert_true(c.dac_override);       /* CAP_DAC_READ_SEARCH */
	static const char nocap[] = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\n";
	assert_int_equal(opal_fs_creds_parse(nocap, sizeof(nocap) - 1, &c), 0);
	assert_false(c.dac_override);      /* root without the capabilities */

	/* A Groups line cut by the read bound loses its last, partial number. */
	static const char cut[] = "Uid:\t5\t5\t5\t5\nGid:\t5\t5\t5\t5\nCapEff:\t0\nGroups:\t7 1234";
	assert_int_equal(opal_fs_creds_parse(cut, sizeof(cut) - 1, &c), 0);
	assert_int_equal(c.n_groups, 1);
	assert_int_equal(c.groups[0], 7);

	/* Missing or malformed required lines. */
	static const char no_cap[] = "Uid:\t5\t5\t5\t5\nGid:\t5\t5\t5\t5\n";
	assert_int_equal(opal_fs_creds_parse(no_cap, sizeof(no_cap) - 1, &c), -EINVAL);
	static const char short_uid[] = "Uid:\t5\t5\t5\nGid:\t5\t5\t5\t5\nCapEff:\t0\n";
	assert_int_equal(opal_fs_creds_parse(short_uid, sizeof(short_uid) - 1, &c), -EINVAL);
	static const char big_uid[] = "Uid:\t5\t5\t5\t4294967296\nGid:\t5\t5\t5\t5\nCapEff:\t0\n";
	assert_int_equal(opal_fs_creds_parse(big_uid, sizeof(big_uid) - 1, &c), -EINVAL);
	assert_int_equal(opal_fs_creds_parse("", 0, &c), -EINVAL);

	/* More groups than the bound: the first OPAL_DEBUGLINK_MAX_GROUPS kept. */
	static char many[16384];
	size_t len = (size_t)snprintf(many, sizeof(many), "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n"
						       "CapEff:\t0\nGroups:\t");
	for (unsigned g = 0; g < OPAL_DEBUGLINK_MAX_GROUPS + 50; g++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%u ", 1000 + g);
	len += (size_t)snprintf(many + len, sizeof(many) - len, "\n");
	assert_int_equal(opal_fs_creds_parse(many, len, &c), 0);
	assert_int_equal(c.n_groups, OPAL_DEBUGLINK_MAX_GROUPS);
	assert_int_equal(c.groups[OPAL_DEBUGLINK_MAX_GROUPS - 1], 1000 + OPAL_DEBUGLINK_MAX_GROUPS - 1);
}

static void test_name_ok(void **state)
{
	(void)state;
	char longest[OPAL_DEBUGLINK_NAME_MAX + 2];

	assert_true(opal_debuglink_name_ok("libc.so.6.debug"));
	assert_true(opal_debuglink_name_ok(".x"));
	assert_false(opal_debuglink_name_ok(""));
	assert_false(opal_debuglink_name_ok("."));
	assert_false(opal_debuglink_name_ok(".."));
	assert_false(opal_debuglink_name_ok("../etc/shadow"));
	assert_false(opal_debuglink_name_ok("a/b"));
	memset(longest, 'a', sizeof(longest) - 1);
	longest[OPAL_DEBUGLINK_NAME_MAX] = '\0';
	assert_true(opal_debuglink_name_ok(longest));
	longest[OPAL_DEBUGLINK_NAME_MAX] = 'a';
	longest[OPAL_DEBUGLINK_NAME_MAX + 1] = '\0';
	assert_false(opal_debuglink_name_ok(longest));
}

static void test_dir(void **state)
{
	(void)state;
	char d[64];

	assert_int_equal(opal_debuglink_dir("/", "/usr/bin/ls", d, sizeof(d)), 0);
	assert_string_equal(d, "/usr/bin");
	assert_int_equal(opal_debuglink_dir("/", "/init", d, sizeof(d)), 0);
	assert_string_equal(d, "");
	/* a chroot seen from the collector */
	assert_int_equal(opal_debuglink_dir("/srv/jail", "/srv/jail/app/bin/x", d, sizeof(d)), 0);
	assert_string_equal(d, "/app/bin");
	assert_int_equal(opal_debuglink_dir("/srv/jail/", "/srv/jail/x", d, sizeof(d)), 0);
	assert_string_equal(d, "");
	assert_int_equal(opal_debuglink_dir("/srv/jail", "/srv/jailbreak/x", d, sizeof(d)), -EXDEV);
	assert_int_equal(opal_debuglink_dir("/srv/jail", "/usr/bin/x", d, sizeof(d)), -EXDEV);
	assert_int_equal(opal_debuglink_dir("/", "memfd:x", d, sizeof(d)), -EINVAL);
	assert_int_equal(opal_debuglink_dir("/", "", d, sizeof(d)), -EINVAL);
	assert_int_equal(opal_debuglink_dir("/", "/aaaaaaaa/b", d, 9), -ENAMETOOLONG);
	assert_int_equal(opal_debuglink_dir("/", "/aaaaaaa/b", d, 9), 0);
}

/* ---- opening candidates ------------------------------------------------------ */

static void test_both_candidates(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n = 99;
	char text[64];
	int fds = count_fds();

	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 2);
	/* paths as the process sees them: the root prefix is gone */
	assert_string_equal(c[0].path, "/app/prog.debug");
	assert_string_equal(c[1].path, "/app/.debug/prog.debug");
	read_all(c[0].fd, text, sizeof(text));
	assert_string_equal(text, "next to it\n");
	assert_int_equal(c[0].size, strlen("next to it\n"));
	read_all(c[1].fd, text, sizeof(text));
	assert_string_equal(text, "in .debug\n");
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(fcntl(c[i].fd, F_GETFL) & O_ACCMODE, O_RDONLY);
		assert_true(fcntl(c[i].fd, F_GETFD) & FD_CLOEXEC);
	}
	assert_int_equal(fk.creds_calls, 2);   /* before and after */
	close_all(c, n);
	assert_int_equal(count_fds(), fds);

	/* only the one in .debug */
	sh("rm %s/prog.debug", app);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(c[0].path, "/app/.debug/prog.debug");
	close_all(c, n);
	/* none: no error */
	assert_int_equal(open_for("other.debug", c, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(count_fds(), fds);
}

/* A binary whose .gnu_debuglink names itself: DIR/NAME is skipped. */
static void test_self_skipped(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n;

	write_file(at(app, "/.debug/prog"), "debug of prog\n", 0644);
	assert_int_equal(open_for("prog", c, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(c[0].path, "/app/.debug/prog");
	close_all(c, n);
}

/* The process root as the collector's root: paths are the collector's. */
static void test_process_root_is_slash(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n;
	char want[256];

	snprintf(root, sizeof(root), "/");
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 2);
	snprintf(want, sizeof(want), "%s/prog.debug", app);
	assert_string_equal(c[0].path, want);
	close_all(c, n);
}

/* No symlink is followed: not as NAME, not as .debug, not above DIR. */
static void test_symlinks_refused(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n;
	int fds = count_fds();

	sh("rm -r %s/prog.debug %s/.debug && ln -s %s/outside %s/.debug && "
	   "ln -s %s/outside/prog.debug %s/prog.debug",
	   app, app, base, app, base, app);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 0);
	/* relative symlinks inside the root, too */
	sh("rm %s/prog.debug %s/.debug && mkdir %s/real && echo x >%s/real/prog.debug && "
	   "ln -s real %s/.debug && ln -s real/prog.debug %s/prog.debug",
	   app, app, app, app, app, app);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 0);
	/* a symlinked directory on the way to DIR */
	sh("ln -s app %s/lnk && echo y >%s/real/../prog2.debug", root, app);
	snprintf(fk.mapped, sizeof(fk.mapped), "%s/lnk/prog", root);
	assert_int_equal(open_for("prog2.debug", c, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(count_fds(), fds);
}

/* Opened only as the process could: search on every directory, read on the file. */
static void test_permissions(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n;
	char p[256];

	snprintf(p, sizeof(p), "%s/prog.debug", app);
	assert_int_equal(chmod(p, 0600), 0);   /* owned by us, not the stranger */
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(c[0].path, "/app/.debug/prog.debug");
	close_all(c, n);

	/* the owner class decides for the owner, even when "other" may read */
	fk.creds.fsuid = getuid();
	assert_int_equal(chmod(p, 0066), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 1);
	close_all(c, n);
	assert_int_equal(chmod(p, 0400), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 2);
	close_all(c, n);

	/* the group class: by fsgid or a supplementary group */
	fk.creds = stranger();
	assert_int_equal(chmod(p, 0040), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 1);
	close_all(c, n);
	fk.creds.groups[0] = 7;
	fk.creds.groups[1] = getgid();
	fk.creds.n_groups = 2;
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 2);
	close_all(c, n);
	fk.creds = stranger();
	fk.creds.fsgid = getgid();
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 2);
	close_all(c, n);

	/* a directory the process cannot search hides what is below it */
	fk.creds = stranger();
	assert_int_equal(chmod(p, 0644), 0);
	snprintf(p, sizeof(p), "%s/.debug", app);
	assert_int_equal(chmod(p, 0750), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(c[0].path, "/app/prog.debug");
	close_all(c, n);
	assert_int_equal(chmod(app, 0700), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(chmod(root, 0700), 0);
	assert_int_equal(chmod(app, 0755), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 0);

	/* uid 0 with CAP_DAC_READ_SEARCH reads anything */
	fk.creds = (struct opal_fs_creds){ .fsuid = 0, .fsgid = 0, .dac_override = true };
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 2);
	close_all(c, n);
}

/* FIFOs, directories and huge files are never opened for reading. */
static void test_not_regular(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n;
	char p[256];

	snprintf(p, sizeof(p), "%s/prog.debug", app);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0644), 0);   /* opening it O_RDONLY would block */
	snprintf(p, sizeof(p), "%s/.debug/prog.debug", app);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 0);

	/* sparse: one byte over the bound, and exactly the bound */
	assert_int_equal(rmdir(p), 0);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)OPAL_DEBUGLINK_MAX_SIZE + 1), 0);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ftruncate(fd, (off_t)OPAL_DEBUGLINK_MAX_SIZE), 0);
	close(fd);
	assert_int_equal(open_for("prog.debug", c, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(c[0].size, OPAL_DEBUGLINK_MAX_SIZE);
	close_all(c, n);
}

static void test_errors(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n = 7;
	struct stat st;
	int fds = count_fds();

	assert_int_equal(open_for("../outside/prog.debug", c, &n), -EINVAL);
	assert_int_equal(n, 0);
	assert_int_equal(open_for("..", c, &n), -EINVAL);

	/* credentials changed between the two reads: nothing is kept */
	fk.creds_change = true;
	fk.creds_later = stranger();
	fk.creds_later.fsuid = 0;
	assert_int_equal(open_for("prog.debug", c, &n), -EAGAIN);
	assert_int_equal(n, 0);
	assert_int_equal(count_fds(), fds);
	fk.creds_change = false;

	/* the range now maps another file */
	assert_int_equal(stat(fk.mapped, &st), 0);
	assert_int_equal(opal_debuglink_open(&fake_src, 1, 0, 1, st.st_dev, st.st_ino + 1,
					     "prog.debug", c, &n),
			 -ESTALE);
	/* the process is gone */
	fk.mapped_err = -ENOENT;
	assert_int_equal(open_for("prog.debug", c, &n), -ENOENT);
	fk.mapped_err = 0;
	/* the file lies outside the process's root (mapped before a chroot) */
	write_file(at(base, "/outside/prog"), "bin\n", 0755);
	snprintf(fk.mapped, sizeof(fk.mapped), "%s/outside/prog", base);
	assert_int_equal(open_for("prog.debug", c, &n), -EXDEV);
	assert_int_equal(n, 0);
	assert_int_equal(count_fds(), fds);
}

/* The live /proc on this very process: a file of the temp tree is mapped,
 * found through map_files and /proc/self/status. Following a
 * /proc/PID/map_files link needs CAP_CHECKPOINT_RESTORE (the collector has
 * it); without it (probed here with stat, not through the code under
 * test) the lookup fails with the kernel's -EPERM and leaves no
 * descriptor open. */
static void test_live_self(void **state)
{
	(void)state;
	struct opal_debuglink_candidate c[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n;
	struct stat st;
	char want[256], link[96];
	struct stat probe;

	int fd = open(fk.mapped, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	close(fd);
	uint64_t start = (uint64_t)(uintptr_t)m;

	snprintf(link, sizeof(link), "/proc/self/map_files/%" PRIx64 "-%" PRIx64, start,
		 start + 4096);
	if (stat(link, &probe) < 0) {
		assert_int_equal(errno, EPERM);
		int fds = count_fds();
		assert_int_equal(opal_debuglink_open(&opal_debuglink_source_live, getpid(), start,
						     start + 4096, st.st_dev, st.st_ino,
						     "prog.debug", c, &n),
				 -EPERM);
		assert_int_equal(count_fds(), fds);
		munmap(m, 4096);
		return;
	}

	assert_int_equal(opal_debuglink_open(&opal_debuglink_source_live, getpid(), start,
					     start + 4096, st.st_dev, st.st_ino, "prog.debug", c,
					     &n),
			 0);
	assert_int_equal(n, 2);
	snprintf(want, sizeof(want), "%s/.debug/prog.debug", app);
	assert_string_equal(c[1].path, want);
	close_all(c, n);
	/* a deleted binary keeps its directory */
	assert_int_equal(unlink(fk.mapped), 0);
	assert_int_equal(opal_debuglink_open(&opal_debuglink_source_live, getpid(), start,
					     start + 4096, st.st_dev, st.st_ino, "prog.debug", c,
					     &n),
			 0);
	assert_int_equal(n, 2);
	close_all(c, n);
	assert_int_equal(opal_debuglink_open(&opal_debuglink_source_live, getpid(), start,
					     start + 4096, st.st_dev, st.st_ino + 1, "prog.debug", c,
					     &n),
			 -ESTALE);
	munmap(m, 4096);
	assert_int_equal(opal_debuglink_open(&opal_debuglink_source_live, getpid(), start,
					     start + 4096, st.st_dev, st.st_ino, "prog.debug", c,
					     &n),
			 -ENOENT);
}

/* ---- the sender ------------------------------------------------------------------ */

#define RUN_ID 7

static char elf_path[256];

static int open_elf(void *ctx, pid_t pid, uint64_t start, uint64_t limit)
{
	(void)ctx;
	(void)pid;
	(void)start;
	(void)limit;
	int fd = open(elf_path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static const struct opal_proc_source elf_src = { .open_mapped = open_elf };

static Opal__Wire__V1__Envelope *next_msg(struct opal_wire_reader *rd, int *fd)
{
	Opal__Wire__V1__Envelope *env;
	int r = opal_wire_recv(rd, &env, fd);
	if (r != 1)
		fail_msg("opal_wire_recv: %d", r);
	return env;
}

static Opal__Wire__V1__FileKind next_file(struct opal_wire_reader *rd, int *fd,
					  Opal__Wire__V1__Envelope **env)
{
	*env = next_msg(rd, fd);
	assert_int_equal((*env)->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE);
	return (*env)->file->kind;
}

static void skip_msg(struct opal_wire_reader *rd, Opal__Wire__V1__Envelope__MsgCase want)
{
	int fd;
	Opal__Wire__V1__Envelope *e = next_msg(rd, &fd);
	assert_int_equal(e->msg_case, want);
	if (fd >= 0)
		close(fd);
	opal_wire_free(e);
}

/* The ELF FileInfo of `f`, then its two candidates, in order. */
static void expect_elf_and_links(struct opal_wire_reader *rd, const struct opal_file *f,
				 const char *debug_path)
{
	static const char *const want_path[] = { "/app/dl_next.debug", "/app/.debug/dl_next.debug" };
	Opal__Wire__V1__Envelope *e;
	int fd;
	struct stat want, got;

	assert_int_equal(next_file(rd, &fd, &e), OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	assert_memory_equal(e->file->file_id.data, f->id.b, 16);
	assert_true(fd >= 0);
	close(fd);
	opal_wire_free(e);
	assert_int_equal(stat(debug_path, &want), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(next_file(rd, &fd, &e),
				 OPAL__WIRE__V1__FILE_KIND__FILE_KIND_DEBUGLINK);
		const Opal__Wire__V1__FileInfo *fi = e->file;
		assert_int_equal(fi->debuglink_of.len, 16);
		assert_memory_equal(fi->debuglink_of.data, f->id.b, 16);
		assert_int_equal(fi->file_id.len, 0);
		assert_int_equal(fi->gnu_build_id.len, 0);
		assert_string_equal(fi->path, want_path[i]);
		assert_true(fi->has_fd);
		assert_true(fd >= 0);
		/* both are hard links to the real debug file */
		assert_int_equal(fstat(fd, &got), 0);
		assert_int_equal(got.st_ino, want.st_ino);
		assert_int_equal(fi->size, (uint64_t)want.st_size);
		close(fd);
		opal_wire_free(e);
	}
}

static void test_sender_sends_candidates(void **state)
{
	(void)state;
	char src_dir[4352], debug_path[256], sock_path[100];
	struct opal_counters ctr = { 0 };
	struct opal_file_table files;
	struct opal_sendq q;
	struct opal_sender s;
	struct opal_host_info host = { .hostname = "h", .kernel_release = "r" };
	struct opal_file *f;
	struct opal_wire_reader rd;
	uint64_t next_seq = 2;

	snprintf(src_dir, sizeof(src_dir), "%s/debuglink", fixtures);
	snprintf(elf_path, sizeof(elf_path), "%s/dl_next", app);
	snprintf(debug_path, sizeof(debug_path), "%s/dl_next.debug", app);
	sh("cp %s/dl_next %s/dl_next.debug %s/ && ln %s/dl_next.debug %s/.debug/", src_dir, src_dir,
	   app, app, app);
	snprintf(fk.mapped, sizeof(fk.mapped), "%s", elf_path);
	struct opal_map_entry m = { .start = 0x1000, .limit = 0x2000, .executable = true,
				    .path = elf_path };
	assert_int_equal(opal_files_init(&files, 16, 16, &elf_src, &ctr), 0);
	assert_int_equal(opal_files_resolve(&files, 4242, &m, &f), 0);
	assert_true(f->elf.has_debuglink);
	assert_string_equal(f->elf.debuglink, "dl_next.debug");

	snprintf(sock_path, sizeof(sock_path), "%s/s.sock", base);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 2), 0);

	assert_int_equal(opal_sendq_init(&q, 1 << 20), 0);
	opal_sender_init(&s, sock_path, &q, &files, &ctr, &host);
	assert_ptr_equal(s.debuglinks, &opal_debuglink_source_live);
	s.debuglinks = &fake_src;
	s.run_id = RUN_ID;
	s.next_seq = &next_seq;
	Opal__Wire__V1__Interval iv = OPAL__WIRE__V1__INTERVAL__INIT;
	struct opal_sendq_entry qe = { .seq = 1 };
	iv.seq = 1;
	iv.run_id = RUN_ID;
	qe.len = opal__wire__v1__interval__get_packed_size(&iv);
	qe.buf = malloc(qe.len);
	opal__wire__v1__interval__pack(&iv, qe.buf);
	qe.ids = malloc(sizeof(f->id));
	qe.ids[0] = f->id;
	qe.n_ids = 1;
	assert_true(opal_sendq_push(&q, &qe) >= 0);

	int fds = count_fds();
	opal_sender_service(&s, 1);
	assert_true(s.sock >= 0);
	int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	assert_true(c >= 0);
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	opal_wire_reader_init(&rd, c);
	skip_msg(&rd, OPAL__WIRE__V1__ENVELOPE__MSG_HELLO);
	skip_msg(&rd, OPAL__WIRE__V1__ENVELOPE__MSG_FILE);   /* kallsyms */
	expect_elf_and_links(&rd, f, debug_path);
	skip_msg(&rd, OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL);
	/* the collector holds no candidate descriptor: the socket and the
	 * table's ELF descriptor were already open or are the only new ones */
	assert_int_equal(count_fds(), fds + 2);   /* + the accepted socket, + the sender's */

	/* FileRequest: the ELF and its candidates again */
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileRequest req = OPAL__WIRE__V1__FILE_REQUEST__INIT;
	req.file_id.len = 16;
	req.file_id.data = f->id.b;
	req.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST;
	env.file_request = &req;
	assert_int_equal(opal_wire_send(c, &env, -1), 0);
	opal_sender_service(&s, 2);
	expect_elf_and_links(&rd, f, debug_path);
	assert_int_equal(count_fds(), fds + 2);

	/* a process whose mapping is gone: the ELF goes (its descriptor is
	 * still held), no candidates */
	fk.mapped_err = -ENOENT;
	assert_int_equal(opal_wire_send(c, &env, -1), 0);
	opal_sender_service(&s, 3);
	Opal__Wire__V1__Envelope *e;
	int fd;
	assert_int_equal(next_file(&rd, &fd, &e), OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	close(fd);
	opal_wire_free(e);
	char b;
	assert_int_equal(recv(c, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);

	opal_sender_close(&s);
	opal_wire_reader_close(&rd);
	close(c);
	close(ls);
	opal_sendq_destroy(&q);
	opal_files_destroy(&files);
}

int main(void)
{
	const char *env = getenv("OPAL_FIXTURES");
	snprintf(fixtures, sizeof(fixtures), "%s", env && *env ? env : "build/fixtures");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_creds_parse),
		cmocka_unit_test(test_name_ok),
		cmocka_unit_test(test_dir),
		cmocka_unit_test_setup_teardown(test_both_candidates, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_self_skipped, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_process_root_is_slash, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_symlinks_refused, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_permissions, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_not_regular, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_errors, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_live_self, setup_tree, teardown_tree),
		cmocka_unit_test_setup_teardown(test_sender_sends_candidates, setup_tree,
						teardown_tree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
