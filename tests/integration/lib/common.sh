# shellcheck shell=bash disable=SC2034 # sets variables the sourcing scripts read
# Helpers shared by the integration scripts of tests/integration, sourced
# (bash) by each of them as
#     . "$(dirname "$0")/lib/common.sh"
# The contract tests/run-integration.sh relies on: a script prints a
# "PASS NAME" or "FAIL NAME: WHY" line per check, ends with
# "N passed, N failed" (finish) and exits non-zero on any failure; a
# missing prerequisite is a failure (need), never a skip.
# Temp folder (make_tmp): removed at the end of a run without failures,
# kept (and named) otherwise or when OPAL_IT_KEEP=1.
# Sets on sourcing: passed, failed, prereq_ok, tmp (empty), sym_env (empty),
# it_name (the script's file name), repo (the repository's root), lib_dir
# (this folder); and an EXIT trap that kills the script's own jobs.

passed=0
failed=0
prereq_ok=1
tmp=
sym_env=()
it_name=${0##*/}
lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$lib_dir/../../.." && pwd)

# ---- results ---------------------------------------------------------------------

# pass NAME: one check passed.
pass() {
	echo "PASS $1"
	passed=$((passed + 1))
}

# fail NAME WHY: one check failed, WHY says what was seen instead.
fail() {
	echo "FAIL $1: $2"
	failed=$((failed + 1))
}

# finish: ends the run: kills the script's jobs (cleanup), removes or keeps
# the temp folder, prints "N passed, N failed" as the last line and exits
# 0 only when no check failed.
finish() {
	cleanup
	if [ -n "$tmp" ]; then
		if [ "$failed" -eq 0 ] && [ "${OPAL_IT_KEEP:-0}" != 1 ]; then
			rm -rf "$tmp"
		else
			echo "$it_name: kept $tmp"
		fi
	fi
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

# report_lines: counts the "PASS NAME" and "FAIL NAME: WHY" lines a checker
# program (node, python) printed, read from stdin, as this script's own
# checks; its other non-empty lines are shown indented.
report_lines() {
	local line rest
	while IFS= read -r line; do
		case $line in
		"PASS "*) pass "${line#PASS }" ;;
		"FAIL "*)
			rest=${line#FAIL }
			fail "${rest%%: *}" "${rest#*: }"
			;;
		?*) echo "    $line" ;;
		esac
	done
}

# ---- prerequisites -----------------------------------------------------------------
# Each need* records a failed prerequisite and goes on, so that one run
# names them all; the script then ends with
#     [ "$prereq_ok" -eq 1 ] || finish

# need NAME WHY: the prerequisite NAME is missing (FAIL "prerequisite NAME");
# clears prereq_ok.
need() {
	fail "prerequisite $1" "$2"
	prereq_ok=0
}

# need_build DIR: sets build (DIR as an absolute path) and the paths of the
# binaries in it: collector, symbolizer, report. Ends the run when DIR is
# not a folder.
need_build() {
	build=$(cd "$1" 2>/dev/null && pwd) || {
		need build-dir "no folder $1"
		finish
	}
	collector=$build/opal-collector
	symbolizer=$build/opal-symbolizer
	report=$build/opal-report
}

# need_root WHY: running as root; WHY says what needs it.
need_root() {
	[ "$(id -u)" -eq 0 ] || need root "run as root: $1"
}

# need_bpf: a kernel that can load the collector's BPF CO-RE programs.
need_bpf() {
	[ -r /sys/kernel/btf/vmlinux ] ||
		need bpf "/sys/kernel/btf/vmlinux is missing: this kernel has no BTF, BPF CO-RE programs cannot load"
	[ -d /sys/fs/bpf ] || need bpf "/sys/fs/bpf is missing: no BPF support"
}

# need_nobody: the user nobody, to which the symbolizer drops.
need_nobody() {
	id nobody >/dev/null 2>&1 || need user "user 'nobody' does not exist (the symbolizer drops to it)"
}

# need_daemons: what running both daemons takes: root, a kernel with BTF,
# the user nobody, and the collector and symbolizer binaries.
need_daemons() {
	need_root "the collector loads BPF programs and opens perf events"
	need_bpf
	need_nobody
	need_bins "$collector" "$symbolizer"
}

# need_bins FILE...: each an executable that `make all` builds.
need_bins() {
	local b
	for b in "$@"; do
		[ -x "$b" ] || need binaries "$b is missing: run 'make all'"
	done
}

# need_fixtures FILE...: each an executable that `make fixtures` builds.
need_fixtures() {
	local f
	for f in "$@"; do
		[ -x "$f" ] || need fixtures "$f is missing: run 'make fixtures'"
	done
}

# need_tools COMMAND...: each in PATH.
need_tools() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null ||
			need "$t" "$t is not installed (scripts/install-deps.sh installs it)"
	done
}

# ---- processes and files -------------------------------------------------------------

# make_tmp PREFIX: sets tmp to a new folder /tmp/PREFIX.XXXXXX (mode 0755, so
# that the symbolizer's user can reach its folders inside) and names it;
# finish removes or keeps it.
make_tmp() {
	tmp=$(mktemp -d "/tmp/$1.XXXXXX")
	chmod 0755 "$tmp"
	echo "$it_name: working in $tmp"
}

# cleanup: kills and reaps the script's own background jobs still running,
# never anything by name (a pid this script already reaped may be someone
# else's by now). Runs from finish and on EXIT.
cleanup() {
	local p
	for p in $(jobs -p); do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
}
trap cleanup EXIT

# busy_load SECONDS: work for a profile, in the foreground: a shell loop
# (user frames) and dd copying /dev/zero (kernel frames under libc's read
# and write). An idle machine (CI) has nothing else to sample, and the
# daemons' own samples are excluded.
busy_load() {
	local dd_pid
	timeout "$1" dd if=/dev/zero of=/dev/null bs=64k status=none &
	dd_pid=$!
	timeout "$1" bash -c 'while :; do :; done'
	wait "$dd_pid"
}

# wait_for_exit PID SECONDS: waits up to SECONDS for the child PID to exit;
# sets wait_rc to its exit status, 124 when it is still running.
wait_for_exit() {
	local pid=$1 limit=$2 i
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		wait_rc=124
		return
	fi
	wait "$pid"
	wait_rc=$?
}

# wait_log FILE ERE SECONDS [PID]: returns 0 as soon as a line of FILE
# matches ERE, 1 after SECONDS or, with PID, once that process has exited
# without logging it.
wait_log() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -qE -- "$2" "$1" 2>/dev/null && return 0
		if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then
			grep -qE -- "$2" "$1" 2>/dev/null
			return
		fi
		sleep 0.1
	done
	return 1
}

# wait_acked LOG SECONDS PID: waits until the symbolizer has acknowledged
# the last interval the collector (run with --verbose, logging to LOG, pid
# PID) has closed so far. Under emulation the symbolizer runs intervals
# behind (a cold libpython takes tens of seconds there), and what it has
# not acknowledged when the collector stops is lost. 1 at the limit.
wait_acked() {
	local last
	last=$(sed -nE 's/.*opal-collector: interval ([0-9]+): .*/\1/p' "$1" | tail -n 1)
	[ -z "$last" ] && return 0
	wait_log "$1" "opal-collector: interval $last acknowledged" "$2" "$3"
}

# show_log NAME FILE: the last 30 lines of the daemon log FILE, indented
# (libbpf's lines left out).
show_log() {
	echo "---- $1 (last 30 lines)"
	grep -v 'libbpf:' "$2" 2>/dev/null | tail -n 30 | sed 's/^/    /'
}

# ---- the daemons ---------------------------------------------------------------------
# A daemon folder DIR holds the symbolizer's DIR/state and DIR/out and the
# collector socket DIR/run/opal.sock.

# make_dirs DIR: creates DIR/state and DIR/out for the symbolizer's user
# nobody, and DIR/run root's (as /run/opal: the collector refuses a socket
# folder another user could write, and trusts only a root listener unless
# told --symbolizer-user).
make_dirs() {
	mkdir -p "$1/state" "$1/out" "$1/run"
	chown nobody "$1/state" "$1/out"
}

# wait_symbolizer PID LOG [SECONDS]: returns 0 once the symbolizer PID logs
# its "listening on ...; state" line in LOG (socket bound, sandbox applied,
# HTTP API and signal handlers in place), 1 when it exits first or after
# SECONDS (30).
wait_symbolizer() {
	wait_log "$2" 'listening on .*; state ' "${3:-30}" "$1"
}

# not_started PID WHY: sets start_why to why the daemon PID is not up: its
# exit status when it has exited (reaping it), else WHY.
not_started() {
	start_why=$2
	if ! kill -0 "$1" 2>/dev/null; then
		wait "$1"
		start_why="exited with status $? before it was ready"
	fi
}

# launch_symbolizer LOG ARGS...: starts the symbolizer with ARGS, its
# output into LOG, its environment changed by the sym_env array (env(1)
# arguments, e.g. (-u VAR)); sets sym_pid. Returns 0 once it is ready
# (wait_symbolizer), else fails the check "symbolizer starts", shows LOG
# and returns 1.
launch_symbolizer() {
	local log=$1
	shift
	env "${sym_env[@]}" "$symbolizer" "$@" >"$log" 2>&1 &
	sym_pid=$!
	wait_symbolizer "$sym_pid" "$log" && return 0
	not_started "$sym_pid" "not listening within 30 s"
	fail "symbolizer starts" "$start_why (see $log)"
	show_log symbolizer "$log"
	return 1
}

# start_symbolizer DIR LOG ARGS...: launch_symbolizer on the daemon folder
# DIR, as root with --user nobody, and ARGS.
start_symbolizer() {
	local dir=$1 log=$2
	shift 2
	launch_symbolizer "$log" --socket "$dir/run/opal.sock" --state-dir "$dir/state" \
		--out-dir "$dir/out" --user nobody "$@"
}

# start_collector LOG ARGS...: starts the collector with ARGS (--socket
# included), its output into LOG; sets coll_pid. Returns 0 once it logs
# "run ID:" (BPF programs loaded, sampling), setting run_hex to that run
# ID; else fails the check "collector starts", shows LOG and returns 1.
start_collector() {
	local log=$1
	shift
	"$collector" "$@" >"$log" 2>&1 &
	coll_pid=$!
	if wait_log "$log" 'opal-collector: run [0-9a-f]{16}:' 20 "$coll_pid"; then
		run_hex=$(sed -nE 's/^<6>opal-collector: run ([0-9a-f]{16}):.*/\1/p' "$log" | head -n 1)
		return 0
	fi
	not_started "$coll_pid" "no 'run' line within 20 s"
	fail "collector starts" "$start_why (see $log)"
	show_log collector "$log"
	return 1
}

# stop_daemon CHECK PID SECONDS LOG: SIGTERM to the daemon PID; PASS CHECK
# when it exits with status 0 within SECONDS, else FAIL CHECK with its exit
# status (124: still running), LOG shown, and return 1. Sets wait_rc.
stop_daemon() {
	kill -TERM "$2" 2>/dev/null
	wait_for_exit "$2" "$3"
	if [ "$wait_rc" -eq 0 ]; then
		pass "$1"
		return 0
	fi
	fail "$1" "exit status $wait_rc"
	show_log "${4##*/}" "$4"
	return 1
}

# http_port LOG: the port of the symbolizer's HTTP API (--http-listen
# 127.0.0.1:0) as its log names it; empty when it has none.
http_port() {
	sed -n 's/.*http: listening on 127.0.0.1:0 (port \([0-9]*\).*/\1/p' "$1"
}

# ---- seccomp denials, counted by the symbolizer ------------------------------------------
# A check that the sandbox refused nothing reads the symbolizer's count,
# never the absence of a log line: a run that never got to log would pass.

# check_exit_denials CHECK LOG WANT: PASS CHECK when the symbolizer's exit
# total in LOG ("seccomp denied N system calls in this run", logged at
# every clean exit) is WANT; FAIL with the total, or its absence, and the
# logged denials.
check_exit_denials() {
	local n
	n=$(sed -n 's/.*seccomp denied \([0-9]*\) system calls in this run.*/\1/p' "$2" | tail -n 1)
	if [ "$n" = "$3" ]; then
		pass "$1"
	elif [ -z "$n" ]; then
		fail "$1" "no exit total of seccomp denials in $2 (did the symbolizer exit cleanly?)"
	else
		fail "$1" "$n denied, want $3: $(grep -m 2 'seccomp: denied' "$2" | tr '\n' ' ')"
	fi
}

# check_live_denials CHECK BASE_URL LOG [CURL_ARG...]: PASS CHECK when the
# running symbolizer at BASE_URL counts no seccomp denial
# (opal_seccomp_denials_total in its /metrics, read with curl and
# CURL_ARGs, e.g. --cacert for HTTPS); FAIL with the count, or why it could
# not be read, and the denials LOG shows.
check_live_denials() {
	local n check=$1 url=$2 log=$3
	shift 3
	n=$(curl -s --max-time 10 "$@" "$url/metrics" |
		sed -n 's/^opal_seccomp_denials_total \([0-9]*\)$/\1/p')
	if [ "$n" = 0 ]; then
		pass "$check"
	elif [ -z "$n" ]; then
		fail "$check" "no opal_seccomp_denials_total in $url/metrics"
	else
		fail "$check" "$n denied: $(grep -m 2 'seccomp: denied' "$log" | tr '\n' ' ')"
	fi
}

# ---- the OTLP test receiver (tests/otlp_receiver) ---------------------------------------

# need_receiver: builds the receiver into $build/tests and sets receiver to
# it; a failed build fails the check "receiver builds" and ends the run.
need_receiver() {
	receiver=$build/tests/otlp-receiver
	if ! "$repo/tests/otlp_receiver/build.sh" "$build" >/dev/null 2>&1; then
		fail "receiver builds" "tests/otlp_receiver/build.sh $build failed"
		finish
	fi
}

# start_otlp_receiver NAME SCRIPT [ARGS...]: starts the receiver on a loopback
# port answering requests as SCRIPT says, with ARGS (e.g. --save-dir DIR), logging each request as a JSON line
# into $tmp/NAME.requests.jsonl (its own output: $tmp/NAME.receiver.log);
# sets rcv_pid, rcv_log and rcv_port. Returns 1 when it names no port
# within 5 s.
start_otlp_receiver() {
	rcv_log=$tmp/$1.requests.jsonl
	rm -f "$tmp/$1.port"
	"$receiver" --log "$rcv_log" --script "$2" --port-file "$tmp/$1.port" "${@:3}" \
		>"$tmp/$1.receiver.log" 2>&1 &
	rcv_pid=$!
	wait_log "$tmp/$1.port" '.' 5 "$rcv_pid"
	rcv_port=$(cat "$tmp/$1.port" 2>/dev/null)
	[ -n "$rcv_port" ]
}
