#!/usr/bin/env bash
# Seeds the OTLP receive fuzz target (fuzz_otlp_receive.c): requests shaped
# like the OpenTelemetry eBPF profiler's (native frames as address + Mapping
# with htlhash and GNU build ID attributes, a kernel and a CPython frame
# with Lines), written as text and encoded with protoc from proto/.
# usage: tests/fuzz/seed_otlp_receive.sh REPO_ROOT CORPUS_DIR
set -euo pipefail
root=${1:?usage: seed_otlp_receive.sh REPO_ROOT CORPUS_DIR}
corpus=${2:?usage: seed_otlp_receive.sh REPO_ROOT CORPUS_DIR}
msg=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
file=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
seed() { # NAME ADDRESS...: one request whose native Locations have these addresses
	local name=$1 locs="" idx="" i=5 a
	shift
	for a in "$@"; do
		locs+="location_table { mapping_index: 1 address: $a attribute_indices: 3 } "
		idx+="location_indices: $i "
		i=$((i + 1))
	done
	protoc -I"$root/proto" --encode="$msg" "$file" >"$corpus/$name" <<TXT
resource_profiles { resource { attributes { key: "service.name" value { string_value: "s" } } }
  scope_profiles { profiles { sample_type { type_strindex: 1 unit_strindex: 2 }
    samples { stack_index: 1 values: 1 attribute_indices: 6 } } } }
dictionary {
  mapping_table { } mapping_table { filename_strindex: 3 attribute_indices: 1 attribute_indices: 2 }
  location_table { }
  location_table { mapping_index: 1 address: 4660 attribute_indices: 3 }
  location_table { lines { function_index: 1 } attribute_indices: 4 }
  location_table { lines { function_index: 2 line: 7 } attribute_indices: 5 }
  location_table { lines { function_index: 1 } lines { function_index: 2 line: 3 } }
  $locs
  function_table { } function_table { name_strindex: 4 }
  function_table { name_strindex: 5 filename_strindex: 6 }
  link_table { }
  string_table: [ "", "samples", "count", "app", "do_syscall_64", "work", "/srv/app.py",
                  "process.executable.build_id.htlhash", "process.executable.build_id.gnu",
                  "profile.frame.type", "thread.name" ]
  attribute_table { }
  attribute_table { key_strindex: 7 value { string_value: "00112233445566778899aabbccddeeff" } }
  attribute_table { key_strindex: 8 value { string_value_strindex: 3 } }
  attribute_table { key_strindex: 9 value { string_value: "native" } }
  attribute_table { key_strindex: 9 value { string_value: "kernel" } }
  attribute_table { key_strindex: 9 value { string_value: "cpython" } }
  attribute_table { key_strindex: 10 value { array_value { values { string_value: "t" } } } }
  stack_table { } stack_table { location_indices: [1, 2, 3, 4] $idx }
}
TXT
}
seed agent_request
seed agent_request_more 4097 4353 8193 61455 1 2 3
