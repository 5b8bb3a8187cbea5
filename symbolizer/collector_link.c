/* Collector connections: Hello, FileInfo (+ descriptor), Interval -> Ack. */
#include "collector_link.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "base/metrics.h"
#include "ingest.h"
#include "shared/log.h"
#include "shared/wire.h"
#include "stop_deadline.h"

#define RECV_TIMEOUT_S 5
#define FRAME_TIMEOUT_MS 5000   /* one frame, whole: a stalled peer holds the others no longer */
#define DRAIN_MS 3000
/* A connection that sent no Hello this long after it was accepted is
 * closed; one idle this long gives its slot to a new collector when every
 * slot is taken (a collector re-sends what was not acknowledged). */
#define HELLO_TIMEOUT_MS 10000
#define IDLE_EVICT_MS    30000

struct conn {
	int fd;
	struct opal_wire_reader rd;
	bool hello;
	uint32_t collector_pid;
	uint64_t period_ns;
	char host_name[256];
	char host_id[64];
	char kernel_release[65];
	char kernel_build_id[2 * OPAL_BUILD_ID_MAX + 1];
	uint64_t intervals, duplicates;
	uint64_t serial;  /* this connection's, for the code table */
	int64_t accepted_ms, last_frame_ms;   /* CLOCK_MONOTONIC */
	bool unwritten;   /* an interval could not be written: reconnect to get it again */
};

struct server {
	const struct opal_server_config *cfg;
	struct conn conns[OPAL_SERVER_MAX_CONNS];
	struct opal_profile *whole;
	uint64_t malformed;
	uint64_t next_serial;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_close(const struct server *sv, struct conn *c)
{
	if (sv->cfg->codes)
		opal_code_table_drop_conn(sv->cfg->codes, c->serial);
	if (sv->cfg->jits)
		opal_jit_table_drop_conn(sv->cfg->jits, c->serial);
	opal_wire_reader_close(&c->rd);
	close(c->fd);
	c->fd = -1;
}

static bool peer_allowed(const struct opal_server_config *cfg, int fd, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0)
		return false;
	if (cred->uid == 0)
		return true;
	for (size_t i = 0; i < cfg->n_allow; i++)
		if (cfg->allow_uids[i] == cred->uid)
			return true;
	return false;
}

static void accept_one(struct server *sv)
{
	struct ucred cred;
	int fd = accept4(sv->cfg->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (!peer_allowed(sv->cfg, fd, &cred)) {
		opal_warn("refusing collector connection from pid %d uid %u (allowed: 0 and --allow-uid)",
			  (int)cred.pid, (unsigned)cred.uid);
		close(fd);
		return;
	}
	struct conn *idlest = NULL;
	int64_t now = now_ms();
	for (int i = 0; i < OPAL_SERVER_MAX_CONNS; i++) {
		struct conn *c = &sv->conns[i];
		if (c->fd >= 0 && (!idlest || c->last_frame_ms < idlest->last_frame_ms))
			idlest = c;
	}
	if (idlest && now - idlest->last_frame_ms >= IDLE_EVICT_MS) {
		opal_warn("every collector slot taken: closing the connection of collector pid %u, "
			  "idle for %lld s, for pid %d", idlest->collector_pid,
			  (long long)(now - idlest->last_frame_ms) / 1000, (int)cred.pid);
		opal_metrics_collector_conn(OPAL_COLLECTOR_CONN_IDLE_EVICTED);
		conn_close(sv, idlest);
	}
	for (int i = 0; i < OPAL_SERVER_MAX_CONNS; i++) {
		struct conn *c = &sv->conns[i];
		if (c->fd >= 0)
			continue;
		memset(c, 0, sizeof(*c));
		c->accepted_ms = c->last_frame_ms = now;
		c->fd = fd;
		c->serial = ++sv->next_serial;
		struct timeval tv = { .tv_sec = RECV_TIMEOUT_S };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		opal_wire_reader_init(&c->rd, fd);
		c->rd.frame_timeout_ms = FRAME_TIMEOUT_MS;
		opal_info("collector connected (pid %d)", (int)cred.pid);
		return;
	}
	opal_warn("too many collector connections (%d); refusing pid %d", OPAL_SERVER_MAX_CONNS,
		  (int)cred.pid);
	opal_metrics_collector_conn(OPAL_COLLECTOR_CONN_REFUSED);
	close(fd);
}

static void request_file(void *arg, const opal_file_id *id)
{
	struct conn *c = arg;
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileRequest req = OPAL__WIRE__V1__FILE_REQUEST__INIT;

	req.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
	req.file_id.data = (uint8_t *)id->b;
	req.file_id.len = OPAL_FILE_ID_LEN;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST;
	env.file_request = &req;
	opal_wire_send(c->fd, &env, -1);
}

static void send_ack(struct conn *c, uint64_t run_id, uint64_t seq)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__Ack ack = OPAL__WIRE__V1__ACK__INIT;
	int err;

	ack.run_id = run_id;
	ack.seq = seq;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_ACK;
	env.ack = &ack;
	if ((err = opal_wire_send(c->fd, &env, -1)) < 0)
		opal_warn("ack of interval %" PRIu64 " not sent: %s", seq, strerror(-err));
}

static void on_hello(struct conn *c, const Opal__Wire__V1__Hello *h)
{
	c->hello = true;
	c->collector_pid = h->collector_pid;
	c->period_ns = h->period_ns ? h->period_ns : 50000000;
	snprintf(c->host_name, sizeof(c->host_name), "%s", h->hostname ? h->hostname : "");
	snprintf(c->host_id, sizeof(c->host_id), "%s", h->host_id ? h->host_id : "");
	snprintf(c->kernel_release, sizeof(c->kernel_release), "%s",
		 h->kernel_release ? h->kernel_release : "");
	c->kernel_build_id[0] = '\0';
	if (h->kernel_build_id.len > 0 && h->kernel_build_id.len <= OPAL_BUILD_ID_MAX)
		opal_hex_encode(h->kernel_build_id.data, h->kernel_build_id.len, c->kernel_build_id);
	opal_info("collector pid %u on %s: kernel %s, %u Hz", h->collector_pid, c->host_name,
		  h->kernel_release ? h->kernel_release : "?", h->frequency_hz);
}

/* A .gnu_debuglink candidate the collector opened next to a binary. */
static void on_debuglink(struct server *sv, const Opal__Wire__V1__FileInfo *fi, int fd)
{
	opal_file_id of;
	if (fi->debuglink_of.len != OPAL_FILE_ID_LEN || fd < 0) {
		if (fi->debuglink_of.len != OPAL_FILE_ID_LEN)
			sv->malformed++;
		if (fd >= 0)
			close(fd);
		return;
	}
	memcpy(of.b, fi->debuglink_of.data, OPAL_FILE_ID_LEN);
	int err = opal_symbolizer_add_debuglink(sv->cfg->sym, &of, fd, fi->path);
	if (err < 0)
		opal_debug("debuglink candidate %s dropped: %s", fi->path ? fi->path : "?",
			   strerror(-err));
}

/* A process's perf map or jitdump file, opened by the collector. */
static void on_jit_file(struct server *sv, const struct conn *c,
			const Opal__Wire__V1__FileInfo *fi, int fd)
{
	enum opal_jit_file_kind kind =
		fi->kind == OPAL__WIRE__V1__FILE_KIND__FILE_KIND_PERF_MAP ? OPAL_JIT_FILE_PERF_MAP
									   : OPAL_JIT_FILE_JITDUMP;

	if (fd < 0 || !sv->cfg->jits || fi->jit_id == 0) {
		if (fi->jit_id == 0)
			sv->malformed++;
		if (fd >= 0)
			close(fd);
		return;
	}
	int err = opal_jit_table_put(sv->cfg->jits, c->serial, fi->jit_id, kind, fd);
	if (err < 0)
		opal_warn("JIT file %s dropped: %s", fi->path ? fi->path : "?", strerror(-err));
	else
		opal_debug("JIT file %s of process %llx registered", fi->path ? fi->path : "?",
			   (unsigned long long)fi->jit_id);
}

static void on_file(struct server *sv, const struct conn *c, const Opal__Wire__V1__FileInfo *fi,
		    int fd)
{
	struct opal_symbolizer *sym = sv->cfg->sym;
	opal_file_id id;
	int err;

	if (fi->kind == OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS) {
		if (fd < 0) {
			opal_warn("collector sent no kallsyms descriptor: %s",
				  fi->error ? fi->error : "no reason given");
			return;
		}
		err = opal_symbolizer_set_kallsyms(sym, fd);
		if (err < 0)
			opal_warn("kallsyms unusable: %s: kernel frames stay raw addresses",
				  strerror(-err));
		else
			opal_info("kallsyms: %d kernel symbols", err);
		return;
	}
	if (fi->kind == OPAL__WIRE__V1__FILE_KIND__FILE_KIND_DEBUGLINK) {
		on_debuglink(sv, fi, fd);
		return;
	}
	if (fi->kind == OPAL__WIRE__V1__FILE_KIND__FILE_KIND_PERF_MAP ||
	    fi->kind == OPAL__WIRE__V1__FILE_KIND__FILE_KIND_JITDUMP) {
		on_jit_file(sv, c, fi, fd);
		return;
	}
	if (fi->file_id.len != OPAL_FILE_ID_LEN) {
		sv->malformed++;
		opal_warn("FileInfo with a %zu-byte file ID dropped", fi->file_id.len);
		if (fd >= 0)
			close(fd);
		return;
	}
	memcpy(id.b, fi->file_id.data, OPAL_FILE_ID_LEN);
	if (fd < 0) {
		opal_debug("file %s has no descriptor: %s", fi->path ? fi->path : "?",
			   fi->error ? fi->error : "");
		return;
	}
	err = opal_symbolizer_add_file(sym, &id, fd, fi->gnu_build_id.data, fi->gnu_build_id.len,
				       fi->path);
	if (err < 0)
		opal_warn("file %s not registered: %s", fi->path ? fi->path : "?", strerror(-err));
}

static void on_interval(struct server *sv, struct conn *c, const Opal__Wire__V1__Interval *iv)
{
	const struct opal_server_config *cfg = sv->cfg;
	struct opal_ingest_source src = {
		.host_name = c->host_name,
		.kernel_build_id_hex = c->kernel_build_id[0] ? c->kernel_build_id : NULL,
		.request_file = request_file, .arg = c,
		.codes = cfg->codes, .jits = cfg->jits, .conn = c->serial,
		.host_id = c->host_id[0] ? c->host_id : NULL,
		.kernel_release = c->kernel_release[0] ? c->kernel_release : NULL,
	};
	struct opal_ingest_stats st = { 0 };
	struct opal_profile *p;

	if (!c->hello) {
		sv->malformed++;
		opal_warn("interval before Hello dropped");
		return;
	}
	opal_metrics_collector_counters(c->host_name, iv->run_id, iv->seq, iv->counters);
	if (opal_ledger_seen(cfg->ledger, iv->run_id, iv->seq)) {
		c->duplicates++;
		opal_info("interval %" PRIu64 " of run %016" PRIx64 " already written; acknowledging",
			  iv->seq, iv->run_id);
		send_ack(c, iv->run_id, iv->seq);
		return;
	}
	p = opal_profile_new(c->period_ns);
	bool ok = p && opal_ingest_interval(cfg->sym, &src, iv, p, &st) == 0;
	if (ok && cfg->settle && cfg->settle(cfg->hook_arg) > 0) {
		/* better frames arrived for files first seen in this interval */
		opal_profile_free(p);
		st = (struct opal_ingest_stats){ 0 };
		p = opal_profile_new(c->period_ns);
		ok = p && opal_ingest_interval(cfg->sym, &src, iv, p, &st) == 0;
	}
	if (!ok) {
		opal_err("interval %" PRIu64 ": out of memory; not acknowledged", iv->seq);
		opal_metrics_interval_unwritten(OPAL_UNWRITTEN_NO_MEMORY);
		opal_profile_free(p);
		c->unwritten = true;
		return;
	}
	bool want_otlp = cfg->want_otlp && cfg->want_otlp(cfg->hook_arg);
	struct opal_output_interval enc;
	if (opal_output_write_interval(cfg->out, p, iv->start_unix_ns, iv->seq, want_otlp,
				       &enc) < 0) {
		opal_profile_free(p);
		/* Not acknowledged. The collector re-sends what is unacknowledged
		 * when it reconnects, so the connection is closed once this frame
		 * is done: it comes back after its backoff, and written intervals
		 * are not written twice (ledger). */
		c->unwritten = true;
		return;
	}
	if (cfg->whole_run) {
		struct opal_ingest_stats ignored = { 0 };
		if (!sv->whole)
			sv->whole = opal_profile_new(c->period_ns);
		if (!sv->whole || opal_ingest_interval(cfg->sym, &src, iv, sv->whole, &ignored) < 0 ||
		    opal_output_write_whole(cfg->out, sv->whole) < 0)
			opal_err("whole-run profile not updated for interval %" PRIu64, iv->seq);
	}
	if (opal_ledger_record(cfg->ledger, iv->run_id, iv->seq) < 0)
		opal_warn("interval %" PRIu64 " written but not recorded in the ledger", iv->seq);
	c->intervals++;
	send_ack(c, iv->run_id, iv->seq);
	if (cfg->on_written) {
		struct opal_server_written w = {
			.p = p, .enc = &enc, .run_id = iv->run_id, .seq = iv->seq,
			.start_unix_ns = iv->start_unix_ns, .end_unix_ns = iv->end_unix_ns,
			.host_name = c->host_name,
		};
		cfg->on_written(cfg->hook_arg, &w);
	}
	opal_output_interval_free(&enc);
	opal_profile_free(p);
	if (cfg->on_interval)
		cfg->on_interval(cfg->on_interval_arg, iv->seq, st.samples);
	opal_info("interval %" PRIu64 "%s: %" PRIu64 " samples, %" PRIu64 "/%" PRIu64
		  " frames symbolized, %" PRIu64 " idle, %" PRIu64 " malformed stacks",
		  iv->seq, iv->final ? " (final)" : "", st.samples, st.frames_symbolized, st.frames,
		  iv->idle_samples, st.stacks_malformed);
}

/* Closes the connections that sent no Hello within HELLO_TIMEOUT_MS: a
 * peer that only holds a slot. */
static void close_silent(struct server *sv)
{
	int64_t now = now_ms();

	for (int i = 0; i < OPAL_SERVER_MAX_CONNS; i++) {
		struct conn *c = &sv->conns[i];
		if (c->fd < 0 || c->hello || now - c->accepted_ms < HELLO_TIMEOUT_MS)
			continue;
		opal_warn("collector connection without a Hello for %d s closed", HELLO_TIMEOUT_MS / 1000);
		opal_metrics_collector_conn(OPAL_COLLECTOR_CONN_NO_HELLO);
		conn_close(sv, c);
	}
}

/* Reads and handles one frame. Returns false when the connection is done. */
static bool serve_one(struct server *sv, struct conn *c)
{
	Opal__Wire__V1__Envelope *env;
	int fd, r = opal_wire_recv(&c->rd, &env, &fd);

	c->last_frame_ms = now_ms();
	if (r == -EBADMSG) {
		sv->malformed++;
		opal_metrics_frame_rejected(OPAL_FRAME_MALFORMED);
		opal_warn("malformed message from collector pid %u dropped", c->collector_pid);
		return true;
	}
	if (r == -E2BIG) {
		sv->malformed++;
		opal_metrics_frame_rejected(OPAL_FRAME_OVER_BUDGET);
		opal_warn("message from collector pid %u dropped: decoding it would take over %u "
			  "times its size (or %u MiB)", c->collector_pid, OPAL_WIRE_DECODE_FACTOR,
			  OPAL_WIRE_DECODE_MAX >> 20);
		return true;
	}
	if (r <= 0) {
		if (r == -ETIMEDOUT) {
			opal_metrics_frame_rejected(OPAL_FRAME_STALLED);
			opal_warn("collector pid %u: a frame stalled or took over %d ms; closing the "
				  "connection", c->collector_pid, FRAME_TIMEOUT_MS);
		} else if (r == -EPROTO) {
			opal_metrics_frame_rejected(c->rd.frames_too_large ? OPAL_FRAME_TOO_LARGE :
									     OPAL_FRAME_BAD_MAGIC);
			opal_warn("collector pid %u: %s; closing the connection", c->collector_pid,
				  c->rd.frames_too_large ? "a frame over the 64 MiB bound" :
							   "not a frame (bad magic)");
		}
		else if (r < 0 && r != -EPROTO)
			opal_warn("collector connection: %s", strerror(-r));
		opal_info("collector pid %u disconnected after %" PRIu64 " intervals",
			  c->collector_pid, c->intervals);
		return false;
	}
	switch (env->msg_case) {
	case OPAL__WIRE__V1__ENVELOPE__MSG_HELLO:
		on_hello(c, env->hello);
		break;
	case OPAL__WIRE__V1__ENVELOPE__MSG_FILE:
		on_file(sv, c, env->file, fd);
		fd = -1;
		break;
	case OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL:
		on_interval(sv, c, env->interval);
		break;
	case OPAL__WIRE__V1__ENVELOPE__MSG_CODE:
		if (sv->cfg->codes && opal_code_table_put(sv->cfg->codes, c->serial, env->code) == -EINVAL)
			opal_debug("collector pid %u: code object %016" PRIx64 " refused (malformed "
				   "or of an unknown version)", c->collector_pid, env->code->code_id);
		break;
	default:
		sv->malformed++;
		opal_warn("unexpected message %d from collector dropped", (int)env->msg_case);
		break;
	}
	if (fd >= 0)
		close(fd);
	opal_wire_free(env);
	if (c->unwritten) {
		opal_warn("collector pid %u: closing the connection so that it re-sends the "
			  "interval that could not be written", c->collector_pid);
		return false;
	}
	return true;
}

int opal_server_run(const struct opal_server_config *cfg, volatile sig_atomic_t *stop)
{
	struct server sv = { .cfg = cfg };
	int64_t drain_until = 0;

	for (int i = 0; i < OPAL_SERVER_MAX_CONNS; i++)
		sv.conns[i].fd = -1;
	for (;;) {
		struct pollfd pfd[OPAL_SERVER_MAX_CONNS + 1];
		int idx[OPAL_SERVER_MAX_CONNS + 1], n = 0;

		if (cfg->on_tick)
			cfg->on_tick(cfg->hook_arg);
		if (*stop && !drain_until)
			drain_until = now_ms() + DRAIN_MS;
		close_silent(&sv);
		if (!drain_until) {
			pfd[n] = (struct pollfd){ .fd = cfg->listen_fd, .events = POLLIN };
			idx[n++] = -1;
		}
		for (int i = 0; i < OPAL_SERVER_MAX_CONNS; i++) {
			if (sv.conns[i].fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = sv.conns[i].fd, .events = POLLIN };
			idx[n++] = i;
		}
		/* Draining: serve connected collectors until they hang up (a
		 * stopping collector sends its final interval first), bounded. */
		if (drain_until && (n == 0 || now_ms() > drain_until))
			break;
		int r = poll(pfd, (nfds_t)n, OPAL_SERVER_TICK_MS);
		if (r < 0 && errno != EINTR)
			return -errno;
		for (int k = 0; r > 0 && k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (idx[k] < 0) {
				accept_one(&sv);
				continue;
			}
			struct conn *c = &sv.conns[idx[k]];
			if (!serve_one(&sv, c))
				conn_close(&sv, c);
		}
	}
	for (int i = 0; i < OPAL_SERVER_MAX_CONNS; i++)
		if (sv.conns[i].fd >= 0)
			conn_close(&sv, &sv.conns[i]);
	if (sv.whole) {
		opal_stop_deadline_step("writing the whole-run profile");
		opal_output_write_whole(cfg->out, sv.whole);
	}
	opal_profile_free(sv.whole);
	if (sv.malformed)
		opal_warn("%" PRIu64 " malformed messages dropped in this run", sv.malformed);
	return 0;
}
