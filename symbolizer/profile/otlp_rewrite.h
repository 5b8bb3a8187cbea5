/* A received OTLP profiles request (ExportProfilesServiceRequest,
 * opentelemetry-proto v1development: docs/otlp-receive.md) decoded under
 * bounds, checked, its unsymbolized native Locations given Lines through a
 * resolver, and encoded again for forwarding.
 *
 * Bounds, all checked before the work they bound starts: message nesting
 * (OPAL_OTLP_RX_MAX_DEPTH, scanned on the wire before protobuf-c recurses),
 * the memory of the decoded request and everything the rewrite adds to it
 * (one budget, enforced by the allocator protobuf-c decodes with), the
 * Locations of a request and the Lines the rewrite adds.
 *
 * Rewrite rules: a Location is symbolized when it has no Line, its
 * `profile.frame.type` attribute is "native" or absent, and its Mapping
 * carries `process.executable.build_id.htlhash` and/or
 * `process.executable.build_id.gnu`. Its address is looked up as it is (an
 * ELF virtual address; the OTel eBPF profiler already subtracts 1 from
 * return addresses). Lines are the inline chain, innermost first; their
 * Functions and strings are appended to the dictionary or reuse equal
 * entries already there, and never take index 0. Every other Location and
 * every other part of the request, unknown fields included, is kept as it
 * came. */
#ifndef OPAL_OTLP_REWRITE_H
#define OPAL_OTLP_REWRITE_H

#include <stddef.h>
#include <stdint.h>
#include "base/sym_result.h"
#include "shared/fileid.h"

#define OPAL_OTLP_RX_MAX_DEPTH     32            /* nested messages */
#define OPAL_OTLP_RX_MAX_MEMORY    (256u << 20)  /* decoded request + additions, bytes */
#define OPAL_OTLP_RX_MAX_LOCATIONS (1u << 18)    /* Location table entries */
#define OPAL_OTLP_RX_MAX_NEW_LINES (1u << 21)    /* Lines added by one rewrite */

struct opal_otlp_rx;

/* Decodes `len` bytes of protobuf (borrowed) into *out, using at most
 * `max_memory` bytes (0: OPAL_OTLP_RX_MAX_MEMORY) for the decoded request
 * and for what opal_otlp_rx_rewrite adds, and checks every dictionary
 * index of the request (tables, samples, stacks, profiles) is in range (0,
 * "unset", always is). Returns 0; -EINVAL (malformed protobuf, an index
 * out of range, nesting over OPAL_OTLP_RX_MAX_DEPTH), -E2BIG (memory
 * budget, more than OPAL_OTLP_RX_MAX_LOCATIONS Locations) or -ENOMEM, with
 * the reason in `why`. */
int opal_otlp_rx_decode(const uint8_t *buf, size_t len, size_t max_memory,
			struct opal_otlp_rx **out, char *why, size_t why_len);

/* Finds what opal knows about a file and symbolizes addresses in it. */
struct opal_otlp_resolver {
	/* The file named by `htlhash` (32 lowercase hex digits, or NULL)
	 * and/or `gnu_build_id` (lowercase hex, or NULL; at least one is
	 * given): 0 and *key, -ENOENT when unknown, -EINVAL for a malformed
	 * ID. Called once per Mapping. */
	int (*find_file)(void *arg, const char *htlhash, const char *gnu_build_id,
			 opal_file_id *key);
	/* ELF virtual address `address` of file `key` into `out` (n may be
	 * 0); 0 or -errno. `out` is released with opal_sym_result_free. */
	int (*symbolize)(void *arg, const opal_file_id *key, uint64_t address,
			 struct opal_sym_result *out);
	void *arg;
};

/* What a rewrite did with the request's Locations. */
struct opal_otlp_rx_stats {
	uint64_t symbolized;     /* given Lines */
	uint64_t unresolved;     /* file known, address not found: kept as it was */
	uint64_t unknown_file;   /* Mapping names a file opal does not have: kept */
	uint64_t kept;           /* already symbolized, not native, or no file ID: kept */
};

/* Symbolizes the request's Locations by the rules above; `st` (may be
 * NULL) receives the counts. On an error the request is left partly
 * rewritten: free it, never encode it. Returns 0, -E2BIG (the memory
 * budget or OPAL_OTLP_RX_MAX_NEW_LINES would be exceeded) or -ENOMEM. */
int opal_otlp_rx_rewrite(struct opal_otlp_rx *rx, const struct opal_otlp_resolver *r,
			 struct opal_otlp_rx_stats *st);

/* Encodes the request as protobuf into *out (malloc'd, *len bytes).
 * Returns 0 or -ENOMEM. */
int opal_otlp_rx_encode(const struct opal_otlp_rx *rx, uint8_t **out, size_t *len);

/* The request as one gzip'd pprof profile for the flame graph's recent
 * profiles (otlp_pprof.c): dictionary entry i is pprof id i; every Sample
 * of every Profile is a pprof sample of type samples/count weighted by
 * its timestamps (else its first value, for a count), labelled "pid" from
 * process.pid (Sample, else Resource attributes). start_unix_ns and end_unix_ns:
 * the Profiles' time range. Returns 0 (*gz malloc'd, *gz_len bytes) or
 * -ENOMEM (the request's memory budget bounds the conversion too). */
int opal_otlp_rx_pprof(const struct opal_otlp_rx *rx, uint8_t **gz, size_t *gz_len,
		       uint64_t *start_unix_ns, uint64_t *end_unix_ns);

/* The decoded request (protobuf-c's
 * Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest),
 * for reading (tests). */
const void *opal_otlp_rx_request(const struct opal_otlp_rx *rx);

/* Frees the request and everything added to it. NULL is a no-op. */
void opal_otlp_rx_free(struct opal_otlp_rx *rx);

#endif
