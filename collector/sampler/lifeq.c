/* Lifecycle records held for ordering (lifeq.h). */
#include "sampler/lifeq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define REC_ALIGN(n) (((n) + 7u) & ~(size_t)7u)

int opal_lifeq_init(struct opal_lifeq *q, size_t cap)
{
	memset(q, 0, sizeof(*q));
	q->buf = malloc(cap);
	if (!q->buf)
		return -ENOMEM;
	q->cap = cap;
	return 0;
}

void opal_lifeq_destroy(struct opal_lifeq *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

int opal_lifeq_push(struct opal_lifeq *q, const void *rec, size_t size)
{
	uint64_t n = size;

	if (size < 16)
		return -EINVAL;
	if (q->cap - q->tail < sizeof(n) || REC_ALIGN(size) > q->cap - q->tail - sizeof(n))
		return -ENOSPC;
	memcpy(q->buf + q->tail, &n, sizeof(n));
	memcpy(q->buf + q->tail + sizeof(n), rec, size);
	q->tail += sizeof(n) + REC_ALIGN(size);
	return 0;
}

void opal_lifeq_release(struct opal_lifeq *q, uint64_t before_ns,
			void (*cb)(void *ctx, void *rec, size_t size), void *ctx)
{
	while (q->head < q->tail) {
		uint64_t n, t;
		uint8_t *rec = q->buf + q->head + sizeof(n);
		memcpy(&n, q->buf + q->head, sizeof(n));
		memcpy(&t, rec + 8, sizeof(t));
		if (t >= before_ns)
			break;
		q->head += sizeof(n) + REC_ALIGN(n);
		cb(ctx, rec, (size_t)n);
	}
	if (q->head == q->tail)
		q->head = q->tail = 0;
}
