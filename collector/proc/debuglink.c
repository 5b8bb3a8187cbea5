/* .gnu_debuglink candidates opened in the process's view (debuglink.h). */
#include "proc/debuglink.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "proc/procsrc.h"
#include "shared/fileid.h"
#include "shared/log.h"

#define CAP_BIT_DAC_OVERRIDE    1   /* linux/capability.h */
#define CAP_BIT_DAC_READ_SEARCH 2

/* ---- /proc/PID/status ------------------------------------------------------ */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Parses the decimal number at *p (after blanks) in [*p, end); it must be
 * followed by a blank or a newline inside the text, so that a number cut
 * by the read bound is never taken for a smaller one. */
static bool next_u32(const char **p, const char *end, uint32_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	while (s < end && is_blank(*s))
		s++;
	const char *digits = s;
	while (s < end && *s >= '0' && *s <= '9') {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return false;
		s++;
	}
	if (s == digits || s == end || !(is_blank(*s) || *s == '\n'))
		return false;
	*p = s;
	*out = (uint32_t)v;
	return true;
}

static bool next_hex64(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int nd = 0;

	while (s < end && is_blank(*s))
		s++;
	for (; s < end; s++, nd++) {
		int d = opal_hex_digit(*s);
		if (d < 0)
			break;
		if (nd == 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	if (nd == 0 || s == end || *s != '\n')
		return false;
	*p = s;
	*out = v;
	return true;
}

/* The 4th of the four ids of a "Uid:"/"Gid:" line: real, effective, saved, fs. */
static bool fs_id(const char *p, const char *end, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		if (!next_u32(&p, end, &v))
			return false;
	*out = v;
	return true;
}

int opal_fs_creds_parse(const char *text, size_t len, struct opal_fs_creds *out)
{
	const char *p = text, *end = text + len;
	bool uid = false, gid = false, cap = false;
	uint64_t capeff = 0;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl + 1 : end;   /* a line keeps its newline */
		if (eol - p > 4 && memcmp(p, "Uid:", 4) == 0)
			uid = fs_id(p + 4, eol, &out->fsuid);
		else if (eol - p > 4 && memcmp(p, "Gid:", 4) == 0)
			gid = fs_id(p + 4, eol, &out->fsgid);
		else if (eol - p > 7 && memcmp(p, "CapEff:", 7) == 0) {
			const char *q = p + 7;
			cap = next_hex64(&q, eol, &capeff);
		} else if (eol - p > 7 && memcmp(p, "Groups:", 7) == 0) {
			const char *q = p + 7;
			uint32_t g;
			out->n_groups = 0;
			while (out->n_groups < OPAL_DEBUGLINK_MAX_GROUPS && next_u32(&q, eol, &g))
				out->groups[out->n_groups++] = g;
		}
		p = eol;
	}
	if (!uid || !gid || !cap)
		return -EINVAL;
	out->dac_override = out->fsuid == 0 &&
			    (capeff & (1ull << CAP_BIT_DAC_OVERRIDE | 1ull << CAP_BIT_DAC_READ_SEARCH));
	return 0;
}

static bool creds_equal(const struct opal_fs_creds *a, const struct opal_fs_creds *b)
{
	return a->fsuid == b->fsuid && a->fsgid == b->fsgid && a->dac_override == b->dac_override &&
	       a->n_groups == b->n_groups &&
	       memcmp(a->groups, b->groups, a->n_groups * sizeof(a->groups[0])) == 0;
}

/* ---- the live /proc ---------------------------------------------------------- */

static int live_open_root(void *ctx, pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int live_mapped_file(void *ctx, pid_t pid, uint64_t start, uint64_t limit, char *buf,
			    size_t cap, uint64_t *dev, uint64_t *ino)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	char link[96];
	struct stat st;
	int err = opal_map_files_path(link, sizeof(link), pid, start, limit);

	if (err)
		return err;
	ssize_t n = readlink(link, buf, cap);
	if (n < 0)
		return -errno;
	if ((size_t)n >= cap)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	if ((size_t)n > dlen && strcmp(buf + n - dlen, deleted) == 0)
		buf[n - dlen] = '\0';
	/* stat follows the link to the mapped file itself, deleted or not. */
	if (stat(link, &st) < 0)
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

static int live_read_creds(void *ctx, pid_t pid, struct opal_fs_creds *out)
{
	char path[64];
	size_t len = 0;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *text = malloc(OPAL_DEBUGLINK_STATUS_MAX);
	if (!text) {
		close(fd);
		return -ENOMEM;
	}
	while (len < OPAL_DEBUGLINK_STATUS_MAX) {
		ssize_t r = read(fd, text + len, OPAL_DEBUGLINK_STATUS_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = -errno;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (!err)
		err = opal_fs_creds_parse(text, len, out);
	free(text);
	return err;
}

const struct opal_debuglink_source opal_debuglink_source_live = {
	.ctx = NULL,
	.open_root = live_open_root,
	.mapped_file = live_mapped_file,
	.read_creds = live_read_creds,
};

/* ---- names and directories -------------------------------------------------- */

bool opal_debuglink_name_ok(const char *name)
{
	size_t len = strnlen(name, OPAL_DEBUGLINK_NAME_MAX + 1);

	return len > 0 && len <= OPAL_DEBUGLINK_NAME_MAX && !memchr(name, '/', len) &&
	       strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int opal_debuglink_dir(const char *root, const char *mapped, char *dir, size_t cap)
{
	size_t rlen = strlen(root);
	const char *rel = mapped;

	if (mapped[0] != '/')
		return -EINVAL;
	while (rlen > 0 && root[rlen - 1] == '/')
		rlen--;
	if (rlen > 0) {
		if (strncmp(mapped, root, rlen) != 0 || mapped[rlen] != '/')
			return -EXDEV;
		rel = mapped + rlen;
	}
	size_t dlen = (size_t)(strrchr(rel, '/') - rel);
	if (dlen >= cap)
		return -ENAMETOOLONG;
	memcpy(dir, rel, dlen);
	dir[dlen] = '\0';
	return 0;
}

/* ---- the walk ---------------------------------------------------------------------- */

/* `want` (S_IROTH or S_IXOTH) by the owner, group or other class, as the
 * kernel's generic permission check picks it (mode bits only). */
static bool permitted(const struct opal_fs_creds *c, const struct stat *st, mode_t want)
{
	mode_t bits = st->st_mode;
	bool in_group = st->st_gid == c->fsgid;

	if (c->dac_override)
		return true;
	for (size_t i = 0; !in_group && i < c->n_groups; i++)
		in_group = st->st_gid == c->groups[i];
	if (st->st_uid == c->fsuid)
		bits >>= 6;
	else if (in_group)
		bits >>= 3;
	return (bits & want) == want;
}

/* One path component `name` under `dirfd`, never through a symlink and
 * never out of `dirfd`. */
static int open_component(int dirfd, const char *name, uint64_t flags)
{
	struct open_how how = {
		.flags = flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* The directory `name` under `dirfd` as an O_PATH descriptor, when the
 * process may search it. */
static int step_dir(int dirfd, const char *name, const struct opal_fs_creds *c)
{
	struct stat st;
	int fd = open_component(dirfd, name, O_PATH | O_DIRECTORY), err = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		err = -errno;
	else if (!S_ISDIR(st.st_mode))
		err = -ENOTDIR;
	else if (!permitted(c, &st, S_IXOTH))
		err = -EACCES;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* DIR (components separated by '/', "" for the root) from the process's
 * root directory `root_fd`, checking search permission on each. */
static int walk_dir(int root_fd, const char *dir, const struct opal_fs_creds *c)
{
	char buf[PATH_MAX];
	struct stat st;
	unsigned depth = 0;

	if (fstat(root_fd, &st) < 0)
		return -errno;
	if (!permitted(c, &st, S_IXOTH))
		return -EACCES;
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	int cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -errno;
	char *save = NULL;
	for (char *comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		int next = ++depth > OPAL_DEBUGLINK_MAX_DEPTH ? -ENAMETOOLONG :
								 step_dir(cur, comp, c);
		close(cur);
		if (next < 0)
			return next;
		cur = next;
	}
	return cur;
}

/* The regular file `name` under `dirfd`, opened read-only only after its
 * type, size and the process's read permission were checked on an O_PATH
 * descriptor (opening a FIFO or a device could block or act). */
static int open_leaf(int dirfd, const char *name, const struct opal_fs_creds *c,
		     uint64_t max_size, struct stat *st)
{
	char reopen[64];
	int err = 0, fd = -1;
	int pfd = open_component(dirfd, name, O_PATH);

	if (pfd < 0)
		return pfd;
	if (fstat(pfd, st) < 0)
		err = -errno;
	else if (!S_ISREG(st->st_mode))
		err = -ENOEXEC;
	else if ((uint64_t)st->st_size > max_size)
		err = -EFBIG;
	else if (!permitted(c, st, S_IROTH))
		err = -EACCES;
	if (!err) {
		/* Reopening the O_PATH descriptor's magic link opens that very
		 * inode: nothing can be swapped in since the checks. */
		snprintf(reopen, sizeof(reopen), "/proc/self/fd/%d", pfd);
		fd = open(reopen, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0 || fstat(fd, st) < 0)
			err = -errno;
	}
	close(pfd);
	if (err) {
		if (fd >= 0)
			close(fd);
		return err;
	}
	return fd;
}

/* Adds candidate `name` under `dirfd` (shown as `shown_dir`/`name`) to out[*n]. */
static void try_candidate(int dirfd, const char *shown_dir, const char *name,
			  const struct opal_fs_creds *c, uint64_t self_dev, uint64_t self_ino,
			  pid_t pid, struct opal_debuglink_candidate *out, size_t *n)
{
	struct opal_debuglink_candidate *cand = &out[*n];
	struct stat st;
	int fd;

	if (snprintf(cand->path, sizeof(cand->path), "%s/%s", shown_dir, name) >=
	    (int)sizeof(cand->path))
		return;
	fd = open_leaf(dirfd, name, c, OPAL_DEBUGLINK_MAX_SIZE, &st);
	if (fd < 0) {
		if (fd != -ENOENT)
			opal_debug("debuglink candidate %s of pid %d refused: %s", cand->path,
				   (int)pid, strerror(-fd));
		return;
	}
	if ((uint64_t)st.st_dev == self_dev && (uint64_t)st.st_ino == self_ino) {
		close(fd);   /* the binary names itself */
		return;
	}
	cand->fd = fd;
	cand->size = (uint64_t)st.st_size;
	(*n)++;
}

static void close_candidates(struct opal_debuglink_candidate *out, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		close(out[i].fd);
	*n = 0;
}

/* The path of the O_PATH descriptor `fd` as the collector sees it. */
static int fd_path(int fd, char *buf, size_t cap)
{
	char link[64];

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, buf, cap);
	if (n < 0)
		return -errno;
	if ((size_t)n >= cap)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return 0;
}

int opal_debuglink_open(const struct opal_debuglink_source *src, pid_t pid, uint64_t start,
			uint64_t limit, uint64_t dev, uint64_t ino, const char *name,
			struct opal_debuglink_candidate out[OPAL_DEBUGLINK_MAX_CANDIDATES],
			size_t *n)
{
	char mapped[PATH_MAX], root[PATH_MAX], dir[PATH_MAX];
	struct opal_fs_creds before, after;
	uint64_t mdev, mino;
	int root_fd, dir_fd, err;

	*n = 0;
	if (!opal_debuglink_name_ok(name))
		return -EINVAL;
	if ((err = src->mapped_file(src->ctx, pid, start, limit, mapped, sizeof(mapped), &mdev,
				    &mino)) < 0)
		return err;
	if (mdev != dev || mino != ino)
		return -ESTALE;
	if ((err = src->read_creds(src->ctx, pid, &before)) < 0)
		return err;
	if ((root_fd = src->open_root(src->ctx, pid)) < 0)
		return root_fd;
	/* The root as the collector sees it, from the descriptor itself, so
	 * that it is the root the walk starts from. */
	if ((err = fd_path(root_fd, root, sizeof(root))) < 0 ||
	    (err = opal_debuglink_dir(root, mapped, dir, sizeof(dir))) < 0) {
		close(root_fd);
		return err;
	}
	dir_fd = walk_dir(root_fd, dir, &before);
	close(root_fd);
	if (dir_fd < 0) {
		opal_debug("debuglink: directory '%s' of pid %d refused: %s", dir, (int)pid,
			   strerror(-dir_fd));
		return 0;
	}
	try_candidate(dir_fd, dir, name, &before, dev, ino, pid, out, n);
	int sub = step_dir(dir_fd, ".debug", &before);
	if (sub >= 0) {
		char shown[PATH_MAX];
		if (snprintf(shown, sizeof(shown), "%s/.debug", dir) < (int)sizeof(shown))
			try_candidate(sub, shown, name, &before, dev, ino, pid, out, n);
		close(sub);
	} else if (sub != -ENOENT) {
		opal_debug("debuglink: %s/.debug of pid %d refused: %s", dir, (int)pid,
			   strerror(-sub));
	}
	close(dir_fd);
	/* A process that changed credentials meanwhile (setuid exec, or the
	 * pid reused) may have been checked with the wrong ones. */
	if ((err = src->read_creds(src->ctx, pid, &after)) < 0 || !creds_equal(&before, &after)) {
		close_candidates(out, n);
		return err < 0 ? err : -EAGAIN;
	}
	return 0;
}

int opal_debuglink_open_file(const struct opal_debuglink_source *src, const struct opal_file *f,
			     struct opal_debuglink_candidate out[OPAL_DEBUGLINK_MAX_CANDIDATES],
			     size_t *n)
{
	int err = -ENOENT;

	*n = 0;
	if (!f->elf.has_debuglink)
		return 0;
	if (!opal_debuglink_name_ok(f->elf.debuglink)) {
		opal_debug("file %s: .gnu_debuglink name is not a plain file name", f->path);
		return 0;
	}
	for (unsigned i = 0; i < f->n_witness; i++) {
		const struct opal_file_witness *w = &f->witness[i];
		err = opal_debuglink_open(src, w->pid, w->start, w->limit, f->key.dev, f->key.ino,
					  f->elf.debuglink, out, n);
		if (err == 0)
			return 0;
		opal_debug("file %s: debuglink through pid %d: %s", f->path, (int)w->pid,
			   strerror(-err));
	}
	return err;
}

int opal_debuglink_open_as(const struct opal_debuglink_source *src, pid_t pid, const char *dir,
			   const char *name, uint64_t max_size,
			   struct opal_debuglink_candidate *out)
{
	struct opal_fs_creds before, after;
	struct stat st;
	int root_fd, dir_fd, fd, err;

	if (!opal_debuglink_name_ok(name))
		return -EINVAL;
	if (snprintf(out->path, sizeof(out->path), "%s/%s", dir, name) >= (int)sizeof(out->path))
		return -ENAMETOOLONG;
	if ((err = src->read_creds(src->ctx, pid, &before)) < 0)
		return err;
	if ((root_fd = src->open_root(src->ctx, pid)) < 0)
		return root_fd;
	dir_fd = walk_dir(root_fd, dir, &before);
	close(root_fd);
	if (dir_fd < 0)
		return dir_fd;
	fd = open_leaf(dir_fd, name, &before, max_size, &st);
	close(dir_fd);
	if (fd < 0)
		return fd;
	if ((err = src->read_creds(src->ctx, pid, &after)) < 0 || !creds_equal(&before, &after)) {
		close(fd);
		return err < 0 ? err : -EAGAIN;
	}
	out->fd = fd;
	out->size = (uint64_t)st.st_size;
	out->dev = (uint64_t)st.st_dev;
	out->ino = (uint64_t)st.st_ino;
	return 0;
}
