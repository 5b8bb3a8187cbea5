/* Native and kernel symbolization: (file ID, ELF virtual address) ->
 * inline chain of frames, via elfutils libdwfl; kernel addresses via a
 * kallsyms descriptor. Results are cached in memory and in SQLite
 * (cache.h). */
#ifndef OPAL_SYMBOLIZE_H
#define OPAL_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fileid.h"

struct opal_cache;

/* One source-level frame. For an inline chain at one address, frames[0] is
 * the innermost inlined callee and frames[n-1] the real (outermost)
 * function; frames[i].inlined is true for every frame inlined into
 * frames[i+1]; frames[i].line/file are where frames[i] was executing (for
 * i > 0: the call site of frames[i-1], DW_AT_call_file/DW_AT_call_line). */
struct opal_sym_frame {
	char *function;     /* demangled name, or NULL when unknown */
	char *file;         /* source path, or NULL */
	uint32_t line;      /* 0 when unknown */
	bool inlined;
};

struct opal_sym_result {
	size_t n;                       /* 0: unresolved (keep mapping+address) */
	struct opal_sym_frame *frames;  /* n entries, heap; free with opal_sym_result_free */
	char *module;                   /* kernel: module name ("" for vmlinux), else NULL */
};

void opal_sym_result_free(struct opal_sym_result *r);

/* Quality of what was found for a file, best last (stored in SQLite). */
enum opal_debug_quality {
	OPAL_DEBUG_NONE = 0,        /* nothing usable: frames stay file+0xADDR */
	OPAL_DEBUG_DYNSYM = 1,
	OPAL_DEBUG_SYMTAB = 2,
	OPAL_DEBUG_DWARF_LINES = 3,
	OPAL_DEBUG_DWARF_INLINE = 4,
};

struct opal_symbolizer;

/* Creates a symbolizer; `cache` may be NULL (no persistence) and is
 * borrowed. `max_open_files` bounds the libdwfl handles kept open (LRU;
 * 0 is taken as 1).
 * Returns NULL with errno set on failure. */
struct opal_symbolizer *opal_symbolizer_new(struct opal_cache *cache, size_t max_open_files);
void opal_symbolizer_free(struct opal_symbolizer *s);

/* Registers the ELF file `fd` (the symbolizer takes ownership of fd) under
 * `id`. `build_id` (len bytes, may be 0) and `path` (may be NULL) are
 * informational and recorded in the cache's files table. Registering an id
 * again replaces the descriptor. Returns 0 or -errno. */
int opal_symbolizer_add_file(struct opal_symbolizer *s, const opal_file_id *id, int fd,
			     const uint8_t *build_id, size_t build_id_len, const char *path);

/* True when a descriptor (or cached results) is known for `id`. */
bool opal_symbolizer_has_file(struct opal_symbolizer *s, const opal_file_id *id);

/* Symbolizes ELF virtual address `vaddr` of file `id`. When `return_address`
 * is true the lookup uses vaddr - 1 (a return address points after its
 * call). Fills `out` (n may be 0: unresolved, which is not an error).
 * Returns 0, -ENOENT when no descriptor or cache entry exists for `id`
 * (ask the collector for the file again), or -errno. */
int opal_symbolize_native(struct opal_symbolizer *s, const opal_file_id *id, uint64_t vaddr,
			  bool return_address, struct opal_sym_result *out);

/* Loads kernel symbols from a /proc/kallsyms descriptor (taken over and
 * closed) opened by a CAP_SYSLOG holder; replaces earlier ones. Returns the
 * symbol count or -errno (-EPERM when every address reads as zero). */
int opal_symbolizer_set_kallsyms(struct opal_symbolizer *s, int fd);

/* Kernel address -> function (+ module). n == 0 when unknown or before
 * kallsyms arrived. Return addresses are looked up at addr - 1. */
int opal_symbolize_kernel(struct opal_symbolizer *s, uint64_t addr, bool return_address,
			  struct opal_sym_result *out);

/* Drops every cached result of `id`, in memory and in SQLite (better debug
 * data arrived). Opening a descriptor whose debug quality beats the
 * recorded one does this by itself. Returns 0 or -errno from the cache. */
int opal_symbolizer_invalidate_file(struct opal_symbolizer *s, const opal_file_id *id);

/* Debug quality of `id`: from its open session, by opening its registered
 * descriptor, or from the cache's files table. Returns 0, -ENOENT when
 * the file is unknown, or -errno. */
int opal_symbolizer_file_quality(struct opal_symbolizer *s, const opal_file_id *id,
				 enum opal_debug_quality *q);

/* Statistics for /metrics and logs (native lookups; files_open is the
 * current number of libdwfl sessions, files_evicted the sessions closed
 * to stay within max_open_files). */
struct opal_symbolizer_stats {
	uint64_t mem_hits, cache_hits, misses, unresolved, files_open, files_evicted;
};
void opal_symbolizer_stats(struct opal_symbolizer *s, struct opal_symbolizer_stats *out);

#endif
