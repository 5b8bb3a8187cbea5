#!/usr/bin/env bash
# The symbolizer's privilege drop and self-sandbox, observed from outside on
# the real daemon:
# - started as root with --user nobody: /proc/PID/status shows uid/gid
#   nobody, no capabilities in any set, NoNewPrivs 1, Seccomp 2;
# - it symbolizes a real collector's intervals under the sandbox without a
#   single seccomp denial, as its /metrics counter says (when
#   build/opal-collector exists);
# - it cannot open a root-only file (mode 0600 in a 0700 folder), nor a
#   world-readable file outside the folders Landlock grants. To observe
#   that on the daemon itself, a preloaded probe (tests/fixtures/sandbox)
#   makes its main thread call open() once it is sandboxed: the kernel
#   applies the process's own credentials, Landlock domain and seccomp
#   filter, so the answer is the daemon's. A file in its state folder is
#   opened the same way as a control;
# - a system call outside the allow-list fails with EPERM, is logged, and
#   is the one denial of the exit total;
# - started by an unprivileged user it applies the same sandbox;
# - as root without --user it refuses to start.
# usage: tests/integration/test_sandbox.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_sandbox.sh BUILD_DIR}"
need_root "the symbolizer drops from root to nobody"
need_nobody
need_tools setpriv curl
need_bins "$symbolizer"
probe=$build/fixtures/sandbox/probe.so
need_fixtures "$probe"
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-sandbox

# status_field PID NAME: the value of NAME in /proc/PID/status.
status_field() {
	awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ +/, ""); print; exit }' "/proc/$1/status"
}

# in_process COMMAND...: the probe's "RET ERRNO" answer to each COMMAND
# ("open PATH", "syscall NR"), run by the symbolizer's main thread (within
# its 200 ms poll), or "timeout".
in_process() {
	local c ans
	for c in "$@"; do
		printf '%s\n' "$c" >"$tmp/probe.cmd"
		read -r -t 10 -u "$probe_res" ans && echo "$ans" || echo timeout
	done
}

nobody_uid=$(id -u nobody)
nobody_gid=$(id -g nobody)

# ---- as root with --user nobody --------------------------------------------------
sock=$tmp/run/sym.sock
mkdir -p "$tmp/run"
mkfifo -m 0600 "$tmp/probe.cmd" "$tmp/probe.res"
exec {probe_res}<>"$tmp/probe.res"
LD_PRELOAD=$probe OPAL_PROBE_CMD=$tmp/probe.cmd OPAL_PROBE_RES=$tmp/probe.res \
	"$symbolizer" --socket "$sock" --state-dir "$tmp/state" --out-dir "$tmp/out" --whole-run \
	--user nobody --http-listen 127.0.0.1:0 >"$tmp/sym.log" 2>&1 &
sym=$!
# Ready once it logs "listening on": the socket is bound before the sandbox
# is applied.
if ! wait_symbolizer "$sym" "$tmp/sym.log" || [ ! -S "$sock" ]; then
	fail "symbolizer starts as root with --user nobody" "no socket; log: $(tail -n 5 "$tmp/sym.log")"
	finish
fi
pass "symbolizer starts as root with --user nobody"

uids=$(status_field "$sym" Uid)
gids=$(status_field "$sym" Gid)
[ "$(echo $uids)" = "$nobody_uid $nobody_uid $nobody_uid $nobody_uid" ] &&
	[ "$(echo $gids)" = "$nobody_gid $nobody_gid $nobody_gid $nobody_gid" ] &&
	pass "runs as nobody (Uid: $(echo $uids))" ||
	fail "runs as nobody" "Uid: $uids, Gid: $gids"
caps_ok=1
for f in CapInh CapPrm CapEff CapBnd CapAmb; do
	v=$(status_field "$sym" $f)
	[ "$v" = 0000000000000000 ] || { fail "capability set $f empty" "$f: $v"; caps_ok=0; }
done
[ "$caps_ok" -eq 1 ] && pass "no capabilities (CapEff, CapPrm, CapInh, CapBnd, CapAmb all 0)"
[ "$(status_field "$sym" NoNewPrivs)" = 1 ] && pass "NoNewPrivs: 1" ||
	fail "NoNewPrivs: 1" "NoNewPrivs: $(status_field "$sym" NoNewPrivs)"
[ "$(status_field "$sym" Seccomp)" = 2 ] && pass "Seccomp: 2 (filter mode)" ||
	fail "Seccomp: 2" "Seccomp: $(status_field "$sym" Seccomp)"
grep -q 'sandbox: seccomp allow-list; Landlock ABI [12]' "$tmp/sym.log" &&
	pass "Landlock applied ($(grep -o 'Landlock ABI.*rules' "$tmp/sym.log"))" ||
	fail "Landlock applied" "$(grep sandbox "$tmp/sym.log")"

# Real traffic under the sandbox.
if [ ! -x "$collector" ]; then
	fail "collector traffic" "$collector is missing: run 'make all'"
elif start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 1; then
	coll=$coll_pid
	busy_load 4
	kill -TERM "$coll" 2>/dev/null
	wait_for_exit "$coll" 30
	[ "$wait_rc" -eq 0 ] || fail "collector ran against the sandboxed symbolizer" \
		"exit $wait_rc: $(tail -n 5 "$tmp/collector.log")"
	n=$(ls "$tmp/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
	if [ "$n" -ge 2 ] && "$report" check "$tmp/out/profile.pb.gz" >"$tmp/check.txt" 2>&1; then
		pass "sandboxed symbolizer wrote $n intervals with symbolized user and kernel frames"
	else
		fail "sandboxed symbolizer wrote symbolized intervals" \
			"$n intervals; $(cat "$tmp/check.txt" 2>/dev/null)"
	fi
	check_live_denials "no seccomp denial while symbolizing" \
		"http://127.0.0.1:$(http_port "$tmp/sym.log")" "$tmp/sym.log"
fi

# File access, asked of the daemon itself.
mkdir -p "$tmp/rootonly"
chmod 0700 "$tmp/rootonly"
echo secret >"$tmp/rootonly/secret"
chmod 0600 "$tmp/rootonly/secret"
echo public >"$tmp/public"
chmod 0644 "$tmp/public"
echo control >"$tmp/state/control"
chmod 0644 "$tmp/state/control"
mapfile -t r < <(in_process "open $tmp/state/control" "open $tmp/rootonly/secret" \
	"open $tmp/public" "open /etc/passwd")
if [ "${#r[@]}" -ne 4 ] || [[ " ${r[*]} " == *" timeout "* ]]; then
	fail "the probe answers inside the daemon" "got: ${r[*]}"
else
	[ "${r[0]% *}" -ge 0 ] &&
		pass "control: it opens a file in its state folder (fd ${r[0]% *})" ||
		fail "control: it opens a file in its state folder" "open: ${r[0]}"
	[ "${r[1]}" = "-1 13" ] &&
		pass "it cannot open a root-only file (mode 0600 in a 0700 folder): EACCES" ||
		fail "it cannot open a root-only file" "open: ${r[1]} (ret errno)"
	[ "${r[2]}" = "-1 13" ] &&
		pass "Landlock: it cannot open a world-readable file outside its folders: EACCES" ||
		fail "Landlock refuses a world-readable file outside its folders" "open: ${r[2]}"
	[ "${r[3]}" = "-1 13" ] &&
		pass "Landlock: it cannot read /etc/passwd: EACCES" ||
		fail "Landlock refuses /etc/passwd" "open: ${r[3]}"
fi

# A system call outside the allow-list: ptrace (101 on x86_64).
r=$(in_process "syscall 101")
if [ "$r" = "-1 1" ] && wait_log "$tmp/sym.log" 'seccomp: denied system call ptrace \(101\) with EPERM' 5; then
	pass "a call outside the allow-list fails with EPERM and is logged"
else
	fail "a call outside the allow-list fails with EPERM and is logged" \
		"got $r; log: $(grep seccomp "$tmp/sym.log")"
fi

kill -TERM "$sym"
wait_for_exit "$sym" 30
[ "$wait_rc" -eq 0 ] && pass "stops cleanly" || fail "stops cleanly" "exit $wait_rc; $(tail -n 3 "$tmp/sym.log")"
check_exit_denials "counts exactly the one denial" "$tmp/sym.log" 1

# ---- started by an unprivileged user ------------------------------------------------
mkdir -p "$tmp/user"
chown nobody: "$tmp/user"
usock=$tmp/user/sym.sock
setpriv --reuid nobody --regid "$nobody_gid" --clear-groups \
	"$symbolizer" --socket "$usock" --state-dir "$tmp/user/state" --out-dir "$tmp/user/out" \
	>"$tmp/user.log" 2>&1 &
usym=$!
if wait_symbolizer "$usym" "$tmp/user.log" && [ -S "$usock" ]; then
	[ "$(status_field "$usym" Seccomp)" = 2 ] && [ "$(status_field "$usym" NoNewPrivs)" = 1 ] &&
		[ "$(status_field "$usym" CapEff)" = 0000000000000000 ] &&
		grep -q 'sandbox: seccomp allow-list; Landlock ABI' "$tmp/user.log" &&
		pass "started as nobody: same sandbox (Seccomp 2, NoNewPrivs 1, Landlock)" ||
		fail "started as nobody: same sandbox" \
			"Seccomp $(status_field "$usym" Seccomp), NoNewPrivs $(status_field "$usym" NoNewPrivs)"
	kill -TERM "$usym"
	wait_for_exit "$usym" 30
	[ "$wait_rc" -eq 0 ] || fail "unprivileged symbolizer stops cleanly" "exit $wait_rc"
else
	fail "started as nobody" "no socket; log: $(tail -n 5 "$tmp/user.log")"
fi

# ---- root without --user --------------------------------------------------------------
"$symbolizer" --socket "$tmp/root.sock" --state-dir "$tmp/rstate" --out-dir "$tmp/rout" \
	>"$tmp/root.log" 2>&1 &
rsym=$!
wait_for_exit "$rsym" 10
[ "$wait_rc" -eq 2 ] && grep -q 'refusing to run as root' "$tmp/root.log" && [ ! -e "$tmp/root.sock" ] &&
	pass "as root without --user it refuses to start" ||
	fail "as root without --user it refuses to start" "exit $wait_rc: $(cat "$tmp/root.log")"

finish
