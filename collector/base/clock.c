/* Clock readings (clock.h). */
#include "base/clock.h"

#include <time.h>

static uint64_t read_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t opal_mono_ns(void)
{
	return read_ns(CLOCK_MONOTONIC);
}

uint64_t opal_mono_to_real_offset_ns(void)
{
	uint64_t best_gap = UINT64_MAX, offset = 0;

	/* Bracket a realtime reading between two monotonic ones; the pair with
	 * the smallest gap bounds the error best (a preemption widens it). */
	for (int i = 0; i < 8; i++) {
		uint64_t m0 = read_ns(CLOCK_MONOTONIC);
		uint64_t r = read_ns(CLOCK_REALTIME);
		uint64_t m1 = read_ns(CLOCK_MONOTONIC);
		if (m1 - m0 < best_gap) {
			best_gap = m1 - m0;
			offset = r - (m0 + (m1 - m0) / 2);
		}
	}
	return offset;
}
