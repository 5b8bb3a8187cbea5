/* Perf map and jitdump parsers, JIT name conventions (jit_parse.h). */
#include "interp/jit_parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "shared/fileid.h"

/* A hex number at line[*i] (optional "0x"), followed by one space or tab. */
static bool hex_field(const char *line, size_t len, size_t *i, uint64_t *out)
{
	uint64_t v = 0;
	size_t digits = 0, p = *i;
	int d;

	if (p + 1 < len && line[p] == '0' && (line[p + 1] == 'x' || line[p + 1] == 'X'))
		p += 2;
	for (; p < len && (d = opal_hex_digit(line[p])) >= 0; p++, digits++) {
		if (v >> 60)
			return false;   /* past 64 bits */
		v = (v << 4) | (uint64_t)d;
	}
	if (digits == 0 || p >= len || (line[p] != ' ' && line[p] != '\t'))
		return false;
	*out = v;
	*i = p + 1;
	return true;
}

int opal_perfmap_parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size,
			    size_t *name_off, size_t *name_len)
{
	size_t i = 0, end = len;

	if (len > OPAL_PERFMAP_MAX_LINE || memchr(line, '\0', len))
		return -EINVAL;
	if (!hex_field(line, len, &i, start) || !hex_field(line, len, &i, size))
		return -EINVAL;
	if (*size == 0 || *start + *size < *start)
		return -EINVAL;
	while (end > i && (line[end - 1] == '\r' || line[end - 1] == ' '))
		end--;
	if (end <= i)
		return -EINVAL;
	*name_off = i;
	*name_len = end - i;
	return 0;
}

static uint32_t u32_at(const uint8_t *b)
{
	uint32_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

static uint64_t u64_at(const uint8_t *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return v;
}

int opal_jitdump_parse_header(const uint8_t *b, size_t len)
{
	uint32_t total;

	if (len < OPAL_JITDUMP_HEADER_MIN)
		return -EAGAIN;
	if (u32_at(b) != OPAL_JITDUMP_MAGIC)
		return -EINVAL;
	total = u32_at(b + 8);
	if (total < OPAL_JITDUMP_HEADER_MIN || total > OPAL_JITDUMP_HEADER_MAX)
		return -EINVAL;
	return (int)total;
}

int opal_jitdump_parse_record(const uint8_t *b, size_t len, struct opal_jitdump_rec *out)
{
	const size_t fixed = OPAL_JITDUMP_REC_HEAD + OPAL_JITDUMP_LOAD_FIXED;

	memset(out, 0, sizeof(*out));
	if (len < OPAL_JITDUMP_REC_HEAD)
		return -EAGAIN;
	out->id = u32_at(b);
	out->total_size = u32_at(b + 4);
	if (out->total_size < OPAL_JITDUMP_REC_HEAD || out->total_size > OPAL_JITDUMP_MAX_RECORD)
		return -EINVAL;
	if (out->id != OPAL_JITDUMP_CODE_LOAD)
		return 0;
	if (out->total_size < fixed + 1)
		return -EINVAL;   /* no room for the name's NUL */
	if (len < fixed)
		return -EAGAIN;
	out->code_addr = u64_at(b + OPAL_JITDUMP_REC_HEAD + 16);
	out->code_size = u64_at(b + OPAL_JITDUMP_REC_HEAD + 24);
	if (out->code_size == 0 || out->code_addr + out->code_size < out->code_addr)
		return -EINVAL;
	/* the name: NUL-terminated, within the record */
	size_t room = out->total_size - fixed, have = len - fixed;
	size_t look = room < have ? room : have;
	const uint8_t *nul = memchr(b + fixed, '\0', look);
	if (!nul) {
		if (look == room)
			return -EINVAL;          /* the record holds no NUL */
		if (look <= OPAL_JIT_MAX_NAME)
			return -EAGAIN;          /* more of it is to come */
		out->name_len = OPAL_JIT_MAX_NAME;   /* long: cut */
	} else {
		out->name_len = (size_t)(nul - (b + fixed));
		if (out->name_len > OPAL_JIT_MAX_NAME)
			out->name_len = OPAL_JIT_MAX_NAME;
	}
	out->name = (const char *)(b + fixed);
	return 0;
}

/* Copies n bytes of s into dst (cap bytes), cut, NUL-terminated. */
static void copy_cut(char *dst, size_t cap, const char *s, size_t n)
{
	if (cap == 0)
		return;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static bool has_prefix(const char *s, size_t len, const char *p)
{
	size_t n = strlen(p);

	return len >= n && memcmp(s, p, n) == 0;
}

/* V8's "<function> <file>:<line>:<column>" (the function may be empty). */
static void split_v8(const char *s, size_t len, char *func, char *file, size_t cap,
		     uint32_t *line)
{
	const char *sp = NULL;

	if (len && strchr("~^+*", s[0])) {
		s++;
		len--;
	}
	for (size_t i = len; i-- > 0;)
		if (s[i] == ' ') {
			sp = s + i;
			break;
		}
	if (!sp) {
		copy_cut(func, cap, s, len);
		return;
	}
	copy_cut(func, cap, s, (size_t)(sp - s));
	if (!func[0])
		copy_cut(func, cap, "(anonymous)", 11);
	/* file:line:column: the two last colons */
	const char *loc = sp + 1, *end = s + len, *c2 = NULL, *c1 = NULL;
	for (const char *q = end; q-- > loc;)
		if (*q == ':') {
			if (!c2)
				c2 = q;
			else {
				c1 = q;
				break;
			}
		}
	if (!c1) {
		copy_cut(file, cap, loc, (size_t)(end - loc));
		return;
	}
	copy_cut(file, cap, loc, (size_t)(c1 - loc));
	uint32_t v = 0;
	for (const char *q = c1 + 1; q < c2 && *q >= '0' && *q <= '9' && v < 100000000; q++)
		v = v * 10 + (uint32_t)(*q - '0');
	*line = v;
}

enum opal_jit_runtime opal_jit_name_split(const char *name, size_t len, char *func, char *file,
					  size_t cap, uint32_t *line)
{
	static const char *const v8_code[] = { "JS:", "LazyCompile:", "Function:", "Script:" };
	static const char *const v8_other[] = { "Builtin:", "BytecodeHandler:", "Stub:",
						"RegExp:", "Handler:", "KeyedLoadIC:",
						"KeyedStoreIC:", "LoadIC:", "StoreIC:" };

	*line = 0;
	if (cap)
		file[0] = '\0';
	for (size_t i = 0; i < sizeof(v8_code) / sizeof(v8_code[0]); i++)
		if (has_prefix(name, len, v8_code[i])) {
			size_t n = strlen(v8_code[i]);
			split_v8(name + n, len - n, func, file, cap, line);
			return OPAL_JIT_V8JS;
		}
	for (size_t i = 0; i < sizeof(v8_other) / sizeof(v8_other[0]); i++)
		if (has_prefix(name, len, v8_other[i])) {
			copy_cut(func, cap, name, len);
			return OPAL_JIT_V8JS;
		}
	if (has_prefix(name, len, "py::")) {
		const char *s = name + 4, *end = name + len;
		const char *colon = memchr(s, ':', (size_t)(end - s));
		copy_cut(func, cap, s, colon ? (size_t)(colon - s) : (size_t)(end - s));
		if (colon)
			copy_cut(file, cap, colon + 1, (size_t)(end - colon - 1));
		return OPAL_JIT_CPYTHON;
	}
	copy_cut(func, cap, name, len);
	return OPAL_JIT_NATIVE;
}

enum opal_jit_runtime opal_jit_runtime_of_exe(const char *exe_path)
{
	const char *base = exe_path ? strrchr(exe_path, '/') : NULL;

	base = base ? base + 1 : exe_path ? exe_path : "";
	if (strcmp(base, "node") == 0 || strcmp(base, "nodejs") == 0)
		return OPAL_JIT_V8JS;
	if (strcmp(base, "java") == 0)
		return OPAL_JIT_JVM;
	if (strncmp(base, "python", 6) == 0 &&
	    strspn(base + 6, "0123456789.") == strlen(base + 6))
		return OPAL_JIT_CPYTHON;
	return OPAL_JIT_NATIVE;
}
