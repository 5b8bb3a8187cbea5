// SPDX-License-Identifier: GPL-2.0
/* A BPF program no verifier accepts, built only for
 * tests/unit/test_collector_bpf_load.c: it indexes a map value with an
 * unbounded number, so the load fails with a verifier log ("R... unbounded
 * memory access" or "invalid access to map value"), which
 * collector/bpf_load.c must print. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[4]);
} values SEC(".maps");

SEC("perf_event")
int opal_unverifiable(void *ctx)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&values, &zero);

	if (!v)
		return 0;
	return (int)v[bpf_get_prandom_u32()];
}
