/* Daemon configuration from four sources, in increasing precedence:
 * built-in defaults < JSON config file (--config) < environment variables <
 * command-line flags. Each daemon describes its options once in a table of
 * struct opal_opt; opal_config_load fills the caller's own struct (fields
 * found through `offset`), and opal_config_help prints --help from the same
 * table, listing every option's default and environment variable.
 *
 * Flags: "--name VALUE", "--name=VALUE"; a bool flag alone means true and
 * also takes "--name=true|false". A list option repeated on the command line
 * accumulates; each value may itself be a comma list. Positional arguments
 * are rejected.
 * Environment: an empty variable counts as unset (OpenTelemetry SDK rule);
 * bools take 1/0, true/false, yes/no, on/off; lists are comma lists.
 * File: one JSON object whose keys are option names; strings, numbers
 * (uint/size), booleans, and arrays of strings (or one comma-list string)
 * for lists. An unknown key, a wrong type or a duplicate key is an error.
 * A source that sets a list replaces the whole list of lower sources. */
#ifndef OPAL_CONFIG_H
#define OPAL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OPAL_CONFIG_MAX_FILE   (1u << 20)   /* bytes of a config file */
#define OPAL_CONFIG_MAX_LIST   64           /* entries of a list option */
#define OPAL_CONFIG_MAX_VALUE  4096         /* bytes of one value */
#define OPAL_CONFIG_MAX_OPTS   128          /* entries of a table */

enum opal_opt_type {
	OPAL_OPT_STRING,   /* char * (malloc'd copy; NULL when unset) */
	OPAL_OPT_UINT,     /* uint64_t, decimal, within [min, max] */
	OPAL_OPT_SIZE,     /* uint64_t bytes: decimal with optional k/m/g suffix (1024-based) */
	OPAL_OPT_BOOL,     /* bool */
	OPAL_OPT_LIST,     /* struct opal_strlist */
};

/* Where an option's value came from. */
enum opal_config_source {
	OPAL_SRC_DEFAULT = 0,
	OPAL_SRC_FILE,
	OPAL_SRC_ENV,
	OPAL_SRC_FLAG,
};

/* Value of an OPAL_OPT_LIST: `n` malloc'd strings (n <= OPAL_CONFIG_MAX_LIST). */
struct opal_strlist {
	char **v;
	size_t n;
};

struct opal_opt {
	const char *name;       /* flag without "--" and JSON key, e.g. "out-dir" */
	enum opal_opt_type type;
	size_t offset;          /* offsetof(the caller's struct, the field) */
	const char *def;        /* default, written as on the command line; NULL = unset */
	const char *env;        /* environment variable, or NULL */
	const char *arg;        /* value name in --help ("DIR"); NULL for bools */
	const char *help;       /* one line */
	uint64_t min, max;      /* OPAL_OPT_UINT / OPAL_OPT_SIZE; both 0 = no bound */
	const char *const *choices;  /* NULL-terminated allowed values (STRING, LIST); NULL = any */
	bool reloadable;        /* may change at run time (SIGHUP); shown in --help */
	const char *env_note;   /* extra --help text on environment handling, or NULL */
	bool secret;            /* value never shown in log lines (e.g. auth headers) */
};

struct opal_config_spec {
	const char *prog;       /* "opal-symbolizer" */
	const char *usage;      /* first --help lines (what the program does) */
	const struct opal_opt *opts;
	size_t n_opts;          /* <= OPAL_CONFIG_MAX_OPTS */
	const char *config_env; /* variable naming the config file (e.g. OPAL_SYMBOLIZER_CONFIG), or NULL */
};

/* Fills `dst` (the caller's struct, zeroed by the caller before the first
 * load) from defaults, the config file (--config FILE, else the file named
 * by spec->config_env when set), the environment and `argv[1..argc-1]`.
 * `sources` (spec->n_opts entries, may be NULL) receives where each value
 * came from. "--help"/"-h" prints opal_config_help to stdout and returns 1
 * without reading anything else. On error a reason naming the option and
 * the source is written to `why` (why_len bytes) and `dst` holds no
 * allocation (as after opal_config_free).
 * Returns 0, 1 (help printed), -EINVAL (bad flag, value, file content),
 * -ENOENT / -EACCES / -errno (config file unreadable), -EFBIG (config file
 * over OPAL_CONFIG_MAX_FILE), -ENOMEM. `dst` values from an earlier load
 * must have been released with opal_config_free first. */
int opal_config_load(const struct opal_config_spec *spec, int argc, char *const *argv, void *dst,
		     enum opal_config_source *sources, char *why, size_t why_len);

/* The config file opal_config_load would read for this argv: the last
 * --config value, else the file named by spec->config_env, else NULL (also
 * when --help is present). Points into argv or the environment. */
const char *opal_config_file(const struct opal_config_spec *spec, int argc, char *const *argv);

/* Releases the strings and lists opal_config_load stored in `dst` and sets
 * those fields to NULL / empty. Safe on a zeroed struct. */
void opal_config_free(const struct opal_config_spec *spec, void *dst);

/* Prints usage, then one entry per option: flag and value name, help text,
 * default, environment variable (plus env_note), allowed values and
 * "reloadable on SIGHUP" where set; then --config and --help. */
void opal_config_help(const struct opal_config_spec *spec, FILE *out);

/* For SIGHUP: compares two loaded structs option by option. Stores up to
 * `max` pointers to the options whose values differ into `changed` and
 * returns how many differ (may exceed `max`). */
size_t opal_config_changed(const struct opal_config_spec *spec, const void *a, const void *b,
			   const struct opal_opt **changed, size_t max);

/* What a SIGHUP reload does with the options whose values differ between
 * the running configuration and the one just loaded. */
struct opal_config_plan {
	const struct opal_opt *applied[OPAL_CONFIG_MAX_OPTS];  /* reloadable: now in effect */
	size_t n_applied;
	const struct opal_opt *restart[OPAL_CONFIG_MAX_OPTS];  /* not reloadable: old value kept */
	size_t n_restart;
};

/* For SIGHUP: `cur` is the running configuration, `next` one loaded since
 * (both with opal_config_load and this spec). Every option whose value
 * differs is listed in `plan`: a reloadable one has its value moved from
 * `next` into `cur` (strings and lists are swapped, so that
 * opal_config_free(next) releases the old value), together with its source
 * (when `cur_src` and `next_src` are both non-NULL); any other keeps its
 * running value and is listed as needing a restart. `next` must still be
 * released with opal_config_free. */
void opal_config_apply_reload(const struct opal_config_spec *spec, void *cur,
			      enum opal_config_source *cur_src, void *next,
			      const enum opal_config_source *next_src,
			      struct opal_config_plan *plan);

/* True when the option named `name` is in plan->applied. */
bool opal_config_plan_applied(const struct opal_config_plan *plan, const char *name);

/* The value of option `o` of the loaded struct `cfg` as text for log lines,
 * written to `buf` (`len` bytes, truncated, always NUL-terminated): the
 * string, the number, "true"/"false", the comma-joined list, "(none)" when
 * unset, "(hidden)" for a secret option. */
void opal_config_value_text(const struct opal_opt *o, const void *cfg, char *buf, size_t len);

/* True when `list` holds `s`. */
bool opal_strlist_has(const struct opal_strlist *list, const char *s);

#endif
