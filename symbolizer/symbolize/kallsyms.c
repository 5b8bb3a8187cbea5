/* /proc/kallsyms parsing and lookup (kallsyms.h). */
#include <errno.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/fileid.h"
#include "shared/log.h"
#include "symbolize/demangle.h"
#include "symbolize/kallsyms.h"

#define NO_NAME        UINT32_MAX
#define RANK_BOUNDARY  255
#define MOD_HASH_SLOTS (1u << 17)   /* > 2 * OPAL_KALLSYMS_MAX_MODULES */
#define READ_CHUNK     (64u << 10)

struct ksym {
	uint64_t addr;
	uint32_t name;      /* offset in names, NO_NAME for a boundary-only entry */
	uint32_t seq;       /* input line, so that equal entries sort stably */
	uint16_t module;    /* index in modules; 0 is vmlinux ("") */
	uint8_t rank;       /* preference among symbols at one address */
};

/* After loading: one entry per distinct address, holding the preferred
 * symbol there; a symbol ends at the next entry's address when that entry
 * belongs to the same module. */
struct opal_kallsyms {
	struct ksym *syms;
	size_t n;
	size_t n_text;
	char *names;
	char **modules;
	size_t n_modules;
};

struct builder {
	struct ksym *syms;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	char **modules;
	size_t n_modules, modules_cap;
	uint32_t *mod_slots;   /* module index + 1, 0 = empty */
	size_t n_text, n_lines;
	bool any_nonzero;
};

/* Start/end markers of kernel text sections: real addresses, never names
 * (an address at _stext belongs to the function that starts there). */
static bool is_section_marker(const char *name)
{
	static const char *const exact[] = { "_text", "_stext", "_etext", "_sinittext",
					     "_einittext", "_end" };
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(name, exact[i]) == 0)
			return true;
	size_t len = strlen(name);
	return strncmp(name, "__", 2) == 0 &&
	       ((len > 9 && strcmp(name + len - 9, "_text_end") == 0) ||
		(len > 11 && strcmp(name + len - 11, "_text_start") == 0));
}

static uint8_t text_rank(char type, const char *name)
{
	uint8_t r;
	switch (type) {
	case 'T': r = 0; break;
	case 't': r = 1; break;
	case 'W': r = 2; break;
	case 'w': r = 3; break;
	default: return RANK_BOUNDARY;
	}
	if (is_section_marker(name))
		return RANK_BOUNDARY;
	/* "__pi_" are the early-boot aliases of the same code. */
	if (strncmp(name, "__pi_", 5) == 0)
		r += 4;
	return r;
}

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;   /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Index of module `name`, adding it; negative errno on overflow. */
static int intern_module(struct builder *b, const char *name)
{
	if (!*name)
		return 0;
	uint32_t slot = hash_str(name) & (MOD_HASH_SLOTS - 1);
	while (b->mod_slots[slot]) {
		uint32_t idx = b->mod_slots[slot] - 1;
		if (strcmp(b->modules[idx], name) == 0)
			return (int)idx;
		slot = (slot + 1) & (MOD_HASH_SLOTS - 1);
	}
	if (b->n_modules >= OPAL_KALLSYMS_MAX_MODULES + 1)
		return -E2BIG;
	if (b->n_modules == b->modules_cap) {
		size_t ncap = b->modules_cap * 2;
		char **m = realloc(b->modules, ncap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		b->modules = m;
		b->modules_cap = ncap;
	}
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	b->modules[b->n_modules] = copy;
	b->mod_slots[slot] = (uint32_t)b->n_modules + 1;
	return (int)b->n_modules++;
}

static int add_name(struct builder *b, const char *name, uint32_t *off)
{
	size_t len = strlen(name) + 1;
	if (b->names_len + len > b->names_cap) {
		size_t ncap = b->names_cap ? b->names_cap : 1u << 16;
		while (ncap < b->names_len + len)
			ncap *= 2;
		char *p = realloc(b->names, ncap);
		if (!p)
			return -ENOMEM;
		b->names = p;
		b->names_cap = ncap;
	}
	memcpy(b->names + b->names_len, name, len);
	*off = (uint32_t)b->names_len;
	b->names_len += len;
	return 0;
}

/* Parses one NUL-terminated line without its newline. Malformed lines are
 * skipped (return 0): the format is the kernel's, a bad line is a bug or a
 * truncated read, not a reason to drop the table. */
static int parse_line(struct builder *b, char *line)
{
	uint64_t addr = 0;
	int digits = 0, v;
	char *p = line;
	while ((v = opal_hex_digit(*p)) >= 0 && digits < 16) {
		addr = addr << 4 | (uint64_t)v;
		p++;
		digits++;
	}
	if (digits == 0 || p[0] != ' ' || p[1] == '\0' || p[2] != ' ')
		return 0;
	char type = p[1];
	char *name = p + 3;
	char *module = "";
	char *tab = strchr(name, '\t');
	if (tab) {
		*tab = '\0';
		char *m = tab + 1;
		size_t ml = strlen(m);
		if (ml < 3 || m[0] != '[' || m[ml - 1] != ']')
			return 0;
		m[ml - 1] = '\0';
		module = m + 1;
	}
	if (!*name || strchr(name, ' '))
		return 0;
	if (++b->n_lines > OPAL_KALLSYMS_MAX_SYMBOLS)
		return -E2BIG;
	if (addr == 0)
		return 0;
	b->any_nonzero = true;

	int mod = intern_module(b, module);
	if (mod < 0)
		return mod;
	struct ksym s = { .addr = addr, .name = NO_NAME, .seq = (uint32_t)b->n_lines,
			  .module = (uint16_t)mod, .rank = text_rank(type, name) };
	if (s.rank != RANK_BOUNDARY) {
		int r = add_name(b, name, &s.name);
		if (r < 0)
			return r;
		b->n_text++;
	}
	if (b->n == b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 4096;
		struct ksym *n = realloc(b->syms, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->syms = n;
		b->cap = ncap;
	}
	b->syms[b->n++] = s;
	return 0;
}

static int read_all(struct builder *b, int fd)
{
	char *buf = malloc(READ_CHUNK + OPAL_KALLSYMS_MAX_LINE + 1);
	if (!buf)
		return -ENOMEM;
	size_t have = 0, total = 0;
	bool skipping = false;   /* inside an overlong line */
	int ret = 0;

	for (;;) {
		ssize_t got = read(fd, buf + have, READ_CHUNK);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		total += (size_t)got;
		if (total > OPAL_KALLSYMS_MAX_BYTES) {
			ret = -EFBIG;
			break;
		}
		have += (size_t)got;
		bool eof = got == 0;
		if (eof && have > 0 && buf[have - 1] != '\n')
			buf[have++] = '\n';   /* last line without newline */
		size_t start = 0;
		for (size_t i = 0; i < have && ret == 0; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = '\0';
			if (!skipping && i - start <= OPAL_KALLSYMS_MAX_LINE)
				ret = parse_line(b, buf + start);
			skipping = false;
			start = i + 1;
		}
		if (ret)
			break;
		have -= start;
		memmove(buf, buf + start, have);
		if (have > OPAL_KALLSYMS_MAX_LINE) {
			skipping = true;
			have = 0;
		}
		if (eof)
			break;
	}
	free(buf);
	return ret;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static void builder_free(struct builder *b)
{
	free(b->syms);
	free(b->names);
	for (size_t i = 0; i < b->n_modules; i++)
		free(b->modules[i]);
	free(b->modules);
	free(b->mod_slots);
}

int opal_kallsyms_load(int fd, struct opal_kallsyms **out)
{
	struct builder b = { 0 };
	struct stat st;
	*out = NULL;
	/* a pipe or socket could block the reader forever: only files (procfs
	 * and memfd ones included) */
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	b.modules_cap = 64;
	b.modules = calloc(b.modules_cap, sizeof(*b.modules));
	b.mod_slots = calloc(MOD_HASH_SLOTS, sizeof(*b.mod_slots));
	if (!b.modules || !b.mod_slots || !(b.modules[0] = strdup(""))) {
		builder_free(&b);
		return -ENOMEM;
	}
	b.n_modules = 1;

	int r = read_all(&b, fd);
	if (r == 0 && b.n_lines == 0)
		r = -ENODATA;
	else if (r == 0 && !b.any_nonzero)
		r = -EPERM;
	else if (r == 0 && b.n_text == 0)
		r = -ENODATA;
	struct opal_kallsyms *k = r ? NULL : calloc(1, sizeof(*k));
	if (r == 0 && !k)
		r = -ENOMEM;
	if (r) {
		builder_free(&b);
		return r;
	}

	qsort(b.syms, b.n, sizeof(*b.syms), cmp_ksym);
	size_t w = 0;   /* keep the preferred (first) entry per address */
	for (size_t i = 0; i < b.n; i++)
		if (w == 0 || b.syms[w - 1].addr != b.syms[i].addr)
			b.syms[w++] = b.syms[i];
	k->syms = realloc(b.syms, (w ? w : 1) * sizeof(*b.syms));
	if (!k->syms)
		k->syms = b.syms;
	k->n = w;
	k->n_text = b.n_text;
	k->names = b.names;
	k->modules = b.modules;
	k->n_modules = b.n_modules;
	free(b.mod_slots);
	*out = k;
	return 0;
}

void opal_kallsyms_free(struct opal_kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	for (size_t i = 0; i < k->n_modules; i++)
		free(k->modules[i]);
	free(k->modules);
	free(k);
}

size_t opal_kallsyms_count(const struct opal_kallsyms *k)
{
	return k->n_text;
}

int opal_kallsyms_lookup(const struct opal_kallsyms *k, uint64_t addr,
			 struct opal_sym_result *out)
{
	memset(out, 0, sizeof(*out));
	size_t lo = 0, hi = k->n;
	while (lo < hi) {   /* first entry above addr */
		size_t mid = lo + (hi - lo) / 2;
		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	const struct ksym *s = &k->syms[lo - 1];
	if (s->name == NO_NAME)
		return 0;
	if (addr != s->addr) {
		/* Past the module's (or the table's) last symbol: its end is
		 * unknown, so the address stays unresolved. */
		if (lo == k->n || k->syms[lo].module != s->module)
			return 0;
	}
	out->frames = calloc(1, sizeof(*out->frames));
	out->module = strdup(k->modules[s->module]);
	if (out->frames)
		out->frames[0].function = opal_demangle(k->names + s->name);
	if (!out->frames || !out->module || !out->frames[0].function) {
		free(out->frames ? out->frames[0].function : NULL);
		free(out->frames);
		free(out->module);
		memset(out, 0, sizeof(*out));
		return -ENOMEM;
	}
	out->n = 1;
	return 0;
}
