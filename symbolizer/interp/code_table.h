/* Interpreter code objects as the collectors sent them (wire CodeObject:
 * raw bytes copied from the process), parsed here, by the symbolizer, and
 * kept per collector connection so that the interpreter frames of its
 * intervals can be named: function (qualified name), file, first line
 * and the line executing at a frame's instruction.
 *
 * Bounds: OPAL_CODE_TABLE_MAX_BYTES of parsed entries and
 * OPAL_CODE_TABLE_MAX_ENTRIES entries over all connections (least
 * recently used dropped, counted); each part of a code object is bounded
 * by the parser (interp/python_code.h). Thread-safe. */
#ifndef OPAL_SYMBOLIZER_CODE_TABLE_H
#define OPAL_SYMBOLIZER_CODE_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include "opal/wire.pb-c.h"

#define OPAL_CODE_TABLE_MAX_BYTES   (64u << 20)
#define OPAL_CODE_TABLE_MAX_ENTRIES (1u << 18)

struct opal_code_table;

struct opal_code_table_stats {
	uint64_t entries, bytes;
	uint64_t added;      /* code objects parsed and kept */
	uint64_t invalid;    /* refused by the parser (malformed, unknown version) */
	uint64_t evicted;    /* dropped for the bounds */
	uint64_t unknown;    /* frames naming a code object the table does not have */
};

/* NULL on ENOMEM. */
struct opal_code_table *opal_code_table_new(void);
void opal_code_table_free(struct opal_code_table *t);

/* Parses `msg` (a CodeObject received on connection `conn`, a serial of
 * the caller's) and keeps it. Returns 0, -EINVAL (malformed or a runtime
 * or version opal cannot parse: counted, nothing kept) or -ENOMEM. */
int opal_code_table_put(struct opal_code_table *t, uint64_t conn,
			const Opal__Wire__V1__CodeObject *msg);

/* What an interpreter frame is. Strings are the table's: valid until
 * the next call on `t` that may evict (copy them before that). */
struct opal_code_frame {
	const char *function;   /* qualified name */
	const char *file;
	uint32_t first_line;    /* 0 when unknown */
	uint32_t line;          /* executing at the instruction, 0 when unknown */
};

/* Names frame (`code_id`, instruction index `lasti`; UINT32_MAX: none) of
 * connection `conn` into *out under the table's lock, calls `use`, and
 * returns its result; -ENOENT (counted as unknown) when the table has no
 * such code object. */
int opal_code_table_with(struct opal_code_table *t, uint64_t conn, uint64_t code_id,
			 uint32_t lasti, int (*use)(void *arg, const struct opal_code_frame *f),
			 void *arg);

/* Drops every code object of connection `conn` (it closed). */
void opal_code_table_drop_conn(struct opal_code_table *t, uint64_t conn);

void opal_code_table_stats(struct opal_code_table *t, struct opal_code_table_stats *out);

#endif
