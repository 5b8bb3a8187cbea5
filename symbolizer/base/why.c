/* Refusal reasons (why.h). */
#include <stdarg.h>
#include <stdio.h>

#include "base/why.h"

int opal_why(char *why, size_t why_len, int err, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}
