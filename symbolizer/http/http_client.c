/* libcurl client of the HTTP API (http_client.h). One easy handle per
 * request, so threads share nothing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include "http/http_client.h"
#include "debuginfo/debuginfo_keep.h"

int opal_http_client_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

struct buf {
	char *p;
	size_t len;
	bool overflow;
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	size_t add = size * n;
	if (b->overflow || add > OPAL_CLIENT_MAX_ANSWER - b->len) {
		b->overflow = true;
		return 0;   /* aborts the transfer */
	}
	char *np = realloc(b->p, b->len + add + 1);
	if (!np) {
		b->overflow = true;
		return 0;
	}
	memcpy(np + b->len, data, add);
	b->p = np;
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

static CURL *easy(const struct opal_http_client *c, const char *path, struct curl_slist **hdrs,
		  struct buf *out)
{
	char url[2048];
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	/* An absolute upload URL from the server is used as it is. */
	if (!strncmp(path, "http://", 7) || !strncmp(path, "https://", 8))
		snprintf(url, sizeof(url), "%s", path);
	else
		snprintf(url, sizeof(url), "%s%s", c->base, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	if (c->ca_pem) {
		struct curl_blob blob = { .data = (void *)c->ca_pem, .len = strlen(c->ca_pem),
					  .flags = CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (c->token) {
		char auth[64 + 4096];
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
		*hdrs = curl_slist_append(*hdrs, auth);
	}
	return h;
}

static int perform(CURL *h, struct curl_slist *hdrs, long *status, char *why, size_t why_len)
{
	char err[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
	CURLcode rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		snprintf(why, why_len, "%s", err[0] ? err : curl_easy_strerror(rc));
		return -EIO;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

int opal_http_client_post_json(const struct opal_http_client *c, const char *path,
			       json_t *body, long *status, json_t **answer, char *why,
			       size_t why_len)
{
	struct buf out = { 0 };
	struct curl_slist *hdrs = NULL;
	*answer = NULL;
	char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	CURL *h = easy(c, path, &hdrs, &out);
	if (!h) {
		free(text);
		return -ENOMEM;
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)OPAL_CLIENT_TIMEOUT_S);
	int r = perform(h, hdrs, status, why, why_len);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	free(text);
	if (r == 0 && out.p)
		*answer = json_loadb(out.p, out.len, 0, NULL);
	free(out.p);
	return r;
}

/* The server's "reason" or "error" string of an answer, or "". */
static const char *reason_of(json_t *a)
{
	const char *s = json_string_value(json_object_get(a, "reason"));
	if (!s)
		s = json_string_value(json_object_get(a, "error"));
	return s ? s : "";
}

static int sha256_fd(int fd, char hex[65], uint64_t *size)
{
	unsigned char buf[1 << 16], md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	off_t off = 0;
	for (;;) {
		ssize_t got = pread(fd, buf, sizeof(buf), off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			EVP_MD_CTX_free(ctx);
			return -e;
		}
		if (got == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)got);
		off += got;
	}
	EVP_DigestFinal_ex(ctx, md, &n);
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; i < 32 && i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	*size = (uint64_t)off;
	return 0;
}

struct put_src {
	int fd;
	off_t off;
};

static size_t on_read(char *dst, size_t size, size_t n, void *arg)
{
	struct put_src *s = arg;
	ssize_t got;
	do
		got = pread(s->fd, dst, size * n, s->off);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return CURL_READFUNC_ABORT;
	s->off += got;
	return (size_t)got;
}

static int put_file(const struct opal_http_client *c, const char *url, int fd, uint64_t size,
		    long *status, json_t **answer, char *why, size_t why_len)
{
	struct buf out = { 0 };
	struct curl_slist *hdrs = NULL;
	struct put_src src = { .fd = fd };
	CURL *h = easy(c, url, &hdrs, &out);
	*answer = NULL;
	if (!h)
		return -ENOMEM;
	hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
	curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(h, CURLOPT_READDATA, &src);
	curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)OPAL_CLIENT_UPLOAD_LOW_SPEED_S);
	int r = perform(h, hdrs, status, why, why_len);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	if (r == 0 && out.p)
		*answer = json_loadb(out.p, out.len, 0, NULL);
	free(out.p);
	return r;
}

/* Outcome of a refusal: "in progress" is worth retrying. */
static enum opal_upload_outcome refused(long status, json_t *a, char *why, size_t len)
{
	const char *r = reason_of(a);
	snprintf(why, len, "%ld: %s", status, r);
	if (strstr(r, "in progress") || strstr(r, "being received"))
		return OPAL_UPLOAD_OUT_IN_PROGRESS;
	if (status == 412)
		return OPAL_UPLOAD_OUT_NOT_NEEDED;
	return OPAL_UPLOAD_OUT_REJECTED;
}

enum opal_upload_outcome opal_http_client_upload(const struct opal_http_client *c, int fd,
						 const char *id, enum opal_di_id_type id_type,
						 enum opal_di_type type, bool force, char *why,
						 size_t why_len)
{
	char hash[65];
	uint64_t size;
	long status = 0;
	json_t *a = NULL;
	enum opal_upload_outcome out = OPAL_UPLOAD_OUT_ERROR;
	int r = sha256_fd(fd, hash, &size);
	if (r < 0) {
		snprintf(why, why_len, "reading the file: %s", strerror(-r));
		return OPAL_UPLOAD_OUT_ERROR;
	}
	json_t *req = json_pack("{s:s,s:s,s:s,s:s,s:b}", "build_id", id, "build_id_type",
				opal_di_id_type_name(id_type), "type", opal_di_type_name(type),
				"hash", hash, "force", (int)force);
	if (!req) {
		snprintf(why, why_len, "out of memory");
		return OPAL_UPLOAD_OUT_ERROR;
	}
	if (opal_http_client_post_json(c, "/debuginfo/v1/should-initiate-upload", req, &status, &a,
				       why, why_len) < 0)
		goto out;
	if (status != 200) {
		out = refused(status, a, why, why_len);
		goto out;
	}
	if (!json_is_true(json_object_get(a, "should_initiate_upload"))) {
		snprintf(why, why_len, "%s", reason_of(a));
		out = strstr(why, "in progress") ? OPAL_UPLOAD_OUT_IN_PROGRESS
						 : OPAL_UPLOAD_OUT_NOT_NEEDED;
		goto out;
	}
	json_decref(a);
	a = NULL;
	json_object_set_new(req, "size", json_integer((json_int_t)size));
	if (opal_http_client_post_json(c, "/debuginfo/v1/initiate-upload", req, &status, &a, why,
				       why_len) < 0)
		goto out;
	if (status != 200) {
		out = refused(status, a, why, why_len);
		goto out;
	}
	const char *url = json_string_value(json_object_get(a, "upload_url"));
	const char *upload_id = json_string_value(json_object_get(a, "upload_id"));
	if (!url || !upload_id || strlen(upload_id) > 64) {
		snprintf(why, why_len, "initiate-upload answered without upload_url/upload_id");
		goto out;
	}
	char uid[65], put_url[1024];
	snprintf(uid, sizeof(uid), "%s", upload_id);
	snprintf(put_url, sizeof(put_url), "%s", url);
	json_decref(a);
	a = NULL;
	if (put_file(c, put_url, fd, size, &status, &a, why, why_len) < 0)
		goto out;
	if (status != 200) {
		out = refused(status, a, why, why_len);
		goto out;
	}
	snprintf(why, why_len, "%s", reason_of(a));
	json_decref(a);
	a = NULL;
	json_t *fin = json_pack("{s:s,s:s,s:s}", "build_id", id, "upload_id", uid, "type",
				opal_di_type_name(type));
	char why2[256];
	int fr = fin ? opal_http_client_post_json(c, "/debuginfo/v1/mark-upload-finished", fin,
						  &status, &a, why2, sizeof(why2)) : -ENOMEM;
	json_decref(fin);
	if (fr < 0 || status != 200) {
		snprintf(why, why_len, "mark-upload-finished: %s",
			 fr < 0 ? why2 : reason_of(a));
		goto out;
	}
	out = OPAL_UPLOAD_OUT_DONE;
out:
	json_decref(a);
	json_decref(req);
	return out;
}

/* An unlinked temporary file in `dir`, or -errno. */
static int temp_file(const char *dir)
{
	int fd = open(dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/opal-upload.XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

enum opal_upload_outcome opal_http_client_upload_debug(const struct opal_http_client *c,
						       int elf_fd, const char *id,
						       enum opal_di_id_type id_type,
						       const char *tmp_dir, bool force, char *why,
						       size_t why_len)
{
	int tfd = temp_file(tmp_dir);
	if (tfd < 0) {
		snprintf(why, why_len, "temporary file in %s: %s", tmp_dir, strerror(-tfd));
		return OPAL_UPLOAD_OUT_ERROR;
	}
	int r = opal_keep_debug_write(elf_fd, tfd, why, why_len);
	if (r < 0) {
		close(tfd);
		if (!why[0])
			snprintf(why, why_len, "%s", strerror(-r));
		return OPAL_UPLOAD_OUT_ERROR;
	}
	enum opal_upload_outcome out =
		opal_http_client_upload(c, tfd, id, id_type, OPAL_DI_DEBUGINFO, force, why, why_len);
	close(tfd);
	return out;
}
