#!/usr/bin/env bash
# The symbolizer as an OTLP profiles receiver (docs/otlp-receive.md), end to
# end: the symbolizer runs with --otlp-receive, forwarding to the loopback
# test receiver (tests/otlp_receiver, which checks the dictionary rules and
# keeps every body); the debug file of a fully stripped copy of the
# `inline_split` fixture is uploaded with opal-debuginfo; then curl posts
# requests built like the OpenTelemetry eBPF profiler's (written as text,
# encoded by protoc from proto/: native frames as ELF virtual address +
# Mapping with the htlhash file ID, computed by opal-debuginfo with
# shared/fileid.c, and the GNU build ID, no Line; a kernel and a CPython
# frame with names):
#   - gzip'd: 200; the forwarded request is valid and its native frames
#     carry the fixture's chain leaf <- mid <- outer (inline, innermost
#     first) and plain, with the source lines of inline.c's LINE: markers;
#     the kernel and CPython frames are unchanged;
#   - the same request for files opal never saw: forwarded unchanged,
#     counted as unknown_file;
#   - both received profiles in GET /flamegraph (the recent profiles);
#   - bad input: truncated protobuf, an out-of-range index, a body over
#     --max-upload-bytes, a gzip bomb, JSON, no token: 400/413/415/401,
#     counted, nothing forwarded.
# usage: tests/integration/test_otlp_receive.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and "N passed, N failed"; missing prerequisites
# are failures. OPAL_IT_KEEP=1 keeps the temp folder (kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

need_build "${1:?usage: test_otlp_receive.sh BUILD_DIR}"
fx=$build/fixtures/symbolize
dbg=$build/opal-debuginfo
need_daemons
need_bins "$dbg"
for f in inline_split inline_split.debug inline.c; do
	[ -e "$fx/$f" ] || need fixtures "$fx/$f is missing: run 'make fixtures'"
done
need_tools curl protoc python3 eu-readelf gzip objcopy
[ "$prereq_ok" -eq 1 ] || finish
need_receiver

make_tmp opal-otlp-receive

# ---- the fixture as the agent's host has it: stripped of everything ------------------------
objcopy --strip-all "$fx/inline_split" "$tmp/app"
ids=$("$dbg" buildid "$tmp/app")
htl=$(echo "$ids" | sed -n 's/.* htlhash=\([0-9a-f]*\).*/\1/p')
gnu=$(echo "$ids" | sed -n 's/.* gnu=\([0-9a-f]*\) .*/\1/p')
addr_of() { # SYMBOL -> decimal ELF virtual address, from the debug file's .symtab
	printf '%d' "0x$(eu-readelf -s "$fx/inline_split.debug" | awk -v s="$1" '$8 == s { print $2; exit }')"
}
leaf=$(addr_of opal_mark_leaf)
plain=$(addr_of opal_mark_plain)
line_of() { grep -n "LINE:$1 " "$fx/inline.c" | cut -d: -f1; }
if [ ${#htl} -ne 32 ] || [ -z "$gnu" ] || [ "$leaf" = 0 ] || [ "$plain" = 0 ]; then
	fail "fixture identity" "htlhash '$htl' gnu '$gnu' leaf '$leaf' plain '$plain'"
	finish
fi

# ---- forward target and symbolizer ----------------------------------------------------------
mkdir -p "$tmp/saved"
chmod 0755 "$tmp/saved"
if ! start_otlp_receiver fwd "" --save-dir "$tmp/saved"; then
	fail "receiver starts" "see $tmp/fwd.receiver.log"
	finish
fi

echo "otlp-receive-test-token" >"$tmp/token"
make_dirs "$tmp/sym"
sym_env=(-u DEBUGINFOD_URLS -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT)
start_symbolizer "$tmp/sym" "$tmp/sym.log" --http-listen 127.0.0.1:0 --token-file "$tmp/token" \
	--max-upload-bytes 1m --otlp-receive \
	--otlp-forward "http://127.0.0.1:$rcv_port/v1development/profiles" || finish
port=$(http_port "$tmp/sym.log")
base=http://127.0.0.1:$port
auth=(-H "Authorization: Bearer otlp-receive-test-token")

# The upload an OTel-profiler fleet makes for its binaries (docs/otlp-receive.md).
if out=$("$dbg" upload --server "$base" --token-file "$tmp/token" "$fx/inline_split.debug" 2>&1); then
	pass "debug file of the stripped fixture uploaded"
else
	fail "debug file of the stripped fixture uploaded" "$out"
fi

# ---- requests, as the OTel eBPF profiler builds them ----------------------------------------
proto_req=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
proto_file=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
# request HTLHASH GNU LOCATION_MAPPING_INDEX -> text format on stdout
request() {
	cat <<EOF
resource_profiles {
  resource {
    attributes { key: "service.name" value { string_value: "app" } }
    attributes { key: "process.pid" value { int_value: 4242 } }
  }
  scope_profiles {
    scope { name: "opentelemetry-ebpf-profiler" version: "test" }
    profiles {
      sample_type { type_strindex: 1 unit_strindex: 2 }
      period_type { type_strindex: 3 unit_strindex: 4 }
      period: 50000000
      time_unix_nano: $now
      duration_nano: 1000000000
      samples { stack_index: 1 timestamps_unix_nano: $now }
    }
  }
}
dictionary {
  mapping_table { }
  mapping_table { memory_start: 93824992231424 memory_limit: 93824992260096
                  filename_strindex: 5 attribute_indices: 1 attribute_indices: 2 }
  location_table { }
  location_table { mapping_index: $3 address: $leaf attribute_indices: 3 }
  location_table { mapping_index: $3 address: $plain attribute_indices: 3 }
  location_table { address: 18446744071578845184 lines { function_index: 1 } attribute_indices: 4 }
  location_table { lines { function_index: 2 line: 7 } attribute_indices: 5 }
  function_table { }
  function_table { name_strindex: 6 }
  function_table { name_strindex: 7 filename_strindex: 8 }
  link_table { }
  string_table: ""
  string_table: "samples"
  string_table: "count"
  string_table: "cpu"
  string_table: "nanoseconds"
  string_table: "app"
  string_table: "do_syscall_64"
  string_table: "work"
  string_table: "/srv/app.py"
  string_table: "process.executable.build_id.htlhash"
  string_table: "process.executable.build_id.gnu"
  string_table: "profile.frame.type"
  attribute_table { }
  attribute_table { key_strindex: 9 value { string_value: "$1" } }
  attribute_table { key_strindex: 10 value { string_value: "$2" } }
  attribute_table { key_strindex: 11 value { string_value: "native" } }
  attribute_table { key_strindex: 11 value { string_value: "kernel" } }
  attribute_table { key_strindex: 11 value { string_value: "cpython" } }
  stack_table { }
  stack_table { location_indices: [1, 2, 3, 4] }
}
EOF
}
now=$(date +%s%N)
encode() { protoc -I"$repo/proto" --encode="$proto_req" "$proto_file"; }
decode() { protoc -I"$repo/proto" --decode="$proto_req" "$proto_file"; }
request "$htl" "$gnu" 1 | encode >"$tmp/known.pb"
request 00112233445566778899aabbccddeeff 0123456789abcdef0123456789abcdef01234567 1 |
	encode >"$tmp/unknown.pb"
request "$htl" "$gnu" 7 | encode >"$tmp/bad_index.pb"
gzip -c "$tmp/known.pb" >"$tmp/known.pb.gz"

# post NAME FILE CURL_ARGS... -> the HTTP status on stdout, body in $tmp/NAME.answer
post() {
	local name=$1 file=$2
	shift 2
	curl -s -o "$tmp/$name.answer" -w '%{http_code}' --max-time 60 "$@" \
		--data-binary "@$file" "$base/v1development/profiles"
}
pb=(-H "Content-Type: application/x-protobuf")
forwarded() { find "$tmp/saved" -name '*.pb' | wc -l; }
wait_forwarded() { # N: waits up to 20 s for N forwarded bodies
	for _ in $(seq 200); do
		[ "$(forwarded)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

code=$(post known "$tmp/known.pb.gz" "${auth[@]}" "${pb[@]}" -H "Content-Encoding: gzip")
if [ "$code" = 200 ] && [ ! -s "$tmp/known.answer" ]; then
	pass "gzip'd request answered 200 with an empty ExportProfilesServiceResponse"
else
	fail "gzip'd request answered 200 with an empty ExportProfilesServiceResponse" \
		"status $code: $(head -c 300 "$tmp/known.answer")"
fi
if wait_forwarded 1; then
	pass "symbolized request forwarded"
else
	fail "symbolized request forwarded" "nothing reached the receiver (see $tmp/sym.log)"
fi
code=$(post unknown "$tmp/unknown.pb" "${auth[@]}" "${pb[@]}")
[ "$code" = 200 ] && wait_forwarded 2
decode <"$tmp/saved/0000.pb" >"$tmp/fwd0.txt" 2>&1
decode <"$tmp/saved/0001.pb" >"$tmp/fwd1.txt" 2>&1
decode <"$tmp/unknown.pb" >"$tmp/unknown.txt" 2>&1

python3 - "$rcv_log" "$tmp/fwd0.txt" "$leaf" "$plain" "$(line_of leaf_body)" \
	"$(line_of mid_call_leaf)" "$(line_of outer_call_mid)" "$(line_of plain_body)" \
	<<'PY' >"$tmp/forwarded.checks" 2>&1 || fail "forwarded request checked" "$(tail -n 3 "$tmp/forwarded.checks")"
import json, re, sys
log, text = sys.argv[1], sys.argv[2]
leaf, plain = int(sys.argv[3]), int(sys.argv[4])
l_leaf, l_mid, l_outer, l_plain = map(int, sys.argv[5:9])

def parse(s):
    """protoc's text format into nested dicts of lists."""
    toks = re.findall(r'"(?:[^"\\]|\\.)*"|[{}]|[A-Za-z_0-9.\-]+:?', s)
    def obj(i):
        o = {}
        while i < len(toks) and toks[i] != '}':
            k = toks[i].rstrip(':')
            if toks[i + 1] == '{':
                v, i = obj(i + 2)
                i += 1
            else:
                v = toks[i + 1]
                v = v[1:-1] if v.startswith('"') else int(v) if re.match(r'-?\d+$', v) else v
                i += 2
            o.setdefault(k, []).append(v)
        return o, i
    return obj(0)[0]

reqs = [json.loads(l) for l in open(log) if l.strip()]
ok = reqs and reqs[0].get("valid")
print(("PASS" if ok else "FAIL") + " forwarded request passes the receiver's dictionary checks" +
      ("" if ok else ": %s" % (reqs[0].get("error") if reqs else "no request")))
d = parse(open(text).read())["dictionary"][0]
strings = d.get("string_table", [])
funcs = d.get("function_table", [])
def lines_of(loc):
    out = []
    for ln in loc.get("lines", []):
        f = funcs[ln.get("function_index", [0])[0]]
        name = strings[f.get("name_strindex", [0])[0]]
        file = strings[f.get("filename_strindex", [0])[0]]
        out.append((name, file.rsplit("/", 1)[-1], ln.get("line", [0])[0]))
    return out
def at(addr):
    return lines_of(next((l for l in d.get("location_table", []) if l.get("address") == [addr]), {}))
want = [("leaf", "inline.c", l_leaf), ("mid", "inline.c", l_mid), ("outer", "inline.c", l_outer)]
got = at(leaf)
print(("PASS" if got == want else "FAIL") + " native frame: the inline chain leaf <- mid <- outer"
      " with inline.c's lines" + ("" if got == want else ": %s" % got))
got = at(plain)
print(("PASS" if got == [("plain", "inline.c", l_plain)] else "FAIL") +
      " native frame: plain with its line" + ("" if got == [("plain", "inline.c", l_plain)] else ": %s" % got))
locs = d.get("location_table", [])
got = [lines_of(locs[3]), lines_of(locs[4])] if len(locs) == 5 else locs
want = [[("do_syscall_64", "", 0)], [("work", "app.py", 7)]]
print(("PASS" if got == want else "FAIL") + " kernel and CPython frames unchanged" +
      ("" if got == want else ": %s" % got))
dup = len(strings) != len(set(strings))
print(("FAIL" if dup else "PASS") + " no duplicate strings after the rewrite")
PY
report_lines <"$tmp/forwarded.checks"

if cmp -s "$tmp/fwd1.txt" "$tmp/unknown.txt"; then
	pass "request for files opal never saw forwarded unchanged"
else
	fail "request for files opal never saw forwarded unchanged" \
		"$(diff "$tmp/unknown.txt" "$tmp/fwd1.txt" | head -n 5 | tr '\n' ' ')"
fi

# ---- the flame graph's recent profiles hold the received ones -------------------------------
curl -s -o "$tmp/fg.html" --max-time 30 "$base/flamegraph?seconds=600&pid=4242"
python3 - "$tmp/fg.html" <<'PY' >"$tmp/fg.checks" 2>&1 || fail "flame graph checked" "$(tail -n 3 "$tmp/fg.checks")"
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<script[^>]*id="opal-data"[^>]*>(.*?)</script>', text, re.S)
d = json.loads(m.group(1)) if m else {"names": [], "total": 0}
want = {"leaf", "mid", "outer", "plain", "do_syscall_64", "work"}
missing = want - set(d["names"])
ok = not missing and d["total"] == 2
print(("PASS" if ok else "FAIL") + " GET /flamegraph?pid=4242 shows both received profiles with the"
      " symbolized chain" + ("" if ok else ": total %d, missing %s" % (d["total"], sorted(missing))))
PY
report_lines <"$tmp/fg.checks"

# ---- bad input: answered, counted, nothing forwarded -----------------------------------------
head -c $(($(stat -c %s "$tmp/known.pb") / 2)) "$tmp/known.pb" >"$tmp/truncated.pb"
head -c $((2 << 20)) /dev/zero >"$tmp/big.pb"
head -c $((8 << 20)) /dev/zero | gzip -c >"$tmp/bomb.pb.gz"
expect() { # NAME WANT_STATUS FILE CURL_ARGS...
	local name=$1 want=$2 file=$3 code
	shift 3
	code=$(post bad "$file" "$@")
	if [ "$code" = "$want" ] && grep -q '"error"' "$tmp/bad.answer"; then
		pass "$name: $want"
	else
		fail "$name: $want" "status $code: $(head -c 200 "$tmp/bad.answer")"
	fi
}
expect "truncated protobuf" 400 "$tmp/truncated.pb" "${auth[@]}" "${pb[@]}"
expect "index out of range" 400 "$tmp/bad_index.pb" "${auth[@]}" "${pb[@]}"
expect "body over --max-upload-bytes" 413 "$tmp/big.pb" "${auth[@]}" "${pb[@]}"
expect "gzip bomb" 413 "$tmp/bomb.pb.gz" "${auth[@]}" "${pb[@]}" -H "Content-Encoding: gzip"
expect "JSON encoding" 415 "$tmp/known.pb" "${auth[@]}" -H "Content-Type: application/json"
expect "no bearer token" 401 "$tmp/known.pb" "${pb[@]}"
sleep 1
if [ "$(forwarded)" -eq 2 ]; then
	pass "refused requests were not forwarded"
else
	fail "refused requests were not forwarded" "$(forwarded) bodies reached the receiver, want 2"
fi

metrics=$(curl -s --max-time 10 "$base/metrics")
metric() { echo "$metrics" | sed -n "s/^$1 \([0-9]*\)$/\1/p"; }
want_metric() { # SERIES WANT
	local v
	v=$(metric "$1")
	if [ "$v" = "$2" ]; then
		pass "metric $1 = $2"
	else
		fail "metric $1 = $2" "${v:-absent}"
	fi
}
want_metric 'opal_otlp_receive_requests_total{outcome="forwarded"}' 2
want_metric 'opal_otlp_receive_requests_total{outcome="malformed"}' 2
want_metric 'opal_otlp_receive_requests_total{outcome="too_large"}' 2
want_metric 'opal_otlp_receive_requests_total{outcome="unsupported"}' 1
want_metric 'opal_otlp_receive_locations_total{result="symbolized"}' 2
want_metric 'opal_otlp_receive_locations_total{result="unknown_file"}' 2
want_metric 'opal_export_requests_total{exporter="otlp-forward",outcome="sent"}' 2

check_live_denials "no seccomp denial while receiving" "$base" "$tmp/sym.log"
stop_daemon "symbolizer ran and stopped cleanly" "$sym_pid" 30 "$tmp/sym.log"
check_exit_denials "no seccomp denial in the run" "$tmp/sym.log" 0
finish
