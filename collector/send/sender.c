/* Socket side of the collector (sender.h). */
#include "send/sender.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "shared/log.h"

uint64_t opal_backoff_next(uint64_t cur_ns)
{
	if (cur_ns < OPAL_BACKOFF_MIN_NS)
		return OPAL_BACKOFF_MIN_NS;
	return cur_ns >= OPAL_BACKOFF_MAX_NS / 2 ? OPAL_BACKOFF_MAX_NS : cur_ns * 2;
}

void opal_sender_init(struct opal_sender *s, const char *path, struct opal_sendq *q,
		      struct opal_file_table *files, struct opal_counters *ctr,
		      const struct opal_host_info *host)
{
	memset(s, 0, sizeof(*s));
	s->path = path;
	s->sock = -1;
	s->q = q;
	s->files = files;
	s->debuglinks = &opal_debuglink_source_live;
	s->ctr = ctr;
	s->host = host;
	s->backoff_ns = OPAL_BACKOFF_MIN_NS;
}

/* Intervals that left the full send buffer while in flight and turned out
 * lost (sendq.h): counted and logged here, when their fate is known. */
static void count_lost(struct opal_sender *s, uint64_t n, const char *why)
{
	if (!n)
		return;
	s->ctr->intervals_dropped += n;
	opal_warn("%llu intervals pushed out of the full send buffer while in flight are lost (%s)",
		  (unsigned long long)n, why);
}

/* Frees the output queue's frames and closes their descriptors. */
static void out_clear(struct opal_sender *s)
{
	for (size_t i = s->out_head; i < s->out_head + s->out_n; i++) {
		free(s->out[i].buf);
		if (s->out[i].fd >= 0)
			close(s->out[i].fd);
	}
	s->out_head = s->out_n = s->out_bytes = 0;
	s->out_fds = 0;
}

bool opal_sender_pending(const struct opal_sender *s)
{
	return s->out_n > 0;
}

void opal_sender_close(struct opal_sender *s)
{
	out_clear(s);
	if (s->sock < 0)
		return;
	opal_wire_reader_close(&s->rd);
	close(s->sock);
	s->sock = -1;
	count_lost(s, opal_sendq_set_conn(s->q, 0), "connection closed before their Ack");
}

/* Drops the connection after an error; the next attempt comes after the
 * minimum backoff (the symbolizer may just have restarted). */
static void lose(struct opal_sender *s, const char *what, int err, uint64_t now_ns)
{
	opal_warn("symbolizer connection lost (%s: %s); %zu intervals kept for re-sending", what,
		  err ? strerror(-err) : "closed by the peer", s->q->n);
	opal_sender_close(s);
	s->backoff_ns = OPAL_BACKOFF_MIN_NS;
	s->next_try_ns = now_ns + s->backoff_ns;
}

/* Writes queued frames while the socket takes them without blocking; a
 * frame's descriptor goes with its first byte. Returns 0 (all written, or
 * the socket is full) or -errno on a dead peer. */
static int out_flush(struct opal_sender *s)
{
	while (s->out_n) {
		struct opal_out_frame *f = &s->out[s->out_head];
		ssize_t w = opal_wire_write(s->sock, f->buf + f->off, f->len - f->off, f->fd,
					    MSG_DONTWAIT);
		if (w < 0) {
			if (w == -EINTR)
				continue;
			return w == -EAGAIN ? 0 : (int)w;
		}
		if (f->fd >= 0) {
			close(f->fd);
			f->fd = -1;
			s->out_fds--;
		}
		f->off += (size_t)w;
		s->out_bytes -= (size_t)w;
		if (f->off < f->len)
			continue;
		free(f->buf);
		s->out_head++;
		if (--s->out_n == 0)
			s->out_head = 0;
	}
	return 0;
}

/* Room for one more frame at the end of the queue: the frames move to the
 * front of the array, or it grows (up to OPAL_SEND_OUT_MAX_FRAMES). */
static int out_room(struct opal_sender *s)
{
	if (s->out_head + s->out_n < s->out_cap)
		return 0;
	if (s->out_head) {
		memmove(s->out, s->out + s->out_head, s->out_n * sizeof(*s->out));
		s->out_head = 0;
		return 0;
	}
	size_t cap = s->out_cap ? 2 * s->out_cap : 64;
	struct opal_out_frame *a = realloc(s->out, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->out = a;
	s->out_cap = cap;
	return 0;
}

/* Queues `env` (with a duplicate of `fd` when >= 0: the caller keeps its
 * own) and writes what the socket takes now. An `entry` frame (an interval
 * or what it names) is refused with -EAGAIN while the queue is at its
 * bound: the caller comes back to it at a later service. Returns 0, -EAGAIN,
 * -EMSGSIZE (over OPAL_WIRE_MAX_FRAME), -ENOBUFS (a reply past the hard
 * bounds) or -errno. */
static int send_env_as(struct opal_sender *s, Opal__Wire__V1__Envelope *env, int fd, bool entry)
{
	uint8_t *buf;
	size_t len;
	int dup = -1, err;

	if (entry && (s->out_bytes >= OPAL_SEND_OUT_BYTES || s->out_n >= OPAL_SEND_OUT_MAX_FRAMES / 2 ||
		      (fd >= 0 && s->out_fds >= OPAL_SEND_OUT_FDS)))
		return -EAGAIN;
	if (s->out_n >= OPAL_SEND_OUT_MAX_FRAMES || (fd >= 0 && s->out_fds >= OPAL_SEND_OUT_MAX_FDS))
		return -ENOBUFS;
	if ((err = out_room(s)) < 0 || (err = opal_wire_frame(env, &buf, &len)) < 0)
		return err;
	if (fd >= 0 && (dup = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		err = -errno;
		free(buf);
		return err;
	}
	s->out[s->out_head + s->out_n++] = (struct opal_out_frame){ buf, len, 0, dup };
	s->out_bytes += len;
	s->out_fds += dup >= 0;
	return out_flush(s);
}

static int send_env(struct opal_sender *s, Opal__Wire__V1__Envelope *env, int fd)
{
	return send_env_as(s, env, fd, false);
}

static int send_hello(struct opal_sender *s)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__Hello h = OPAL__WIRE__V1__HELLO__INIT;

	h.protocol_version = OPAL_WIRE_VERSION;
	h.hostname = (char *)s->host->hostname;
	h.kernel_release = (char *)s->host->kernel_release;
	h.host_id = (char *)s->host->machine_id;
	h.os_type = (char *)"linux";
	h.kernel_build_id.len = s->host->kernel_build_id_len;
	h.kernel_build_id.data = (uint8_t *)s->host->kernel_build_id;
	h.boot_time_unix_ns = s->boot_time_unix_ns;
	h.frequency_hz = s->frequency_hz;
	h.period_ns = s->period_ns;
	h.collector_pid = (uint32_t)getpid();
	h.first_unacked_seq = opal_sendq_first_seq(s->q, s->next_seq ? *s->next_seq : 1);
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	return send_env(s, &env, -1);
}

/* kallsyms shows real addresses to readers whose opener had CAP_SYSLOG,
 * so the collector opens it; a fresh descriptor each time, because the
 * symbolizer's reads move the shared file offset. */
static int send_kallsyms(struct opal_sender *s)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;
	char why[128];
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC), err;

	fi.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS;
	fi.path = "/proc/kallsyms";
	if (fd >= 0) {
		fi.has_fd = true;
	} else {
		snprintf(why, sizeof(why), "open /proc/kallsyms: %s", strerror(errno));
		fi.error = why;
		opal_warn("%s", why);
	}
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
	env.file = &fi;
	err = send_env(s, &env, fd);
	if (fd >= 0)
		close(fd);
	return err;
}

/* One FileInfo kind DEBUGLINK per .gnu_debuglink candidate of `f` found
 * in a process that maps it; the candidates are opened here and closed as
 * soon as they are sent. Only a socket error is returned. */
static int send_debuglinks(struct opal_sender *s, const struct opal_file *f)
{
	struct opal_debuglink_candidate cand[OPAL_DEBUGLINK_MAX_CANDIDATES];
	size_t n = 0;
	int err = 0;

	if (!f->elf.has_debuglink)
		return 0;
	opal_debuglink_open_file(s->debuglinks, f, cand, &n);
	for (size_t i = 0; i < n; i++) {
		Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
		Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;

		fi.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_DEBUGLINK;
		fi.debuglink_of.len = OPAL_FILE_ID_LEN;
		fi.debuglink_of.data = (uint8_t *)f->id.b;
		fi.path = cand[i].path;
		fi.size = cand[i].size;
		fi.has_fd = true;
		env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
		env.file = &fi;
		if (!err) {
			err = send_env(s, &env, cand[i].fd);
			if (!err)
				opal_debug("file %s: debuglink candidate %s sent", f->path,
					   cand[i].path);
		}
		close(cand[i].fd);
	}
	return err;
}

/* FileInfo of `f` with its descriptor, or has_fd=false and the reason;
 * then its debuglink candidates when the descriptor went out (queued with
 * it whatever the bound: a file is never sent half). */
static int send_file(struct opal_sender *s, struct opal_file *f, bool entry)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;
	int fd = opal_files_fd(s->files, f), err;

	fi.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
	fi.file_id.len = OPAL_FILE_ID_LEN;
	fi.file_id.data = f->id.b;
	fi.gnu_build_id.len = f->elf.build_id_len;
	fi.gnu_build_id.data = f->elf.build_id;
	fi.path = f->path;
	fi.size = f->key.size;
	if (fd >= 0) {
		fi.has_fd = true;
	} else {
		fi.error = "no process maps this file any more; cannot reopen it";
	}
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
	env.file = &fi;
	err = send_env_as(s, &env, fd >= 0 ? fd : -1, entry);
	if (err == 0 && fd >= 0)
		err = send_debuglinks(s, f);
	if (err == 0)
		f->sent_conn = s->conn_gen;
	return err;
}

/* FileInfo for a file ID the table no longer knows. */
static int send_unknown_file(struct opal_sender *s, const opal_file_id *id, bool entry)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;

	fi.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
	fi.file_id.len = OPAL_FILE_ID_LEN;
	fi.file_id.data = (uint8_t *)id->b;
	fi.error = "file no longer tracked by the collector";
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
	env.file = &fi;
	return send_env_as(s, &env, -1, entry);
}

/* The code objects entry `e` names that have not gone out on this
 * connection; one evicted since is left out (its frames stay unnamed). */
static int send_codes(struct opal_sender *s, const struct opal_sendq_entry *e)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	int err;

	for (size_t i = 0; s->codes && i < e->n_code_ids; i++) {
		struct opal_code_entry *c = opal_code_cache_by_id(s->codes, e->code_ids[i]);
		if (!c || c->sent_conn == s->conn_gen)
			continue;
		env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_CODE;
		env.code = &c->msg;
		if ((err = send_env_as(s, &env, -1, true)) < 0)
			return err;
		c->sent_conn = s->conn_gen;
	}
	return 0;
}

/* The JIT files of the processes entry `e` names that have not gone out
 * on this connection (or were replaced since); a process whose entry was
 * closed since keeps its JIT frames unnamed. */
static int send_jit_files(struct opal_sender *s, const struct opal_sendq_entry *e)
{
	static const Opal__Wire__V1__FileKind kinds[OPAL_JIT_KINDS] = {
		[OPAL_JIT_PERF_MAP] = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_PERF_MAP,
		[OPAL_JIT_JITDUMP] = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_JITDUMP,
	};
	int err;

	for (size_t i = 0; s->jit && i < e->n_jit_ids; i++) {
		struct opal_jit_proc *jp = opal_jit_find(s->jit, e->jit_ids[i]);
		for (int k = 0; jp && k < OPAL_JIT_KINDS; k++) {
			struct opal_jit_file *f = &jp->f[k];
			Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
			Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;
			struct stat st;
			if (f->fd < 0 || f->sent_conn == s->conn_gen)
				continue;
			fi.kind = kinds[k];
			fi.jit_id = jp->id;
			fi.path = f->path;
			fi.size = fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
			fi.has_fd = true;
			env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
			env.file = &fi;
			if ((err = send_env_as(s, &env, f->fd, true)) < 0)
				return err;
			f->sent_conn = s->conn_gen;
		}
	}
	return 0;
}

static int send_entry(struct opal_sender *s, struct opal_sendq_entry *e)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__Interval *iv;
	int err;

	if ((err = send_codes(s, e)) < 0 || (err = send_jit_files(s, e)) < 0)
		return err;
	for (size_t i = 0; i < e->n_ids; i++) {
		struct opal_file *f = opal_files_find_id(s->files, &e->ids[i]);
		if (f && f->sent_conn == s->conn_gen)
			continue;
		if ((err = f ? send_file(s, f, true) : send_unknown_file(s, &e->ids[i], true)) < 0)
			return err;
	}
	/* The queue keeps packed bytes (its bound is in bytes); the framing
	 * API takes a message, so unpack it again for sending. */
	iv = opal__wire__v1__interval__unpack(NULL, e->len, e->buf);
	if (!iv)
		return -ENOMEM;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL;
	env.interval = iv;
	err = send_env_as(s, &env, -1, true);
	opal__wire__v1__interval__free_unpacked(iv, NULL);
	if (err == 0) {
		e->sent_conn = s->conn_gen;
		opal_debug("sent interval %llu (%zu bytes, %zu files)", (unsigned long long)e->seq,
			   e->len, e->n_ids);
	}
	return err;
}

static int recv_timeout_ms(const struct opal_sender *s)
{
	return s->max_block_ms && s->max_block_ms < OPAL_RECV_TIMEOUT_MS ? s->max_block_ms :
									  OPAL_RECV_TIMEOUT_MS;
}

static void set_timeout(int sock, int opt, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	setsockopt(sock, SOL_SOCKET, opt, &tv, sizeof(tv));
}

void opal_sender_limit_block(struct opal_sender *s, int ms)
{
	s->max_block_ms = ms < 1 ? 1 : ms;
	if (s->sock >= 0)
		set_timeout(s->sock, SO_RCVTIMEO, recv_timeout_ms(s));
}

/* Waits for the next attempt with the growing backoff. */
static void retry_later(struct opal_sender *s, uint64_t now_ns)
{
	s->next_try_ns = now_ns + s->backoff_ns;
	s->backoff_ns = opal_backoff_next(s->backoff_ns);
}

/* The socket's folder may have been replaced since the start; a folder
 * that does not exist yet is only a symbolizer not started. */
static bool folder_trusted(struct opal_sender *s, uint64_t now_ns)
{
	char why[512];
	int err = opal_socket_dir_check(&s->peer, s->path, why, sizeof(why));

	if (err != -EPERM)
		return true;
	if (!s->warned_refused)
		opal_err("not connecting to %s: %s", s->path, why);
	s->warned_refused = true;
	retry_later(s, now_ns);
	return false;
}

/* A listener that is not the symbolizer gets nothing: not the Hello, not
 * a descriptor. */
static void refuse_peer(struct opal_sender *s, int sock, const struct ucred *cred,
			uint64_t now_ns)
{
	s->ctr->peers_refused++;
	if (!s->warned_refused)
		opal_err("refusing the listener on %s: it runs as uid %d (pid %d), neither root nor "
			 "the symbolizer's user (--symbolizer-user); nothing sent", s->path,
			 (int)cred->uid, (int)cred->pid);
	s->warned_refused = true;
	close(sock);
	retry_later(s, now_ns);
}

static void try_connect(struct opal_sender *s, uint64_t now_ns)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred = { .pid = 0, .uid = (uid_t)-1 };
	socklen_t clen = sizeof(cred);
	int sock, err;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->path);
	if (!folder_trusted(s, now_ns))
		return;
	/* Non-blocking connect: a full listen backlog must not stall sampling. */
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = errno;
		if (sock >= 0)
			close(sock);
		if (!s->warned_down)
			opal_info("symbolizer not reachable at %s (%s); retrying", s->path,
				  strerror(err));
		else
			opal_debug("connect %s: %s; next try in %llu ms", s->path, strerror(err),
				   (unsigned long long)(s->backoff_ns / 1000000));
		s->warned_down = true;
		retry_later(s, now_ns);
		return;
	}
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    !opal_peer_uid_trusted(&s->peer, cred.uid)) {
		refuse_peer(s, sock, &cred, now_ns);
		return;
	}
	/* blocking for reads (a frame is read whole, within SO_RCVTIMEO);
	 * every send is MSG_DONTWAIT (out_flush) */
	fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) & ~O_NONBLOCK);
	set_timeout(sock, SO_RCVTIMEO, recv_timeout_ms(s));
	s->sock = sock;
	s->conn_gen++;
	opal_sendq_set_conn(s->q, s->conn_gen);   /* nothing pending: the close settled it */
	s->warned_down = false;
	s->warned_refused = false;
	s->backoff_ns = OPAL_BACKOFF_MIN_NS;
	opal_wire_reader_init(&s->rd, sock);
	opal_info("connected to symbolizer at %s (pid %d, uid %u)", s->path, (int)cred.pid,
		  (unsigned)cred.uid);
	if (s->on_peer && cred.pid > 0)
		s->on_peer(s->on_peer_ctx, cred.pid);
	if ((err = send_hello(s)) < 0 || (err = send_kallsyms(s)) < 0)
		lose(s, "hello", err, now_ns);
}

static void handle_file_request(struct opal_sender *s, const Opal__Wire__V1__FileRequest *r,
				uint64_t now_ns)
{
	opal_file_id id;
	int err;

	if (r->kind == OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS) {
		err = send_kallsyms(s);
	} else if (r->file_id.len != OPAL_FILE_ID_LEN) {
		opal_warn("FileRequest with a %zu-byte file ID ignored", r->file_id.len);
		return;
	} else {
		memcpy(id.b, r->file_id.data, OPAL_FILE_ID_LEN);
		struct opal_file *f = opal_files_find_id(s->files, &id);
		err = f ? send_file(s, f, false) : send_unknown_file(s, &id, false);
	}
	if (err < 0)
		lose(s, "file request", err, now_ns);
}

static void read_messages(struct opal_sender *s, uint64_t now_ns)
{
	for (int i = 0; i < OPAL_RECV_PER_SERVICE && s->sock >= 0; i++) {
		struct pollfd pfd = { .fd = s->sock, .events = POLLIN };
		Opal__Wire__V1__Envelope *env;
		int fd, r;

		if (poll(&pfd, 1, 0) <= 0)
			return;
		r = opal_wire_recv(&s->rd, &env, &fd);
		if (r == -EBADMSG) {
			opal_warn("malformed message from the symbolizer dropped");
			continue;
		}
		if (r <= 0) {
			lose(s, "read", r, now_ns);
			return;
		}
		if (fd >= 0)
			close(fd);   /* the symbolizer never sends descriptors */
		if (env->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_ACK) {
			bool found = false;
			if (env->ack->run_id == s->run_id)
				count_lost(s, opal_sendq_acked(s->q, env->ack->seq, &found),
					   "the symbolizer acknowledged a later one");
			if (found)
				opal_debug("interval %llu acknowledged",
					   (unsigned long long)env->ack->seq);
		} else if (env->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST) {
			handle_file_request(s, env->file_request, now_ns);
		} else {
			opal_warn("unexpected message %d from the symbolizer ignored",
				  (int)env->msg_case);
		}
		opal_wire_free(env);
	}
}

void opal_sender_service(struct opal_sender *s, uint64_t now_ns)
{
	if (s->sock < 0 && now_ns >= s->next_try_ns)
		try_connect(s, now_ns);
	if (s->sock < 0)
		return;
	int err = out_flush(s);
	if (err < 0) {
		lose(s, "send", err, now_ns);
		return;
	}
	read_messages(s, now_ns);
	size_t i = 0;
	while (i < s->q->n && s->sock >= 0) {
		struct opal_sendq_entry *e = opal_sendq_at(s->q, i);
		err = e->sent_conn == s->conn_gen ? 0 : send_entry(s, e);
		if (err == -EAGAIN) {
			/* the symbolizer reads slower than this: the rest waits */
			s->ctr->send_waits++;
			break;
		}
		if (err == -EMSGSIZE) {
			opal_err("interval %llu too large to send (%zu bytes); dropped",
				 (unsigned long long)e->seq, e->len);
			s->ctr->intervals_dropped++;
			opal_sendq_ack(s->q, e->seq);   /* the next entry moves into slot i */
			continue;
		}
		if (err < 0)
			lose(s, "send", err, now_ns);
		i++;
	}
}

void opal_sender_wait(struct opal_sender *s, int timeout_ms)
{
	if (s->sock >= 0) {
		struct pollfd pfd = { .fd = s->sock, .events = POLLIN | (s->out_n ? POLLOUT : 0) };
		poll(&pfd, 1, timeout_ms);
	} else {
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
}
