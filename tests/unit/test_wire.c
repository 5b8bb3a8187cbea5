/* Unit tests of shared/wire.c over socketpair(AF_UNIX, SOCK_STREAM): every
 * Envelope type, descriptor passing, the frame layout on the wire, and each
 * error the reader documents. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shared/wire.h"
#include "shared/wire_frames.h"

typedef Opal__Wire__V1__Envelope Envelope;

struct pair {
	int w;   /* writer end */
	int r;   /* reader end */
	struct opal_wire_reader rd;
};

static void pair_open(struct pair *p)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	p->w = sv[0];
	p->r = sv[1];
	/* A broken reader must fail the test, not hang it. */
	struct timeval tv = { .tv_sec = 20 };
	assert_int_equal(setsockopt(p->r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	opal_wire_reader_init(&p->rd, p->r);
}

static void pair_close(struct pair *p)
{
	opal_wire_reader_close(&p->rd);
	if (p->w >= 0)
		close(p->w);
	close(p->r);
}

static void write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	while (len) {
		ssize_t n = write(fd, b, len);
		assert_true(n > 0);
		b += n;
		len -= (size_t)n;
	}
}

/* Frame header as docs say: the bytes "OPAL" then a little-endian u32. */
static void put_header(uint8_t hdr[8], const char magic[4], uint32_t len)
{
	memcpy(hdr, magic, 4);
	hdr[4] = (uint8_t)len;
	hdr[5] = (uint8_t)(len >> 8);
	hdr[6] = (uint8_t)(len >> 16);
	hdr[7] = (uint8_t)(len >> 24);
}

static void raw_frame(int sock, const char magic[4], uint32_t len, const void *payload,
		      size_t payload_len)
{
	uint8_t hdr[8];
	put_header(hdr, magic, len);
	write_all(sock, hdr, sizeof(hdr));
	if (payload_len)
		write_all(sock, payload, payload_len);
}

static int recv_one(struct pair *p, Envelope **env, int *fd)
{
	*env = NULL;
	*fd = -2;
	return opal_wire_recv(&p->rd, env, fd);
}

static int memfd_with(const char *content)
{
	int fd = memfd_create("opal-test-wire", MFD_CLOEXEC);
	assert_true(fd >= 0);
	write_all(fd, content, strlen(content));
	return fd;
}

static void assert_fd_content(int fd, const char *content)
{
	char buf[256];
	size_t want = strlen(content);
	assert_true(want < sizeof(buf));
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	assert_int_equal(n, (ssize_t)want);
	assert_memory_equal(buf, content, want);
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void send_ack(int sock, uint64_t run_id, uint64_t seq)
{
	Opal__Wire__V1__Ack ack = OPAL__WIRE__V1__ACK__INIT;
	ack.run_id = run_id;
	ack.seq = seq;
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_ACK;
	env.ack = &ack;
	assert_int_equal(opal_wire_send(sock, &env, -1), 0);
}

static void expect_ack(struct pair *p, uint64_t run_id, uint64_t seq)
{
	Envelope *env;
	int fd;
	assert_int_equal(recv_one(p, &env, &fd), 1);
	assert_non_null(env);
	assert_int_equal(fd, -1);
	assert_int_equal(env->version, OPAL_WIRE_VERSION);
	assert_int_equal(env->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_ACK);
	assert_int_equal(env->ack->run_id, run_id);
	assert_int_equal(env->ack->seq, seq);
	opal_wire_free(env);
}

static void test_hello(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);

	uint8_t kbid[20];
	for (size_t i = 0; i < sizeof(kbid); i++)
		kbid[i] = (uint8_t)(0xf0 ^ i);
	Opal__Wire__V1__Hello h = OPAL__WIRE__V1__HELLO__INIT;
	h.protocol_version = 1;
	h.hostname = "host-ä.example";
	h.kernel_release = "6.18.0-test";
	h.kernel_build_id.data = kbid;
	h.kernel_build_id.len = sizeof(kbid);
	h.boot_time_unix_ns = 1732870000123456789ull;
	h.frequency_hz = 99;
	h.period_ns = 10101010;
	h.collector_pid = 4242;
	h.first_unacked_seq = 17;
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.version = 0;   /* opal_wire_send sets it */
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	assert_int_equal(opal_wire_send(p.w, &env, -1), 0);

	Envelope *got;
	int fd;
	assert_int_equal(recv_one(&p, &got, &fd), 1);
	assert_int_equal(fd, -1);
	assert_int_equal(got->version, 1);
	assert_int_equal(got->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_HELLO);
	Opal__Wire__V1__Hello *g = got->hello;
	assert_int_equal(g->protocol_version, 1);
	assert_string_equal(g->hostname, "host-ä.example");
	assert_string_equal(g->kernel_release, "6.18.0-test");
	assert_int_equal(g->kernel_build_id.len, sizeof(kbid));
	assert_memory_equal(g->kernel_build_id.data, kbid, sizeof(kbid));
	assert_int_equal(g->boot_time_unix_ns, 1732870000123456789ull);
	assert_int_equal(g->frequency_hz, 99);
	assert_int_equal(g->period_ns, 10101010);
	assert_int_equal(g->collector_pid, 4242);
	assert_int_equal(g->first_unacked_seq, 17);
	opal_wire_free(got);
	pair_close(&p);
}

static void test_ack_and_file_request(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	send_ack(p.w, 0xdeadbeefcafef00dull, 12345);

	uint8_t id[16];
	for (size_t i = 0; i < sizeof(id); i++)
		id[i] = (uint8_t)(i * 3);
	Opal__Wire__V1__FileRequest fr = OPAL__WIRE__V1__FILE_REQUEST__INIT;
	fr.file_id.data = id;
	fr.file_id.len = sizeof(id);
	fr.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST;
	env.file_request = &fr;
	assert_int_equal(opal_wire_send(p.w, &env, -1), 0);

	Opal__Wire__V1__FileRequest ks = OPAL__WIRE__V1__FILE_REQUEST__INIT;
	ks.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS;
	env.file_request = &ks;
	assert_int_equal(opal_wire_send(p.w, &env, -1), 0);

	expect_ack(&p, 0xdeadbeefcafef00dull, 12345);

	Envelope *got;
	int fd;
	assert_int_equal(recv_one(&p, &got, &fd), 1);
	assert_int_equal(fd, -1);
	assert_int_equal(got->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST);
	assert_int_equal(got->file_request->kind, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	assert_int_equal(got->file_request->file_id.len, 16);
	assert_memory_equal(got->file_request->file_id.data, id, 16);
	opal_wire_free(got);

	assert_int_equal(recv_one(&p, &got, &fd), 1);
	assert_int_equal(got->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST);
	assert_int_equal(got->file_request->kind, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS);
	assert_int_equal(got->file_request->file_id.len, 0);
	opal_wire_free(got);
	pair_close(&p);
}

static void send_file_info(int sock, const char *path, int fd)
{
	static uint8_t id[16];
	static uint8_t bid[20];
	for (size_t i = 0; i < sizeof(id); i++)
		id[i] = (uint8_t)(path[0] + i);
	for (size_t i = 0; i < sizeof(bid); i++)
		bid[i] = (uint8_t)(0x80 + i);
	Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;
	fi.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
	fi.file_id.data = id;
	fi.file_id.len = sizeof(id);
	fi.gnu_build_id.data = bid;
	fi.gnu_build_id.len = sizeof(bid);
	fi.path = (char *)path;
	fi.size = 4096 + strlen(path);
	fi.has_fd = fd >= 0;
	if (fd < 0)
		fi.error = "permission denied";
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
	env.file = &fi;
	assert_int_equal(opal_wire_send(sock, &env, fd), 0);
}

static void expect_file_info(struct pair *p, const char *path, const char *content)
{
	Envelope *got;
	int fd;
	assert_int_equal(recv_one(p, &got, &fd), 1);
	assert_int_equal(got->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_FILE);
	Opal__Wire__V1__FileInfo *fi = got->file;
	assert_int_equal(fi->kind, OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF);
	assert_string_equal(fi->path, path);
	assert_int_equal(fi->size, 4096 + strlen(path));
	assert_int_equal(fi->file_id.len, 16);
	assert_int_equal(fi->file_id.data[0], (uint8_t)path[0]);
	assert_int_equal(fi->file_id.data[15], (uint8_t)(path[0] + 15));
	assert_int_equal(fi->gnu_build_id.len, 20);
	assert_int_equal(fi->gnu_build_id.data[19], 0x80 + 19);
	if (content) {
		assert_true(fi->has_fd);
		assert_true(fd >= 0);
		assert_fd_content(fd, content);
		close(fd);
	} else {
		assert_false(fi->has_fd);
		assert_string_equal(fi->error, "permission denied");
		assert_int_equal(fd, -1);
	}
	opal_wire_free(got);
}

static void test_file_info_with_fd(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	const char *content = "ELF-ish contents of the passed descriptor\n";
	int m = memfd_with(content);
	struct stat st_sent;
	assert_int_equal(fstat(m, &st_sent), 0);
	send_file_info(p.w, "/usr/lib/libdemo.so", m);
	/* The caller keeps its copy: still valid after the send. */
	assert_fd_content(m, content);
	close(m);

	Envelope *got;
	int fd;
	assert_int_equal(recv_one(&p, &got, &fd), 1);
	assert_true(fd >= 0);
	assert_true(got->file->has_fd);
	struct stat st_got;
	assert_int_equal(fstat(fd, &st_got), 0);
	assert_int_equal(st_got.st_ino, st_sent.st_ino);
	assert_int_equal(st_got.st_dev, st_sent.st_dev);
	assert_fd_content(fd, content);
	close(fd);
	opal_wire_free(got);
	pair_close(&p);
}

/* Several frames queued before the reader runs: each descriptor stays with
 * its own frame; frames without one get -1. */
static void test_fds_stay_with_frames(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	int a = memfd_with("first descriptor");
	int b = memfd_with("second descriptor");
	int c = memfd_with("third descriptor");
	send_file_info(p.w, "/a", a);
	send_ack(p.w, 1, 1);
	send_file_info(p.w, "/b", b);
	send_file_info(p.w, "/nofd", -1);
	send_file_info(p.w, "/c", c);
	close(a);
	close(b);
	close(c);

	expect_file_info(&p, "/a", "first descriptor");
	expect_ack(&p, 1, 1);
	expect_file_info(&p, "/b", "second descriptor");
	expect_file_info(&p, "/nofd", NULL);
	expect_file_info(&p, "/c", "third descriptor");
	pair_close(&p);
}

/* Interval with every nested message, checked field by field. */
static void test_interval(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);

	uint8_t fid[16];
	memset(fid, 0x5c, sizeof(fid));
	Opal__Wire__V1__Mapping maps[2] = { OPAL__WIRE__V1__MAPPING__INIT,
					    OPAL__WIRE__V1__MAPPING__INIT };
	maps[0].start = 0x555555556000ull;
	maps[0].limit = 0x55555555a000ull;
	maps[0].file_offset = 0x2000;
	maps[0].file_id.data = fid;
	maps[0].file_id.len = sizeof(fid);
	maps[0].load_bias = 0x555555554000ull;
	maps[0].path = "/usr/bin/prog";
	maps[1].start = 0x7f0000000000ull;
	maps[1].limit = 0x7f0000021000ull;
	maps[1].path = "";
	Opal__Wire__V1__Mapping *mapps[2] = { &maps[0], &maps[1] };

	Opal__Wire__V1__Frame fr[4] = { OPAL__WIRE__V1__FRAME__INIT, OPAL__WIRE__V1__FRAME__INIT,
					OPAL__WIRE__V1__FRAME__INIT, OPAL__WIRE__V1__FRAME__INIT };
	fr[0].kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL;
	fr[0].address = 0xffffffff81000123ull;
	fr[1].kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE;
	fr[1].address = 0x1770;
	fr[1].mapping_index = 0;
	fr[2].kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE;
	fr[2].address = 0x1234;
	fr[2].mapping_index = 0;
	fr[2].return_address = 1;
	fr[3].kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_ERROR;
	fr[3].address = OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_TRUNCATED;
	Opal__Wire__V1__Frame *frp[4] = { &fr[0], &fr[1], &fr[2], &fr[3] };

	uint64_t ts[3] = { 1000000001, 1000000002, 1999999999999999999ull };
	uint32_t cpus[3] = { 0, 1, 1 };
	Opal__Wire__V1__Stack st = OPAL__WIRE__V1__STACK__INIT;
	st.n_frames = 4;
	st.frames = frp;
	st.n_timestamps_unix_ns = 3;
	st.timestamps_unix_ns = ts;
	st.n_cpus = 3;
	st.cpus = cpus;
	Opal__Wire__V1__Stack *stp[1] = { &st };

	Opal__Wire__V1__Thread th = OPAL__WIRE__V1__THREAD__INIT;
	th.tid = 77;
	th.name = "worker 1";
	th.n_stacks = 1;
	th.stacks = stp;
	Opal__Wire__V1__Thread *thp[1] = { &th };

	Opal__Wire__V1__Process pr = OPAL__WIRE__V1__PROCESS__INIT;
	pr.pid = 76;
	pr.comm = "prog";
	pr.executable_path = "/usr/bin/prog";
	pr.service_name = "checkout";
	pr.container_id = "0123abcd";
	pr.n_mappings = 2;
	pr.mappings = mapps;
	pr.n_threads = 1;
	pr.threads = thp;
	Opal__Wire__V1__Process *prp[1] = { &pr };

	Opal__Wire__V1__CollectorCounters cc = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	cc.samples_total = 1000;
	cc.samples_idle = 300;
	cc.samples_lost = 2;
	cc.stack_errors = 9;

	Opal__Wire__V1__Interval iv = OPAL__WIRE__V1__INTERVAL__INIT;
	iv.seq = 3;
	iv.run_id = 0x1122334455667788ull;
	iv.start_unix_ns = 1700000000000000000ull;
	iv.end_unix_ns = 1700000005000000000ull;
	iv.n_processes = 1;
	iv.processes = prp;
	iv.idle_samples = 300;
	iv.counters = &cc;
	iv.final = 1;
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL;
	env.interval = &iv;
	assert_int_equal(opal_wire_send(p.w, &env, -1), 0);

	Envelope *got;
	int fd;
	assert_int_equal(recv_one(&p, &got, &fd), 1);
	assert_int_equal(fd, -1);
	assert_int_equal(got->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL);
	Opal__Wire__V1__Interval *g = got->interval;
	assert_int_equal(g->seq, 3);
	assert_int_equal(g->run_id, 0x1122334455667788ull);
	assert_int_equal(g->start_unix_ns, 1700000000000000000ull);
	assert_int_equal(g->end_unix_ns, 1700000005000000000ull);
	assert_int_equal(g->idle_samples, 300);
	assert_true(g->final);
	assert_non_null(g->counters);
	assert_int_equal(g->counters->samples_total, 1000);
	assert_int_equal(g->counters->samples_idle, 300);
	assert_int_equal(g->counters->samples_lost, 2);
	assert_int_equal(g->counters->stack_errors, 9);
	assert_int_equal(g->n_processes, 1);
	Opal__Wire__V1__Process *gp = g->processes[0];
	assert_int_equal(gp->pid, 76);
	assert_string_equal(gp->comm, "prog");
	assert_string_equal(gp->executable_path, "/usr/bin/prog");
	assert_string_equal(gp->service_name, "checkout");
	assert_string_equal(gp->container_id, "0123abcd");
	assert_int_equal(gp->n_mappings, 2);
	assert_int_equal(gp->mappings[0]->start, 0x555555556000ull);
	assert_int_equal(gp->mappings[0]->limit, 0x55555555a000ull);
	assert_int_equal(gp->mappings[0]->file_offset, 0x2000);
	assert_int_equal(gp->mappings[0]->load_bias, 0x555555554000ull);
	assert_int_equal(gp->mappings[0]->file_id.len, 16);
	assert_memory_equal(gp->mappings[0]->file_id.data, fid, 16);
	assert_string_equal(gp->mappings[0]->path, "/usr/bin/prog");
	assert_int_equal(gp->mappings[1]->file_id.len, 0);
	assert_int_equal(gp->n_threads, 1);
	assert_int_equal(gp->threads[0]->tid, 77);
	assert_string_equal(gp->threads[0]->name, "worker 1");
	assert_int_equal(gp->threads[0]->n_stacks, 1);
	Opal__Wire__V1__Stack *gs = gp->threads[0]->stacks[0];
	assert_int_equal(gs->n_frames, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(gs->frames[i]->kind, fr[i].kind);
		assert_int_equal(gs->frames[i]->address, fr[i].address);
		assert_int_equal(gs->frames[i]->mapping_index, fr[i].mapping_index);
		assert_int_equal(!!gs->frames[i]->return_address, !!fr[i].return_address);
	}
	assert_int_equal(gs->n_timestamps_unix_ns, 3);
	assert_memory_equal(gs->timestamps_unix_ns, ts, sizeof(ts));
	assert_int_equal(gs->n_cpus, 3);
	assert_memory_equal(gs->cpus, cpus, sizeof(cpus));
	opal_wire_free(got);
	pair_close(&p);
}

/* What opal_wire_send puts on the wire: "OPAL", LE length, Envelope. */
static void test_frame_layout(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	send_ack(p.w, 5, 6);
	close(p.w);
	p.w = -1;

	uint8_t buf[256];
	size_t got = 0;
	ssize_t n;
	while ((n = read(p.r, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	assert_true(got > OPAL_WIRE_HDR_LEN);
	assert_memory_equal(buf, "OPAL", 4);
	uint32_t len = (uint32_t)buf[4] | (uint32_t)buf[5] << 8 | (uint32_t)buf[6] << 16 |
		       (uint32_t)buf[7] << 24;
	assert_int_equal(len, got - OPAL_WIRE_HDR_LEN);
	Envelope *env = opal__wire__v1__envelope__unpack(NULL, len, buf + OPAL_WIRE_HDR_LEN);
	assert_non_null(env);
	assert_int_equal(env->version, 1);
	assert_int_equal(env->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_ACK);
	assert_int_equal(env->ack->run_id, 5);
	assert_int_equal(env->ack->seq, 6);
	opal__wire__v1__envelope__free_unpacked(env, NULL);
	pair_close(&p);
}

static void test_malformed_payload(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	uint8_t garbage[16];
	memset(garbage, 0xff, sizeof(garbage));
	raw_frame(p.w, "OPAL", sizeof(garbage), garbage, sizeof(garbage));
	send_ack(p.w, 9, 10);

	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), -EBADMSG);
	assert_null(env);
	assert_int_equal(p.rd.frames_bad, 1);
	expect_ack(&p, 9, 10);
	pair_close(&p);
}

/* A garbage frame that carries a descriptor: the descriptor is closed, not
 * leaked, and not handed to the next frame. */
static void test_malformed_payload_with_fd(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	int before = count_open_fds();

	int m = memfd_with("orphan");
	uint8_t frame[8 + 12];
	put_header(frame, "OPAL", 12);
	memset(frame + 8, 0xff, 12);
	struct iovec iov = { .iov_base = frame, .iov_len = sizeof(frame) };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &m, sizeof(int));
	assert_int_equal(sendmsg(p.w, &msg, 0), (ssize_t)sizeof(frame));
	close(m);
	send_ack(p.w, 1, 2);

	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), -EBADMSG);
	expect_ack(&p, 1, 2);
	assert_int_equal(p.rd.nfds, 0);
	assert_int_equal(count_open_fds(), before);
	pair_close(&p);
}

static void test_wrong_version(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	Opal__Wire__V1__Ack ack = OPAL__WIRE__V1__ACK__INIT;
	ack.seq = 1;
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.version = 2;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_ACK;
	env.ack = &ack;
	uint8_t buf[64];
	size_t len = opal__wire__v1__envelope__get_packed_size(&env);
	assert_true(len <= sizeof(buf));
	opal__wire__v1__envelope__pack(&env, buf);
	raw_frame(p.w, "OPAL", (uint32_t)len, buf, len);
	send_ack(p.w, 3, 4);

	Envelope *got;
	int fd;
	assert_int_equal(recv_one(&p, &got, &fd), -EBADMSG);
	expect_ack(&p, 3, 4);
	pair_close(&p);
}

/* A frame of 20,000 empty Process messages: 40 KB that protobuf-c would
 * decode into megabytes. Refused by the decode budget; the stream goes
 * on. */
static void test_decode_budget(void **state)
{
	(void)state;
	enum { N = 20000 };
	static uint8_t payload[2 * N + 16];
	size_t n = 0;
	struct pair p;

	payload[n++] = 0x08;   /* version 1 */
	payload[n++] = 0x01;
	payload[n++] = 0x22;   /* interval, length-delimited */
	for (uint32_t v = 2 * N; v; v >>= 7)
		payload[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
	for (int i = 0; i < N; i++) {
		payload[n++] = 0x2a;   /* processes: an empty message */
		payload[n++] = 0x00;
	}
	pair_open(&p);
	raw_frame(p.w, "OPAL", (uint32_t)n, payload, n);
	send_ack(p.w, 5, 6);
	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), -E2BIG);
	assert_null(env);
	assert_int_equal(p.rd.frames_over_budget, 1);
	expect_ack(&p, 5, 6);
	pair_close(&p);
}

static void test_bad_magic(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	uint8_t payload[4] = { 0x08, 0x01, 0x2a, 0x00 };
	raw_frame(p.w, "LAPO", sizeof(payload), payload, sizeof(payload));
	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), -EPROTO);
	assert_null(env);
	pair_close(&p);
}

static void test_oversize_length(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	raw_frame(p.w, "OPAL", OPAL_WIRE_MAX_FRAME + 1, "x", 1);
	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), -EPROTO);
	assert_int_equal(p.rd.frames_too_large, 1);
	pair_close(&p);

	pair_open(&p);
	raw_frame(p.w, "OPAL", UINT32_MAX, NULL, 0);
	assert_int_equal(recv_one(&p, &env, &fd), -EPROTO);
	pair_close(&p);

	/* The limit itself is allowed: this frame is merely cut short. */
	pair_open(&p);
	raw_frame(p.w, "OPAL", OPAL_WIRE_MAX_FRAME, "abc", 3);
	close(p.w);
	p.w = -1;
	assert_int_equal(recv_one(&p, &env, &fd), -ECONNRESET);
	pair_close(&p);
}

static void test_eof_between_frames(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	send_ack(p.w, 1, 1);
	assert_int_equal(shutdown(p.w, SHUT_WR), 0);
	expect_ack(&p, 1, 1);
	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), 0);
	assert_null(env);
	pair_close(&p);

	/* EOF before any frame at all. */
	pair_open(&p);
	close(p.w);
	p.w = -1;
	assert_int_equal(recv_one(&p, &env, &fd), 0);
	pair_close(&p);
}

static void test_eof_inside_frame(void **state)
{
	(void)state;
	Envelope *env;
	int fd;
	struct pair p;

	/* Inside the payload. */
	pair_open(&p);
	uint8_t payload[10] = { 0x08, 0x01 };
	raw_frame(p.w, "OPAL", 40, payload, sizeof(payload));
	close(p.w);
	p.w = -1;
	assert_int_equal(recv_one(&p, &env, &fd), -ECONNRESET);
	assert_null(env);
	pair_close(&p);

	/* Inside the header. */
	pair_open(&p);
	write_all(p.w, "OPA", 3);
	close(p.w);
	p.w = -1;
	assert_int_equal(recv_one(&p, &env, &fd), -ECONNRESET);
	pair_close(&p);

	/* After a good frame, a header with no payload. */
	pair_open(&p);
	send_ack(p.w, 7, 8);
	raw_frame(p.w, "OPAL", 5, NULL, 0);
	close(p.w);
	p.w = -1;
	expect_ack(&p, 7, 8);
	assert_int_equal(recv_one(&p, &env, &fd), -ECONNRESET);
	pair_close(&p);
}

static void test_timeout(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	struct timeval tv = { .tv_usec = 100000 };
	assert_int_equal(setsockopt(p.r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	Envelope *env;
	int fd;
	assert_int_equal(recv_one(&p, &env, &fd), -EAGAIN);
	/* Still usable afterwards. */
	send_ack(p.w, 2, 3);
	expect_ack(&p, 2, 3);
	pair_close(&p);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A peer that sends a frame a byte at a time within each SO_RCVTIMEO
 * cannot hold the reader past frame_timeout_ms for the whole frame. */
static void test_frame_deadline(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	struct timeval tv = { .tv_sec = 2 };
	assert_int_equal(setsockopt(p.r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	p.rd.frame_timeout_ms = 300;
	/* the header and one byte of a 100-byte payload, then nothing */
	uint8_t hdr[9] = { 'O', 'P', 'A', 'L', 100, 0, 0, 0, 0x0a };
	write_all(p.w, hdr, sizeof(hdr));
	Envelope *env;
	int fd;
	double t = now_s();
	assert_int_equal(recv_one(&p, &env, &fd), -ETIMEDOUT);
	double took = now_s() - t;
	assert_true(took >= 0.25 && took < 1.5);
	pair_close(&p);
}

/* ~5 MB Interval; the socket buffer is far smaller, so a thread sends. */
#define BIG_N_TS 600000u

struct big_send {
	int sock;
	Envelope *env;
	int rc;
};

static void *big_sender(void *arg)
{
	struct big_send *b = arg;
	b->rc = opal_wire_send(b->sock, b->env, -1);
	return NULL;
}

static uint64_t big_ts(size_t i)
{
	return 1700000000000000000ull + i * 1000003ull;
}

/* An interval envelope of one process with one thread of one stack, all
 * held in `o` (the caller's). */
struct one_stack {
	Opal__Wire__V1__Stack *stp[1];
	Opal__Wire__V1__Thread th, *thp[1];
	Opal__Wire__V1__Process pr, *prp[1];
	Opal__Wire__V1__Interval iv;
	Envelope env;
};

static Envelope *one_stack_envelope(struct one_stack *o, Opal__Wire__V1__Stack *st, uint64_t seq)
{
	o->stp[0] = st;
	o->th = (Opal__Wire__V1__Thread)OPAL__WIRE__V1__THREAD__INIT;
	o->th.tid = 1;
	o->th.name = "big";
	o->th.n_stacks = 1;
	o->th.stacks = o->stp;
	o->thp[0] = &o->th;
	o->pr = (Opal__Wire__V1__Process)OPAL__WIRE__V1__PROCESS__INIT;
	o->pr.pid = 1;
	o->pr.n_threads = 1;
	o->pr.threads = o->thp;
	o->prp[0] = &o->pr;
	o->iv = (Opal__Wire__V1__Interval)OPAL__WIRE__V1__INTERVAL__INIT;
	o->iv.seq = seq;
	o->iv.n_processes = 1;
	o->iv.processes = o->prp;
	o->env = (Envelope)OPAL__WIRE__V1__ENVELOPE__INIT;
	o->env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL;
	o->env.interval = &o->iv;
	return &o->env;
}

/* Sends `env` from a thread (a frame bigger than the socket buffer) and
 * receives it on p; returns what came, checked to be one frame. */
static Envelope *send_and_receive(struct pair *p, Envelope *env)
{
	struct big_send b = { .sock = p->w, .env = env, .rc = -1 };
	pthread_t t;
	Envelope *got;
	int fd;
	assert_int_equal(pthread_create(&t, NULL, big_sender, &b), 0);
	int rc = recv_one(p, &got, &fd);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(b.rc, 0);
	assert_int_equal(rc, 1);
	assert_int_equal(fd, -1);
	return got;
}

static void test_big_interval(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);

	uint64_t *ts = malloc(BIG_N_TS * sizeof(*ts));
	uint32_t *cpus = malloc(BIG_N_TS * sizeof(*cpus));
	assert_non_null(ts);
	assert_non_null(cpus);
	for (size_t i = 0; i < BIG_N_TS; i++) {
		ts[i] = big_ts(i);
		cpus[i] = (uint32_t)(i % 2);
	}
	Opal__Wire__V1__Frame fr = OPAL__WIRE__V1__FRAME__INIT;
	fr.kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE;
	fr.address = 0x401126;
	Opal__Wire__V1__Frame *frp[1] = { &fr };
	Opal__Wire__V1__Stack st = OPAL__WIRE__V1__STACK__INIT;
	st.n_frames = 1;
	st.frames = frp;
	st.n_timestamps_unix_ns = BIG_N_TS;
	st.timestamps_unix_ns = ts;
	st.n_cpus = BIG_N_TS;
	st.cpus = cpus;
	struct one_stack o;
	Envelope *env = one_stack_envelope(&o, &st, 99);
	size_t packed = opal__wire__v1__envelope__get_packed_size(env);
	assert_true(packed > 5000000 && packed < OPAL_WIRE_MAX_FRAME);

	Envelope *got = send_and_receive(&p, env);
	assert_int_equal(got->msg_case, OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL);
	assert_int_equal(got->interval->seq, 99);
	Opal__Wire__V1__Stack *gs = got->interval->processes[0]->threads[0]->stacks[0];
	assert_int_equal(gs->n_timestamps_unix_ns, BIG_N_TS);
	assert_int_equal(gs->n_cpus, BIG_N_TS);
	for (size_t i = 0; i < BIG_N_TS; i++) {
		if (gs->timestamps_unix_ns[i] != big_ts(i) || gs->cpus[i] != i % 2)
			fail_msg("sample %zu differs", i);
	}
	assert_int_equal(gs->frames[0]->address, 0x401126);
	opal_wire_free(got);
	free(ts);
	free(cpus);

	/* The stream is still in step. */
	send_ack(p.w, 4, 5);
	expect_ack(&p, 4, 5);
	pair_close(&p);
}

/* An interval of many small frames decodes to about 8 times its payload
 * (protobuf-c's scan of each message included): past the arena's first
 * block (6 times), so it grows block by block, and every frame still
 * reads back as sent. */
#define MANY_FRAMES 50000

static void test_arena_grows(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);

	Opal__Wire__V1__Frame *frames = calloc(MANY_FRAMES, sizeof(*frames));
	Opal__Wire__V1__Frame **frp = calloc(MANY_FRAMES, sizeof(*frp));
	assert_non_null(frames);
	assert_non_null(frp);
	for (size_t i = 0; i < MANY_FRAMES; i++) {
		frames[i] = (Opal__Wire__V1__Frame)OPAL__WIRE__V1__FRAME__INIT;
		frames[i].kind = OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE;
		frames[i].address = 0x7f0000000000ull + i;
		frames[i].mapping_index = 1;
		frames[i].return_address = 1;
		frp[i] = &frames[i];
	}
	Opal__Wire__V1__Stack st = OPAL__WIRE__V1__STACK__INIT;
	st.n_frames = MANY_FRAMES;
	st.frames = frp;
	struct one_stack o;
	Envelope *got = send_and_receive(&p, one_stack_envelope(&o, &st, 7));
	Opal__Wire__V1__Stack *gs = got->interval->processes[0]->threads[0]->stacks[0];
	assert_int_equal(gs->n_frames, MANY_FRAMES);
	for (size_t i = 0; i < MANY_FRAMES; i++) {
		if (gs->frames[i]->kind != OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE ||
		    gs->frames[i]->address != 0x7f0000000000ull + i ||
		    gs->frames[i]->mapping_index != 1 || !gs->frames[i]->return_address)
			fail_msg("frame %zu differs", i);
	}
	opal_wire_free(got);
	opal_wire_free(NULL);
	free(frames);
	free(frp);
	pair_close(&p);
}

/* A Stack's frames: Frame messages or the packed arrays, read the same;
 * both at once, arrays of different lengths or a code ID short are
 * malformed. */
static void test_packed_frames(void **state)
{
	(void)state;
	uint32_t info[3] = {
		opal_wire_frame_info(OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL, false, 0),
		opal_wire_frame_info(OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED, false, 0),
		opal_wire_frame_info(OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_JIT, true,
				     OPAL_WIRE_FRAME_MAX_MAPPING),
	};
	uint64_t addr[3] = { 0xffffffff81000010ull, 7, 0x7f0000001234ull }, code[1] = { 0xc0de };
	Opal__Wire__V1__Stack st = OPAL__WIRE__V1__STACK__INIT;
	Opal__Wire__V1__Frame tmp;
	size_t at = 0;

	assert_int_equal(opal_wire_stack_frames_check(&st), 0);   /* no frames at all */
	st.n_frame_info = st.n_frame_address = 3;
	st.frame_info = info;
	st.frame_address = addr;
	assert_int_equal(opal_wire_stack_frames_check(&st), -EBADMSG);   /* code ID missing */
	st.n_frame_code_id = 1;
	st.frame_code_id = code;
	assert_int_equal(opal_wire_stack_frames_check(&st), 0);
	assert_int_equal(opal_wire_stack_n_frames(&st), 3);
	const Opal__Wire__V1__Frame *f = opal_wire_stack_frame(&st, 0, &at, &tmp);
	assert_int_equal(f->kind, OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL);
	assert_int_equal(f->address, 0xffffffff81000010ull);
	f = opal_wire_stack_frame(&st, 1, &at, &tmp);
	assert_int_equal(f->kind, OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED);
	assert_int_equal(f->code_id, 0xc0de);
	assert_int_equal(f->address, 7);
	f = opal_wire_stack_frame(&st, 2, &at, &tmp);
	assert_int_equal(f->kind, OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_JIT);
	assert_true(f->return_address);
	assert_int_equal(f->mapping_index, OPAL_WIRE_FRAME_MAX_MAPPING);
	assert_int_equal(f->code_id, 0);

	st.n_frame_address = 2;
	assert_int_equal(opal_wire_stack_frames_check(&st), -EBADMSG);
	st.n_frame_address = 3;
	Opal__Wire__V1__Frame msg = OPAL__WIRE__V1__FRAME__INIT, *msgs[1] = { &msg };
	st.n_frames = 1;
	st.frames = msgs;
	assert_int_equal(opal_wire_stack_frames_check(&st), -EBADMSG);   /* both forms */
	st.n_frame_info = st.n_frame_address = st.n_frame_code_id = 0;
	assert_int_equal(opal_wire_stack_frames_check(&st), 0);
	assert_int_equal(opal_wire_stack_n_frames(&st), 1);
	assert_ptr_equal(opal_wire_stack_frame(&st, 0, &at, &tmp), &msg);
}

/* A message over the frame limit is refused before anything is written. */
static void test_send_too_big(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	size_t n = OPAL_WIRE_MAX_FRAME + 1;
	uint8_t *big = calloc(1, n);
	assert_non_null(big);
	Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;
	fi.gnu_build_id.data = big;
	fi.gnu_build_id.len = n;
	Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
	env.file = &fi;
	assert_int_equal(opal_wire_send(p.w, &env, -1), -EMSGSIZE);
	free(big);
	send_ack(p.w, 11, 12);
	expect_ack(&p, 11, 12);
	pair_close(&p);
}

/* Sending to a closed peer returns -EPIPE instead of raising SIGPIPE (run
 * in a child so a SIGPIPE shows as a failure, not a dead test binary). */
static void test_send_dead_peer(void **state)
{
	(void)state;
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		signal(SIGPIPE, SIG_DFL);
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			_exit(100);
		close(sv[1]);
		Opal__Wire__V1__Ack ack = OPAL__WIRE__V1__ACK__INIT;
		Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
		env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_ACK;
		env.ack = &ack;
		int rc = opal_wire_send(sv[0], &env, -1);
		_exit(rc == -EPIPE ? 0 : 101);
	}
	int status = 0;
	assert_int_equal(waitpid(child, &status, 0), child);
	if (WIFSIGNALED(status))
		fail_msg("opal_wire_send to a closed peer killed the process with signal %d",
			 WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_ack_and_file_request),
		cmocka_unit_test(test_file_info_with_fd),
		cmocka_unit_test(test_fds_stay_with_frames),
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_frame_layout),
		cmocka_unit_test(test_malformed_payload),
		cmocka_unit_test(test_malformed_payload_with_fd),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_decode_budget),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_oversize_length),
		cmocka_unit_test(test_eof_between_frames),
		cmocka_unit_test(test_eof_inside_frame),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_frame_deadline),
		cmocka_unit_test(test_big_interval),
		cmocka_unit_test(test_arena_grows),
		cmocka_unit_test(test_packed_frames),
		cmocka_unit_test(test_send_too_big),
		cmocka_unit_test(test_send_dead_peer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
