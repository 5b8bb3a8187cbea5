#!/usr/bin/env bash
# End-to-end test of the symbolizer's debug-info services (docs/http-api.md):
#   - a real `debuginfod -F DIR` on loopback as DEBUGINFOD_URLS (with the
#     negative cache),
#   - two symbolizers on loopback: "central" (HTTPS with a self-signed
#     certificate, bearer token, 256 KiB upload limit) and "host" (plain
#     HTTP, DEBUGINFOD_URLS, --upstream central --upload-debuginfo, fed by
#     the real collector),
#   - the upload flow with its bad cases (not an ELF, truncated ELF, wrong
#     build ID, oversize, missing/wrong token, non-hex build ID, concurrent
#     uploads of one ID), through curl and opal-debuginfo,
#   - a stripped fixture symbolized only through an upload, libc's static
#     functions through libc6-dbg, and each debug-data variant (DWARF 5 and
#     4, zlib, zstd decompressed by opal, dwz, MiniDebugInfo),
#   - debuginfod-find, eu-stack and gdb using the host symbolizer as their
#     DEBUGINFOD_URLS server.
# usage: tests/integration/test_debuginfo.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

# check NAME COMMAND...: PASS when the command succeeds, else FAIL with its output.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name" "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
	fi
}

# ---- prerequisites ---------------------------------------------------------
need_build "${1:?usage: test_debuginfo.sh BUILD_DIR}"
fx=$build/fixtures/debuginfo
dbg=$build/opal-debuginfo
need_daemons
need_bins "$dbg" "$report"
# (not need_fixtures: the debug and data files among them are not executables)
for f in di_full di_stripped di_full.debug di_dwarf4 di_zlib.debug di_zstd.debug di_link \
	di_link.debug di_dwz_a.debug di_dwz.multi di_mini di_mini.nm not_elf; do
	[ -e "$fx/$f" ] || need fixtures "$fx/$f is missing: run 'make fixtures'"
done
need_tools debuginfod debuginfod-find eu-stack gdb curl openssl python3 eu-readelf
libc=/lib/x86_64-linux-gnu/libc.so.6
[ "$prereq_ok" -eq 1 ] || finish
libc_id=$("$dbg" buildid "$libc" | sed -n 's/.* gnu=\([0-9a-f]*\) .*/\1/p')
libc_debug=/usr/lib/debug/.build-id/${libc_id:0:2}/${libc_id:2}.debug
[ -r "$libc_debug" ] || { need libc6-dbg "$libc_debug missing: install libc6-dbg"; finish; }

make_tmp opal-debuginfo-it

# Ports from this script's PID, so parallel runs do not collide.
base=$((20000 + ($$ % 20000)))
dfd_port=$base central_port=$((base + 1)) host_port=$((base + 2))
central=https://127.0.0.1:$central_port
host=http://127.0.0.1:$host_port

id_of() { "$dbg" buildid "$1" | sed -n 's/.* gnu=\([0-9a-f]*\) .*/\1/p'; }
addr_of() { # FILE SYMBOL -> 0xADDR from FILE's .symtab
	eu-readelf -s "$1" | awk -v s="$2" '$8 == s { print "0x" $2; exit }' | sed 's/0x0*/0x/'
}
full_id=$(id_of "$fx/di_full")
dwarf4_id=$(id_of "$fx/di_dwarf4")
link_id=$(id_of "$fx/di_link")
dwz_id=$(id_of "$fx/di_dwz_a")
mini_id=$(id_of "$fx/di_mini")
leaf=$(addr_of "$fx/di_full" di_mark_leaf)
static_full=$(addr_of "$fx/di_full" di_mark_static)

# ---- debuginfod ----------------------------------------------------------------
mkdir -p "$tmp/dfd-files"
cp "$fx/di_dwarf4" "$tmp/dfd-files/"
debuginfod -F "$tmp/dfd-files" -p "$dfd_port" -d "$tmp/dfd.sqlite" >"$tmp/debuginfod.log" 2>&1 &
dfd_ok=0
for _ in $(seq 300); do
	# curl, not debuginfod-find: the client would cache the first 404.
	if curl -sf -o /dev/null "http://127.0.0.1:$dfd_port/buildid/$dwarf4_id/debuginfo"; then
		dfd_ok=1
		break
	fi
	sleep 0.2
done
if [ "$dfd_ok" -eq 1 ]; then pass "debuginfod -F serves the fixture"; else
	fail "debuginfod -F serves the fixture" "$(tail -n 3 "$tmp/debuginfod.log")"; fi

# ---- the two symbolizers ---------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext "subjectAltName=IP:127.0.0.1" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" \
	>/dev/null 2>&1 || fail "self-signed certificate" "openssl req failed"
echo "central-token-$$" >"$tmp/central.token"
echo "host-token-$$" >"$tmp/host.token"
chmod 0600 "$tmp"/*.token "$tmp/key.pem"   # root-only: read before the privilege drop
ctok=$(cat "$tmp/central.token")
htok=$(cat "$tmp/host.token")
make_dirs "$tmp/central"
make_dirs "$tmp/host"
start_symbolizer "$tmp/central" "$tmp/central.log" --http-listen "127.0.0.1:$central_port" \
	--token-file "$tmp/central.token" --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" \
	--max-upload-bytes 256k --upload-expiry 3 || finish
sym_env=(DEBUGINFOD_URLS="http://127.0.0.1:$dfd_port")
start_symbolizer "$tmp/host" "$tmp/host.log" --http-listen "127.0.0.1:$host_port" \
	--token-file "$tmp/host.token" --upstream "$central" --upstream-token-file "$tmp/central.token" \
	--upstream-cacert "$tmp/cert.pem" --upload-debuginfo || finish
up=0
for _ in $(seq 100); do
	if curl -sf --cacert "$tmp/cert.pem" "$central/healthz" >/dev/null &&
		curl -sf "$host/healthz" >/dev/null; then
		up=1
		break
	fi
	sleep 0.1
done
if [ "$up" -eq 1 ]; then pass "central (HTTPS) and host symbolizers answer /healthz"; else
	fail "symbolizers start" "$(tail -n 5 "$tmp/central.log" "$tmp/host.log")"
	finish
fi

C() { curl -s --cacert "$tmp/cert.pem" "$@"; }   # to the central symbolizer
status() { curl -s -o "$tmp/body" -w '%{http_code}' --cacert "$tmp/cert.pem" "$@"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
# symbolize URL TOKEN ID ADDR... -> the JSON answer
symbolize() {
	local url=$1 tok=$2 id=$3 addrs="" a
	shift 3
	for a in "$@"; do addrs="$addrs${addrs:+,}\"$a\""; done
	curl -s --cacert "$tmp/cert.pem" -H "Authorization: Bearer $tok" -X POST "$url/symbolize/v1" \
		-d "{\"requests\":[{\"build_id\":\"$id\",\"addresses\":[$addrs]}]}"
}
# functions JSON -> "f1;f2;...|line-of-first" of the first location
functions() {
	python3 -c 'import json,sys
loc = json.load(sys.stdin)["results"][0]["locations"][0]["frames"]
print(";".join(str(f["function"]) for f in loc) + "|" + str(loc[0]["line"] if loc else None))'
}

# ---- upload flow against the central symbolizer ----------------------------------
if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$central_port/healthz")" != 200 ]
then pass "central refuses plain HTTP on its TLS port"; else
	fail "central refuses plain HTTP on its TLS port" "answered 200"; fi
body="{\"build_id\":\"$full_id\",\"hash\":\"$(sha "$fx/di_full.debug")\",\"size\":$(size "$fx/di_full.debug")}"
s=$(status -X POST "$central/debuginfo/v1/initiate-upload" -d "$body")
[ "$s" = 401 ] && pass "missing token: 401" || fail "missing token: 401" "got $s"
s=$(status -H "Authorization: Bearer nope" -X POST "$central/debuginfo/v1/initiate-upload" -d "$body")
[ "$s" = 403 ] && pass "wrong token: 403" || fail "wrong token: 403" "got $s"
auth=(-H "Authorization: Bearer $ctok")
s=$(status "${auth[@]}" -X POST "$central/debuginfo/v1/should-initiate-upload" \
	-d "{\"build_id\":\"XYZ123\",\"hash\":\"$(sha "$fx/di_full.debug")\"}")
[ "$s" = 400 ] && grep -q hex "$tmp/body" && pass "non-hex build ID: 400" ||
	fail "non-hex build ID: 400" "got $s $(cat "$tmp/body")"

# upload FILE ID [TYPE] -> prints "initiate-status put-status put-body"
upload() {
	local file=$1 id=$2 type=${3:-debuginfo} r url s
	r=$(C "${auth[@]}" -X POST "$central/debuginfo/v1/initiate-upload" -w '\n%{http_code}' \
		-d "{\"build_id\":\"$id\",\"type\":\"$type\",\"hash\":\"$(sha "$file")\",\"size\":$(size "$file")}")
	s=$(echo "$r" | tail -n 1)
	if [ "$s" != 200 ]; then echo "$s - $(echo "$r" | head -n 1)"; return; fi
	url=$(echo "$r" | head -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["upload_url"])')
	s=$(status "${auth[@]}" -T "$file" "$central$url")
	echo "200 $s $(cat "$tmp/body")"
}
r=$(upload "$fx/not_elf" "$full_id")
[[ $r == "200 400 "*"not an ELF"* ]] && pass "not an ELF: 400" || fail "not an ELF: 400" "$r"
r=$(upload "$fx/not_elf" "$full_id")
[[ $r == "409 "* ]] && pass "same invalid bytes again: 409" || fail "same invalid bytes: 409" "$r"
head -c 3000 "$fx/di_full.debug" >"$tmp/truncated"
r=$(upload "$tmp/truncated" "$full_id")
[[ $r == "200 400 "*truncated* ]] && pass "truncated ELF: 400" || fail "truncated ELF: 400" "$r"
r=$(upload "$fx/di_dwarf4.debug" "$full_id")
[[ $r == "200 400 "*"build ID mismatch"* ]] && pass "wrong build ID: 400" ||
	fail "wrong build ID: 400" "$r"
head -c 300000 /dev/urandom >"$tmp/big"
r=$(upload "$tmp/big" "$full_id")
[[ $r == "413 "* ]] && pass "oversize (over --max-upload-bytes): 413" || fail "oversize: 413" "$r"
# Concurrent initiates of one ID: exactly one wins, the rest get 412.
race_pids=()
for i in 1 2 3 4 5; do
	C "${auth[@]}" -o /dev/null -w '%{http_code}\n' -X POST \
		"$central/debuginfo/v1/initiate-upload" -d "$body" >"$tmp/race.$i" &
	race_pids+=($!)
done
wait "${race_pids[@]}"
wins=$(cat "$tmp"/race.* | grep -c '^200$')
busy=$(cat "$tmp"/race.* | grep -c '^412$')
[ "$wins" = 1 ] && [ "$busy" = 4 ] && pass "concurrent uploads of one ID: one 200, four 412" ||
	fail "concurrent uploads of one ID" "$(cat "$tmp"/race.* | tr '\n' ' ')"
sleep 4   # that winner expires unfinished (--upload-expiry 3)

# The stripped fixture, symbolized only through an upload.
j=$(symbolize "$central" "$ctok" "$full_id" "$leaf")
[ "$(echo "$j" | functions)" = "|None" ] && pass "central: no answer before the upload" ||
	fail "central: no answer before the upload" "$j"
out=$("$dbg" upload --server "$central" --token-file "$tmp/central.token" --cacert "$tmp/cert.pem" \
	"$fx/di_stripped" "$fx/di_full" 2>&1)
echo "$out" | grep -q "di_full: uploaded" && pass "opal-debuginfo uploads the debug parts over HTTPS" ||
	fail "opal-debuginfo upload" "$out"
f=$(symbolize "$central" "$ctok" "$full_id" "$leaf" | functions)
[[ $f == "di_leaf;di_mid;di_outer|"[1-9]* ]] && pass "stripped fixture symbolized through the upload ($f)" ||
	fail "stripped fixture symbolized through the upload" "$f"
out=$("$dbg" upload --server "$central" --token-file "$tmp/central.token" --cacert "$tmp/cert.pem" \
	"$fx/di_full" 2>&1)
echo "$out" | grep -q "not needed" && pass "re-upload: not needed" || fail "re-upload: not needed" "$out"
"$dbg" upload --server "$central" --token-file "$tmp/central.token" --cacert "$tmp/cert.pem" \
	--type debuginfo --build-id "$link_id" "$fx/di_link.debug" >"$tmp/link-upload.log" 2>&1 ||
	fail "upload di_link.debug to central" "$(cat "$tmp/link-upload.log")"

# ---- sources on the host: debuginfod, libc6-dbg, variants ---------------------------
f=$(symbolize "$host" "$htok" "$dwarf4_id" "$(addr_of "$fx/di_dwarf4" di_mark_leaf)" | functions)
[[ $f == "di_leaf;di_mid;di_outer|"[1-9]* ]] && pass "DWARF 4 via the real debuginfod ($f)" ||
	fail "DWARF 4 via debuginfod" "$f"
symbolize "$host" "$htok" 00112233445566778899 0x10 >/dev/null
symbolize "$host" "$htok" 00112233445566778899 0x10 >/dev/null
m=$(curl -s "$host/metrics")
nf=$(echo "$m" | sed -n 's/^opal_debuginfod_lookups_total{result="not_found"} //p')
nc=$(echo "$m" | sed -n 's/^opal_debuginfod_lookups_total{result="negative_cached"} //p')
[ "${nf:-0}" -ge 1 ] && [ "${nc:-0}" -ge 1 ] && pass "debuginfod negative cache (not_found $nf, cached $nc)" ||
	fail "debuginfod negative cache" "not_found=$nf negative_cached=$nc"

lsym=$(eu-readelf -s "$libc_debug" | awk '$4 == "FUNC" && $5 == "LOCAL" && $3 > 64 && $8 !~ /\./ { print $2, $8; exit }')
laddr=0x$(echo "$lsym" | cut -d' ' -f1 | sed 's/^0*//')
lname=$(echo "$lsym" | cut -d' ' -f2)
f=$(symbolize "$host" "$htok" "$libc_id" "$(printf '0x%x' $((laddr + 4)))" | functions)
[[ ";${f%%|*};" == *";$lname;"* ]] && pass "libc static function $lname via libc6-dbg" ||
	fail "libc static function via libc6-dbg" "$lname: $f"

hupload() { "$dbg" upload --server "$host" --token-file "$tmp/host.token" "$@" 2>&1; }
hupload --build-id "$full_id" "$fx/di_zstd.debug" >"$tmp/zstd.log"
# eu-addr2line on the uncompressed build: the line of the innermost frame
want_line=$(eu-addr2line -i -e "$fx/di_full" "$leaf" | head -n 1 | sed 's/.*:\([0-9]*\):[0-9]*$/\1/')
f=$(symbolize "$host" "$htok" "$full_id" "$leaf" | functions)
[ "$f" = "di_leaf;di_mid;di_outer|$want_line" ] &&
	pass "zstd-compressed DWARF (opal's libzstd): inline chain and line ($f)" ||
	fail "zstd-compressed DWARF: inline chain" "$f, want line $want_line $(cat "$tmp/zstd.log")"
hupload --force --build-id "$full_id" "$fx/di_zlib.debug" >"$tmp/zlib.log"
f=$(symbolize "$host" "$htok" "$full_id" "$leaf" | functions)
[ "$f" = "di_leaf;di_mid;di_outer|$want_line" ] &&
	pass "zlib-compressed DWARF gives the same frames ($f)" ||
	fail "zlib DWARF: the same frames" "$f $(cat "$tmp/zlib.log")"
hupload --build-id "$dwz_id" "$fx/di_dwz_a.debug" >"$tmp/dwz.log"
hupload "$fx/di_dwz.multi" >>"$tmp/dwz.log"
f=$(symbolize "$host" "$htok" "$dwz_id" "$(addr_of "$fx/di_dwz_a" di_mark_leaf)" | functions)
[[ $f == "di_leaf;di_mid;di_outer|"[1-9]* ]] && pass "dwz: .gnu_debugaltlink file by build ID ($f)" ||
	fail "dwz" "$f $(cat "$tmp/dwz.log")"
hupload --type executable "$fx/di_mini" >"$tmp/mini.log"
maddr=0x$(awk '$3 == "di_static_work" { print $1 }' "$fx/di_mini.nm" | sed 's/^0*//')
f=$(symbolize "$host" "$htok" "$mini_id" "$(printf '0x%x' $((maddr + 2)))" | functions)
[ "$f" = "di_static_work|None" ] && pass "MiniDebugInfo names a static function" ||
	fail "MiniDebugInfo" "$f $(cat "$tmp/mini.log")"

# ---- debuginfod clients using the host symbolizer ----------------------------------
"$fx/di_stripped" 20 &
spin_pid=$!
sleep 0.5
export DEBUGINFOD_CACHE_PATH=$tmp/client-cache DEBUGINFOD_URLS=$host
check "debuginfod-find -v debuginfo from opal" \
	sh -c "debuginfod-find -v debuginfo '$fx/di_stripped' 2>&1 | grep -q 'X-DEBUGINFOD-SIZE'"
es=$(eu-stack -p "$spin_pid" 2>&1)
echo "$es" | grep -q di_outer && pass "eu-stack names frames through opal" ||
	fail "eu-stack through opal" "$(echo "$es" | head -n 5 | tr '\n' ' ')"
gd=$(timeout 60 gdb -q -batch -iex 'set debuginfod enabled on' -ex 'thread apply all bt' \
	-p "$spin_pid" 2>&1)
echo "$gd" | grep -q "di_outer.*di.c:[0-9]" && pass "gdb names frames with lines through opal" ||
	fail "gdb through opal" "$(echo "$gd" | grep -m 3 '#' | tr '\n' ' ')"
unset DEBUGINFOD_CACHE_PATH DEBUGINFOD_URLS
kill "$spin_pid" 2>/dev/null

# ---- fleet: collector -> host -> central ---------------------------------------------
mkdir -p "$tmp/app"
chmod 0755 "$tmp/app"
cp "$fx/di_link" "$fx/di_dwarf4" "$tmp/app/"    # no debug file next to di_link here
start_collector "$tmp/collector.log" --socket "$tmp/host/run/opal.sock" --frequency 199 \
	--interval 2 && pass "collector starts"
"$tmp/app/di_link" 12 &
link_pid=$!
"$tmp/app/di_dwarf4" 12 &
d4_pid=$!
wait "$link_pid" "$d4_pid"
sleep 4
kill -TERM "$coll_pid" 2>/dev/null
wait_for_exit "$coll_pid" 30
sleep 3
last=$(ls -t "$tmp/host/out/intervals/"*.pb.gz 2>/dev/null)
found=0
for p in $last; do
	if "$report" stacks "$p" 2>/dev/null | grep "^pid=$link_pid " | grep -q "di_outer"; then
		found=1
		break
	fi
done
[ "$found" = 1 ] && pass "host names a stripped binary through the central symbolizer" ||
	fail "host names a stripped binary through the central" \
		"$(grep -h upstream "$tmp/host.log" | tail -n 3 | tr '\n' ' ')"
s=$(status "$central/buildid/$dwarf4_id/debuginfo")
[ "$s" = 200 ] && pass "--upload-debuginfo: the host uploaded a new file's debug parts" ||
	fail "--upload-debuginfo" "central answers $s; $(grep -h upstream "$tmp/host.log" | tail -n 3 | tr '\n' ' ')"
m=$(curl -s "$host/metrics")
echo "$m" | grep -q '^opal_collector_samples_total{host=' && pass "collector counters in /metrics" ||
	fail "collector counters in /metrics" "$(echo "$m" | grep collector | head -n 2)"
echo "$m" | grep -Eq '^opal_upstream_events_total\{event="batch_ok"\} [1-9]' &&
	pass "host sent batches upstream" || fail "host sent batches upstream" "$(echo "$m" | grep upstream)"

check_live_denials "central: no seccomp denials" "$central" "$tmp/central.log" \
	--cacert "$tmp/cert.pem"
check_live_denials "host: no seccomp denials" "$host" "$tmp/host.log"
cleanup
finish
