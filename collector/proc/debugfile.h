/* The separate debug file of an ELF file on the collector's own host, by
 * GNU build ID: <root>/.build-id/xx/yyyy.debug (the GDB manual,
 * "Debugging Information in Separate Files"; Debian's -dbg and -dbgsym
 * packages), root being /usr/lib/debug. The collector reads only its CFI
 * (.debug_frame, for unwind tables: unwind_table.h), never its symbols.
 *
 * Why the host's folder, opened as root, and not the process's own view
 * (as debuglink.h does for the symbolizer): an unwind table is keyed by
 * the file's ID and shared by every process that maps the file, in every
 * mount namespace, so its rules must not depend on which process asked
 * first; and the host's /usr/lib/debug belongs to root and its package
 * manager, while a container's file system belongs to whoever built the
 * image, who could otherwise steer the unwinding of other processes that
 * map the same file. A binary whose debug file exists only inside a
 * container keeps frame pointers as its fallback. */
#ifndef OPAL_COLLECTOR_DEBUGFILE_H
#define OPAL_COLLECTOR_DEBUGFILE_H

#include <stddef.h>
#include <stdint.h>

#define OPAL_DEBUGFILE_ROOT     "/usr/lib/debug"
#define OPAL_DEBUGFILE_MAX_SIZE (4ull << 30)   /* bytes of a debug file */

/* Opens the debug file of the ELF file open on `fd` (borrowed, position
 * untouched) under `root`: the file's GNU build ID names it, and the
 * candidate must be a regular file of at most OPAL_DEBUGFILE_MAX_SIZE
 * bytes (looked at through O_PATH first, so no FIFO or device is ever
 * opened) whose own build ID note is the same. Returns a read-only
 * O_CLOEXEC descriptor, -ENODATA when the file has no build ID, -ENOENT
 * when no such debug file exists, -ESTALE when its build ID differs,
 * -EFBIG, -EINVAL (not a regular file) or another -errno. */
int opal_debugfile_open(int fd, const char *root);

#endif
