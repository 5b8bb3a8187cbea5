/* The reason a parser or validator gives for refusing its input, written
 * into the caller's buffer (the `char *why, size_t why_len` pair of the
 * symbolizer's parsing functions) as it returns its error. */
#ifndef OPAL_WHY_H
#define OPAL_WHY_H

#include <stddef.h>

/* Formats `fmt` into why[why_len] (cut to fit, always NUL-terminated;
 * nothing is written when `why` is NULL or `why_len` is 0) and returns
 * `err` (a negative errno), so that a failing path reads
 * `return opal_why(why, why_len, -EINVAL, "...", ...);`. */
int opal_why(char *why, size_t why_len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
