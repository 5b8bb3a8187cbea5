/* Unit tests of collector/send/sender.c over a real Unix socket, with the test
 * playing the symbolizer: connect retry with backoff, Hello, the kallsyms
 * and ELF descriptors, FileInfo before the first interval that needs it on
 * each connection, Ack, FileRequest, re-sending unacknowledged intervals
 * in order after a reconnect, and a symbolizer that reads slower than the
 * collector sends: no send blocks, the connection stays, nothing is lost. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "collector/send/sender.h"

#define MS 1000000ull
#define RUN_ID 0xfeedull

static char dir[64], sock_path[100], elf_path[4096];

static int open_path(void *ctx, pid_t pid, uint64_t start, uint64_t limit)
{
	(void)ctx;
	(void)pid;
	(void)start;
	(void)limit;
	int fd = open(elf_path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static const struct opal_proc_source src = { .open_mapped = open_path };

/* The test binary itself is a convenient ELF file. */
static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/opal-sender-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/c.sock", dir);
	ssize_t n = readlink("/proc/self/exe", elf_path, sizeof(elf_path) - 1);
	assert_true(n > 0);
	elf_path[n] = '\0';
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(sock_path);
	rmdir(dir);
	return 0;
}

static int listen_sock(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	unlink(sock_path);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 4), 0);
	return s;
}

static int accept_peer(int ls, struct opal_wire_reader *rd)
{
	struct timeval tv = { .tv_sec = 2 };
	int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);

	assert_true(c >= 0);
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	opal_wire_reader_init(rd, c);
	return c;
}

/* Next message from the collector; *fd gets its descriptor or -1. */
static Opal__Wire__V1__Envelope *next(struct opal_wire_reader *rd, int *fd)
{
	Opal__Wire__V1__Envelope *env;
	int r = opal_wire_recv(rd, &env, fd);

	if (r != 1)
		fail_msg("opal_wire_recv: %d", r);
	return env;
}

/* Nothing more is waiting from the collector. */
static void expect_quiet(int c)
{
	char b;
	assert_int_equal(recv(c, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

static void expect_hello(struct opal_wire_reader *rd, uint64_t first_unacked)
{
	int fd;
	Opal__Wire__V1__Envelope *e = next(rd, &fd);

	assert_int_equal(e->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_HELLO);
	assert_int_equal(fd, -1);
	assert_int_equal(e->hello->protocol_version, 1);
	assert_string_equal(e->hello->hostname, "testhost");
	assert_string_equal(e->hello->kernel_release, "6.1.0-test");
	assert_int_equal(e->hello->kernel_build_id.len, 3);
	assert_int_equal(e->hello->boot_time_unix_ns, 123456789);
	assert_int_equal(e->hello->frequency_hz, 20);
	assert_int_equal(e->hello->period_ns, 50000000);
	assert_int_equal(e->hello->collector_pid, (uint32_t)getpid());
	assert_int_equal(e->hello->first_unacked_seq, first_unacked);
	opal_wire_free(e);
}

static void expect_kallsyms(struct opal_wire_reader *rd)
{
	int fd;
	char line[64] = { 0 };
	Opal__Wire__V1__Envelope *e = next(rd, &fd);

	assert_int_equal(e->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE);
	assert_int_equal(e->file->kind, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS);
	assert_true(e->file->has_fd);
	assert_true(fd >= 0);
	/* a fresh descriptor each time: it reads from the start */
	assert_true(read(fd, line, sizeof(line) - 1) > 0);
	assert_non_null(strchr(line, ' '));
	close(fd);
	opal_wire_free(e);
}

static void expect_elf(struct opal_wire_reader *rd, const struct opal_file *f)
{
	int fd;
	opal_file_id got;
	Opal__Wire__V1__Envelope *e = next(rd, &fd);

	assert_int_equal(e->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE);
	assert_int_equal(e->file->kind, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	assert_int_equal(e->file->file_id.len, 16);
	assert_memory_equal(e->file->file_id.data, f->id.b, 16);
	assert_int_equal(e->file->gnu_build_id.len, f->elf.build_id_len);
	assert_string_equal(e->file->path, "/test/exe");
	assert_int_equal(e->file->size, f->key.size);
	assert_true(e->file->has_fd);
	assert_true(fd >= 0);
	assert_int_equal(opal_file_id_from_fd(fd, &got), 0);
	assert_memory_equal(got.b, f->id.b, 16);
	close(fd);
	opal_wire_free(e);
}

static void expect_interval(struct opal_wire_reader *rd, uint64_t seq)
{
	int fd;
	Opal__Wire__V1__Envelope *e = next(rd, &fd);

	assert_int_equal(e->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL);
	assert_int_equal(fd, -1);
	assert_int_equal(e->interval->seq, seq);
	assert_int_equal(e->interval->run_id, RUN_ID);
	assert_int_equal(e->interval->start_unix_ns, seq * 1000);
	opal_wire_free(e);
}

static void send_ack(int c, uint64_t run_id, uint64_t seq)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__Ack ack = OPAL__WIRE__V1__ACK__INIT;

	ack.run_id = run_id;
	ack.seq = seq;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_ACK;
	env.ack = &ack;
	assert_int_equal(opal_wire_send(c, &env, -1), 0);
}

static void send_request(int c, const opal_file_id *id, int kind)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileRequest req = OPAL__WIRE__V1__FILE_REQUEST__INIT;

	if (id) {
		req.file_id.len = 16;
		req.file_id.data = (uint8_t *)id->b;
	}
	req.kind = kind;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST;
	env.file_request = &req;
	assert_int_equal(opal_wire_send(c, &env, -1), 0);
}

/* Queues interval `seq` referencing `id` (when non-NULL). */
static void push(struct opal_sendq *q, uint64_t seq, const opal_file_id *id)
{
	Opal__Wire__V1__Interval iv = OPAL__WIRE__V1__INTERVAL__INIT;
	struct opal_sendq_entry e = { .seq = seq };

	iv.seq = seq;
	iv.run_id = RUN_ID;
	iv.start_unix_ns = seq * 1000;
	e.len = opal__wire__v1__interval__get_packed_size(&iv);
	e.buf = malloc(e.len);
	opal__wire__v1__interval__pack(&iv, e.buf);
	if (id) {
		e.ids = malloc(sizeof(*id));
		e.ids[0] = *id;
		e.n_ids = 1;
	}
	assert_true(opal_sendq_push(q, &e) >= 0);
}

#define BIG_PROCS 100
#define BIG_CMDLINE 4000   /* a big interval: BIG_PROCS times this, ~400 KB */

/* Queues interval `seq` of ~400 KB, referencing `id`. */
static void push_big(struct opal_sendq *q, uint64_t seq, const opal_file_id *id)
{
	Opal__Wire__V1__Interval iv = OPAL__WIRE__V1__INTERVAL__INIT;
	Opal__Wire__V1__Process procs[BIG_PROCS], *pp[BIG_PROCS];
	static char line[BIG_CMDLINE + 1];
	struct opal_sendq_entry e = { .seq = seq };

	memset(line, 'a', BIG_CMDLINE);
	for (size_t i = 0; i < BIG_PROCS; i++) {
		opal__wire__v1__process__init(&procs[i]);
		procs[i].pid = (uint32_t)(i + 1);
		procs[i].command_line = line;
		pp[i] = &procs[i];
	}
	iv.seq = seq;
	iv.run_id = RUN_ID;
	iv.start_unix_ns = seq * 1000;
	iv.n_processes = BIG_PROCS;
	iv.processes = pp;
	e.len = opal__wire__v1__interval__get_packed_size(&iv);
	e.buf = malloc(e.len);
	opal__wire__v1__interval__pack(&iv, e.buf);
	e.ids = malloc(sizeof(*id));
	e.ids[0] = *id;
	e.n_ids = 1;
	assert_true(opal_sendq_push(q, &e) >= 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The slow symbolizer's reader: the messages it gets, in order. */
struct slow_reader {
	struct opal_wire_reader *rd;
	size_t n_want;          /* intervals to read before returning */
	uint64_t seqs[64];
	size_t n_seqs, n_files, n_other;
	int bad;                /* a frame that did not read */
};

static void *slow_read(void *arg)
{
	struct slow_reader *r = arg;

	while (r->n_seqs < r->n_want) {
		Opal__Wire__V1__Envelope *env;
		int fd;
		if (opal_wire_recv(r->rd, &env, &fd) != 1) {
			r->bad = 1;
			return NULL;
		}
		if (fd >= 0)
			close(fd);
		if (env->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL)
			r->seqs[r->n_seqs++] = env->interval->seq;
		else if (env->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_FILE)
			r->n_files++;
		else
			r->n_other++;
		opal_wire_free(env);
	}
	return NULL;
}

static pid_t peer_seen;

static void on_peer(void *ctx, pid_t pid)
{
	(void)ctx;
	peer_seen = pid;
}

/* What both protocol tests drive: a file table holding the test binary
 * as /test/exe (f), a send queue and a disconnected sender trusting this
 * user as symbolizer. */
struct rig {
	struct opal_counters ctr;
	struct opal_file_table files;
	struct opal_sendq q;
	struct opal_sender s;
	struct opal_file *f;
	uint64_t next_seq;
};

static void rig_init(struct rig *r, const struct opal_host_info *host, size_t q_bytes)
{
	struct opal_map_entry m = { .start = 0x1000, .limit = 0x2000, .executable = true,
				    .path = "/test/exe" };

	memset(r, 0, sizeof(*r));
	r->next_seq = 1;
	assert_int_equal(opal_files_init(&r->files, 16, 16, &src, &r->ctr), 0);
	assert_int_equal(opal_files_resolve(&r->files, 1, &m, &r->f), 0);
	assert_int_equal(opal_sendq_init(&r->q, q_bytes), 0);
	opal_sender_init(&r->s, sock_path, &r->q, &r->files, &r->ctr, host);
	r->s.peer.symbolizer_uid = getuid();   /* the test is the symbolizer */
	r->s.run_id = RUN_ID;
	r->s.next_seq = &r->next_seq;
}

/* Closes the sender, the test's end of the connection and the listener. */
static void rig_free(struct rig *r, struct opal_wire_reader *rd, int c, int ls)
{
	opal_sender_close(&r->s);
	opal_wire_reader_close(rd);
	close(c);
	close(ls);
	opal_sendq_destroy(&r->q);
	opal_files_destroy(&r->files);
}

static void test_backoff(void **state)
{
	(void)state;
	uint64_t b = 0, want[] = { 100, 200, 400, 800, 1600, 3200, 5000, 5000 };

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		b = opal_backoff_next(b);
		assert_int_equal(b, want[i] * MS);
	}
}

static void test_protocol(void **state)
{
	(void)state;
	struct rig r;
	struct opal_host_info host = { .hostname = "testhost", .kernel_release = "6.1.0-test",
				       .kernel_build_id = { 1, 2, 3 }, .kernel_build_id_len = 3 };
	struct opal_wire_reader rd;
	uint64_t now = 1000 * MS;

	rig_init(&r, &host, 1 << 20);
	r.s.boot_time_unix_ns = 123456789;
	r.s.frequency_hz = 20;
	r.s.period_ns = 50000000;
	r.s.on_peer = on_peer;

	/* nobody listening: intervals are kept, retries back off */
	unlink(sock_path);
	push(&r.q, 1, &r.f->id);
	r.next_seq = 2;
	opal_sender_service(&r.s, now);
	assert_true(r.s.sock < 0);
	assert_int_equal(r.s.next_try_ns, now + 100 * MS);
	assert_int_equal(r.s.backoff_ns, 200 * MS);
	opal_sender_service(&r.s, now + 50 * MS);   /* too early: no attempt */
	assert_int_equal(r.s.backoff_ns, 200 * MS);
	now += 100 * MS;
	opal_sender_service(&r.s, now);
	assert_true(r.s.sock < 0);
	assert_int_equal(r.s.next_try_ns, now + 200 * MS);
	assert_int_equal(r.q.n, 1);

	/* the symbolizer appears */
	int ls = listen_sock();
	now += 200 * MS;
	opal_sender_service(&r.s, now);
	assert_true(r.s.sock >= 0);
	assert_int_equal(peer_seen, getpid());
	int c = accept_peer(ls, &rd);
	expect_hello(&rd, 1);
	expect_kallsyms(&rd);
	expect_elf(&rd, r.f);      /* before the first interval that needs it */
	expect_interval(&rd, 1);
	expect_quiet(c);

	/* acknowledged: dropped from the queue; a foreign run's Ack is ignored */
	send_ack(c, RUN_ID, 1);
	opal_sender_service(&r.s, now);
	assert_int_equal(r.q.n, 0);

	/* later intervals: the file already went out on this connection */
	push(&r.q, 2, &r.f->id);
	push(&r.q, 3, NULL);
	r.next_seq = 4;
	opal_sender_service(&r.s, now);
	expect_interval(&rd, 2);
	expect_interval(&rd, 3);
	expect_quiet(c);
	send_ack(c, RUN_ID + 1, 2);
	opal_sender_service(&r.s, now);
	assert_int_equal(r.q.n, 2);

	/* FileRequest: the ELF descriptor again, and kallsyms */
	send_request(c, &r.f->id, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	send_request(c, NULL, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS);
	opal_sender_service(&r.s, now);
	expect_elf(&rd, r.f);
	expect_kallsyms(&rd);
	/* an unknown file ID: FileInfo without descriptor, with the reason */
	opal_file_id unknown = { { 0xee } };
	send_request(c, &unknown, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	opal_sender_service(&r.s, now);
	int fd;
	Opal__Wire__V1__Envelope *e = next(&rd, &fd);
	assert_int_equal(e->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE);
	assert_false(e->file->has_fd);
	assert_int_equal(fd, -1);
	assert_true(e->file->error[0] != '\0');
	assert_memory_equal(e->file->file_id.data, unknown.b, 16);
	opal_wire_free(e);
	expect_quiet(c);

	/* the symbolizer goes away with 2 and 3 unacknowledged */
	opal_wire_reader_close(&rd);
	close(c);
	opal_sender_service(&r.s, now);
	assert_true(r.s.sock < 0);
	assert_int_equal(r.q.n, 2);
	now += 100 * MS;
	opal_sender_service(&r.s, now);
	assert_true(r.s.sock >= 0);
	c = accept_peer(ls, &rd);
	/* a new connection has seen no file: FileInfo again, then 2 and 3 in order */
	expect_hello(&rd, 2);
	expect_kallsyms(&rd);
	expect_elf(&rd, r.f);
	expect_interval(&rd, 2);
	expect_interval(&rd, 3);
	expect_quiet(c);
	send_ack(c, RUN_ID, 3);
	send_ack(c, RUN_ID, 2);
	opal_sender_service(&r.s, now);
	assert_int_equal(r.q.n, 0);

	rig_free(&r, &rd, c, ls);
}

/* A symbolizer busy with a cold interval reads nothing for a while: the
 * collector queues what the socket does not take, up to its bound, and
 * leaves the rest in the send buffer; the connection stays, and once the
 * symbolizer reads again every interval arrives, in order, once. */
static void test_slow_peer(void **state)
{
	(void)state;
	struct rig r;
	struct opal_host_info host = { .hostname = "testhost", .kernel_release = "6.1.0-test" };
	struct opal_wire_reader rd;
	uint64_t now = 1000 * MS, t0;
	const size_t n = 20;   /* ~8 MB: twice the output queue's bound */

	rig_init(&r, &host, 64 << 20);
	int ls = listen_sock();
	for (uint64_t i = 1; i <= n; i++)
		push_big(&r.q, i, &r.f->id);
	r.next_seq = n + 1;

	/* the symbolizer accepts and then reads nothing */
	opal_sender_service(&r.s, now);
	assert_true(r.s.sock >= 0);
	int c = accept_peer(ls, &rd);
	for (int i = 0; i < 20; i++)
		opal_sender_service(&r.s, now);
	/* a blocking send would have timed out and dropped the connection */
	assert_true(r.s.sock >= 0);
	assert_true(r.ctr.send_waits > 0);
	assert_true(opal_sender_pending(&r.s));
	assert_true(r.s.out_bytes < OPAL_SEND_OUT_BYTES + 512 * 1024);
	assert_int_equal(r.q.n, n);

	/* it reads again: all n, in order, the file once before the first */
	struct slow_reader sr = { .rd = &rd, .n_want = n };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, slow_read, &sr), 0);
	t0 = mono_ns();
	while (sr.n_seqs < n && !sr.bad && mono_ns() - t0 < 20000 * MS) {
		opal_sender_service(&r.s, now);
		opal_sender_wait(&r.s, 10);
	}
	pthread_join(th, NULL);
	assert_int_equal(sr.bad, 0);
	assert_int_equal(sr.n_seqs, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(sr.seqs[i], i + 1);
	assert_int_equal(sr.n_files, 2);      /* kallsyms, then the ELF file */
	assert_int_equal(sr.n_other, 1);      /* Hello */
	assert_false(opal_sender_pending(&r.s));
	assert_int_equal(r.s.out_fds, 0);
	expect_quiet(c);

	rig_free(&r, &rd, c, ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_protocol),
		cmocka_unit_test(test_slow_peer),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
