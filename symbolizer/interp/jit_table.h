/* Names of JIT code, per process of a collector connection (wire
 * Process.jit_id), from the perf map and jitdump descriptors the
 * collector passed (FileInfo kinds PERF_MAP, JITDUMP): read and parsed
 * here (interp/jit_parse.h), incrementally — a file that grew is read on
 * from where the last read stopped (at most once per
 * OPAL_JIT_REFRESH_NS per process, when a frame is looked up), a file
 * rewritten (jcmd Compiler.perfmap: it shrank, or a perf map's last line
 * read no longer ends where it did) is read again from its start,
 * a partial last line or record waits for the next read. When ranges
 * overlap, the one written last names the address (runtimes reuse code
 * memory).
 *
 * Bounds, each counted when it cuts: OPAL_JIT_TABLE_MAX_PROCS processes
 * and OPAL_JIT_TABLE_MAX_BYTES of ranges and names over all of them
 * (least recently used process dropped); per process
 * OPAL_JIT_MAX_RANGES ranges and OPAL_JIT_MAX_READ bytes read per file
 * (the rest of a file is not read); lines over OPAL_PERFMAP_MAX_LINE and
 * malformed lines or records skipped. Thread-safe. */
#ifndef OPAL_SYMBOLIZER_JIT_TABLE_H
#define OPAL_SYMBOLIZER_JIT_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include "interp/jit_parse.h"

#define OPAL_JIT_TABLE_MAX_PROCS 256
#define OPAL_JIT_TABLE_MAX_BYTES (256u << 20)
#define OPAL_JIT_MAX_RANGES      (1u << 20)
#define OPAL_JIT_MAX_READ        (256ull << 20)
#define OPAL_JIT_REFRESH_NS      1000000000ull   /* 1 s */

enum opal_jit_file_kind { OPAL_JIT_FILE_PERF_MAP = 0, OPAL_JIT_FILE_JITDUMP = 1, OPAL_JIT_FILES };

struct opal_jit_table;

struct opal_jit_table_stats {
	uint64_t procs, bytes;
	uint64_t files;            /* descriptors registered */
	uint64_t ranges;           /* ranges read (all time) */
	uint64_t bad_lines;        /* perf map lines skipped: malformed or too long */
	uint64_t bad_records;      /* jitdump records or headers refused (the rest of that file is not read) */
	uint64_t cut;              /* reads stopped by a bound (ranges, bytes read, table bytes) */
	uint64_t evicted;          /* processes dropped for the table's bounds */
	uint64_t named, unnamed;   /* frames looked up with and without a name */
};

/* NULL on ENOMEM. */
struct opal_jit_table *opal_jit_table_new(void);
void opal_jit_table_free(struct opal_jit_table *t);

/* Registers descriptor `fd` (taken over: closed by the table, also on
 * error) as file `kind` of process `jit_id` of connection `conn`,
 * replacing a descriptor of the same kind (the process's ranges are then
 * read again from all its files). Returns 0, -EINVAL (jit_id 0, bad kind)
 * or -ENOMEM. */
int opal_jit_table_put(struct opal_jit_table *t, uint64_t conn, uint64_t jit_id,
		       enum opal_jit_file_kind kind, int fd);

/* The name of the JIT code at runtime address `addr` of process `jit_id`
 * of `conn`, NUL-terminated into `buf` (`cap` bytes, cut when longer), at
 * time `now_ns` (CLOCK_MONOTONIC: when to read on). Returns 0, or
 * -ENOENT when no range holds it (counted as unnamed). */
int opal_jit_table_name(struct opal_jit_table *t, uint64_t conn, uint64_t jit_id, uint64_t addr,
			uint64_t now_ns, char *buf, size_t cap);

/* Drops every process of connection `conn` (it closed). */
void opal_jit_table_drop_conn(struct opal_jit_table *t, uint64_t conn);

void opal_jit_table_stats(struct opal_jit_table *t, struct opal_jit_table_stats *out);

#endif
