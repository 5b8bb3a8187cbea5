/* Parsers of the HTTP API's JSON request bodies (docs/http-api.md), with
 * jansson, separate from the server so that they can be fuzzed. Every
 * parser first bounds the nesting depth (opal_json_depth_ok), then takes
 * only the fields it knows, checked for type and range; unknown fields
 * are ignored. */
#ifndef OPAL_HTTP_JSON_H
#define OPAL_HTTP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "debuginfo/debuginfo_store.h"

#define OPAL_JSON_MAX_DEPTH 8   /* nesting accepted in a request body */

/* True when no array/object in `len` bytes of JSON text nests deeper than
 * `max_depth` (strings are skipped, so brackets inside them do not count).
 * Cheap enough to run before jansson builds anything. */
bool opal_json_depth_ok(const char *text, size_t len, unsigned max_depth);

/* Body of should-initiate-upload (`with_size` false) or initiate-upload
 * (`with_size` true: "size" required): {"build_id", "build_id_type":
 * "gnu"|"htlhash"|"hash", "type": "debuginfo"|"executable"|"sources",
 * "hash", "force", "size"}. build_id_type defaults to gnu, type to
 * debuginfo, force to false. Returns 0, or -EINVAL with `why` set. */
int opal_json_parse_di_request(const char *text, size_t len, bool with_size,
			       struct opal_di_request *out, char *why, size_t why_len);

/* Body of mark-upload-finished: {"build_id", "upload_id", "type"}. The
 * ID is accepted as a build ID or an htlhash file ID. */
int opal_json_parse_mark_finished(const char *text, size_t len, char *id, size_t id_len,
				  enum opal_di_type *type, char *upload_id, size_t upload_id_len,
				  char *why, size_t why_len);

struct opal_sym_request_entry {
	bool by_file_id;                       /* "file_id" (htlhash) instead of "build_id" */
	char id[OPAL_DI_ID_HEX_MAX + 1];       /* lowercase hex */
	size_t n_addrs;
	uint64_t *addrs;                       /* ELF virtual addresses, request order */
};

struct opal_sym_request {
	size_t n;
	struct opal_sym_request_entry *entries;
	size_t total_addrs;
};

/* Body of POST /symbolize/v1: {"requests": [{"build_id": "hex" |
 * "file_id": "hex", "addresses": ["0x401136", ...]}, ...]}. Addresses are
 * hex strings with an optional 0x prefix, at most 16 digits. Returns 0,
 * -EINVAL (why set), -E2BIG when more than `max_addrs` addresses (413),
 * or -ENOMEM. Free with opal_json_sym_request_free. */
int opal_json_parse_symbolize(const char *text, size_t len, size_t max_addrs,
			      struct opal_sym_request *out, char *why, size_t why_len);
void opal_json_sym_request_free(struct opal_sym_request *r);

#endif
