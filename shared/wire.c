/* Frames of the wire protocol: "OPAL" | u32 length | Envelope, with an
 * optional SCM_RIGHTS descriptor on the frame's first byte. */
#include "shared/wire.h"
#include "shared/service.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* When a stop signal came: the time by which the whole frame must be out,
 * one SO_SNDTIMEO from now (each sendmsg that moves a byte would otherwise
 * start a new timeout); 0 otherwise, or without a timeout. */
static uint64_t stop_deadline_ms(int sock)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (!opal_stop_signals || getsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) < 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return 0;
	return mono_ms() + (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

ssize_t opal_wire_write(int sock, const uint8_t *buf, size_t len, int fd, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t w = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	return w < 0 ? -errno : w;
}

/* Writes buf fully; the descriptor rides on the first write only. */
static int send_all(int sock, const uint8_t *buf, size_t len, int fd)
{
	uint64_t until = stop_deadline_ms(sock);

	while (len > 0) {
		if (until && mono_ms() >= until)
			return -EAGAIN;
		ssize_t w = opal_wire_write(sock, buf, len, fd, 0);
		if (w < 0) {
			if (w == -EINTR && !opal_stop_signals)
				continue;
			return (int)w;
		}
		fd = -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

int opal_wire_frame(Opal__Wire__V1__Envelope *env, uint8_t **frame, size_t *len)
{
	size_t n;
	uint8_t *buf;

	env->version = OPAL_WIRE_VERSION;
	n = opal__wire__v1__envelope__get_packed_size(env);
	if (n > OPAL_WIRE_MAX_FRAME)
		return -EMSGSIZE;
	buf = malloc(OPAL_WIRE_HDR_LEN + n);
	if (!buf)
		return -ENOMEM;
	put_le32(buf, OPAL_WIRE_MAGIC);
	put_le32(buf + 4, (uint32_t)n);
	opal__wire__v1__envelope__pack(env, buf + OPAL_WIRE_HDR_LEN);
	*frame = buf;
	*len = OPAL_WIRE_HDR_LEN + n;
	return 0;
}

int opal_wire_send(int sock, Opal__Wire__V1__Envelope *env, int fd)
{
	uint8_t *buf;
	size_t len;
	int err = opal_wire_frame(env, &buf, &len);

	if (err < 0)
		return err;
	err = send_all(sock, buf, len, fd);
	free(buf);
	return err;
}

void opal_wire_reader_init(struct opal_wire_reader *r, int sock)
{
	memset(r, 0, sizeof(*r));
	r->sock = sock;
}

static void take_fds(struct opal_wire_reader *r, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (r->nfds < OPAL_WIRE_MAX_FDS) {
				r->fds[r->nfds++] = fd;
			} else {
				close(fd);
				r->fds_dropped++;
			}
		}
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits until `sock` is readable or r->deadline_ns passes. Returns 0 or
 * -ETIMEDOUT. */
static int wait_readable(const struct opal_wire_reader *r)
{
	for (;;) {
		uint64_t now = mono_ns();
		if (now >= r->deadline_ns)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = r->sock, .events = POLLIN };
		int ms = (int)((r->deadline_ns - now + 999999) / 1000000);
		int n = poll(&p, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return 0;   /* let recvmsg report it */
	}
}

/* Reads exactly len bytes, collecting descriptors. `in_frame`: bytes of
 * this frame were read already. Returns len, 0 at EOF before any byte,
 * -ECONNRESET at EOF after some, -ETIMEDOUT when the frame stalls or
 * passes r->deadline_ns (with frame_timeout_ms set), or -errno. */
static ssize_t recv_all(struct opal_wire_reader *r, uint8_t *buf, size_t len, bool in_frame)
{
	size_t got = 0;
	char cbuf[CMSG_SPACE(sizeof(int) * OPAL_WIRE_MAX_FDS)];

	while (got < len) {
		if (r->frame_timeout_ms && wait_readable(r) < 0)
			return -ETIMEDOUT;
		struct iovec iov = { buf + got, len - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		ssize_t n = recvmsg(r->sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EWOULDBLOCK && (got > 0 || in_frame))
				return -ETIMEDOUT;   /* a stalled peer mid-frame */
			return -errno;
		}
		take_fds(r, &mh);
		if (n == 0)
			return got ? -ECONNRESET : 0;
		got += (size_t)n;
	}
	return (ssize_t)len;
}

/* The arena one frame is unpacked into: protobuf-c allocates once per
 * message, string and repeated field (an interval: thousands), so blocks
 * are carved instead and the whole frame goes with one free per block.
 * The arena's header sits in front of the envelope, the first allocation
 * of protobuf_c_message_unpack, which opal_wire_free finds it by. What
 * protobuf-c asks for is counted against the frame's decode budget. */
#define ARENA_MAGIC 0x6172656e61u   /* "arena" */
#define ARENA_ALIGN 16u
#define ARENA_MIN_BLOCK (4u << 10)
#define ARENA_MAX_BLOCK ((size_t)16 << 20)   /* blocks grow by doubling up to this */

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

struct wire_arena {
	uint64_t magic;
	size_t left;          /* decode budget left, bytes */
	bool over;            /* a request went over it */
	struct arena_block *head;   /* the block being carved; older ones behind */
	void *first;          /* the first allocation: the envelope */
};

#define ARENA_HDR ((sizeof(struct wire_arena) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

static struct arena_block *arena_block_new(size_t cap)
{
	struct arena_block *b = malloc(sizeof(*b) + cap);

	if (b)
		*b = (struct arena_block){ .cap = cap };
	return b;
}

static void arena_free_blocks(struct arena_block *b)
{
	while (b) {
		struct arena_block *next = b->next;
		free(b);
		b = next;
	}
}

/* An arena whose first block holds its header and about what a frame of
 * `len` payload bytes decodes into (real intervals take about 5 times). */
static struct wire_arena *arena_new(size_t len, size_t budget)
{
	size_t cap = len * 6 + ARENA_MIN_BLOCK;
	struct arena_block *b;
	struct wire_arena *a;

	if (cap > ARENA_MAX_BLOCK)
		cap = ARENA_MAX_BLOCK;
	if (cap > budget + ARENA_HDR)
		cap = budget + ARENA_HDR;
	if (!(b = arena_block_new(cap)))
		return NULL;
	a = (struct wire_arena *)b->data;
	*a = (struct wire_arena){ .magic = ARENA_MAGIC, .left = budget, .head = b };
	b->used = ARENA_HDR;
	return a;
}

static void *arena_alloc(void *data, size_t size)
{
	struct wire_arena *a = data;
	struct arena_block *b = a->head;
	size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *p;

	if (size > a->left || need < size) {
		a->over = true;
		return NULL;
	}
	a->left -= size;
	if (b->cap - b->used < need) {
		size_t cap = b->cap < ARENA_MAX_BLOCK / 2 ? 2 * b->cap : ARENA_MAX_BLOCK;
		if (cap < need)
			cap = need;
		struct arena_block *nb = arena_block_new(cap);
		if (!nb)
			return NULL;
		nb->next = b;
		a->head = b = nb;
	}
	p = b->data + b->used;
	b->used += need;
	if (!a->first)
		a->first = p;
	return p;
}

/* Frees come with the arena. */
static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p;
}

/* The first block is the one the header lives in: the last of the chain. */
static void arena_destroy(struct wire_arena *a)
{
	arena_free_blocks(a->head);
}

void opal_wire_free(Opal__Wire__V1__Envelope *env)
{
	struct wire_arena *a;

	if (!env)
		return;
	a = (struct wire_arena *)((unsigned char *)env - ARENA_HDR);
	if (a->magic != ARENA_MAGIC || a->first != env)
		abort();   /* not from opal_wire_recv: freeing it would corrupt the heap */
	a->magic = 0;
	arena_destroy(a);
}

static int claim_fd(struct opal_wire_reader *r)
{
	if (r->nfds == 0)
		return -1;
	int fd = r->fds[0];
	memmove(r->fds, r->fds + 1, (r->nfds - 1) * sizeof(int));
	r->nfds--;
	return fd;
}

int opal_wire_recv(struct opal_wire_reader *r, Opal__Wire__V1__Envelope **env, int *fd)
{
	uint8_t hdr[OPAL_WIRE_HDR_LEN];
	ssize_t n;

	*env = NULL;
	*fd = -1;
	if (r->frame_timeout_ms)
		r->deadline_ns = mono_ns() + r->frame_timeout_ms * 1000000ull;
	n = recv_all(r, hdr, sizeof(hdr), false);
	if (n <= 0)
		return (int)n;
	if (get_le32(hdr) != OPAL_WIRE_MAGIC)
		return -EPROTO;
	uint32_t len = get_le32(hdr + 4);
	if (len > OPAL_WIRE_MAX_FRAME) {
		r->frames_too_large++;
		return -EPROTO;
	}
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	n = recv_all(r, buf, len, true);
	if (n < 0 || (n == 0 && len > 0)) {
		free(buf);
		return n < 0 ? (int)n : -ECONNRESET;
	}
	int got_fd = claim_fd(r);
	size_t budget = (size_t)len * OPAL_WIRE_DECODE_FACTOR + OPAL_WIRE_DECODE_SLACK;
	struct wire_arena *a = arena_new(len, budget < OPAL_WIRE_DECODE_MAX ? budget :
									   OPAL_WIRE_DECODE_MAX);
	if (!a) {
		free(buf);
		if (got_fd >= 0)
			close(got_fd);
		return -ENOMEM;
	}
	ProtobufCAllocator alloc = { .alloc = arena_alloc, .free = arena_free,
				     .allocator_data = a };
	Opal__Wire__V1__Envelope *e = opal__wire__v1__envelope__unpack(&alloc, len, buf);
	free(buf);
	if (!e && a->over) {
		arena_destroy(a);
		if (got_fd >= 0)
			close(got_fd);
		r->frames_over_budget++;
		return -E2BIG;
	}
	if (!e || (void *)e != a->first || e->version != OPAL_WIRE_VERSION ||
	    e->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG__NOT_SET) {
		arena_destroy(a);
		if (got_fd >= 0)
			close(got_fd);
		r->frames_bad++;
		return -EBADMSG;
	}
	*env = e;
	*fd = got_fd;
	return 1;
}

void opal_wire_reader_close(struct opal_wire_reader *r)
{
	while (r->nfds > 0)
		close(r->fds[--r->nfds]);
}
