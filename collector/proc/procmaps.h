/* /proc/PID/maps parsing (proc(5)). */
#ifndef OPAL_PROCMAPS_H
#define OPAL_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OPAL_MAPS_MAX_ENTRIES 65536   /* larger maps files are truncated (-E2BIG) */

struct opal_map_entry {
	uint64_t start;     /* inclusive */
	uint64_t limit;     /* exclusive */
	uint64_t offset;    /* file offset of start */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	bool readable, writable, executable, shared;
	bool deleted;       /* path ended in " (deleted)" (suffix removed from path) */
	char *path;         /* heap string; "" for anonymous; "[vdso]" etc. kept as is */
};

/* Parses one line of a maps file (without or with its trailing newline).
 * On success fills `out` (out->path is malloc'd, caller frees) and returns
 * 0; returns -EINVAL for a malformed line, -ENOMEM. */
int opal_maps_parse_line(const char *line, struct opal_map_entry *out);

/* Reads every entry of /proc/<pid>/maps (or of `path` when non-NULL, for
 * tests) into a malloc'd array sorted by start; `*n` gets its length.
 * Free with opal_maps_free. Returns 0, -ENOENT/-ESRCH when the process is
 * gone, -E2BIG when over OPAL_MAPS_MAX_ENTRIES (first entries kept), or
 * -errno. */
int opal_maps_read(pid_t pid, const char *path, struct opal_map_entry **out, size_t *n);

void opal_maps_free(struct opal_map_entry *entries, size_t n);

/* True for anonymous executable memory, where runtimes put the code they
 * generate (JIT compilers, CPython's perf trampolines): no inode, and no
 * path or a name given with PR_SET_VMA_ANON_NAME ("[anon:...]"). */
bool opal_maps_is_jit(const struct opal_map_entry *m);

/* Binary search for the entry holding `addr`; NULL if none. */
const struct opal_map_entry *opal_maps_find(const struct opal_map_entry *e, size_t n,
					    uint64_t addr);

#endif
