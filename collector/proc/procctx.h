/* The OTEP 4719 process context of a process (OpenTelemetry
 * specification, oteps/profiles/4719-process-ctx.md, merged 2026-04-07,
 * header version 2): a mapping named OTEL_CTX whose 32-byte header points
 * to a protobuf payload. The collector only finds the mapping and copies
 * the payload's bytes, with the OTEP's read protocol; the symbolizer
 * parses them (untrusted). docs/correlation.md. */
#ifndef OPAL_COLLECTOR_PROCCTX_H
#define OPAL_COLLECTOR_PROCCTX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "proc/procmaps.h"

#define OPAL_PROCCTX_HEADER_SIZE 32
#define OPAL_PROCCTX_VERSION     2
#define OPAL_PROCCTX_MAX_PAYLOAD (64u << 10)   /* bytes copied at most */
#define OPAL_PROCCTX_TRIES       3             /* reads raced by an update, then given up */
/* A sampled process with no OTEL_CTX mapping has its maps scanned for one
 * again after 1 s, then after gaps doubling up to 60 s: an SDK publishes
 * when it starts, which can be long after the process's first sample. */
#define OPAL_PROCCTX_SCAN_MIN_NS (1000000000ull)
#define OPAL_PROCCTX_SCAN_MAX_NS (60000000000ull)

/* The copy of one process's context. */
struct opal_procctx {
	uint64_t header;         /* address of the header, 0: no OTEL_CTX mapping */
	uint64_t published_ns;   /* monotonic_published_at_ns of the copy, 0: none */
	uint8_t *payload;        /* heap, len bytes; NULL when none */
	size_t len;
	uint64_t checked_seq;    /* the interval it was last checked in */
	uint64_t next_scan_ns;   /* no header: when to scan its maps again (src->now_ns) */
	uint64_t scan_gap_ns;    /* ... the gap before the one after that */
};

/* The address of the OTEL_CTX header among `n` maps entries: the start of
 * the first readable mapping whose name starts with "[anon_shmem:OTEL_CTX]",
 * "[anon:OTEL_CTX]" or "/memfd:OTEL_CTX"; 0 when none. */
uint64_t opal_procctx_find(const struct opal_map_entry *maps, size_t n);

/* Validates header bytes `h` (OPAL_PROCCTX_HEADER_SIZE): signature and
 * version. Fills *published_ns, *payload and *size. Returns 0, -ENOENT
 * for another signature or version, -EAGAIN while an update is under way
 * (published_ns 0), -E2BIG for a payload over OPAL_PROCCTX_MAX_PAYLOAD. */
int opal_procctx_parse_header(const uint8_t *h, uint64_t *published_ns, uint64_t *payload,
			      uint32_t *size);

/* Copies the context at c->header of `pid` when it changed since c's copy:
 * header, payload, header again; a copy is kept only when both headers
 * carry the same non-zero published_ns (else read again, at most
 * OPAL_PROCCTX_TRIES times). Returns 1 with c updated, 0 when unchanged,
 * or -errno (c keeps its previous copy): -ENOENT, -E2BIG as above,
 * -EAGAIN when every try raced an update, -ESRCH/-EFAULT/-EPERM from the
 * reads, -ENOMEM. */
int opal_procctx_read(pid_t pid, struct opal_procctx *c);

void opal_procctx_clear(struct opal_procctx *c);

/* Reads `len` bytes at address `addr` of process `pid` (process_vm_readv).
 * Returns 0, -EFAULT when not all of them are readable, or -errno
 * (-ESRCH: gone, -EPERM). */
int opal_proc_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len);

#endif
