/* Reading and summarizing pprof files (perftools.profiles.Profile) for
 * opal-report and the tests: load a gzip'd or plain file with bounds and
 * validation, print top functions, one line per sample, or check that a
 * profile has symbolized user frames and kernel frames. */
#ifndef OPAL_REPORT_H
#define OPAL_REPORT_H

#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include "pprof/profile.pb-c.h"

#define OPAL_REPORT_MAX_INPUT  (1u << 30)   /* bytes, after decompression */
#define OPAL_REPORT_KERNEL_MAPPING "[kernel.kallsyms]"

/* Reads `path` (gzip or uncompressed protobuf), decodes it and validates
 * every cross reference (string indices, location / function / mapping
 * ids, value counts). On success *out must be released with
 * perftools__profiles__profile__free_unpacked(*out, NULL). On failure a
 * reason is written to `why` (`why_len` bytes; may be NULL / 0). Returns 0,
 * -errno from open/read, -E2BIG over OPAL_REPORT_MAX_INPUT, -EBADMSG when
 * the bytes are not a (complete) Profile, -EINVAL for a broken reference. */
int opal_report_load(const char *path, Perftools__Profiles__Profile **out, char *why,
		     size_t why_len);

/* Validates an unpacked profile as opal_report_load does. Returns 0 or
 * -EINVAL with a reason in `why` (`why_len` bytes). */
int opal_report_validate(const Perftools__Profiles__Profile *p, char *why, size_t why_len);

/* The text used for one frame: the function name of a line; for a location
 * without lines "<basename of mapping file>+0x<file offset>", where file
 * offset = address - memory_start + file_offset, or "0x<address>" without a
 * mapping. Exposed for tests; `line` < 0 means "the location has no lines". */
void opal_report_frame_name(const Perftools__Profiles__Profile *p,
			    const Perftools__Profiles__Location *loc, long line, char *buf,
			    size_t len);

/* Prints two tables of at most `n` functions, "by self" (flat) and "by
 * cumulative" (cum), in the columns of `go tool pprof -top`: flat flat%
 * sum% cum cum% name. Values are sample counts (the sample_type with unit
 * "count", else the first). An inline frame counts as its own function.
 * With `kind` an enum opal_frame_type (profile.h) only frames of that kind
 * count, self being the innermost such frame of a sample (-1: all).
 * Returns 0 or -ENOMEM. */
int opal_report_top(FILE *out, const Perftools__Profiles__Profile *p, size_t n, int kind);

/* Prints one line per sample:
 *   pid=P tid=T comm=NAME count=N: leaf;caller;...;root
 * with every inline frame as its own entry (innermost first within a
 * location) and kernel frames included; P/T/NAME come from the labels pid,
 * tid and thread_name ("?" when absent). Interpreter frames read
 * "FUNCTION (FILE:LINE)", the line executing; with `lines` every frame
 * with a file does. Returns 0. */
int opal_report_stacks(FILE *out, const Perftools__Profiles__Profile *p, bool lines);

/* Returns 0 when the profile has at least one symbolized user frame (a
 * line with a function name in a location whose mapping is not
 * OPAL_REPORT_KERNEL_MAPPING) and at least one kernel frame (a location in
 * that mapping); otherwise 1 with the reason in `why`; -ENOMEM (with
 * `why` saying so) when it could not look. */
int opal_report_check(const Perftools__Profiles__Profile *p, char *why, size_t why_len);

#endif
