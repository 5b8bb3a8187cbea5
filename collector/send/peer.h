/* Who the collector may talk to (docs/deployment.md, "Threat model"): the
 * listener on --socket must be root or the symbolizer's user, and the
 * socket's folder must be writable by no one else, or another local user
 * could listen there and receive the kallsyms descriptor and the ELF
 * descriptors the collector passes. */
#ifndef OPAL_COLLECTOR_PEER_H
#define OPAL_COLLECTOR_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The uids trusted with the collector's descriptors: root always, and
 * `symbolizer_uid` when it is not 0 (0: root only). */
struct opal_peer_policy {
	uid_t symbolizer_uid;
};

/* True when `uid` (SO_PEERCRED of the listener) is trusted by `p`. */
bool opal_peer_uid_trusted(const struct opal_peer_policy *p, uid_t uid);

/* Checks the folder of the socket at `sock_path` and every folder above it
 * (symbolic links resolved): each owned by a trusted uid, and writable by
 * no other user (group or other write bit), except that a folder above
 * the socket's own may be a root-owned sticky one such as /tmp, in which
 * only an entry's owner may rename it. Returns 0; -ENOENT when the
 * socket's folder does not exist (yet); -EPERM with the folder and the
 * reason in `why` (`why_len` bytes) when another user could replace the
 * socket; another -errno when a folder cannot be examined. */
int opal_socket_dir_check(const struct opal_peer_policy *p, const char *sock_path, char *why,
			  size_t why_len);

#endif
