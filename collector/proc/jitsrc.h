/* The files that name a process's JIT code, opened by the collector for
 * the symbolizer, which parses them (wire FileInfo kinds PERF_MAP and
 * JITDUMP, docs/jit.md); the collector reads none of their contents.
 *   - the perf map, /tmp/perf-NSPID.map, NSPID the pid as the process sees
 *     it (the last "NSpid:" value of /proc/PID/status), opened in the
 *     process's own view of the file system with its permissions
 *     (opal_debuglink_open_as: no symlinks, O_PATH first);
 *   - a jitdump file the process maps (a mapping named ".../jit-N.dump":
 *     runtimes map it so that profilers find it), opened through
 *     /proc/PID/map_files, so it is the very file mapped.
 * A process gets an entry when a sample of it has a JIT frame
 * (opal_jit_note); files not there yet (a JVM whose perf map is written
 * on request) and files replaced under their name are looked for again at
 * most every OPAL_JIT_RETRY_NS while its JIT frames keep coming. A file
 * goes out once per connection, and again after it was replaced; the
 * symbolizer re-reads a file that grew itself, through the descriptor.
 *
 * Bounds: OPAL_JIT_MAX_PROCS entries (two descriptors each at most; the
 * least recently used entry is closed, jit_procs_dropped), entries idle
 * for OPAL_JIT_IDLE_NS closed (after a process's exit its last interval
 * still needs its files). */
#ifndef OPAL_COLLECTOR_JITSRC_H
#define OPAL_COLLECTOR_JITSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/counters.h"
#include "proc/debuglink.h"
#include "proc/proc_table.h"

#define OPAL_JIT_MAX_PROCS     1024
#define OPAL_JIT_RETRY_NS      2000000000ull     /* 2 s */
#define OPAL_JIT_IDLE_NS       120000000000ull   /* 2 min */
#define OPAL_JIT_MAX_FILE_SIZE (4ull << 30)      /* larger files are not opened */
#define OPAL_JIT_STATUS_MAX    (64u << 10)       /* bytes of /proc/PID/status read */

enum opal_jit_kind { OPAL_JIT_PERF_MAP = 0, OPAL_JIT_JITDUMP = 1, OPAL_JIT_KINDS };

struct opal_jit_file {
	int fd;                 /* -1: none */
	uint64_t dev, ino;      /* identity of the open file */
	uint64_t sent_conn;     /* connection generation it went out on; 0: not yet */
	char *path;             /* heap: as the process sees it */
};

struct opal_jit_proc {
	pid_t pid;
	uint64_t start_ticks;   /* the process instance (pid reuse) */
	uint64_t id;            /* Process.jit_id, FileInfo.jit_id */
	uint64_t tried_ns, used_ns;
	struct opal_jit_file f[OPAL_JIT_KINDS];
};

/* How files are found: the live /proc, or fakes in tests. */
struct opal_jit_source {
	const struct opal_debuglink_source *files;   /* opal_debuglink_open_as */
	void *ctx;
	/* The pid `pid` has in its own pid namespace. Returns it or -errno. */
	int (*ns_pid)(void *ctx, pid_t pid);
	/* Opens the file `pid` maps at [start, limit) read-only; returns a
	 * descriptor or -errno. */
	int (*open_mapped)(void *ctx, pid_t pid, uint64_t start, uint64_t limit);
};

/* /proc/PID/status, /proc/PID/map_files, opal_debuglink_source_live. */
extern const struct opal_jit_source opal_jit_source_live;

struct opal_jit_table {
	struct opal_jit_proc e[OPAL_JIT_MAX_PROCS];
	size_t n;
	uint64_t next_id;
	const struct opal_jit_source *src;
	struct opal_counters *ctr;
};

/* `src` and `ctr` must outlive the table. */
void opal_jit_init(struct opal_jit_table *t, const struct opal_jit_source *src,
		   struct opal_counters *ctr);
/* Closes every descriptor. */
void opal_jit_destroy(struct opal_jit_table *t);

/* A sample of `p` (its maps as cached) had a JIT frame at time `now_ns`:
 * finds or adds its entry, looks for its files when due. Returns the
 * entry's id (nonzero). */
uint64_t opal_jit_note(struct opal_jit_table *t, const struct opal_proc *p, uint64_t now_ns);

/* The entry with id `id`, or NULL (closed since). */
struct opal_jit_proc *opal_jit_find(struct opal_jit_table *t, uint64_t id);

/* Closes the entries idle for OPAL_JIT_IDLE_NS. */
void opal_jit_expire(struct opal_jit_table *t, uint64_t now_ns);

/* The last value of the "NSpid:" line of /proc/PID/status text (`len`
 * bytes, need not be NUL-terminated): the pid in the process's innermost
 * pid namespace. Returns it, or -EINVAL when the line is missing or bad. */
int opal_status_ns_pid(const char *text, size_t len);

/* True when `path` names a jitdump file: its last component is
 * "jit-DIGITS.dump" (perf's convention, docs/jit.md). */
bool opal_jit_is_jitdump_path(const char *path);

#endif
