/* Symbolization orchestration: one wire Interval (raw frames) becomes
 * samples of an opal_profile with symbolized locations. */
#ifndef OPAL_INGEST_H
#define OPAL_INGEST_H

#include <stdint.h>
#include "interp/code_table.h"
#include "interp/jit_table.h"
#include "profile/profile.h"
#include "shared/fileid.h"
#include "symbolize/symbolize.h"
#include "opal/wire.pb-c.h"

/* frames per stack (each becomes a location); longer stacks are malformed */
#define OPAL_INGEST_MAX_FRAMES OPAL_PROFILE_MAX_STACK
/* bytes of a Stack's thread_attributes read (OTEP 4947's 640-byte record
 * less its 28-byte head); longer ones are ignored */
#define OPAL_INGEST_MAX_TCTX_ATTRS 612

/* What one collector connection told us, needed to name things. */
struct opal_ingest_source {
	const char *host_name;
	const char *kernel_build_id_hex;   /* NULL when unknown */
	/* Called once per interval for each file ID with neither descriptor nor
	 * cached frames, so that the collector sends it again; may be NULL. */
	void (*request_file)(void *arg, const opal_file_id *id);
	void *arg;
	/* The code objects its interpreter frames name, and the connection's
	 * serial in that table; codes may be NULL (frames then unnamed). */
	struct opal_code_table *codes;
	/* The JIT names of its processes (same connection serial); may be
	 * NULL (JIT frames then unnamed). */
	struct opal_jit_table *jits;
	uint64_t conn;
	const char *host_id;          /* Hello.host_id (host.id), NULL when unknown */
	const char *kernel_release;   /* Hello.kernel_release (os.version), NULL when unknown */
};

struct opal_ingest_stats {
	uint64_t samples;          /* sample timestamps added */
	uint64_t off_cpu_samples;  /* ... of off-CPU stacks (not in samples) */
	uint64_t frames;
	uint64_t frames_symbolized;
	uint64_t frames_malformed; /* bad mapping index etc.: kept as error locations */
	uint64_t stacks_malformed; /* timestamps/cpus length mismatch, too deep: dropped */
	uint64_t interp_unnamed;   /* interpreter frames whose code object is unknown */
	uint64_t process_ctx_invalid; /* process context payloads that did not decode */
};

/* Adds every sample of `iv` to `p`, symbolizing through `s`. Samples keep
 * their per-sample timestamps and CPUs. A malformed stack is dropped and
 * counted; everything else is kept (unresolved frames as mapping+address).
 * Accumulates into *stats. Returns 0 or -ENOMEM. */
int opal_ingest_interval(struct opal_symbolizer *s, const struct opal_ingest_source *src,
			 const Opal__Wire__V1__Interval *iv, struct opal_profile *p,
			 struct opal_ingest_stats *stats);

#endif
