/* Configuration from defaults, JSON file (jansson), environment and flags
 * (config.h). Sources are applied in increasing precedence, each one
 * overwriting what the previous set. */
#include "shared/config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct loader {
	const struct opal_config_spec *spec;
	void *dst;
	enum opal_config_source *sources;
	char *why;
	size_t why_len;
};

static int fail(struct loader *l, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct loader *l, int err, const char *fmt, ...)
{
	va_list ap;

	if (l->why && l->why_len) {
		va_start(ap, fmt);
		vsnprintf(l->why, l->why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

static const char *src_name(enum opal_config_source s)
{
	switch (s) {
	case OPAL_SRC_FILE: return "config file";
	case OPAL_SRC_ENV: return "environment";
	case OPAL_SRC_FLAG: return "command line";
	default: return "default";
	}
}

static void *field(const struct opal_opt *o, void *dst)
{
	return (char *)dst + o->offset;
}

static const void *cfield(const struct opal_opt *o, const void *dst)
{
	return (const char *)dst + o->offset;
}

static void list_clear(struct opal_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void opal_config_free(const struct opal_config_spec *spec, void *dst)
{
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct opal_opt *o = &spec->opts[i];
		if (o->type == OPAL_OPT_STRING) {
			char **s = field(o, dst);
			free(*s);
			*s = NULL;
		} else if (o->type == OPAL_OPT_LIST) {
			list_clear(field(o, dst));
		}
	}
}

static bool in_choices(const struct opal_opt *o, const char *v)
{
	if (!o->choices)
		return true;
	for (const char *const *c = o->choices; *c; c++)
		if (strcmp(*c, v) == 0)
			return true;
	return false;
}

static int bad_choice(struct loader *l, const struct opal_opt *o, const char *v,
		      enum opal_config_source src)
{
	char allowed[512] = "";
	size_t used = 0;

	for (const char *const *c = o->choices; *c && used < sizeof(allowed); c++)
		used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s",
					 c == o->choices ? "" : ", ", *c);
	return fail(l, -EINVAL, "%s: '%s' (from %s) is not one of: %s", o->name, v,
		    src_name(src), allowed);
}

/* Decimal without sign; rejects overflow and empty text. */
static int parse_u64(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	*end = p;
	return 0;
}

static int parse_number(const struct opal_opt *o, const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v, mult = 1;
	int err = parse_u64(s, &v, &end);

	if (err)
		return err;
	if (o->type == OPAL_OPT_SIZE && *end) {
		switch (*end) {
		case 'k': case 'K': mult = 1ull << 10; break;
		case 'm': case 'M': mult = 1ull << 20; break;
		case 'g': case 'G': mult = 1ull << 30; break;
		default: return -EINVAL;
		}
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
	}
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Appends the comma-separated items of `s` (spaces around items trimmed,
 * empty items skipped) to `list`. */
static int list_append(struct loader *l, const struct opal_opt *o, struct opal_strlist *list,
		       const char *s, enum opal_config_source src)
{
	const char *p = s;

	while (*p) {
		const char *comma = strchr(p, ','), *e = comma ? comma : p + strlen(p);
		const char *b = p;
		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		const char *t = e;
		while (t > b && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		if (t > b) {
			if (list->n == OPAL_CONFIG_MAX_LIST)
				return fail(l, -EINVAL, "%s: more than %d values (from %s)", o->name,
					    OPAL_CONFIG_MAX_LIST, src_name(src));
			char *item = strndup(b, (size_t)(t - b));
			char **v = item ? realloc(list->v, (list->n + 1) * sizeof(*v)) : NULL;
			if (!v) {
				free(item);
				return fail(l, -ENOMEM, "out of memory");
			}
			list->v = v;
			list->v[list->n++] = item;
			if (!in_choices(o, item))
				return bad_choice(l, o, item, src);
		}
		p = comma ? comma + 1 : e;
	}
	return 0;
}

/* Sets option `i` from text. `append` (lists given by repeated flags) adds
 * to the list instead of replacing it. */
static int set_text(struct loader *l, size_t i, const char *s, enum opal_config_source src,
		    bool append)
{
	const struct opal_opt *o = &l->spec->opts[i];
	void *f = field(o, l->dst);
	uint64_t v;
	int err;

	if (strlen(s) > OPAL_CONFIG_MAX_VALUE)
		return fail(l, -EINVAL, "%s: value longer than %d bytes (from %s)", o->name,
			    OPAL_CONFIG_MAX_VALUE, src_name(src));
	switch (o->type) {
	case OPAL_OPT_STRING: {
		if (!in_choices(o, s))
			return bad_choice(l, o, s, src);
		char *copy = strdup(s);
		if (!copy)
			return fail(l, -ENOMEM, "out of memory");
		free(*(char **)f);
		*(char **)f = copy;
		break;
	}
	case OPAL_OPT_UINT:
	case OPAL_OPT_SIZE:
		err = parse_number(o, s, &v);
		if (err || ((o->min || o->max) && (v < o->min || v > o->max))) {
			if (o->min || o->max)
				return fail(l, -EINVAL,
					    "%s: '%s' (from %s) is not a number in [%llu, %llu]%s",
					    o->name, s, src_name(src), (unsigned long long)o->min,
					    (unsigned long long)o->max,
					    o->type == OPAL_OPT_SIZE ? " (k/m/g suffixes allowed)" : "");
			return fail(l, -EINVAL, "%s: '%s' (from %s) is not a number", o->name, s,
				    src_name(src));
		}
		*(uint64_t *)f = v;
		break;
	case OPAL_OPT_BOOL:
		if (parse_bool(s, (bool *)f) < 0)
			return fail(l, -EINVAL, "%s: '%s' (from %s) is not a boolean (true/false)",
				    o->name, s, src_name(src));
		break;
	case OPAL_OPT_LIST:
		if (!append)
			list_clear(f);
		if ((err = list_append(l, o, f, s, src)) < 0)
			return err;
		break;
	}
	if (l->sources)
		l->sources[i] = src;
	return 0;
}

static int find_opt(const struct opal_config_spec *spec, const char *name, size_t len)
{
	for (size_t i = 0; i < spec->n_opts; i++)
		if (strlen(spec->opts[i].name) == len && strncmp(spec->opts[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

static int read_file(struct loader *l, const char *path, char **buf, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	size_t got = 0;

	if (fd < 0) {
		err = -errno;
		return fail(l, err, "config file %s: %s", path, strerror(-err));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(l, -EINVAL, "config file %s: not a regular file", path);
	}
	if (st.st_size > OPAL_CONFIG_MAX_FILE) {
		close(fd);
		return fail(l, -EFBIG, "config file %s: larger than %u bytes", path,
			    OPAL_CONFIG_MAX_FILE);
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		close(fd);
		return fail(l, -ENOMEM, "out of memory");
	}
	/* Read until EOF, but never past the bound even if the file grew. */
	while (got <= OPAL_CONFIG_MAX_FILE) {
		char tmp[4096];
		ssize_t r = read(fd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			free(*buf);
			close(fd);
			return fail(l, err, "config file %s: %s", path, strerror(-err));
		}
		if (r == 0)
			break;
		if (got + (size_t)r > (size_t)st.st_size) {
			free(*buf);
			close(fd);
			return fail(l, -EINVAL, "config file %s: changed while being read", path);
		}
		memcpy(*buf + got, tmp, (size_t)r);
		got += (size_t)r;
	}
	close(fd);
	(*buf)[got] = '\0';
	*len = got;
	return 0;
}

static int apply_json_value(struct loader *l, size_t i, json_t *v, const char *path)
{
	const struct opal_opt *o = &l->spec->opts[i];
	char num[32];

	switch (o->type) {
	case OPAL_OPT_STRING:
		if (json_is_string(v))
			return set_text(l, i, json_string_value(v), OPAL_SRC_FILE, false);
		break;
	case OPAL_OPT_UINT:
	case OPAL_OPT_SIZE:
		if (json_is_integer(v) && json_integer_value(v) >= 0) {
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
			return set_text(l, i, num, OPAL_SRC_FILE, false);
		}
		if (json_is_string(v))
			return set_text(l, i, json_string_value(v), OPAL_SRC_FILE, false);
		break;
	case OPAL_OPT_BOOL:
		if (json_is_boolean(v))
			return set_text(l, i, json_is_true(v) ? "true" : "false", OPAL_SRC_FILE,
					false);
		break;
	case OPAL_OPT_LIST:
		if (json_is_string(v))
			return set_text(l, i, json_string_value(v), OPAL_SRC_FILE, false);
		if (json_is_array(v)) {
			size_t k;
			json_t *item;
			int err;
			list_clear(field(o, l->dst));
			json_array_foreach(v, k, item) {
				if (!json_is_string(item))
					return fail(l, -EINVAL, "%s: \"%s\" must hold strings only",
						    path, o->name);
				if ((err = set_text(l, i, json_string_value(item), OPAL_SRC_FILE,
						    true)) < 0)
					return err;
			}
			if (l->sources)
				l->sources[i] = OPAL_SRC_FILE;
			return 0;
		}
		break;
	}
	static const char *const want[] = { "a string", "a non-negative integer",
					    "an integer or a size string", "a boolean",
					    "an array of strings" };
	return fail(l, -EINVAL, "%s: \"%s\" must be %s", path, o->name, want[o->type]);
}

static int apply_file(struct loader *l, const char *path)
{
	char *buf;
	size_t len;
	json_error_t je;
	json_t *root, *v;
	const char *key;
	int err = read_file(l, path, &buf, &len);

	if (err < 0)
		return err;
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	free(buf);
	if (!root)
		return fail(l, -EINVAL, "config file %s:%d:%d: %s", path, je.line, je.column,
			    je.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return fail(l, -EINVAL, "config file %s: expected a JSON object", path);
	}
	err = 0;
	json_object_foreach(root, key, v) {
		int i = find_opt(l->spec, key, strlen(key));
		if (i < 0) {
			err = fail(l, -EINVAL, "config file %s: unknown option \"%s\"", path, key);
			break;
		}
		if ((err = apply_json_value(l, (size_t)i, v, path)) < 0)
			break;
	}
	json_decref(root);
	return err;
}

static int apply_env(struct loader *l)
{
	for (size_t i = 0; i < l->spec->n_opts; i++) {
		const struct opal_opt *o = &l->spec->opts[i];
		const char *v = o->env ? getenv(o->env) : NULL;
		int err;

		if (!v || !*v)
			continue;
		if ((err = set_text(l, i, v, OPAL_SRC_ENV, false)) < 0) {
			/* Name the variable, not only the option. */
			size_t n = l->why ? strlen(l->why) : 0;
			if (l->why && n + 1 < l->why_len)
				snprintf(l->why + n, l->why_len - n, " [%s]", o->env);
			return err;
		}
	}
	return 0;
}

/* Splits "--name[=value]" into name and value. Returns the option index, -1
 * for --config, or -2 when unknown. */
static int flag_of(const struct opal_config_spec *spec, const char *a, const char **value)
{
	const char *name = a + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);

	*value = eq ? eq + 1 : NULL;
	if (len == 6 && strncmp(name, "config", 6) == 0)
		return -1;
	int i = find_opt(spec, name, len);
	return i >= 0 ? i : -2;
}

static int apply_flags(struct loader *l, int argc, char *const *argv)
{
	bool seen[OPAL_CONFIG_MAX_OPTS] = { false };

	for (int k = 1; k < argc; k++) {
		const char *a = argv[k], *value;
		int i, err;

		if (strncmp(a, "--", 2) != 0 || a[2] == '\0')
			return fail(l, -EINVAL, "unexpected argument '%s'", a);
		i = flag_of(l->spec, a, &value);
		if (i == -2)
			return fail(l, -EINVAL, "unknown option '%s' (see --help)", a);
		const struct opal_opt *o = i >= 0 ? &l->spec->opts[i] : NULL;
		if (!value && (!o || o->type != OPAL_OPT_BOOL)) {
			if (k + 1 >= argc)
				return fail(l, -EINVAL, "option '%s' needs a value", a);
			value = argv[++k];
		}
		if (i == -1)
			continue;   /* --config: read before the other sources */
		if (!value)
			value = "true";
		err = set_text(l, (size_t)i, value, OPAL_SRC_FLAG, seen[i]);
		if (err < 0)
			return err;
		seen[i] = true;
	}
	return 0;
}

/* The --config value (last one given), else spec->config_env, else NULL;
 * also answers whether --help / -h is present. Values are validated by
 * apply_flags later. */
static const char *prescan(const struct opal_config_spec *spec, int argc, char *const *argv,
			   bool *help)
{
	const char *path = NULL;

	*help = false;
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k], *value;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*help = true;
			return NULL;
		}
		if (strncmp(a, "--", 2) != 0)
			continue;
		int i = flag_of(spec, a, &value);
		if (i == -1) {
			if (!value && k + 1 < argc)
				value = argv[++k];
			path = value;
		} else if (i >= 0 && !value && spec->opts[i].type != OPAL_OPT_BOOL) {
			k++;   /* skip the option's value: it may look like a flag */
		}
	}
	if (!path && spec->config_env) {
		const char *e = getenv(spec->config_env);
		if (e && *e)
			path = e;
	}
	return path;
}

const char *opal_config_file(const struct opal_config_spec *spec, int argc, char *const *argv)
{
	bool help;

	return prescan(spec, argc, argv, &help);
}

int opal_config_load(const struct opal_config_spec *spec, int argc, char *const *argv, void *dst,
		     enum opal_config_source *sources, char *why, size_t why_len)
{
	struct loader l = { .spec = spec, .dst = dst, .sources = sources, .why = why,
			    .why_len = why_len };
	bool help;
	const char *path;
	int err = 0;

	if (why && why_len)
		why[0] = '\0';
	if (spec->n_opts > OPAL_CONFIG_MAX_OPTS)
		return fail(&l, -EINVAL, "option table larger than %d", OPAL_CONFIG_MAX_OPTS);
	path = prescan(spec, argc, argv, &help);
	if (help) {
		opal_config_help(spec, stdout);
		return 1;
	}
	for (size_t i = 0; i < spec->n_opts && !err; i++) {
		if (sources)
			sources[i] = OPAL_SRC_DEFAULT;
		if (spec->opts[i].def)
			err = set_text(&l, i, spec->opts[i].def, OPAL_SRC_DEFAULT, false);
	}
	if (!err && path)
		err = apply_file(&l, path);
	if (!err)
		err = apply_env(&l);
	if (!err)
		err = apply_flags(&l, argc, argv);
	if (err < 0)
		opal_config_free(spec, dst);
	return err;
}

static const char *type_arg(const struct opal_opt *o)
{
	if (o->arg)
		return o->arg;
	switch (o->type) {
	case OPAL_OPT_UINT: return "N";
	case OPAL_OPT_SIZE: return "BYTES";
	case OPAL_OPT_LIST: return "A,B";
	default: return "VALUE";
	}
}

/* `v` bytes as the shortest exact size literal the parser takes ("64k",
 * "1g", "1000"); `buf` holds 32 bytes. */
static const char *size_text(uint64_t v, char *buf)
{
	static const char units[] = "kmgt";
	int u = -1;

	while (v && u < 3 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, 32, "%llu", (unsigned long long)v);
	else
		snprintf(buf, 32, "%llu%c", (unsigned long long)v, units[u]);
	return buf;
}

void opal_config_help(const struct opal_config_spec *spec, FILE *out)
{
	fprintf(out, "usage: %s [options]\n", spec->prog);
	if (spec->usage)
		fprintf(out, "%s\n", spec->usage);
	fprintf(out, "\nPrecedence: command line > environment > config file > default.\n\n");
	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct opal_opt *o = &spec->opts[i];
		if (o->type == OPAL_OPT_BOOL)
			fprintf(out, "  --%s\n", o->name);
		else
			fprintf(out, "  --%s %s\n", o->name, type_arg(o));
		fprintf(out, "        %s\n", o->help ? o->help : "");
		fprintf(out, "        default: %s", o->def && *o->def ? o->def
					: o->type == OPAL_OPT_BOOL ? "false" : "(none)");
		fprintf(out, "; env: %s", o->env ? o->env : "(none)");
		if (o->env_note)
			fprintf(out, " (%s)", o->env_note);
		if (o->type == OPAL_OPT_UINT && (o->min || o->max))
			fprintf(out, "; range: %llu..%llu", (unsigned long long)o->min,
				(unsigned long long)o->max);
		if (o->type == OPAL_OPT_SIZE && o->max) {
			char lo[32], hi[32];
			fprintf(out, "; range: %s..%s", size_text(o->min, lo), size_text(o->max, hi));
		}
		if (o->choices) {
			fprintf(out, "; one of:");
			for (const char *const *c = o->choices; *c; c++)
				fprintf(out, "%s%s", c == o->choices ? " " : ", ", *c);
		}
		if (o->reloadable)
			fprintf(out, "; reloadable on SIGHUP");
		fprintf(out, "\n");
	}
	fprintf(out, "  --config FILE\n        JSON object of option names to values\n"
		     "        default: (none); env: %s\n",
		spec->config_env ? spec->config_env : "(none)");
	fprintf(out, "  --help\n        this text\n");
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

size_t opal_config_changed(const struct opal_config_spec *spec, const void *a, const void *b,
			   const struct opal_opt **changed, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < spec->n_opts; i++) {
		const struct opal_opt *o = &spec->opts[i];
		const void *fa = cfield(o, a), *fb = cfield(o, b);
		bool same = true;

		switch (o->type) {
		case OPAL_OPT_STRING:
			same = str_eq(*(char *const *)fa, *(char *const *)fb);
			break;
		case OPAL_OPT_UINT:
		case OPAL_OPT_SIZE:
			same = *(const uint64_t *)fa == *(const uint64_t *)fb;
			break;
		case OPAL_OPT_BOOL:
			same = *(const bool *)fa == *(const bool *)fb;
			break;
		case OPAL_OPT_LIST: {
			const struct opal_strlist *la = fa, *lb = fb;
			same = la->n == lb->n;
			for (size_t k = 0; same && k < la->n; k++)
				same = strcmp(la->v[k], lb->v[k]) == 0;
			break;
		}
		}
		if (!same) {
			if (n < max)
				changed[n] = o;
			n++;
		}
	}
	return n;
}

static void swap_field(const struct opal_opt *o, void *a, void *b)
{
	size_t size;
	char tmp[sizeof(struct opal_strlist)];

	switch (o->type) {
	case OPAL_OPT_STRING: size = sizeof(char *); break;
	case OPAL_OPT_UINT:
	case OPAL_OPT_SIZE: size = sizeof(uint64_t); break;
	case OPAL_OPT_BOOL: size = sizeof(bool); break;
	default: size = sizeof(struct opal_strlist); break;
	}
	memcpy(tmp, field(o, a), size);
	memcpy(field(o, a), field(o, b), size);
	memcpy(field(o, b), tmp, size);
}

void opal_config_apply_reload(const struct opal_config_spec *spec, void *cur,
			      enum opal_config_source *cur_src, void *next,
			      const enum opal_config_source *next_src,
			      struct opal_config_plan *plan)
{
	const struct opal_opt *changed[OPAL_CONFIG_MAX_OPTS];
	size_t n = opal_config_changed(spec, cur, next, changed, OPAL_CONFIG_MAX_OPTS);

	plan->n_applied = plan->n_restart = 0;
	for (size_t k = 0; k < n && k < OPAL_CONFIG_MAX_OPTS; k++) {
		const struct opal_opt *o = changed[k];
		if (!o->reloadable) {
			plan->restart[plan->n_restart++] = o;
			continue;
		}
		swap_field(o, cur, next);
		if (cur_src && next_src) {
			size_t i = (size_t)(o - spec->opts);
			cur_src[i] = next_src[i];
		}
		plan->applied[plan->n_applied++] = o;
	}
}

bool opal_config_plan_applied(const struct opal_config_plan *plan, const char *name)
{
	for (size_t i = 0; i < plan->n_applied; i++)
		if (strcmp(plan->applied[i]->name, name) == 0)
			return true;
	return false;
}

void opal_config_value_text(const struct opal_opt *o, const void *cfg, char *buf, size_t len)
{
	const void *f = cfield(o, cfg);
	size_t used = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (o->secret) {
		snprintf(buf, len, "(hidden)");
		return;
	}
	switch (o->type) {
	case OPAL_OPT_STRING: {
		const char *s = *(char *const *)f;
		snprintf(buf, len, "%s", s ? s : "(none)");
		break;
	}
	case OPAL_OPT_UINT:
	case OPAL_OPT_SIZE:
		snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
		break;
	case OPAL_OPT_BOOL:
		snprintf(buf, len, "%s", *(const bool *)f ? "true" : "false");
		break;
	case OPAL_OPT_LIST: {
		const struct opal_strlist *l = f;
		if (!l->n)
			snprintf(buf, len, "(none)");
		for (size_t i = 0; i < l->n && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "",
						 l->v[i]);
		break;
	}
	}
}

bool opal_strlist_has(const struct opal_strlist *list, const char *s)
{
	for (size_t i = 0; i < list->n; i++)
		if (strcmp(list->v[i], s) == 0)
			return true;
	return false;
}
