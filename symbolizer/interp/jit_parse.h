/* Parsers of the files runtimes write to name their JIT code, read by the
 * symbolizer from descriptors the collector passed (untrusted: every
 * size checked before use; fuzzed, tests/fuzz/fuzz_jit.c):
 *   - perf maps, /tmp/perf-PID.map: one line per code range,
 *     "START SIZE name" with START and SIZE in hex (a "0x" prefix is
 *     optional: OpenJDK writes it, V8 and CPython do not), the name the
 *     rest of the line (perf's tools/perf/Documentation/jit-interface.txt);
 *   - jitdump files: a header and records, native byte order, of which
 *     JIT_CODE_LOAD names a range (perf's
 *     tools/perf/Documentation/jitdump-specification.txt).
 * And the runtime's conventions for the names inside them. */
#ifndef OPAL_SYMBOLIZER_JIT_PARSE_H
#define OPAL_SYMBOLIZER_JIT_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define OPAL_PERFMAP_MAX_LINE 4096      /* bytes of a line, its newline excluded */
#define OPAL_JIT_MAX_NAME     1024      /* bytes of a name kept (longer: cut) */

/* One line of a perf map (`len` bytes, no newline). Returns 0 with
 * [*start, *start + *size) and the name at line[*name_off], *name_len
 * bytes (not NUL-terminated, at least 1); -EINVAL for a malformed line
 * (bad number, size 0, a range past 2^64, no name, a line longer than
 * OPAL_PERFMAP_MAX_LINE or holding a NUL). */
int opal_perfmap_parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size,
			    size_t *name_off, size_t *name_len);

#define OPAL_JITDUMP_MAGIC       0x4A695444u   /* "JiTD" as a native u32 */
#define OPAL_JITDUMP_HEADER_MIN  40
#define OPAL_JITDUMP_HEADER_MAX  4096
#define OPAL_JITDUMP_REC_HEAD    16            /* id, total_size, timestamp */
#define OPAL_JITDUMP_LOAD_FIXED  40            /* pid, tid, vma, code_addr, code_size, code_index */
#define OPAL_JITDUMP_MAX_RECORD  (1u << 30)    /* a larger record: the file is corrupt */

enum opal_jitdump_id {
	OPAL_JITDUMP_CODE_LOAD = 0,
	OPAL_JITDUMP_CODE_MOVE = 1,
	OPAL_JITDUMP_DEBUG_INFO = 2,
	OPAL_JITDUMP_CODE_CLOSE = 3,
	OPAL_JITDUMP_UNWINDING_INFO = 4,
};

/* The file header in `b` (`len` bytes read from offset 0). Returns the
 * offset of the first record (the header's total_size), -EAGAIN when
 * fewer than OPAL_JITDUMP_HEADER_MIN bytes are there yet, -EINVAL for a
 * wrong magic (also the other byte order) or a total_size outside
 * [OPAL_JITDUMP_HEADER_MIN, OPAL_JITDUMP_HEADER_MAX]. */
int opal_jitdump_parse_header(const uint8_t *b, size_t len);

struct opal_jitdump_rec {
	uint32_t id;            /* enum opal_jitdump_id, or another value */
	uint32_t total_size;    /* bytes of the whole record */
	/* CODE_LOAD only: */
	uint64_t code_addr, code_size;
	const char *name;       /* into b; name_len bytes, not NUL-terminated */
	size_t name_len;
};

/* One record from its first byte: `b` holds `len` bytes of it (all of a
 * CODE_LOAD's head, its fixed part and its name: up to
 * OPAL_JITDUMP_REC_HEAD + OPAL_JITDUMP_LOAD_FIXED + OPAL_JIT_MAX_NAME + 1
 * bytes are enough; other records need only their head). Returns 0,
 * -EAGAIN when the bytes needed are not there yet (a record being
 * written), -EINVAL for a record that cannot be (total_size below its
 * parts or above OPAL_JITDUMP_MAX_RECORD, a CODE_LOAD whose range is
 * empty or wraps, or whose name has no NUL within the record). A name
 * longer than OPAL_JIT_MAX_NAME is cut to it. */
int opal_jitdump_parse_record(const uint8_t *b, size_t len, struct opal_jitdump_rec *out);

/* What ran a JIT frame, for the OTLP frame type (semantic conventions'
 * profile.frame.type). */
enum opal_jit_runtime { OPAL_JIT_NATIVE = 0, OPAL_JIT_V8JS, OPAL_JIT_JVM, OPAL_JIT_CPYTHON };

/* A name split into function, file and line by its runtime's convention:
 * V8's "JS:<tier><function> <file>:<line>:<column>" (also "LazyCompile:",
 * "Function:", "Script:"; tier one of ~ ^ + *) and other V8 kinds
 * ("Builtin:", "Stub:", ...), CPython's "py::<qualname>:<file>". Other
 * names are kept whole. `func` and `file` get NUL-terminated copies
 * (`cap` bytes each, cut when longer; file "" when none); *line 0 when
 * none. Returns the runtime the name's form shows, OPAL_JIT_NATIVE when
 * it shows none. */
enum opal_jit_runtime opal_jit_name_split(const char *name, size_t len, char *func, char *file,
					  size_t cap, uint32_t *line);

/* The runtime an executable's base name shows: node, nodejs -> V8;
 * java -> JVM; python, python3, python3.N -> CPython; else NATIVE. */
enum opal_jit_runtime opal_jit_runtime_of_exe(const char *exe_path);

#endif
