/* Global table of mapped ELF files, keyed by (st_dev, st_ino, st_size,
 * st_mtim) of the descriptor opened through /proc/PID/map_files, holding
 * each file's ID, ELF layout (PT_LOADs, build ID) and, for the most
 * recently used ones, an open read-only descriptor to pass to the
 * symbolizer.
 *
 * Bounds: at most `max_files` identities (least recently used dropped
 * entirely) and at most `max_fds` open descriptors (least recently used
 * closed; the identity stays and remembers up to OPAL_FILE_WITNESSES
 * (pid, mapping) places it was seen, so it can be reopened). */
#ifndef OPAL_COLLECTOR_FILES_H
#define OPAL_COLLECTOR_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/counters.h"
#include "base/htab.h"
#include "base/list.h"
#include "proc/elfinfo.h"
#include "proc/procmaps.h"
#include "proc/procsrc.h"
#include "shared/fileid.h"

#define OPAL_DEFAULT_MAX_FILES 16384
#define OPAL_FILE_WITNESSES    4

struct opal_file_key {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
};

struct opal_file_witness {
	pid_t pid;
	uint64_t start, limit;
};

struct opal_file {
	struct opal_hnode by_key, by_id;
	struct opal_list lru;      /* every file, most recently used first */
	struct opal_list fd_lru;   /* files with fd >= 0, most recently used first */
	struct opal_file_key key;
	opal_file_id id;
	struct opal_elf_info elf;
	char *path;                /* mapping path when first seen (informational) */
	int fd;                    /* -1 while closed by the descriptor bound */
	uint64_t sent_conn;        /* sender connection generation it was last sent on; 0 never */
	struct opal_file_witness witness[OPAL_FILE_WITNESSES];   /* newest first */
	unsigned n_witness;
	bool pinned;               /* opal_files_add_pinned: never closed or dropped */
};

struct opal_file_table {
	struct opal_htab by_key, by_id;
	struct opal_list lru, fd_lru;
	struct opal_list pinned;   /* pinned files (linked by their lru node), outside the bounds */
	size_t n_files, n_fds;
	size_t max_files, max_fds;
	const struct opal_proc_source *src;
	struct opal_counters *ctr;
};

/* `src` and `ctr` must outlive the table. max_files and max_fds >= 1.
 * Returns 0 or -ENOMEM. */
int opal_files_init(struct opal_file_table *t, size_t max_files, size_t max_fds,
		    const struct opal_proc_source *src, struct opal_counters *ctr);

/* Closes every descriptor and frees every file. */
void opal_files_destroy(struct opal_file_table *t);

/* Opens the file of mapping `m` of `pid` (through src->open_mapped), and
 * finds or adds its entry (computing file ID and ELF info for a new one);
 * records (pid, m) as a witness and marks the file most recently used.
 * Counts files_opened per successful open and file_open_errors per
 * failure. Returns 0 with *out set (owned by the table: valid until a later
 * call that adds a file), -errno from open/fstat, -ENOEXEC for a non-ELF
 * or non-regular file, -E2BIG, or -ENOMEM. */
int opal_files_resolve(struct opal_file_table *t, pid_t pid, const struct opal_map_entry *m,
		       struct opal_file **out);

/* The file with identity `k`, marked most recently used, or NULL. */
struct opal_file *opal_files_lookup(struct opal_file_table *t, const struct opal_file_key *k);

/* A file with ID `id` (any, when several identities share one), or NULL. */
struct opal_file *opal_files_find_id(struct opal_file_table *t, const opal_file_id *id);

/* The open descriptor of `f` (owned by the table: dup it to keep it),
 * reopening it through its witnesses when the bound closed it; a reopened
 * descriptor must have the same identity. Returns fd, or -ENOENT when no
 * witness still maps the file. */
int opal_files_fd(struct opal_file_table *t, struct opal_file *f);

/* Adds the regular file open on `fd` (a memfd holding the vDSO image) as
 * a pinned file: it takes `fd`, which stays open until
 * opal_files_destroy, and the entry is never dropped, so the file can be
 * sent whenever a frame names it. Returns 0 with *out set, -EEXIST when a
 * file with its identity is known, -ENOEXEC, -E2BIG, -ENOMEM or -errno;
 * `fd` stays the caller's on error. */
int opal_files_add_pinned(struct opal_file_table *t, int fd, const char *path,
			  struct opal_file **out);

/* Fills `k` from fstat of `fd`. Returns 0 or -errno. */
int opal_file_key_from_fd(int fd, struct opal_file_key *k);

/* The known file with device `dev` (userspace encoding, makedev) and
 * inode `ino`, or NULL. A linear scan over the table: only for processes
 * gone before their maps could be read. */
struct opal_file *opal_files_by_inode(struct opal_file_table *t, uint64_t dev, uint64_t ino);

#endif
