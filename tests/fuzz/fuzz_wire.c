/* libFuzzer target: decoding one collector -> symbolizer frame
 * (shared/wire.h: the decode budget and the arena an envelope is unpacked
 * into) from arbitrary payload bytes. A frame either decodes, with every
 * repeated field readable to its end, or is refused with -EBADMSG or
 * -E2BIG; the reader never crashes, leaks or reads past the payload, and
 * the stream stays in step for the next frame.
 *
 * fuzz-sources: shared/wire.c, shared/service.c and the generated
 * wire.pb-c.c. Seeds: none (protobuf's structure is found from nothing). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shared/wire.h"

#define FUZZ_MAX_PAYLOAD (64u << 10)   /* fits the socket buffer set below */

/* Reads every frame's fields so that ASan sees any pointer the arena
 * handed out wrong. */
static uint64_t touch(const Opal__Wire__V1__Envelope *e)
{
	uint64_t sum = 0;
	const Opal__Wire__V1__Interval *iv = e->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL ?
						     e->interval : NULL;
	for (size_t p = 0; iv && p < iv->n_processes; p++) {
		const Opal__Wire__V1__Process *pr = iv->processes[p];
		for (size_t m = 0; m < pr->n_mappings; m++)
			sum += pr->mappings[m]->start + pr->mappings[m]->file_id.len;
		for (size_t t = 0; t < pr->n_threads; t++) {
			const Opal__Wire__V1__Thread *th = pr->threads[t];
			sum += th->name ? strlen(th->name) : 0;
			for (size_t s = 0; s < th->n_stacks; s++) {
				const Opal__Wire__V1__Stack *st = th->stacks[s];
				for (size_t f = 0; f < st->n_frames; f++)
					sum += st->frames[f]->address + st->frames[f]->kind;
				for (size_t i = 0; i < st->n_timestamps_unix_ns; i++)
					sum += st->timestamps_unix_ns[i];
				for (size_t i = 0; i < st->n_cpus; i++)
					sum += st->cpus[i];
			}
		}
	}
	return sum;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static volatile uint64_t sink;
	int sv[2], buf_size = 4 * FUZZ_MAX_PAYLOAD;
	uint8_t hdr[OPAL_WIRE_HDR_LEN];

	if (size > FUZZ_MAX_PAYLOAD || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 0;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf_size, sizeof(buf_size));
	put_le32(hdr, OPAL_WIRE_MAGIC);
	put_le32(hdr + 4, (uint32_t)size);
	/* the frame, then an empty Envelope frame that must still be read */
	static const uint8_t next[] = { 'O', 'P', 'A', 'L', 0, 0, 0, 0 };
	if (write(sv[0], hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr) ||
	    write(sv[0], data, size) != (ssize_t)size ||
	    write(sv[0], next, sizeof(next)) != (ssize_t)sizeof(next))
		abort();
	close(sv[0]);

	struct opal_wire_reader rd;
	Opal__Wire__V1__Envelope *e;
	int fd;
	opal_wire_reader_init(&rd, sv[1]);
	int r = opal_wire_recv(&rd, &e, &fd);
	if (r == 1) {
		sink = touch(e);
		opal_wire_free(e);
	} else if (r != -EBADMSG && r != -E2BIG) {
		abort();
	}
	/* the empty frame after it has no message: refused, stream in step */
	if (opal_wire_recv(&rd, &e, &fd) != -EBADMSG || opal_wire_recv(&rd, &e, &fd) != 0)
		abort();
	opal_wire_reader_close(&rd);
	close(sv[1]);
	return 0;
}
