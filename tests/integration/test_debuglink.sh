#!/usr/bin/env bash
# End-to-end test of .gnu_debuglink candidates next to the binary (wire
# FileInfo kind DEBUGLINK): the real collector opens them in each profiled
# process's own view and passes their descriptors; the real symbolizer
# (--user nobody) names the frames of stripped fixtures
# (tests/fixtures/debuglink) from them. Their two static functions exist only
# in the debug files, so a name proves the debug file was used; line numbers
# are read from the whole-run pprof and checked against dl.c's marker lines.
#   dl_next    debug file next to the binary                   -> named, lines
#   dl_dot     debug file in .debug/, run as nobody            -> named, lines
#   dl_static  in a chroot; the debug file exists only inside  -> named, lines
#   dl_none    no debug file                                   -> not named
#   dl_priv    debug file root-only (0600), run as nobody      -> not named
#   dl_link    .debug is a symlink to the debug file's folder  -> not named
#   dl_crc     a debug file of another build under its name    -> not named
# usage: tests/integration/test_debuglink.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

# ---- prerequisites ---------------------------------------------------------
need_build "${1:?usage: test_debuglink.sh BUILD_DIR}"
fx=$build/fixtures/debuglink
need_daemons
need_bins "$report"
for v in dl_next dl_dot dl_static dl_none dl_priv dl_link dl_crc; do
	if [ ! -x "$fx/$v" ] || [ ! -s "$fx/$v.debug" ]; then
		need fixtures "$fx/$v(.debug) missing: run 'make fixtures'"
	fi
done
[ -r "$fx/dl.c" ] || need fixtures "$fx/dl.c is missing: run 'make fixtures'"
need_tools chroot setpriv python3 readelf
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-debuglink-it

# ---- the layouts ---------------------------------------------------------------
# install_bin VARIANT DIR: the stripped binary into DIR (created 0755)
install_bin() {
	mkdir -p "$2"
	chmod 0755 "$2"
	install -m 0755 "$fx/$1" "$2/$1"
}
install_bin dl_next "$tmp/next"
install -m 0644 "$fx/dl_next.debug" "$tmp/next/"
install_bin dl_dot "$tmp/dot"
mkdir -m 0755 "$tmp/dot/.debug"
install -m 0644 "$fx/dl_dot.debug" "$tmp/dot/.debug/"
install_bin dl_static "$tmp/jail/app"
mkdir -m 0755 "$tmp/jail/app/.debug"
install -m 0644 "$fx/dl_static.debug" "$tmp/jail/app/.debug/"
install_bin dl_none "$tmp/none"
install_bin dl_priv "$tmp/priv"
install -m 0600 "$fx/dl_priv.debug" "$tmp/priv/"
install_bin dl_link "$tmp/link"
mkdir -m 0755 "$tmp/link-target"
install -m 0644 "$fx/dl_link.debug" "$tmp/link-target/"
ln -s "$tmp/link-target" "$tmp/link/.debug"
install_bin dl_crc "$tmp/crc"
install -m 0644 "$fx/dl_none.debug" "$tmp/crc/dl_crc.debug"
# The symbolizer itself must have no way to the debug files but the collector.
for v in dl_next dl_dot dl_static dl_priv dl_link dl_crc; do
	id=$(readelf -n "$fx/$v" | sed -n 's/^ *Build ID: *//p')
	[ -e "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] &&
		fail "no system copy of $v.debug" "/usr/lib/debug has it"
done

# ---- run ---------------------------------------------------------------------
make_dirs "$tmp"
sym_env=(-u DEBUGINFOD_URLS)
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
pass "symbolizer starts"
start_collector "$tmp/collector.log" --socket "$tmp/run/opal.sock" --frequency 99 --interval 2 || finish
pass "collector starts"

secs=5
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
declare -A pids
"$tmp/next/dl_next" $secs &
pids[dl_next]=$!
"${as_nobody[@]}" "$tmp/dot/dl_dot" $secs &
pids[dl_dot]=$!
chroot "$tmp/jail" /app/dl_static $secs &
pids[dl_static]=$!
"$tmp/none/dl_none" $secs &
pids[dl_none]=$!
"${as_nobody[@]}" "$tmp/priv/dl_priv" $secs &
pids[dl_priv]=$!
"$tmp/link/dl_link" $secs &
pids[dl_link]=$!
"$tmp/crc/dl_crc" $secs &
pids[dl_crc]=$!
ran=1
for v in "${!pids[@]}"; do
	wait "${pids[$v]}" || { fail "fixture $v runs" "exit status $?"; ran=0; }
done
[ "$ran" -eq 1 ] && pass "fixtures run (chroot, as nobody, as root)"
sleep 0.5
stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
sleep 1
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"

# ---- output ------------------------------------------------------------------
profile=$tmp/out/profile.pb.gz
stacks=$tmp/stacks.txt
if ! "$report" stacks "$profile" >"$stacks" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi
pass "opal-report stacks on the whole-run profile"

# samples PID [PATTERN] -> "matching total": samples of PID, and those whose
# stack contains PATTERN (an awk regex)
samples() {
	awk -v pid="$1" -v pat="${2:-^$}" '
	$1 == "pid=" pid {
		c = $0; sub(/^.* count=/, "", c)
		s = $0; sub(/^[^:]*: /, "", s)
		total += c
		if (s ~ pat) good += c
	}
	END { print good + 0, total + 0 }' "$stacks"
}

named="dl_spin_static;dl_outer_static;main"
for v in dl_next dl_dot dl_static; do
	read -r good total < <(samples "${pids[$v]}" "(^|;)$named(;|$)")
	if [ "$total" -ge 10 ] && [ $((good * 2)) -ge "$total" ]; then
		pass "$v: static functions named from its debug file ($good of $total samples)"
	else
		fail "$v: static functions named" "$good of $total samples have $named"
		grep "^pid=${pids[$v]} " "$stacks" | sort -t= -k5 -nr | head -n 3 | sed 's/^/    /'
	fi
done
# Not named, yet unwound: most samples hold frames of the binary itself,
# shown as "<binary>+0x<offset>" for want of a name.
for v in dl_none dl_priv dl_link dl_crc; do
	read -r bad total < <(samples "${pids[$v]}" "dl_(spin|outer)_static")
	read -r unnamed _ < <(samples "${pids[$v]}" "(^|;)$v\\+0x[0-9a-f]+;$v\\+0x")
	if [ "$total" -ge 10 ] && [ "$bad" -eq 0 ] && [ $((unnamed * 2)) -ge "$total" ]; then
		pass "$v: not named ($unnamed of $total samples have unnamed $v frames, none a name)"
	else
		fail "$v: not named" \
			"$bad of $total samples name a static function, $unnamed have unnamed $v frames"
		grep "^pid=${pids[$v]} " "$stacks" | head -n 3 | sed 's/^/    /'
	fi
done

# Line numbers: every location of dl_spin_static, per mapping file, with
# the file name and line its DWARF gave (pprof decoded by hand: no protobuf
# package needed).
PYTHONPATH=$lib_dir python3 - "$profile" >"$tmp/lines.txt" <<'EOF'
import gzip, os, sys
from wire_client import read_varint as varint

def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, v

def msg(b):
    d = {}
    for num, v in fields(b):
        d.setdefault(num, []).append(v)
    return d

p = msg(gzip.open(sys.argv[1]).read())
strings = [s.decode() for s in p.get(6, [])]
maps = {m[1][0]: strings[m.get(5, [0])[0]] for m in map(msg, p.get(3, []))}
funcs = {}
for f in map(msg, p.get(5, [])):
    funcs[f[1][0]] = (strings[f.get(2, [0])[0]], strings[f.get(4, [0])[0]])
for loc in map(msg, p.get(4, [])):
    mapping = maps.get(loc.get(2, [0])[0], "")
    for ln in map(msg, loc.get(4, [])):
        name, filename = funcs.get(ln.get(1, [0])[0], ("", ""))
        print(os.path.basename(mapping), name, os.path.basename(filename), ln.get(2, [0])[0])
EOF
first=$(grep -n 'DL_SPIN_FIRST \*/' "$fx/dl.c" | cut -d: -f1)
last=$(grep -n 'DL_SPIN_LAST \*/' "$fx/dl.c" | cut -d: -f1)
for v in dl_next dl_dot dl_static; do
	# lines of the leaf function's locations in this binary's mapping
	lines=$(awk -v m="$v" '$1 == m && $2 == "dl_spin_static" && $3 == "dl.c" { print $4 }' \
		"$tmp/lines.txt" | sort -nu | tr '\n' ' ')
	inside=$(echo "$lines" | tr ' ' '\n' | awk -v a="$first" -v b="$last" '$1 >= a && $1 <= b' | wc -l)
	if [ -n "$lines" ] && [ "$inside" -ge 1 ]; then
		pass "$v: dl.c lines of the hot loop ($first-$last) from DWARF: $lines"
	else
		fail "$v: dl.c lines" "want some in $first-$last, got: '$lines' ($(grep -c . "$tmp/lines.txt") location lines)"
	fi
done

check_exit_denials "symbolizer: no seccomp denials" "$tmp/symbolizer.log" 0
finish
