/* JSON request parsers of the HTTP API (http_json.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "base/why.h"
#include "http/http_json.h"
#include "shared/fileid.h"

bool opal_json_depth_ok(const char *text, size_t len, unsigned max_depth)
{
	unsigned depth = 0;
	bool in_string = false, escaped = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max_depth)
				return false;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return true;
}

/* Parses the body into an object, bounding its depth first. */
static json_t *load_object(const char *text, size_t len, char *why, size_t why_len)
{
	json_error_t err;
	if (!opal_json_depth_ok(text, len, OPAL_JSON_MAX_DEPTH)) {
		opal_why(why, why_len, -EINVAL,
			 "JSON nested deeper than %d levels", OPAL_JSON_MAX_DEPTH);
		return NULL;
	}
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	if (!root) {
		opal_why(why, why_len, -EINVAL, "invalid JSON: %s", err.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		opal_why(why, why_len, -EINVAL, "the body must be a JSON object");
		return NULL;
	}
	return root;
}

/* Optional string member: NULL when absent; -EINVAL (why) when not a
 * string. */
static int get_string(json_t *o, const char *key, const char **out, char *why, size_t len)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return opal_why(why, len, -EINVAL, "\"%s\" must be a string", key);
	*out = json_string_value(v);
	return 0;
}

static int parse_type(const char *s, enum opal_di_type *t, char *why, size_t len)
{
	if (!s || !strcmp(s, "debuginfo"))
		*t = OPAL_DI_DEBUGINFO;
	else if (!strcmp(s, "executable"))
		*t = OPAL_DI_EXECUTABLE;
	else if (!strcmp(s, "sources"))
		*t = OPAL_DI_SOURCES;
	else
		return opal_why(why, len, -EINVAL,
				"\"type\" must be debuginfo, executable or sources");
	return 0;
}

int opal_json_parse_di_request(const char *text, size_t len, bool with_size,
			       struct opal_di_request *out, char *why, size_t why_len)
{
	memset(out, 0, sizeof(*out));
	json_t *root = load_object(text, len, why, why_len);
	if (!root)
		return -EINVAL;
	const char *id, *id_type, *type, *hash;
	int r = 0;
	if ((r = get_string(root, "build_id", &id, why, why_len)) < 0 ||
	    (r = get_string(root, "build_id_type", &id_type, why, why_len)) < 0 ||
	    (r = get_string(root, "type", &type, why, why_len)) < 0 ||
	    (r = get_string(root, "hash", &hash, why, why_len)) < 0)
		goto out;
	if (!id_type || !strcmp(id_type, "gnu")) {
		out->id_type = OPAL_DI_ID_GNU;
	} else if (!strcmp(id_type, "htlhash") || !strcmp(id_type, "hash")) {
		out->id_type = OPAL_DI_ID_HTLHASH;
	} else {
		r = opal_why(why, why_len, -EINVAL, "\"build_id_type\" must be gnu or htlhash");
		goto out;
	}
	if (!id || !opal_di_id_valid(id, out->id_type)) {
		r = opal_why(why, why_len, -EINVAL, out->id_type == OPAL_DI_ID_GNU ?
			     "\"build_id\" must be a GNU build ID in lowercase hex" :
			     "\"build_id\" must be a 32-digit htlhash file ID in lowercase hex");
		goto out;
	}
	snprintf(out->id, sizeof(out->id), "%s", id);
	if ((r = parse_type(type, &out->type, why, why_len)) < 0)
		goto out;
	if (!hash || strlen(hash) != 64 || !opal_is_lower_hex(hash, 64)) {
		r = opal_why(why, why_len, -EINVAL,
			     "\"hash\" must be the SHA-256 of the file in lowercase hex");
		goto out;
	}
	memcpy(out->hash, hash, 65);
	json_t *force = json_object_get(root, "force");
	if (force && !json_is_null(force)) {
		if (!json_is_boolean(force)) {
			r = opal_why(why, why_len, -EINVAL, "\"force\" must be true or false");
			goto out;
		}
		out->force = json_is_true(force);
	}
	json_t *size = json_object_get(root, "size");
	if (with_size) {
		if (!json_is_integer(size) || json_integer_value(size) < 0) {
			r = opal_why(why, why_len, -EINVAL,
				     "\"size\" must be the file size in bytes");
			goto out;
		}
		out->size = (uint64_t)json_integer_value(size);
	}
out:
	json_decref(root);
	return r;
}

int opal_json_parse_mark_finished(const char *text, size_t len, char *id, size_t id_len,
				  enum opal_di_type *type, char *upload_id, size_t upload_id_len,
				  char *why, size_t why_len)
{
	json_t *root = load_object(text, len, why, why_len);
	if (!root)
		return -EINVAL;
	const char *bid, *uid, *t;
	int r;
	if ((r = get_string(root, "build_id", &bid, why, why_len)) < 0 ||
	    (r = get_string(root, "upload_id", &uid, why, why_len)) < 0 ||
	    (r = get_string(root, "type", &t, why, why_len)) < 0)
		goto out;
	if (!bid || (!opal_di_id_valid(bid, OPAL_DI_ID_GNU) &&
		     !opal_di_id_valid(bid, OPAL_DI_ID_HTLHASH)) || strlen(bid) >= id_len) {
		r = opal_why(why, why_len, -EINVAL, "\"build_id\" must be lowercase hex");
		goto out;
	}
	if (!uid || strlen(uid) != OPAL_DI_UPLOAD_ID_LEN ||
	    !opal_is_lower_hex(uid, OPAL_DI_UPLOAD_ID_LEN) || strlen(uid) >= upload_id_len) {
		r = opal_why(why, why_len, -EINVAL,
			     "\"upload_id\" must be the ID initiate-upload returned");
		goto out;
	}
	if ((r = parse_type(t, type, why, why_len)) < 0)
		goto out;
	strcpy(id, bid);
	strcpy(upload_id, uid);
out:
	json_decref(root);
	return r;
}

/* "0x401136" (prefix optional, 1 to 16 hex digits, either case). */
static bool parse_address(const char *s, uint64_t *out)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	size_t n = strlen(s);
	if (n == 0 || n > 16)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		int d = opal_hex_digit(s[i]);
		if (d < 0)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return true;
}

void opal_json_sym_request_free(struct opal_sym_request *r)
{
	for (size_t i = 0; r->entries && i < r->n; i++)
		free(r->entries[i].addrs);
	free(r->entries);
	memset(r, 0, sizeof(*r));
}

static int parse_entry(json_t *e, size_t idx, struct opal_sym_request_entry *out, char *why,
		       size_t why_len)
{
	if (!json_is_object(e))
		return opal_why(why, why_len, -EINVAL, "requests[%zu] must be an object", idx);
	const char *bid, *fid;
	int r;
	if ((r = get_string(e, "build_id", &bid, why, why_len)) < 0 ||
	    (r = get_string(e, "file_id", &fid, why, why_len)) < 0)
		return r;
	if ((bid && fid) || (!bid && !fid))
		return opal_why(why, why_len, -EINVAL,
				"requests[%zu] needs exactly one of build_id and file_id",
				idx);
	out->by_file_id = fid != NULL;
	const char *id = fid ? fid : bid;
	if (!opal_di_id_valid(id, fid ? OPAL_DI_ID_HTLHASH : OPAL_DI_ID_GNU))
		return opal_why(why, why_len, -EINVAL,
				"requests[%zu].%s must be lowercase hex%s", idx,
				fid ? "file_id" : "build_id", fid ? " of 32 digits" : "");
	snprintf(out->id, sizeof(out->id), "%s", id);
	json_t *addrs = json_object_get(e, "addresses");
	if (!json_is_array(addrs))
		return opal_why(why, why_len, -EINVAL,
				"requests[%zu].addresses must be an array", idx);
	size_t n = json_array_size(addrs);
	out->addrs = calloc(n ? n : 1, sizeof(*out->addrs));
	if (!out->addrs)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		json_t *a = json_array_get(addrs, k);
		if (!json_is_string(a) || !parse_address(json_string_value(a), &out->addrs[k]))
			return opal_why(why, why_len, -EINVAL,
					"requests[%zu].addresses[%zu] must be a hex string "
					"such as \"0x401136\"", idx, k);
	}
	out->n_addrs = n;
	return 0;
}

int opal_json_parse_symbolize(const char *text, size_t len, size_t max_addrs,
			      struct opal_sym_request *out, char *why, size_t why_len)
{
	memset(out, 0, sizeof(*out));
	json_t *root = load_object(text, len, why, why_len);
	if (!root)
		return -EINVAL;
	int r = 0;
	json_t *reqs = json_object_get(root, "requests");
	if (!json_is_array(reqs)) {
		r = opal_why(why, why_len, -EINVAL, "\"requests\" must be an array");
		goto out;
	}
	size_t n = json_array_size(reqs), total = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_object_get(json_array_get(reqs, i), "addresses");
		total += json_is_array(a) ? json_array_size(a) : 0;
	}
	/* Entries without addresses still cost work: they count as one. */
	if (total > max_addrs) {
		opal_why(why, why_len, -EINVAL,
			 "%zu addresses in one request; at most %zu", total, max_addrs);
		r = -E2BIG;
		goto out;
	}
	if (n > max_addrs) {
		opal_why(why, why_len, -EINVAL,
			 "%zu request entries in one request; at most %zu", n, max_addrs);
		r = -E2BIG;
		goto out;
	}
	out->entries = calloc(n ? n : 1, sizeof(*out->entries));
	if (!out->entries) {
		r = -ENOMEM;
		goto out;
	}
	out->n = n;
	for (size_t i = 0; i < n && r == 0; i++)
		r = parse_entry(json_array_get(reqs, i), i, &out->entries[i], why, why_len);
	out->total_addrs = total;
out:
	json_decref(root);
	if (r < 0)
		opal_json_sym_request_free(out);
	return r;
}
