/* Interactive flame graph pages: a call tree (root = all samples, then
 * callers before callees, every inline frame its own node) built from one or
 * more profiles, written as one self-contained HTML file (template
 * symbolizer/profile/flamegraph.html, embedded at build time; no network access):
 * click to zoom, search, hover for samples and share, frames coloured by
 * kind. Serves both `opal-report flamegraph` (pprof files) and the
 * symbolizer (in-memory profiles, e.g. GET /flamegraph?seconds=N&pid=P). */
#ifndef OPAL_FLAMEGRAPH_H
#define OPAL_FLAMEGRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "pprof/profile.pb-c.h"

struct opal_profile;

#define OPAL_FLAMEGRAPH_MAX_NODES  (1u << 20)  /* call tree nodes, root included */
#define OPAL_FLAMEGRAPH_MAX_NAMES  (1u << 20)  /* distinct frame names */
#define OPAL_FLAMEGRAPH_MAX_DEPTH  4096        /* frames per stack (inline frames count) */

/* Frame kinds, as coloured on the page. Kernel: a location in the mapping
 * "[kernel.kallsyms]" (or typed kernel); inline: a line of a location that
 * is not its last line (a callee inlined into the next line's function);
 * cpython: a Python function (mapping "[cpython]" or typed cpython), named
 * "FUNCTION (FILE:FIRST_LINE)"; native: every other frame. */
enum opal_fg_kind {
	OPAL_FG_NATIVE = 0,
	OPAL_FG_KERNEL = 1,
	OPAL_FG_INLINE = 2,
	OPAL_FG_CPYTHON = 3,
};

/* Which samples count. Timestamps are Unix ns; the window is
 * [start_unix_ns, end_unix_ns), a 0 bound is open. pid 0 keeps every
 * process (pid 0, the idle task, is never shipped). */
struct opal_fg_filter {
	uint64_t start_unix_ns, end_unix_ns;
	uint32_t pid;
};

struct opal_flamegraph;

/* An empty call tree. NULL on ENOMEM. */
struct opal_flamegraph *opal_flamegraph_new(void);
void opal_flamegraph_free(struct opal_flamegraph *fg);

/* Adds the samples of `p` that pass `f` (NULL: all): each sample timestamp
 * inside the window counts once. Returns 0 or -ENOMEM. Stacks deeper than
 * OPAL_FLAMEGRAPH_MAX_DEPTH keep their root-most frames; once the tree has
 * OPAL_FLAMEGRAPH_MAX_NODES nodes, a sample needing a new node counts in the
 * deepest existing one and in opal_flamegraph_truncated (nothing is lost
 * from the totals). */
int opal_flamegraph_add_profile(struct opal_flamegraph *fg, const struct opal_profile *p,
				const struct opal_fg_filter *f);

/* Adds a validated pprof profile (report.h opal_report_load / _validate):
 * sample weight = the "count" sample type (else the first), or in an
 * off-CPU profile the "off_cpu" one (nanoseconds; the page then says "ns
 * off CPU"), pid from the
 * numeric label "pid". pprof samples carry no timestamps, so a time window
 * keeps the whole profile when [time_nanos, time_nanos + duration_nanos)
 * overlaps it and nothing otherwise. Frame names follow
 * opal_report_frame_name. Returns 0, -ENOMEM, -EINVAL (a reference the
 * validation should have caught). */
int opal_flamegraph_add_pprof(struct opal_flamegraph *fg, const Perftools__Profiles__Profile *p,
			      const struct opal_fg_filter *f);

/* A link the page shows beside its title (`text`, `href`; copied, cut at
 * 63 and 511 bytes): the flame graph's other view. */
void opal_flamegraph_set_link(struct opal_flamegraph *fg, const char *text, const char *href);

/* The tree's total (the root's value), in opal_flamegraph_unit(). */
uint64_t opal_flamegraph_total(const struct opal_flamegraph *fg);
/* What the values count: "samples", or "ns off CPU" for an off-CPU
 * profile. A static string. */
const char *opal_flamegraph_unit(const struct opal_flamegraph *fg);
/* Samples whose stack was cut by OPAL_FLAMEGRAPH_MAX_NODES / _MAX_DEPTH. */
uint64_t opal_flamegraph_truncated(const struct opal_flamegraph *fg);
/* Nodes in the tree, root included. */
size_t opal_flamegraph_n_nodes(const struct opal_flamegraph *fg);

/* Writes the HTML page. `title` (NULL: "opal flame graph") is shown as
 * the page title and heading. The tree is embedded as JSON in
 * <script type="application/json" id="opal-data">, '<' escaped as \u003c:
 *   {"title":S, "unit":"samples", "total":N, "truncated":N,
 *    "names":[S...], "kinds":["native","kernel","inline","cpython"],
 *    "nodes":{"name":[I...], "kind":[K...], "parent":[I...], "value":[N...]}}
 * nodes in depth-first preorder, node 0 the root (name "all", parent -1),
 * siblings by decreasing value (then by name). Returns 0, -EIO (write
 * error), -ENOMEM. */
int opal_flamegraph_write_html(const struct opal_flamegraph *fg, const char *title, FILE *out);

/* Same page into a malloc'd buffer (*buf, *len; free()). */
int opal_flamegraph_html_buf(const struct opal_flamegraph *fg, const char *title, char **buf,
			     size_t *len);

#endif
