/* Unit tests of the unwind table extraction (collector/unwind/table/unwind_table.c and
 * friends). The expected rules come from binutils, never from libdw:
 * `readelf --debug-dump=frames-interp` gives every CFI row (CFA, RA, RBP,
 * RBX, RSP columns), `readelf --debug-dump=frames` the DWARF expressions
 * behind its "exp" entries, `readelf -lW` the executable segments and
 * `nm` / `readelf -SW` symbol and section addresses. Each table is checked
 * at the start, middle and last byte of every row, and at the edges of
 * every range no FDE covers.
 * Fixtures: $OPAL_FIXTURES/unwind (tests/fixtures/unwind/build.sh), plus
 * the system's libc.so.6 and ld-linux-x86-64.so.2. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/unwind/table/unwind_prog.h"
#include "collector/unwind/table/unwind_table.h"
#include "unwind_format.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO "/lib64/ld-linux-x86-64.so.2"

static char fixture_dir[4096];

static const char *fixture(const char *name)
{
	static char path[4352];
	snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
	return path;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	assert_non_null(p);
	return p;
}

/* Builds the table of `path` with `lim` (NULL: defaults). */
static int build_path(const char *path, const struct opal_unwind_limits *lim,
		      struct opal_unwind_table *t)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("cannot open %s (run tests/fixtures/build.sh; OPAL_FIXTURES=%s)", path,
			 fixture_dir);
	int rc = opal_unwind_table_build(fd, lim, t);
	close(fd);
	return rc;
}

static void build_ok(const char *path, struct opal_unwind_table *t)
{
	int rc = build_path(path, NULL, t);
	if (rc != 0)
		fail_msg("building the table of %s: %s", path, strerror(-rc));
}

static int dwarf_reg(const char *name)
{
	static const char *const names[17] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
	};
	for (int i = 0; i < 17; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* ---- running binutils ---------------------------------------------------- */

typedef void (*line_fn)(const char *line, void *ctx);

static void run_lines(const char *fmt, const char *arg, line_fn fn, void *ctx)
{
	char cmd[4608], line[4096];
	snprintf(cmd, sizeof(cmd), fmt, arg);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = 0;
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		fn(line, ctx);
		n++;
	}
	/* readelf exits 1 on files without debug info even when it printed
	 * everything asked (binutils 2.40) */
	int st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) > 1 || (WEXITSTATUS(st) == 1 && n == 0))
		fail_msg("'%s' failed (status %d)", cmd, st);
}

static void first_hex_line(const char *line, void *ctx)
{
	uint64_t *v = ctx;
	if (*v == 0)
		*v = strtoull(line, NULL, 16);
}

/* Address of symbol `sym` from `nm` (`dynamic`: nm -D). */
static uint64_t sym_addr(const char *path, const char *sym, bool dynamic)
{
	char fmt[512];
	uint64_t v = 0;
	/* nm -D prints versioned names: vfork@@GLIBC_2.2.5 */
	snprintf(fmt, sizeof(fmt),
		 "nm %s '%%s' | awk '{ n = $3; sub(/@.*/, \"\", n); if (n == \"%s\") print $1 }'",
		 dynamic ? "-D --defined-only" : "--defined-only", sym);
	run_lines(fmt, path, first_hex_line, &v);
	if (v == 0)
		fail_msg("no symbol %s in %s", sym, path);
	return v;
}

/* Column `col` (3: address, 4: file offset) of section `name` in
 * `readelf -SW`. */
static uint64_t section_field(const char *path, const char *name, int col)
{
	char fmt[512];
	uint64_t v = 0;
	snprintf(fmt, sizeof(fmt),
		 "readelf -SW '%%s' | sed 's/^ *\\[ *[0-9]*\\]//' | awk '$1 == \"%s\" { print $%d }'",
		 name, col);
	run_lines(fmt, path, first_hex_line, &v);
	if (v == 0)
		fail_msg("no section %s in %s", name, path);
	return v;
}

static uint64_t section_addr(const char *path, const char *name)
{
	return section_field(path, name, 3);
}

/* ---- the readelf oracle -------------------------------------------------- */

#define MAX_EXPR 160

/* DWARF expressions in force at one location of an FDE (readelf's raw
 * dump), for the "exp" entries of the interpreted dump. Empty = none. */
struct expr_state {
	uint64_t loc;
	char cfa[MAX_EXPR];
	char reg[17][MAX_EXPR];   /* indexed by DWARF register; 3, 6, 7, 16 used */
};

struct ref_fde {
	uint64_t offset;         /* entry offset in its section */
	uint64_t lo, hi;
	bool debug;              /* .debug_frame */
	bool signal;             /* CIE augmentation has 'S' */
	uint64_t cie;
	struct expr_state *ex;   /* snapshots, by increasing loc */
	size_t n_ex;
};

struct ref_row {
	uint64_t loc, end;
	size_t fde;
	char cfa[32], ra[32], rbp[32], rbx[32], rsp[32];
};

struct ref_cie {
	uint64_t offset;
	bool debug, signal;
	char cfa[32], ra[32];
};

struct ref {
	struct ref_fde *fdes;
	size_t n_fdes, cap_fdes;
	struct ref_row *rows;
	size_t n_rows, cap_rows;
	struct ref_cie *cies;
	size_t n_cies, cap_cies;
	uint64_t exec_lo[32], exec_hi[32];
	size_t n_exec;
	/* parser state */
	bool in_debug;
	char cols[24][16];
	size_t n_cols;
	long cur_fde, cur_cie;
	struct expr_state cur, stack[32];
	size_t depth;
};

static void *grow(void *v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return v;
	*cap = *cap ? *cap * 2 : 256;
	while (*cap < need)
		*cap *= 2;
	v = realloc(v, *cap * elem);
	assert_non_null(v);
	return v;
}

/* LOAD lines of `readelf -lW`: "LOAD off vaddr paddr filesz memsz FLAGS align". */
static void exec_line(const char *line, void *ctx)
{
	struct ref *r = ctx;
	char type[32];
	uint64_t off, va, pa, fs, ms;
	int n = 0;

	if (sscanf(line, " %31s %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 "%n",
		   type, &off, &va, &pa, &fs, &ms, &n) != 6 || strcmp(type, "LOAD") != 0)
		return;
	const char *align = strstr(line + n, "0x");
	const char *e = strchr(line + n, 'E');
	if (e && (!align || e < align) && r->n_exec < 32) {
		r->exec_lo[r->n_exec] = va;
		r->exec_hi[r->n_exec++] = va + ms;
	}
}

static bool in_exec(const struct ref *r, uint64_t a)
{
	for (size_t i = 0; i < r->n_exec; i++)
		if (a >= r->exec_lo[i] && a < r->exec_hi[i])
			return true;
	return false;
}

static struct ref_fde *find_fde(struct ref *r, bool debug, uint64_t offset)
{
	for (size_t i = 0; i < r->n_fdes; i++)
		if (r->fdes[i].debug == debug && r->fdes[i].offset == offset)
			return &r->fdes[i];
	return NULL;
}

static const struct ref_cie *find_cie(const struct ref *r, bool debug, uint64_t offset)
{
	for (size_t i = 0; i < r->n_cies; i++)
		if (r->cies[i].debug == debug && r->cies[i].offset == offset)
			return &r->cies[i];
	return NULL;
}

/* Splits an interpreted row into column values; "r9 (r9)" is one value. */
static size_t split_values(const char *s, char vals[][32], size_t max)
{
	size_t n = 0;
	while (*s && n < max) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		const char *e = s;
		while (*e && *e != ' ')
			e++;
		size_t len = (size_t)(e - s);
		if (e[0] == ' ' && e[1] == '(') {   /* register name follows */
			const char *c = strchr(e, ')');
			if (c)
				len = (size_t)(c + 1 - s);
		}
		snprintf(vals[n++], 32, "%.*s", (int)len, s);
		s += len;
	}
	return n;
}

static void interp_line(const char *line, void *ctx)
{
	struct ref *r = ctx;
	uint64_t off, lo, hi, cie;
	char aug[32];

	if (strstr(line, "Contents of the .debug_frame section"))
		r->in_debug = true;
	else if (strstr(line, "Contents of the .eh_frame section"))
		r->in_debug = false;
	if (sscanf(line, "%" SCNx64 " %*x %" SCNx64 " FDE cie=%*x pc=%" SCNx64 "..%" SCNx64,
		   &off, &cie, &lo, &hi) == 4) {
		const char *c = strstr(line, "cie=");
		cie = strtoull(c + 4, NULL, 16);
		r->fdes = grow(r->fdes, &r->cap_fdes, r->n_fdes + 1, sizeof(*r->fdes));
		const struct ref_cie *ci = find_cie(r, r->in_debug, cie);
		r->fdes[r->n_fdes] = (struct ref_fde){
			.offset = off, .lo = lo, .hi = hi, .debug = r->in_debug, .cie = cie,
			.signal = ci && ci->signal,
		};
		r->cur_fde = (long)r->n_fdes++;
		r->cur_cie = -1;
		r->n_cols = 0;
		return;
	}
	if (sscanf(line, "%" SCNx64 " %*x %*x CIE", &off) == 1 && strstr(line, " CIE")) {
		const char *q = strchr(line, '"');
		aug[0] = '\0';
		if (q)
			sscanf(q, "\"%31[^\"]\"", aug);
		r->cies = grow(r->cies, &r->cap_cies, r->n_cies + 1, sizeof(*r->cies));
		r->cies[r->n_cies] = (struct ref_cie){
			.offset = off, .debug = r->in_debug, .signal = strchr(aug, 'S') != NULL,
		};
		r->cur_cie = (long)r->n_cies++;
		r->cur_fde = -1;
		r->n_cols = 0;
		return;
	}
	if (strncmp(line, "   LOC", 6) == 0) {
		char vals[24][32];
		size_t n = split_values(line, vals, 24);
		r->n_cols = 0;
		for (size_t i = 1; i < n && r->n_cols < 24; i++)
			snprintf(r->cols[r->n_cols++], 16, "%s", vals[i]);
		return;
	}
	if (strlen(line) < 17 || line[16] != ' ' || r->n_cols == 0)
		return;
	for (int i = 0; i < 16; i++)
		if (!isxdigit((unsigned char)line[i]))
			return;
	char vals[24][32];
	size_t n = split_values(line + 17, vals, 24);
	if (r->cur_cie >= 0) {
		struct ref_cie *ci = &r->cies[r->cur_cie];
		for (size_t i = 0; i < n && i < r->n_cols; i++) {
			if (strcmp(r->cols[i], "CFA") == 0)
				snprintf(ci->cfa, sizeof(ci->cfa), "%.31s", vals[i]);
			else if (strcmp(r->cols[i], "ra") == 0)
				snprintf(ci->ra, sizeof(ci->ra), "%.31s", vals[i]);
		}
		return;
	}
	if (r->cur_fde < 0)
		return;
	r->rows = grow(r->rows, &r->cap_rows, r->n_rows + 1, sizeof(*r->rows));
	struct ref_row *row = &r->rows[r->n_rows++];
	memset(row, 0, sizeof(*row));
	row->loc = strtoull(line, NULL, 16);
	row->fde = (size_t)r->cur_fde;
	for (size_t i = 0; i < n && i < r->n_cols; i++) {
		const char *c = r->cols[i];
		char *dst = strcmp(c, "CFA") == 0 ? row->cfa : strcmp(c, "ra") == 0 ? row->ra :
			    strcmp(c, "rbp") == 0 ? row->rbp : strcmp(c, "rbx") == 0 ? row->rbx :
			    strcmp(c, "rsp") == 0 ? row->rsp : NULL;
		if (dst)
			snprintf(dst, 32, "%.31s", vals[i]);
	}
}

/* Register number of "rN (name)" after `prefix` in a raw CFI line. */
static int raw_reg(const char *line, const char *prefix)
{
	const char *p = strstr(line, prefix);
	if (!p)
		return -1;
	p += strlen(prefix);
	if (*p != 'r')
		return -1;
	int reg = atoi(p + 1);
	return reg >= 0 && reg <= 16 ? reg : -1;
}

static void snapshot(struct ref_fde *f, const struct expr_state *s)
{
	if (f->n_ex > 0) {
		struct expr_state *last = &f->ex[f->n_ex - 1];
		if (memcmp(last->cfa, s->cfa, sizeof(s->cfa)) == 0 &&
		    memcmp(last->reg, s->reg, sizeof(s->reg)) == 0)
			return;
		if (last->loc == s->loc) {
			*last = *s;
			return;
		}
	} else {
		static const struct expr_state empty;
		if (memcmp(empty.cfa, s->cfa, sizeof(s->cfa)) == 0 &&
		    memcmp(empty.reg, s->reg, sizeof(s->reg)) == 0)
			return;
	}
	f->ex = realloc(f->ex, (f->n_ex + 1) * sizeof(*f->ex));
	assert_non_null(f->ex);
	f->ex[f->n_ex++] = *s;
}

/* readelf --debug-dump=frames: tracks the DWARF expressions in force. */
static void raw_line(const char *line, void *ctx)
{
	struct ref *r = ctx;
	uint64_t off, lo, hi;
	struct ref_fde *f = r->cur_fde >= 0 ? &r->fdes[r->cur_fde] : NULL;
	const char *p;

	if (strstr(line, "Contents of the .debug_frame section"))
		r->in_debug = true;
	else if (strstr(line, "Contents of the .eh_frame section"))
		r->in_debug = false;
	if (sscanf(line, "%" SCNx64 " %*x %*x FDE cie=%*x pc=%" SCNx64 "..%" SCNx64, &off, &lo,
		   &hi) == 3) {
		f = find_fde(r, r->in_debug, off);
		r->cur_fde = f ? f - r->fdes : -1;
		memset(&r->cur, 0, sizeof(r->cur));
		r->cur.loc = lo;
		r->depth = 0;
		return;
	}
	if (strstr(line, " CIE")) {
		r->cur_fde = -1;
		return;
	}
	const char *op = strstr(line, "DW_CFA_");
	if (!f || !op)
		return;
	if ((p = strstr(line, " to ")) && strstr(line, "DW_CFA_advance_loc")) {
		r->cur.loc = strtoull(p + 4, NULL, 16);
		return;
	}
	if ((p = strstr(line, "DW_CFA_set_loc: "))) {
		r->cur.loc = strtoull(p + 16, NULL, 16);
		return;
	}
	if ((p = strstr(line, "DW_CFA_def_cfa_expression ("))) {
		snprintf(r->cur.cfa, MAX_EXPR, "%.*s", (int)(strlen(p + 27) - 1), p + 27);
	} else if (strstr(line, "DW_CFA_def_cfa:") || strstr(line, "DW_CFA_def_cfa_register:") ||
		   strstr(line, "DW_CFA_def_cfa_sf:")) {
		r->cur.cfa[0] = '\0';
	} else if (strstr(line, "DW_CFA_expression: ")) {
		int reg = raw_reg(line, "DW_CFA_expression: ");
		const char *e = strstr(line, ") (");
		if (reg >= 0 && e)
			snprintf(r->cur.reg[reg], MAX_EXPR, "%.*s", (int)(strlen(e + 3) - 1), e + 3);
	} else if (strstr(line, "DW_CFA_remember_state")) {
		if (r->depth < 32)
			r->stack[r->depth++] = r->cur;
	} else if (strstr(line, "DW_CFA_restore_state")) {
		if (r->depth > 0) {
			uint64_t loc = r->cur.loc;
			r->cur = r->stack[--r->depth];
			r->cur.loc = loc;
		}
	} else {
		/* any other rule for a register replaces its expression */
		const char *colon = strchr(op, ':');
		int reg = colon ? raw_reg(colon, ": ") : -1;
		if (reg >= 0)
			r->cur.reg[reg][0] = '\0';
	}
	snapshot(f, &r->cur);
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct ref_row *a = pa, *b = pb;
	if (a->loc != b->loc)
		return a->loc < b->loc ? -1 : 1;
	return (a->fde > b->fde) - (a->fde < b->fde);
}

/* Parses all three dumps of `path`. */
static void ref_load(const char *path, struct ref *r)
{
	memset(r, 0, sizeof(*r));
	r->cur_fde = r->cur_cie = -1;
	run_lines("readelf -lW '%s'", path, exec_line, r);
	assert_true(r->n_exec > 0);
	run_lines("readelf --debug-dump=frames-interp '%s'", path, interp_line, r);
	r->cur_fde = -1;
	r->in_debug = false;
	run_lines("readelf --debug-dump=frames '%s'", path, raw_line, r);

	/* FDEs whose interpretation printed no row keep their CIE's initial
	 * row (readelf prints none when no instruction changes it) */
	bool *has_row = xcalloc(r->n_fdes, sizeof(bool));
	for (size_t i = 0; i < r->n_rows; i++)
		has_row[r->rows[i].fde] = true;
	for (size_t i = 0; i < r->n_fdes; i++) {
		if (has_row[i])
			continue;
		const struct ref_cie *ci = find_cie(r, r->fdes[i].debug, r->fdes[i].cie);
		assert_non_null(ci);
		r->rows = grow(r->rows, &r->cap_rows, r->n_rows + 1, sizeof(*r->rows));
		struct ref_row *row = &r->rows[r->n_rows++];
		memset(row, 0, sizeof(*row));
		row->loc = r->fdes[i].lo;
		row->fde = i;
		memcpy(row->cfa, ci->cfa, sizeof(row->cfa));
		memcpy(row->ra, ci->ra, sizeof(row->ra));
	}
	free(has_row);
	qsort(r->rows, r->n_rows, sizeof(*r->rows), row_cmp);
	/* a row ends at the next row of its FDE, or at the FDE's end */
	uint64_t *next = xcalloc(r->n_fdes, sizeof(uint64_t));
	for (size_t i = r->n_rows; i-- > 0;) {
		struct ref_row *row = &r->rows[i];
		row->end = next[row->fde] ? next[row->fde] : r->fdes[row->fde].hi;
		next[row->fde] = row->loc;
	}
	free(next);
	assert_true(r->n_rows > 0);
}

static void ref_free(struct ref *r)
{
	for (size_t i = 0; i < r->n_fdes; i++)
		free(r->fdes[i].ex);
	free(r->fdes);
	free(r->rows);
	free(r->cies);
}

/* Is `a` inside an .eh_frame FDE? (those win over .debug_frame) */
static bool eh_covers(const struct ref *r, uint64_t a)
{
	for (size_t i = 0; i < r->n_fdes; i++)
		if (!r->fdes[i].debug && a >= r->fdes[i].lo && a < r->fdes[i].hi &&
		    in_exec(r, r->fdes[i].lo) && in_exec(r, r->fdes[i].hi - 1))
			return true;
	return false;
}

static const struct expr_state *expr_at(const struct ref_fde *f, uint64_t a)
{
	static const struct expr_state none;
	const struct expr_state *s = &none;
	for (size_t i = 0; i < f->n_ex && f->ex[i].loc <= a; i++)
		s = &f->ex[i];
	return s;
}

/* ---- expected bodies ------------------------------------------------------ */

/* A single "DW_OP_bregN (name): OFF" expression. */
static bool parse_breg(const char *e, int *reg, long long *off)
{
	int n = 0;
	return sscanf(e, "DW_OP_breg%d (%*[a-z0-9]): %lld%n", reg, off, &n) == 2 && e[n] == '\0';
}

/* Expected register rule from a readelf column value (and the raw
 * expression for "exp"). */
static void expect_reg(const char *v, const char *expr, bool is_ra, __u8 *packed, __s16 *off)
{
	long long o = 0;
	int reg = 0, n = 0;
	int kind;

	*off = 0;
	if (v[0] == '\0' || strcmp(v, "u") == 0) {
		kind = is_ra ? OPAL_REG_UNDEFINED : OPAL_REG_SAME;
	} else if (strcmp(v, "s") == 0) {
		kind = OPAL_REG_SAME;
	} else if ((v[0] == 'c' || v[0] == 'v') && sscanf(v + 1, "%lld%n", &o, &n) == 1 &&
		   v[1 + n] == '\0') {
		kind = v[0] == 'c' ? OPAL_REG_AT_CFA : OPAL_REG_VAL_CFA;
		if (o < INT16_MIN || o > INT16_MAX)
			kind = OPAL_REG_UNSUPPORTED, o = 0;
	} else if (v[0] == 'r' && sscanf(v + 1, "%d", &reg) == 1) {
		kind = reg <= 15 ? OPAL_REG_IN_REG : OPAL_REG_UNSUPPORTED;
		if (kind == OPAL_REG_UNSUPPORTED)
			reg = 0;
	} else if (strcmp(v, "exp") == 0 && parse_breg(expr, &reg, &o) && reg <= 15 &&
		   o >= INT16_MIN && o <= INT16_MAX) {
		kind = OPAL_REG_AT_REG;
	} else {
		kind = OPAL_REG_UNSUPPORTED;
		reg = 0;
		o = 0;
	}
	*packed = OPAL_UNWIND_PACK(kind, reg);
	*off = (__s16)o;
}

static void invalid(struct opal_unwind_body *b, int why)
{
	memset(b, 0, sizeof(*b));
	b->cfa = OPAL_UNWIND_PACK(OPAL_CFA_INVALID, 0);
	b->aux = (__s16)why;
}

/* The CFA rule for a def_cfa_expression as readelf prints it. */
static bool expect_cfa_expr(const char *e, struct opal_unwind_body *b)
{
	char ops[12][64];
	size_t n = 0;
	int reg;
	long long off, add, k;

	for (const char *s = e; *s && n < 12;) {
		const char *semi = strstr(s, "; ");
		size_t len = semi ? (size_t)(semi - s) : strlen(s);
		snprintf(ops[n++], 64, "%.*s", (int)len, s);
		s += len + (semi ? 2 : 0);
	}
	if (n == 0 || !parse_breg(ops[0], &reg, &off) || reg > 15)
		return false;
	b->cfa_off = (__s32)off;
	if (n == 1) {
		b->cfa = OPAL_UNWIND_PACK(OPAL_CFA_REG, reg);
		return true;
	}
	if (strcmp(ops[1], "DW_OP_deref") == 0 &&
	    (n == 2 || (n == 3 && sscanf(ops[2], "DW_OP_plus_uconst: %lld", &add) == 1))) {
		b->cfa = OPAL_UNWIND_PACK(OPAL_CFA_DEREF, reg);
		b->aux = n == 3 ? (__s16)add : 0;
		return true;
	}
	if (n == 9 && reg == 7 && strcmp(ops[1], "DW_OP_breg16 (rip): 0") == 0 &&
	    strcmp(ops[2], "DW_OP_lit15") == 0 && strcmp(ops[3], "DW_OP_and") == 0 &&
	    sscanf(ops[4], "DW_OP_lit%lld", &k) == 1 && strcmp(ops[5], "DW_OP_ge") == 0 &&
	    strcmp(ops[6], "DW_OP_lit3") == 0 && strcmp(ops[7], "DW_OP_shl") == 0 &&
	    strcmp(ops[8], "DW_OP_plus") == 0) {
		b->cfa = OPAL_UNWIND_PACK(OPAL_CFA_PLT, 7);
		b->aux = (__s16)k;
		return true;
	}
	return false;
}

/* What opal must produce for `row` at address `a`, from readelf alone.
 * The order of the INVALID checks is the documented one. */
static void expect_body(const struct ref *r, const struct ref_row *row, uint64_t a,
			struct opal_unwind_body *b)
{
	const struct ref_fde *f = &r->fdes[row->fde];
	const struct expr_state *ex = expr_at(f, a);

	memset(b, 0, sizeof(*b));
	if (f->signal) {
		/* the kernel's rt_sigframe, as glibc's __restore_rt describes it */
		if (strcmp(ex->cfa, "DW_OP_breg7 (rsp): 160; DW_OP_deref") != 0 ||
		    strcmp(ex->reg[16], "DW_OP_breg7 (rsp): 168") != 0 ||
		    strcmp(ex->reg[7], "DW_OP_breg7 (rsp): 160") != 0 ||
		    strcmp(ex->reg[6], "DW_OP_breg7 (rsp): 120") != 0 ||
		    strcmp(ex->reg[3], "DW_OP_breg7 (rsp): 128") != 0) {
			invalid(b, OPAL_INVALID_SIGNAL);
			return;
		}
		b->cfa = OPAL_UNWIND_PACK(OPAL_CFA_SIGNAL, 7);
		b->ra = OPAL_UNWIND_PACK(OPAL_REG_AT_REG, 7);
		b->ra_off = 168;
		b->rbp = OPAL_UNWIND_PACK(OPAL_REG_AT_REG, 7);
		b->rbp_off = 120;
		b->rbx = OPAL_UNWIND_PACK(OPAL_REG_AT_REG, 7);
		b->rbx_off = 128;
		return;
	}
	if (strcmp(row->cfa, "exp") == 0) {
		if (!expect_cfa_expr(ex->cfa, b)) {
			invalid(b, OPAL_INVALID_CFA_EXPR);
			return;
		}
	} else {
		char name[16];
		long long off;
		int n = 0;
		if (sscanf(row->cfa, "%15[a-z0-9]%lld%n", name, &off, &n) != 2 ||
		    row->cfa[n] != '\0' || dwarf_reg(name) < 0 || dwarf_reg(name) > 15)
			fail_msg("unexpected CFA '%s' at %" PRIx64, row->cfa, a);
		b->cfa = OPAL_UNWIND_PACK(OPAL_CFA_REG, dwarf_reg(name));
		b->cfa_off = (__s32)off;
	}
	if (row->rsp[0] && strcmp(row->rsp, "u") != 0 && strcmp(row->rsp, "v+0") != 0) {
		invalid(b, OPAL_INVALID_RSP);
		return;
	}
	expect_reg(row->ra, ex->reg[16], true, &b->ra, &b->ra_off);
	if (OPAL_UNWIND_KIND(b->ra) == OPAL_REG_SAME ||
	    OPAL_UNWIND_KIND(b->ra) == OPAL_REG_UNSUPPORTED) {
		invalid(b, OPAL_INVALID_RA);
		return;
	}
	expect_reg(row->rbp, ex->reg[6], false, &b->rbp, &b->rbp_off);
	expect_reg(row->rbx, ex->reg[3], false, &b->rbx, &b->rbx_off);
}

struct check {
	size_t checked, mismatches, gaps;
};

static void check_addr(const struct opal_unwind_table *t, uint64_t a,
		       const struct opal_unwind_body *want, const char *what, struct check *c)
{
	const struct opal_unwind_body *got = opal_unwind_table_lookup(t, a, NULL, NULL);
	c->checked++;
	if (memcmp(got, want, sizeof(*want)) == 0)
		return;
	if (c->mismatches++ < 20) {
		char g[160], w[160];
		print_message("%" PRIx64 " (%s): got %s, want %s\n", a, what,
			      test_unwind_body_format(got, g, sizeof(g)),
			      test_unwind_body_format(want, w, sizeof(w)));
	}
}

/* Structural invariants every table must satisfy. */
static void check_invariants(const struct opal_unwind_table *t)
{
	assert_true(t->n_rules >= 1);
	assert_true(t->n_bodies >= 1);
	assert_true(t->n_rules <= OPAL_UNWIND_MAX_RULES);
	assert_int_equal(OPAL_UNWIND_KIND(t->bodies[0].cfa), OPAL_CFA_GAP);
	assert_int_equal(t->rules[t->n_rules - 1].body, 0);
	assert_int_equal(t->rules[0].addr, 0);
	for (uint32_t i = 0; i < t->n_rules; i++) {
		assert_true(t->rules[i].body < t->n_bodies);
		if (i > 0) {
			assert_true(t->rules[i].addr > t->rules[i - 1].addr);
			assert_true(t->rules[i].body != t->rules[i - 1].body);
		}
	}
	for (uint32_t i = 1; i < t->n_bodies; i++)
		assert_int_not_equal(OPAL_UNWIND_KIND(t->bodies[i].cfa), OPAL_CFA_GAP);
	assert_int_equal(t->stats.rules, t->n_rules);
	assert_int_equal(t->stats.bodies, t->n_bodies);
	assert_int_equal(t->stats.bytes, (uint64_t)t->n_rules * 8 + (uint64_t)t->n_bodies * 16);
}

/* Compares `t` with readelf at the start, middle and last byte of every
 * row (eh_frame rows first; .debug_frame rows only where no .eh_frame FDE
 * covers the address) and at both edges of every uncovered range inside
 * executable segments. Returns the number of addresses checked. */
static size_t check_against_readelf(const struct opal_unwind_table *t, const char *path)
{
	struct ref r;
	struct check c = {0};
	static const struct opal_unwind_body gap;

	ref_load(path, &r);
	check_invariants(t);
	for (size_t i = 0; i < r.n_rows; i++) {
		const struct ref_row *row = &r.rows[i];
		const struct ref_fde *f = &r.fdes[row->fde];
		if (row->end <= row->loc || !in_exec(&r, f->lo) || !in_exec(&r, f->hi - 1))
			continue;
		uint64_t probes[3] = { row->loc, row->loc + (row->end - row->loc) / 2, row->end - 1 };
		for (int k = 0; k < 3; k++) {
			struct opal_unwind_body want;
			if (f->debug && eh_covers(&r, probes[k]))
				continue;
			expect_body(&r, row, probes[k], &want);
			check_addr(t, probes[k], &want, f->debug ? "debug_frame row" : "eh_frame row",
				   &c);
		}
	}
	/* uncovered ranges between the FDEs */
	struct { uint64_t lo, hi; } *ranges = xcalloc(r.n_fdes, sizeof(*ranges));
	size_t n = 0;
	for (size_t i = 0; i < r.n_fdes; i++)
		if (r.fdes[i].hi > r.fdes[i].lo && in_exec(&r, r.fdes[i].lo) &&
		    in_exec(&r, r.fdes[i].hi - 1)) {
			ranges[n].lo = r.fdes[i].lo;
			ranges[n++].hi = r.fdes[i].hi;
		}
	for (size_t i = 1; i < n; i++)   /* insertion sort by lo: n is small enough */
		for (size_t j = i; j > 0 && ranges[j - 1].lo > ranges[j].lo; j--) {
			__typeof__(*ranges) tmp = ranges[j];
			ranges[j] = ranges[j - 1];
			ranges[j - 1] = tmp;
		}
	uint64_t covered = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && ranges[i].lo > covered) {
			check_addr(t, covered, &gap, "gap start", &c);
			check_addr(t, ranges[i].lo - 1, &gap, "gap end", &c);
			c.gaps++;
		}
		if (ranges[i].hi > covered)
			covered = ranges[i].hi;
	}
	if (n > 0) {
		check_addr(t, covered, &gap, "after the last FDE", &c);
		check_addr(t, ranges[0].lo - 1, &gap, "before the first FDE", &c);
	}
	free(ranges);
	ref_free(&r);
	if (c.mismatches)
		fail_msg("%s: %zu of %zu addresses differ from readelf", path, c.mismatches,
			 c.checked);
	return c.checked;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_fixture_matches_readelf(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	build_ok(fixture("frames"), &t);
	size_t n = check_against_readelf(&t, fixture("frames"));
	assert_true(n > 300);
	/* debug_frame_only.c's three functions come from .debug_frame; the
	 * .debug_frame copy of both_sections.S's FDE is shadowed by .eh_frame */
	assert_int_equal(t.stats.fdes_debug, 3);
	assert_int_equal(t.stats.cfi_errors, 0);
	opal_unwind_table_free(&t);
}

static void test_libc_matches_readelf(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	build_ok(LIBC, &t);
	size_t n = check_against_readelf(&t, LIBC);
	assert_true(n > 50000);
	assert_int_equal(t.stats.cfi_errors, 0);
	print_message("libc: %u rules, %u bodies, %" PRIu64 " bytes, %u FDEs, %u rows\n",
		      t.n_rules, t.n_bodies, t.stats.bytes, t.stats.fdes_eh, t.stats.rows);
	opal_unwind_table_free(&t);
}

static void test_ldso_matches_readelf(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	build_ok(LDSO, &t);
	check_against_readelf(&t, LDSO);
	opal_unwind_table_free(&t);
}

static const struct opal_unwind_body *at(const struct opal_unwind_table *t, uint64_t a)
{
	return opal_unwind_table_lookup(t, a, NULL, NULL);
}

static void assert_cfa(const struct opal_unwind_body *b, int kind, int reg, int off)
{
	char buf[160];
	if (OPAL_UNWIND_KIND(b->cfa) != kind || OPAL_UNWIND_REG(b->cfa) != reg || b->cfa_off != off)
		fail_msg("got %s, want CFA kind %d reg %d off %d",
			 test_unwind_body_format(b, buf, sizeof(buf)), kind, reg, off);
}

static void assert_reg(__u8 packed, __s16 off, int kind, int reg, int want_off)
{
	if (OPAL_UNWIND_KIND(packed) != kind || OPAL_UNWIND_REG(packed) != reg || off != want_off)
		fail_msg("register rule kind %d reg %d off %d, want kind %d reg %d off %d",
			 OPAL_UNWIND_KIND(packed), OPAL_UNWIND_REG(packed), off, kind, reg, want_off);
}

/* Each hand-written rule kind of cfi_kinds.S, as stated there. */
static void test_fixture_rule_kinds(void **state)
{
	(void)state;
	const char *f = fixture("frames");
	struct opal_unwind_table t;
	const struct opal_unwind_body *b;
	build_ok(f, &t);

	b = at(&t, sym_addr(f, "kind_rbx_cfa_body", false));
	assert_cfa(b, OPAL_CFA_REG, OPAL_DWARF_RBX, 32);
	assert_reg(b->rbx, b->rbx_off, OPAL_REG_AT_CFA, 0, -16);
	assert_reg(b->ra, b->ra_off, OPAL_REG_AT_CFA, 0, -8);

	b = at(&t, sym_addr(f, "kind_ra_in_reg_body", false));
	assert_cfa(b, OPAL_CFA_REG, OPAL_DWARF_RSP, 0);
	assert_reg(b->ra, b->ra_off, OPAL_REG_IN_REG, 5, 0);

	b = at(&t, sym_addr(f, "kind_outermost_body", false));
	assert_reg(b->ra, b->ra_off, OPAL_REG_UNDEFINED, 0, 0);

	for (uint64_t a = sym_addr(f, "kind_signal_pre", false);
	     a <= sym_addr(f, "kind_signal", false) + 1; a++) {
		b = at(&t, a);
		assert_cfa(b, OPAL_CFA_SIGNAL, OPAL_DWARF_RSP, 0);
		assert_reg(b->ra, b->ra_off, OPAL_REG_AT_REG, OPAL_DWARF_RSP, OPAL_SIGFRAME_RIP);
		assert_reg(b->rbp, b->rbp_off, OPAL_REG_AT_REG, OPAL_DWARF_RSP, OPAL_SIGFRAME_RBP);
		assert_reg(b->rbx, b->rbx_off, OPAL_REG_AT_REG, OPAL_DWARF_RSP, OPAL_SIGFRAME_RBX);
	}
	b = at(&t, sym_addr(f, "kind_signal_bad", false) + 1);
	assert_cfa(b, OPAL_CFA_INVALID, 0, 0);
	assert_int_equal(b->aux, OPAL_INVALID_SIGNAL);

	b = at(&t, sym_addr(f, "kind_cfa_unsupported_body", false));
	assert_cfa(b, OPAL_CFA_INVALID, 0, 0);
	assert_int_equal(b->aux, OPAL_INVALID_CFA_EXPR);

	b = at(&t, sym_addr(f, "kind_rsp_in_reg_body", false));
	assert_cfa(b, OPAL_CFA_INVALID, 0, 0);
	assert_int_equal(b->aux, OPAL_INVALID_RSP);

	b = at(&t, sym_addr(f, "kind_deref_add_body", false));
	assert_cfa(b, OPAL_CFA_DEREF, OPAL_DWARF_RSP, 16);
	assert_int_equal(b->aux, 8);

	b = at(&t, sym_addr(f, "kind_regs_body", false));
	assert_reg(b->rbp, b->rbp_off, OPAL_REG_VAL_CFA, 0, -16);
	assert_reg(b->rbx, b->rbx_off, OPAL_REG_AT_REG, OPAL_DWARF_RBP, -8);
	assert_reg(b->ra, b->ra_off, OPAL_REG_AT_CFA, 0, -16);

	b = at(&t, sym_addr(f, "kind_regs2_body", false));
	assert_reg(b->rbp, b->rbp_off, OPAL_REG_IN_REG, 9, 0);
	assert_reg(b->rbx, b->rbx_off, OPAL_REG_UNSUPPORTED, 0, 0);
	assert_true(t.stats.unsupported_regs >= 1);

	b = at(&t, sym_addr(f, "kind_cfa_r10_body", false));
	assert_cfa(b, OPAL_CFA_REG, 10, 0);

	uint64_t nocfi = sym_addr(f, "kind_nocfi", false);
	uint64_t start, end;
	b = opal_unwind_table_lookup(&t, nocfi + 1, &start, &end);
	assert_int_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);
	assert_true(start <= nocfi && end >= nocfi + 3);

	assert_int_equal(t.stats.invalid_rows, 3);   /* signal_bad, cfa_unsupported, rsp_in_reg */
	opal_unwind_table_free(&t);
}

/* The C fixtures: large frame, RBP-based CFA (alloca, realignment), DRAP,
 * _start's undefined return address, the PLT expression and .debug_frame. */
static void test_fixture_frames(void **state)
{
	(void)state;
	const char *f = fixture("frames");
	struct opal_unwind_table t;
	build_ok(f, &t);

	/* a 200000-byte frame: the CFA offset exceeds 16 bits somewhere */
	uint64_t large = sym_addr(f, "frames_large", false);
	bool big = false;
	for (uint64_t a = large; a < large + 64; a++)
		big |= OPAL_UNWIND_KIND(at(&t, a)->cfa) == OPAL_CFA_REG && at(&t, a)->cfa_off > 200000;
	assert_true(big);

	/* alloca and realignment move the CFA to RBP + 16 */
	for (int k = 0; k < 2; k++) {
		uint64_t fn = sym_addr(f, k ? "frames_realign" : "frames_alloca", false);
		bool rbp = false;
		for (uint64_t a = fn; a < fn + 64; a++)
			rbp |= at(&t, a)->cfa == OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RBP) &&
			       at(&t, a)->cfa_off == 16;
		assert_true(rbp);
	}

	/* DRAP: CFA = *(RBP - k) with RBP saved at [RBP] */
	uint64_t drap = sym_addr(f, "frames_drap", false);
	bool deref = false;
	for (uint64_t a = drap; a < drap + 256; a++) {
		const struct opal_unwind_body *b = at(&t, a);
		if (b->cfa == OPAL_UNWIND_PACK(OPAL_CFA_DEREF, OPAL_DWARF_RBP) && b->cfa_off < 0 &&
		    b->aux == 0 && b->rbp == OPAL_UNWIND_PACK(OPAL_REG_AT_REG, OPAL_DWARF_RBP) &&
		    b->rbp_off == 0)
			deref = true;
	}
	assert_true(deref);

	/* _start (crt1.o): outermost frame */
	const struct opal_unwind_body *b = at(&t, sym_addr(f, "_start", false));
	assert_int_equal(OPAL_UNWIND_KIND(b->ra), OPAL_REG_UNDEFINED);

	/* .plt: PLT0 pushes twice, then each 16-byte entry uses the psABI
	 * expression (threshold 11: past the entry's jmp) */
	uint64_t plt = section_addr(f, ".plt");
	assert_cfa(at(&t, plt), OPAL_CFA_REG, OPAL_DWARF_RSP, 16);
	assert_cfa(at(&t, plt + 6), OPAL_CFA_REG, OPAL_DWARF_RSP, 24);
	for (uint64_t a = plt + 16; a < plt + 48; a++) {
		b = at(&t, a);
		assert_cfa(b, OPAL_CFA_PLT, OPAL_DWARF_RSP, 8);
		assert_int_equal(b->aux, 11);
	}

	/* debug_frame_only.c has no .eh_frame FDE: its rules come from
	 * .debug_frame and save RBX */
	uint64_t df = sym_addr(f, "df_caller", false);
	bool rbx = false;
	for (uint64_t a = df; a < df + 32; a++) {
		b = at(&t, a);
		assert_int_not_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);
		rbx |= OPAL_UNWIND_KIND(b->rbx) == OPAL_REG_AT_CFA;
	}
	assert_true(rbx);
	opal_unwind_table_free(&t);
}

/* glibc's special frames: __restore_rt (the only 'S' FDE), vfork (return
 * address in RDI, glibc sysdeps/unix/sysv/linux/x86_64/vfork.S), clone and
 * clone3 child paths (undefined return address), and its .plt. */
static void test_libc_special_frames(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	struct ref r;
	build_ok(LIBC, &t);
	ref_load(LIBC, &r);

	size_t signals = 0, outermost = 0;
	for (size_t i = 0; i < r.n_fdes; i++) {
		if (!r.fdes[i].signal)
			continue;
		signals++;
		/* the FDE starts one byte before __restore_rt so that a lookup
		 * of the return address minus one still finds it */
		for (uint64_t a = r.fdes[i].lo; a < r.fdes[i].hi; a++)
			assert_cfa(at(&t, a), OPAL_CFA_SIGNAL, OPAL_DWARF_RSP, 0);
	}
	assert_int_equal(signals, 1);

	uint64_t vfork = sym_addr(LIBC, "vfork", true);
	const struct opal_unwind_body *b = at(&t, vfork + 1);
	assert_cfa(b, OPAL_CFA_REG, OPAL_DWARF_RSP, 0);
	assert_reg(b->ra, b->ra_off, OPAL_REG_IN_REG, 5, 0);
	assert_cfa(at(&t, vfork), OPAL_CFA_REG, OPAL_DWARF_RSP, 8);

	uint64_t clone = sym_addr(LIBC, "clone", true);
	bool clone_outermost = false;
	for (size_t i = 0; i < r.n_rows; i++) {
		if (strcmp(r.rows[i].ra, "u") != 0)
			continue;
		outermost++;
		assert_int_equal(OPAL_UNWIND_KIND(at(&t, r.rows[i].loc)->ra), OPAL_REG_UNDEFINED);
		clone_outermost |= r.rows[i].loc > clone && r.rows[i].loc < clone + 256;
	}
	assert_true(outermost >= 2);   /* clone and clone3 */
	assert_true(clone_outermost);

	uint64_t plt = section_addr(LIBC, ".plt");
	b = at(&t, plt + 16);
	assert_cfa(b, OPAL_CFA_PLT, OPAL_DWARF_RSP, 8);
	ref_free(&r);
	opal_unwind_table_free(&t);
}

/* ld.so's lazy-binding trampolines: CFA = RBX + off, RBX saved in the
 * frame (readelf prints "rbx+N"). */
static void test_ldso_rbx_cfa(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	struct ref r;
	build_ok(LDSO, &t);
	ref_load(LDSO, &r);
	size_t found = 0;
	for (size_t i = 0; i < r.n_rows; i++) {
		long long off;
		if (sscanf(r.rows[i].cfa, "rbx+%lld", &off) != 1)
			continue;
		const struct opal_unwind_body *b = at(&t, r.rows[i].loc);
		assert_cfa(b, OPAL_CFA_REG, OPAL_DWARF_RBX, (int)off);
		assert_int_equal(OPAL_UNWIND_KIND(b->rbx), OPAL_REG_AT_CFA);
		found++;
	}
	assert_true(found >= 2);
	ref_free(&r);
	opal_unwind_table_free(&t);
}

static void assert_same_table(const struct opal_unwind_table *a, const struct opal_unwind_table *b)
{
	assert_int_equal(a->base, b->base);
	assert_int_equal(a->n_rules, b->n_rules);
	assert_int_equal(a->n_bodies, b->n_bodies);
	assert_memory_equal(a->rules, b->rules, a->n_rules * sizeof(*a->rules));
	assert_memory_equal(a->bodies, b->bodies, a->n_bodies * sizeof(*a->bodies));
}

static uint8_t *read_file(const char *path, size_t *size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	uint8_t *buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*size = (size_t)st.st_size;
	return buf;
}

static void test_memory_image_equals_file(void **state)
{
	(void)state;
	struct opal_unwind_table a, b;
	size_t size;
	uint8_t *img = read_file(LIBC, &size);
	build_ok(LIBC, &a);
	assert_int_equal(opal_unwind_table_build_mem(img, size, NULL, &b), 0);
	assert_same_table(&a, &b);
	opal_unwind_table_free(&a);
	opal_unwind_table_free(&b);
	free(img);
}

/* Compressed .debug_frame (SHF_COMPRESSED, and GNU .zdebug_frame),
 * inflated by libelf: the same table. */
static void test_compressed_debug_frame(void **state)
{
	(void)state;
	struct opal_unwind_table a, b;
	build_ok(fixture("frames"), &a);
	for (int k = 0; k < 2; k++) {
		build_ok(fixture(k ? "frames-zgnu" : "frames-zdebug"), &b);
		assert_int_equal(b.stats.fdes_debug, 3);
		assert_same_table(&a, &b);
		opal_unwind_table_free(&b);
	}
	opal_unwind_table_free(&a);
}

/* The vDSO exists only in memory: its image, copied out of this process
 * (as the collector copies it out of a profiled one), gives the same
 * rules readelf reads from a file copy of it. */
static void test_vdso_image(void **state)
{
	(void)state;
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	uint64_t lo = 0, hi = 0;
	assert_non_null(maps);
	while (fgets(line, sizeof(line), maps))
		if (strstr(line, "[vdso]"))
			sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi);
	fclose(maps);
	if (lo == 0)
		fail_msg("no [vdso] mapping in /proc/self/maps (a kernel booted with vdso=0?): "
			 "the collector unwinds vDSO frames from this image");
	size_t size = (size_t)(hi - lo);
	uint8_t *img = malloc(size);
	assert_non_null(img);
	memcpy(img, (const void *)(uintptr_t)lo, size);

	struct opal_unwind_table t;
	assert_int_equal(opal_unwind_table_build_mem(img, size, NULL, &t), 0);
	assert_true(t.stats.fdes_eh > 0);

	char path[] = "/tmp/opal-vdso.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, img, size), (ssize_t)size);
	close(fd);
	check_against_readelf(&t, path);
	unlink(path);
	opal_unwind_table_free(&t);
	free(img);
}

struct fde_find {
	uint64_t lo, offset;
	bool found, in_eh;
};

static void fde_line(const char *line, void *ctx)
{
	struct fde_find *f = ctx;
	uint64_t off, lo;
	if (strstr(line, "Contents of the .eh_frame section"))
		f->in_eh = true;
	else if (strstr(line, "Contents of the"))
		f->in_eh = false;
	if (f->in_eh && !f->found &&
	    sscanf(line, "%" SCNx64 " %*x %*x FDE cie=%*x pc=%" SCNx64, &off, &lo) == 2 &&
	    lo == f->lo) {
		f->offset = off;
		f->found = true;
	}
}

/* File offset of the .eh_frame FDE starting at `lo` (readelf). */
static uint64_t eh_fde_file_offset(const char *path, uint64_t lo)
{
	struct fde_find f = { .lo = lo };
	run_lines("readelf --debug-dump=frames '%s'", path, fde_line, &f);
	assert_true(f.found);
	return section_field(path, ".eh_frame", 4) + f.offset;
}

/* libdw only sees the FDE chain opal walks: .eh_frame_hdr is not used, and
 * FDEs that overlap (libdw could pick either) are left out as GAPs. */
static void test_hdr_ignored_and_overlaps_dropped(void **state)
{
	(void)state;
	const char *f = fixture("frames");
	struct opal_unwind_table a, b;
	size_t size;
	uint8_t *img = read_file(f, &size);
	build_ok(f, &a);

	/* garbage search table */
	uint64_t hdr = section_field(f, ".eh_frame_hdr", 4);
	uint8_t *copy = malloc(size);
	assert_non_null(copy);
	memcpy(copy, img, size);
	memset(copy + hdr + 4, 0x5a, section_field(f, ".eh_frame_hdr", 5) - 4);
	assert_int_equal(opal_unwind_table_build_mem(copy, size, NULL, &b), 0);
	assert_same_table(&a, &b);
	opal_unwind_table_free(&b);

	/* stretch kind_deref_add's FDE (length, CIE pointer, pc-relative
	 * sdata4 start, then the sdata4 range) over kind_regs */
	uint64_t deref = sym_addr(f, "kind_deref_add", false);
	uint64_t regs = sym_addr(f, "kind_regs", false);
	uint64_t range_off = eh_fde_file_offset(f, deref) + 12;
	memcpy(copy, img, size);
	uint32_t range = (uint32_t)(regs - deref + 2);
	memcpy(copy + range_off, &range, sizeof(range));
	assert_int_equal(opal_unwind_table_build_mem(copy, size, NULL, &b), 0);
	assert_int_equal(b.stats.fdes_skipped, a.stats.fdes_skipped + 2);
	assert_int_equal(OPAL_UNWIND_KIND(at(&b, deref + 1)->cfa), OPAL_CFA_GAP);
	assert_int_equal(OPAL_UNWIND_KIND(at(&b, regs + 1)->cfa), OPAL_CFA_GAP);
	assert_int_not_equal(OPAL_UNWIND_KIND(at(&a, regs + 1)->cfa), OPAL_CFA_GAP);
	check_invariants(&b);
	opal_unwind_table_free(&b);

	/* an FDE whose pointer encoding opal does not decode makes .eh_frame
	 * unusable: the first CIE's 'R' byte (length 4, id 4, version 1,
	 * "zR" 3, alignments 2, RA 1, data length 1) set from pcrel|sdata4 to
	 * datarel|sdata4 */
	uint64_t cie_r = section_field(f, ".eh_frame", 4) + 16;
	memcpy(copy, img, size);
	assert_int_equal(copy[cie_r], 0x1b);
	copy[cie_r] = 0x3b;
	assert_int_equal(opal_unwind_table_build_mem(copy, size, NULL, &b), -ENOEXEC);
	opal_unwind_table_free(&a);
	free(copy);
	free(img);
}

/* CFI programs that would make libdw allocate without bound are never
 * run: their FDEs read as GAP (bad_programs.S). */
static void test_bad_programs(void **state)
{
	(void)state;
	const char *f = fixture("badcfi");
	struct opal_unwind_table t;
	build_ok(f, &t);
	assert_int_equal(t.stats.fdes_skipped, 2);
	assert_int_equal(OPAL_UNWIND_KIND(at(&t, sym_addr(f, "bad_huge_register", false) + 1)->cfa),
			 OPAL_CFA_GAP);
	assert_int_equal(OPAL_UNWIND_KIND(at(&t, sym_addr(f, "bad_deep_remember", false) + 1)->cfa),
			 OPAL_CFA_GAP);
	assert_cfa(at(&t, sym_addr(f, "ok_remember_64", false) + 1), OPAL_CFA_REG, OPAL_DWARF_RSP, 16);
	const struct opal_unwind_body *b = at(&t, sym_addr(f, "main", false) + 1);
	assert_cfa(b, OPAL_CFA_REG, OPAL_DWARF_RSP, 16);
	assert_reg(b->rbx, b->rbx_off, OPAL_REG_AT_CFA, 0, -16);
	check_invariants(&t);
	opal_unwind_table_free(&t);
}

static bool prog_ok(const uint8_t *p, size_t n, struct opal_cfi_prog *out)
{
	opal_cfi_prog_check(p, p + n, DW_EH_PE_pcrel | DW_EH_PE_sdata4, out);
	return out->ok;
}

/* The instruction walk of unwind_prog.c on hand-assembled programs
 * (opcodes from DWARF 5 table 7.29). */
static void test_cfi_program_check(void **state)
{
	(void)state;
	struct opal_cfi_prog pr;
	/* def_cfa rsp 8; offset r16 1; advance 4; def_cfa_offset 16 */
	static const uint8_t normal[] = { 0x0c, 7, 8, 0x90, 1, 0x44, 0x0e, 16 };
	assert_true(prog_ok(normal, sizeof(normal), &pr));
	assert_int_equal(pr.max_reg, 16);
	assert_int_equal(pr.bytes, sizeof(normal));

	static const uint8_t reg255[] = { 0x07, 0xff, 0x01 };          /* undefined r255 */
	static const uint8_t reg256[] = { 0x07, 0x80, 0x02 };          /* undefined r256 */
	static const uint8_t expr_reg[] = { 0x10, 0x80, 0x02, 1, 0x70 }; /* expression r256 */
	assert_true(prog_ok(reg255, sizeof(reg255), &pr));
	assert_false(prog_ok(reg256, sizeof(reg256), &pr));
	assert_false(prog_ok(expr_reg, sizeof(expr_reg), &pr));

	static const uint8_t trunc_leb[] = { 0x05, 3, 0x80 };           /* offset_extended r3, cut */
	static const uint8_t trunc_block[] = { 0x0f, 5, 0x77, 0x08 };   /* 5-byte expression, 2 left */
	static const uint8_t trunc_adv[] = { 0x03, 0x01 };              /* advance_loc2, 1 byte */
	assert_false(prog_ok(trunc_leb, sizeof(trunc_leb), &pr));
	assert_false(prog_ok(trunc_block, sizeof(trunc_block), &pr));
	assert_false(prog_ok(trunc_adv, sizeof(trunc_adv), &pr));

	/* libdw stops at an unknown opcode: what follows is never run */
	static const uint8_t unknown[] = { 0x0e, 8, 0x3f, 0x07, 0x80, 0x80, 0x04 };
	assert_true(prog_ok(unknown, sizeof(unknown), &pr));

	uint8_t deep[2 * OPAL_CFI_MAX_DEPTH + 2];
	size_t n = 0;
	for (int i = 0; i < OPAL_CFI_MAX_DEPTH; i++)
		deep[n++] = 0x0a;                                       /* remember_state */
	assert_true(prog_ok(deep, n, &pr));
	assert_int_equal(pr.remembers, OPAL_CFI_MAX_DEPTH);
	deep[n++] = 0x0b;                                               /* restore_state */
	deep[n++] = 0x0a;
	assert_true(prog_ok(deep, n, &pr));
	deep[n++] = 0x0a;
	assert_false(prog_ok(deep, n, &pr));

	/* each lookup is charged both programs and a state copy per remember */
	struct opal_cfi_prog cie = { .ok = true, .max_reg = 16, .bytes = 10 };
	struct opal_cfi_prog fde = { .ok = true, .max_reg = 6, .remembers = 2, .bytes = 100 };
	uint64_t one = opal_cfi_lookup_cost(&cie, &fde);
	fde.remembers = 3;
	assert_true(opal_cfi_lookup_cost(&cie, &fde) > one);
	assert_true(one > 110);
}

static void test_lookup_edges(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	uint64_t start, end;
	build_ok(fixture("frames"), &t);

	const struct opal_unwind_body *b = opal_unwind_table_lookup(&t, 0, &start, &end);
	assert_int_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);
	assert_int_equal(start, 0);
	assert_int_equal(end, t.base);

	b = opal_unwind_table_lookup(&t, t.base, &start, &end);
	assert_int_not_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);
	assert_int_equal(start, t.base);
	assert_int_equal(end, t.base + t.rules[1].addr);

	uint64_t last = t.base + t.rules[t.n_rules - 1].addr;
	b = opal_unwind_table_lookup(&t, last + 100, &start, &end);
	assert_int_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);
	assert_int_equal(start, last);
	assert_int_equal(end, UINT64_MAX);
	b = opal_unwind_table_lookup(&t, UINT64_MAX, NULL, NULL);
	assert_int_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);

	/* every rule start maps to itself */
	for (uint32_t i = 0; i < t.n_rules; i++) {
		b = opal_unwind_table_lookup(&t, t.base + t.rules[i].addr, &start, NULL);
		assert_ptr_equal(b, &t.bodies[t.rules[i].body]);
		assert_int_equal(start, t.base + t.rules[i].addr);
	}
	opal_unwind_table_free(&t);

	struct opal_unwind_table empty;
	memset(&empty, 0, sizeof(empty));
	b = opal_unwind_table_lookup(&empty, 0x1000, NULL, NULL);
	assert_int_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_GAP);
}

static void test_limits(void **state)
{
	(void)state;
	const char *f = fixture("frames");
	struct opal_unwind_limits lim;
	struct opal_unwind_table t;

	opal_unwind_limits_default(&lim);
	lim.max_rules = 10;
	assert_int_equal(build_path(f, &lim, &t), -E2BIG);
	assert_null(t.rules);

	opal_unwind_limits_default(&lim);
	lim.max_fdes = 3;
	assert_int_equal(build_path(f, &lim, &t), -E2BIG);

	opal_unwind_limits_default(&lim);
	lim.max_work = 1000;
	assert_int_equal(build_path(f, &lim, &t), -E2BIG);

	opal_unwind_limits_default(&lim);
	lim.max_section_bytes = 64;
	assert_int_equal(build_path(f, &lim, &t), -E2BIG);

	/* kind_many_rows has 49 rows: the rest past 8 becomes INVALID */
	opal_unwind_limits_default(&lim);
	lim.max_rows_per_fde = 8;
	assert_int_equal(build_path(f, &lim, &t), 0);
	assert_true(t.stats.truncated_fdes >= 1);
	uint64_t many = sym_addr(f, "kind_many_rows", false);
	assert_cfa(at(&t, many + 7), OPAL_CFA_REG, OPAL_DWARF_RSP, 64);
	const struct opal_unwind_body *b = at(&t, many + 8);
	assert_int_equal(OPAL_UNWIND_KIND(b->cfa), OPAL_CFA_INVALID);
	assert_int_equal(b->aux, OPAL_INVALID_ROW_LIMIT);
	assert_int_equal(OPAL_UNWIND_KIND(at(&t, many + 40)->cfa), OPAL_CFA_INVALID);
	check_invariants(&t);
	opal_unwind_table_free(&t);

	/* a .debug_frame above the section bound is ignored, not an error:
	 * frames-debugonly then has no FDE left (its .debug_frame is 176 bytes) */
	opal_unwind_limits_default(&lim);
	lim.max_section_bytes = 100;
	assert_int_equal(build_path(fixture("frames-debugonly"), &lim, &t), -ENODATA);
	lim.max_section_bytes = 1000;
	assert_int_equal(build_path(fixture("frames-debugonly"), &lim, &t), 0);
	assert_int_equal(t.stats.fdes_debug, 4);   /* debug_frame_only.c's 3, both_sections.S */
	opal_unwind_table_free(&t);
}

static void test_no_cfi_and_not_elf(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	assert_int_equal(build_path(fixture("frames-nocfi"), NULL, &t), -ENODATA);

	/* only .debug_frame left: those functions still unwind, others are gaps */
	const char *dbg = fixture("frames-debugonly");
	build_ok(dbg, &t);
	assert_int_equal(t.stats.fdes_eh, 0);
	assert_true(t.stats.fdes_debug >= 3);
	assert_int_not_equal(OPAL_UNWIND_KIND(at(&t, sym_addr(dbg, "df_caller", false))->cfa),
			     OPAL_CFA_GAP);
	assert_int_equal(OPAL_UNWIND_KIND(at(&t, sym_addr(dbg, "frames_alloca", false))->cfa),
			 OPAL_CFA_GAP);
	opal_unwind_table_free(&t);

	char text[] = "/tmp/opal-unwind-test.XXXXXX";
	int tfd = mkstemp(text);
	assert_true(tfd >= 0);
	assert_int_equal(write(tfd, "not an ELF file\n", 16), 16);
	assert_int_equal(opal_unwind_table_build(tfd, NULL, &t), -ENOEXEC);
	close(tfd);
	unlink(text);

	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(opal_unwind_table_build(fd, NULL, &t), -ENOEXEC);
	close(fd);
	assert_int_equal(opal_unwind_table_build(-1, NULL, &t), -EBADF);

	/* another machine */
	size_t size;
	uint8_t *img = read_file(fixture("frames"), &size);
	img[18] = 183;   /* e_machine = EM_AARCH64 */
	assert_int_equal(opal_unwind_table_build_mem(img, size, NULL, &t), -ENOEXEC);
	free(img);
	assert_int_equal(opal_unwind_table_build_mem("", 0, NULL, &t), -ENOEXEC);
}

/* The table of fixture `name` with the debug file at `debug` (a path). */
static int build_with_debug(const char *name, const char *debug, struct opal_unwind_table *t)
{
	int dfd = open(debug, O_RDONLY | O_CLOEXEC), fd = open(fixture(name), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && dfd >= 0);
	int rc = opal_unwind_table_build_debug(fd, dfd, NULL, t);
	close(fd);
	close(dfd);
	return rc;
}

/* CFI only in the .debug_frame of the separate debug file: frames-nocfi
 * with frames.debug gives frames-debugonly's table; a debug file whose
 * executable segment lies elsewhere (another link) is not used. */
static void test_debug_file_cfi(void **state)
{
	(void)state;
	struct opal_unwind_table ref, t;
	build_ok(fixture("frames-debugonly"), &ref);
	assert_int_equal(build_with_debug("frames-nocfi", fixture("frames.debug"), &t), 0);
	assert_true(t.stats.debug_file);
	assert_int_equal(t.stats.fdes_debug, ref.stats.fdes_debug);
	assert_same_table(&ref, &t);
	opal_unwind_table_free(&t);
	opal_unwind_table_free(&ref);

	assert_int_equal(build_with_debug("frames-nocfi", fixture("frames-moved.debug"), &t),
			 -ENODATA);
	/* a file with a .debug_frame of its own keeps it */
	build_ok(fixture("frames"), &ref);
	assert_int_equal(build_with_debug("frames", fixture("frames-moved.debug"), &t), 0);
	assert_false(t.stats.debug_file);
	assert_same_table(&ref, &t);
	opal_unwind_table_free(&t);
	opal_unwind_table_free(&ref);
	/* not an ELF file: left aside */
	build_ok(fixture("frames"), &ref);
	assert_int_equal(build_with_debug("frames", "/proc/self/status", &t), 0);
	assert_same_table(&ref, &t);
	opal_unwind_table_free(&t);
	opal_unwind_table_free(&ref);
}

/* Truncated and corrupted images: an error or a well-formed table, never
 * a crash (ASan and the fuzzer in tests/fuzz/ go further). */
static void test_truncated_and_corrupted(void **state)
{
	(void)state;
	struct opal_unwind_table t;
	size_t size;
	uint8_t *img = read_file(fixture("frames"), &size);
	size_t ok = 0, errors = 0;

	for (size_t len = 1; len < size; len += 61) {
		int rc = opal_unwind_table_build_mem(img, len, NULL, &t);
		if (rc == 0) {
			check_invariants(&t);
			ok++;
		} else {
			assert_true(rc == -ENOEXEC || rc == -ENODATA || rc == -E2BIG);
			errors++;
		}
		opal_unwind_table_free(&t);
	}
	assert_true(errors > 0);

	/* flip bits inside .eh_frame, .eh_frame_hdr and .debug_frame */
	uint64_t secs[3] = { section_field(fixture("frames"), ".eh_frame", 4),
			     section_field(fixture("frames"), ".eh_frame_hdr", 4),
			     section_field(fixture("frames"), ".debug_frame", 4) };
	uint32_t seed = 12345;
	for (int iter = 0; iter < 600; iter++) {
		uint8_t *copy = malloc(size);
		assert_non_null(copy);
		memcpy(copy, img, size);
		for (int k = 0; k < 4; k++) {
			seed = seed * 1103515245u + 12345u;
			uint64_t base = secs[(seed >> 8) % 3];
			uint64_t off = base + (seed >> 12) % 256;
			if (off < size)
				copy[off] ^= (uint8_t)(1u << ((seed >> 4) & 7));
		}
		int rc = opal_unwind_table_build_mem(copy, size, NULL, &t);
		if (rc == 0) {
			check_invariants(&t);
			ok++;
		}
		opal_unwind_table_free(&t);
		free(copy);
	}
	assert_true(ok > 0);
	free(img);
}

int main(void)
{
	const char *env = getenv("OPAL_FIXTURES");
	snprintf(fixture_dir, sizeof(fixture_dir), "%s/unwind", env ? env : "build/fixtures");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_matches_readelf),
		cmocka_unit_test(test_fixture_rule_kinds),
		cmocka_unit_test(test_fixture_frames),
		cmocka_unit_test(test_libc_matches_readelf),
		cmocka_unit_test(test_libc_special_frames),
		cmocka_unit_test(test_ldso_matches_readelf),
		cmocka_unit_test(test_ldso_rbx_cfa),
		cmocka_unit_test(test_memory_image_equals_file),
		cmocka_unit_test(test_compressed_debug_frame),
		cmocka_unit_test(test_hdr_ignored_and_overlaps_dropped),
		cmocka_unit_test(test_bad_programs),
		cmocka_unit_test(test_cfi_program_check),
		cmocka_unit_test(test_vdso_image),
		cmocka_unit_test(test_lookup_edges),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_no_cfi_and_not_elf),
		cmocka_unit_test(test_debug_file_cfi),
		cmocka_unit_test(test_truncated_and_corrupted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
