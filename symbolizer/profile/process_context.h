/* The payload of an OTEP 4719 process context (a serialized
 * ProcessContext, opentelemetry.proto.processcontext.v1development; OTEP
 * 4719 merged 2026-04-07), as a process published it and the collector
 * copied it: untrusted bytes, bounded here before and while decoding.
 * What opal takes from it: the Resource's attributes (the process's
 * resource in OTLP, pprof labels) and OTEP 4947's thread-local reference
 * data (threadlocal.schema_version, threadlocal.attribute_key_map: the
 * names of thread-context attribute keys). docs/correlation.md. */
#ifndef OPAL_PROCESS_CONTEXT_H
#define OPAL_PROCESS_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#include "profile/profile.h"

#define OPAL_PCTX_MAX_BYTES   (64u << 10)   /* payload accepted */
#define OPAL_PCTX_MAX_ATTRS   128           /* resource attributes kept, first ones */
#define OPAL_PCTX_MAX_STRLEN  4096          /* bytes per key or value; longer ones skipped */
#define OPAL_PCTX_MAX_KEYS    256           /* OTEP 4947: a key index is a uint8 */

struct opal_process_context {
	/* Resource attributes with a string, int, bool or double value (as
	 * text), valid UTF-8, duplicates after the first dropped */
	struct opal_profile_attr *resource;
	size_t n_resource;
	/* threadlocal.attribute_key_map: keys[i] names key index i (NULL for
	 * an entry that is not a valid string) */
	char **keys;
	size_t n_keys;
	char *schema_version;   /* threadlocal.schema_version, or NULL */
};

/* Decodes `len` bytes. Returns 0 with *out filled (free with
 * opal_process_context_free), -E2BIG over OPAL_PCTX_MAX_BYTES, -EINVAL
 * for bytes that are not a ProcessContext, or -ENOMEM. */
int opal_process_context_parse(const uint8_t *data, size_t len, struct opal_process_context *out);

void opal_process_context_free(struct opal_process_context *c);

/* Thread-context attributes (OTEP 4947 attrs-data: entries of key index
 * u8, length u8 and `length` UTF-8 bytes, packed) as `c` names their keys:
 * parsing stops at an entry the remaining bytes cannot hold; entries with
 * an index outside the key map, or a value that is not valid UTF-8, are
 * skipped; a key given twice keeps its last value. Values are copied with
 * a NUL into `buf` (2 * len bytes suffice); at most `cap` attributes go to
 * `out`, keys pointing into `c`. Returns how many. */
size_t opal_thread_attrs_parse(const uint8_t *data, size_t len,
			       const struct opal_process_context *c, char *buf,
			       struct opal_profile_attr *out, size_t cap);

/* True when `s` (len bytes) is valid UTF-8 without NUL. */
bool opal_utf8_valid(const char *s, size_t len);

#endif
