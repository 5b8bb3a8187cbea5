/* .gnu_debuglink candidates next to a mapped ELF file, opened by the
 * collector in the profiled process's own view of the file system, for the
 * symbolizer (which opens no other process's files; wire FileInfo kind
 * DEBUGLINK, docs/wire-protocol.md). For a file whose .gnu_debuglink names
 * NAME and that the process maps at DIR/FILE, the candidates are DIR/NAME
 * (unless it is the file itself) and DIR/.debug/NAME, the "next to the
 * binary" places of the GDB manual ("Debugging Information in Separate
 * Files"); /usr/lib/debug is the symbolizer's own business.
 *
 * The collector is root and the names come from files any user can write,
 * so a candidate is opened only as the process itself could have opened
 * it, and never anything else:
 *   - the walk starts at the process's root directory (/proc/PID/root) and
 *     goes one component at a time with openat2(RESOLVE_BENEATH |
 *     RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), O_NOFOLLOW: no symlink
 *     is followed anywhere (mapped paths are canonical, so real layouts
 *     have none; a symlinked .debug is refused);
 *   - every directory must grant search and the file read permission to
 *     the process's file-system credentials (fsuid, fsgid, supplementary
 *     groups from /proc/PID/status; mode bits only, POSIX ACLs are not
 *     consulted), unless it is uid 0 with CAP_DAC_OVERRIDE or
 *     CAP_DAC_READ_SEARCH; the credentials are read before and after and
 *     must not have changed;
 *   - the last component is opened O_PATH first and reopened for reading
 *     only when it is a regular file of at most OPAL_DEBUGLINK_MAX_SIZE
 *     bytes, so no FIFO or device is ever opened.
 * Linux >= 5.6 (openat2). */
#ifndef OPAL_COLLECTOR_DEBUGLINK_H
#define OPAL_COLLECTOR_DEBUGLINK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "proc/files.h"

#define OPAL_DEBUGLINK_MAX_SIZE       (4ull << 30)  /* bytes of a candidate */
#define OPAL_DEBUGLINK_MAX_CANDIDATES 2             /* DIR/NAME, DIR/.debug/NAME */
#define OPAL_DEBUGLINK_NAME_MAX       255           /* bytes of NAME (NAME_MAX) */
#define OPAL_DEBUGLINK_MAX_DEPTH      256           /* directories walked to DIR */
#define OPAL_DEBUGLINK_MAX_GROUPS     256           /* supplementary groups kept (more: dropped,
						       which only denies more) */
#define OPAL_DEBUGLINK_STATUS_MAX     (64u << 10)   /* bytes of /proc/PID/status read */

/* The file-system credentials of a process, for permission checks. */
struct opal_fs_creds {
	uint32_t fsuid, fsgid;
	bool dac_override;      /* fsuid 0 with CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH effective */
	size_t n_groups;
	uint32_t groups[OPAL_DEBUGLINK_MAX_GROUPS];
};

/* How the candidates reach a process: the live /proc, or a fake in tests. */
struct opal_debuglink_source {
	void *ctx;
	/* An O_PATH | O_DIRECTORY | O_CLOEXEC descriptor of the root directory
	 * of `pid`. Returns it or -errno. */
	int (*open_root)(void *ctx, pid_t pid);
	/* The path of the file `pid` maps at [start, limit) as the collector
	 * sees it (like /proc/PID/maps: relative to the collector's root, with
	 * no " (deleted)" suffix), NUL-terminated in `buf` of `cap` bytes, and
	 * that file's st_dev and st_ino. Returns 0 or -errno (-ENOENT when
	 * nothing is mapped there any more, -ENAMETOOLONG). */
	int (*mapped_file)(void *ctx, pid_t pid, uint64_t start, uint64_t limit, char *buf,
			   size_t cap, uint64_t *dev, uint64_t *ino);
	/* The file-system credentials of `pid`. Returns 0 or -errno. */
	int (*read_creds)(void *ctx, pid_t pid, struct opal_fs_creds *out);
};

/* /proc/PID/root, /proc/PID/map_files/<start>-<limit> (readlink and stat;
 * needs CAP_CHECKPOINT_RESTORE), /proc/PID/status. */
extern const struct opal_debuglink_source opal_debuglink_source_live;

/* An open candidate: read-only, O_CLOEXEC, a regular file. */
struct opal_debuglink_candidate {
	int fd;
	uint64_t size;          /* bytes */
	uint64_t dev, ino;      /* st_dev, st_ino (opal_debuglink_open_as) */
	char path[PATH_MAX];    /* as the process sees it, e.g. "/usr/bin/.debug/x.debug" */
};

/* Parses /proc/PID/status text (`len` bytes, need not be NUL-terminated):
 * the 4th (fs) values of "Uid:" and "Gid:", "Groups:" (at most
 * OPAL_DEBUGLINK_MAX_GROUPS kept) and "CapEff:" (hex). Returns 0, or
 * -EINVAL when Uid, Gid or CapEff is missing or malformed. */
int opal_fs_creds_parse(const char *text, size_t len, struct opal_fs_creds *out);

/* True when `name` is usable as NAME: 1..OPAL_DEBUGLINK_NAME_MAX bytes, no
 * '/', not "." or "..". */
bool opal_debuglink_name_ok(const char *name);

/* The directory, as the process sees it, of the file at `mapped` (as the
 * collector sees it), for a process whose root directory the collector
 * sees at `root`: `mapped` without its last component and, unless `root`
 * is "/", without the `root` prefix. "" stands for the process's root
 * directory. Writes it NUL-terminated into `dir` (`cap` bytes). Returns 0,
 * -EINVAL when `mapped` is not an absolute path, -EXDEV when it lies
 * outside `root`, or -ENAMETOOLONG. */
int opal_debuglink_dir(const char *root, const char *mapped, char *dir, size_t cap);

/* Opens the candidates of NAME (`name`) for the file `pid` maps at
 * [start, limit), which must still be the file with st_dev `dev` and
 * st_ino `ino`; DIR/NAME is skipped when it is that file. Fills out[0..*n)
 * in the order DIR/NAME, DIR/.debug/NAME with the ones that exist and
 * pass the checks above (the caller closes their fds); missing or refused
 * candidates are no error (logged at debug level). Returns 0 (also with
 * *n == 0); -EINVAL for a bad NAME; -ESTALE when the range no longer maps
 * that file; -EAGAIN when the process's credentials changed meanwhile (no
 * candidate kept); -errno from `src` when the process or its mapping is
 * gone or unreadable. */
int opal_debuglink_open(const struct opal_debuglink_source *src, pid_t pid, uint64_t start,
			uint64_t limit, uint64_t dev, uint64_t ino, const char *name,
			struct opal_debuglink_candidate out[OPAL_DEBUGLINK_MAX_CANDIDATES],
			size_t *n);

/* opal_debuglink_open for file `f` through its witnesses, newest first,
 * until one still maps it. Returns 0 with the candidates of the first
 * such witness (*n may be 0, also when `f` has no usable .gnu_debuglink),
 * or the last witness's error when none does (-ENOENT without witnesses). */
int opal_debuglink_open_file(const struct opal_debuglink_source *src, const struct opal_file *f,
			     struct opal_debuglink_candidate out[OPAL_DEBUGLINK_MAX_CANDIDATES],
			     size_t *n);

/* Opens the regular file DIR/NAME of process `pid` as the process could
 * (the rules above: from its root directory, no symlinks, its
 * credentials, O_PATH first), for other files the symbolizer needs from
 * the process's own view (perf maps, proc/jitsrc.h). DIR is relative to
 * the process's root ("" for the root, "tmp"), NAME a plain file name;
 * the file may have at most `max_size` bytes. Returns 0 with *out filled
 * (path "DIR/NAME"; the caller closes out->fd), -ENOENT, -EACCES,
 * -ENOEXEC (not a regular file), -EFBIG, -EINVAL (bad NAME), -EAGAIN
 * (the credentials changed meanwhile) or -errno from `src`. */
int opal_debuglink_open_as(const struct opal_debuglink_source *src, pid_t pid, const char *dir,
			   const char *name, uint64_t max_size,
			   struct opal_debuglink_candidate *out);

#endif
