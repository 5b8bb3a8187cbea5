#!/usr/bin/env bash
# Install and the systemd units:
# - `make install PREFIX=/usr DESTDIR=ROOT` puts binaries, units, the
#   sysusers.d and tmpfiles.d files, the default configuration, manual pages
#   and docs in place; systemd-sysusers and systemd-tmpfiles, on ROOT, make
#   the symbolizer's user _opal and its private state folder from them;
# - `systemd-analyze verify --root=ROOT` accepts the installed units without
#   a single message (it needs their ExecStart binaries and man pages, so it
#   runs on the installed copies; ROOT also gets the host's own units, which
#   ours depend on, and kill for ExecReload);
# - `systemd-analyze security --offline=true`: the symbolizer's exposure is
#   at most 2.0, and so is the collector's;
# - the protocols the units rely on, with the installed binaries and the
#   installed configuration's options: systemd-socket-activate holds the
#   collector socket and starts the symbolizer on the collector's first
#   connection (LISTEN_FDS), the symbolizer sends READY=1, STATUS= and, on
#   SIGTERM, STOPPING=1 to $NOTIFY_SOCKET, survives SIGHUP (ExecReload),
#   leaves the activated socket in place and writes the collector's
#   intervals;
# - `make uninstall` removes everything again, keeping only an edited
#   configuration, which a reinstall does not overwrite either.
# usage: tests/integration/test_units.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_units.sh BUILD_DIR}"
need_root "the collector needs BPF"
need_tools systemd-analyze systemd-socket-activate help2man python3 make
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-units
root=$tmp/root
unitdir=$root/usr/lib/systemd/system

# ---- install ----------------------------------------------------------------------
if make -s -C "$repo" install PREFIX=/usr DESTDIR="$root" BUILD="$build" >"$tmp/install.log" 2>&1; then
	pass "make install PREFIX=/usr DESTDIR=..."
else
	fail "make install PREFIX=/usr DESTDIR=..." "$(tail -n 10 "$tmp/install.log")"
	finish
fi
expected=(
	usr/sbin/opal-collector usr/sbin/opal-symbolizer usr/bin/opal-report
	usr/lib/systemd/system/opal-collector.service usr/lib/systemd/system/opal-symbolizer.service
	usr/lib/systemd/system/opal-symbolizer.socket etc/opal/opal.env
	usr/lib/sysusers.d/opal.conf usr/lib/tmpfiles.d/opal.conf
	usr/share/man/man8/opal-collector.8 usr/share/man/man8/opal-symbolizer.8
	usr/share/man/man1/opal-report.1 usr/share/doc/opal/deployment.md
)
[ -x "$build/opal-debuginfo" ] && expected+=(usr/bin/opal-debuginfo usr/share/man/man1/opal-debuginfo.1)
missing=()
for f in "${expected[@]}"; do [ -e "$root/$f" ] || missing+=("$f"); done
[ ${#missing[@]} -eq 0 ] && pass "installed: ${#expected[@]} files (binaries, units, sysusers.d, tmpfiles.d, config, man pages, docs)" ||
	fail "installed files" "missing: ${missing[*]}"
grep -q "^ExecStart=/usr/sbin/opal-symbolizer " "$unitdir/opal-symbolizer.service" &&
	grep -q "^EnvironmentFile=-/etc/opal/opal.env" "$unitdir/opal-collector.service" &&
	! grep -q '@[a-z]*@' "$unitdir"/opal-* &&
	pass "unit paths follow PREFIX and SYSCONFDIR" ||
	fail "unit paths follow PREFIX and SYSCONFDIR" "$(grep -h -e ExecStart -e EnvironmentFile -e '@' "$unitdir"/opal-*)"
if systemd-sysusers --root="$root" >"$tmp/sysusers.log" 2>&1 &&
	systemd-tmpfiles --root="$root" --create opal.conf >"$tmp/tmpfiles.log" 2>&1; then
	uid=$(awk -F: '$1 == "_opal" { print $3 }' "$root/etc/passwd")
	got=$(stat -c '%a %u' "$root/var/lib/opal" 2>&1)
	[ -n "$uid" ] && [ "$uid" -lt 1000 ] && [ "$got" = "700 $uid" ] &&
		pass "sysusers.d makes the system user _opal (uid $uid), tmpfiles.d its /var/lib/opal (0700)" ||
		fail "sysusers.d and tmpfiles.d" "uid '$uid'; /var/lib/opal: $got"
	got=$(stat -c '%a %u' "$root/var/cache/opal-collector" 2>&1)
	[ "$got" = "700 0" ] &&
		pass "tmpfiles.d makes the collector's /var/cache/opal-collector (0700 root)" ||
		fail "tmpfiles.d makes /var/cache/opal-collector" "got: $got"
else
	fail "systemd-sysusers and systemd-tmpfiles accept the installed files" \
		"$(cat "$tmp/sysusers.log" "$tmp/tmpfiles.log" 2>/dev/null)"
fi
grep -q '^User=_opal$' "$unitdir/opal-symbolizer.service" &&
	pass "the symbolizer runs as _opal" ||
	fail "the symbolizer runs as _opal" "$(grep -E '^(User|DynamicUser)=' "$unitdir/opal-symbolizer.service")"
man -l "$root/usr/share/man/man8/opal-symbolizer.8" 2>/dev/null | grep -q -- '--state-dir' &&
	pass "man page generated from --help" || fail "man page generated from --help" "no --state-dir in it"

# ---- systemd-analyze verify ----------------------------------------------------------
# Our units order against and pull in the host's standard units.
cp -an /usr/lib/systemd/system/. "$unitdir/"
install -D /usr/bin/kill "$root/usr/bin/kill"
[ -e "$root/bin" ] || ln -s usr/bin "$root/bin"
for u in opal-symbolizer.socket opal-symbolizer.service opal-collector.service; do
	MANPATH=$root/usr/share/man systemd-analyze verify --root="$root" "/usr/lib/systemd/system/$u" \
		>"$tmp/verify.log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ] && [ ! -s "$tmp/verify.log" ]; then
		pass "systemd-analyze verify $u"
	else
		fail "systemd-analyze verify $u" "exit $rc: $(cat "$tmp/verify.log")"
	fi
done

# ---- exposure scores ----------------------------------------------------------------------
for u in opal-symbolizer.service opal-collector.service; do
	systemd-analyze security --offline=true --root="$root" "/usr/lib/systemd/system/$u" \
		>"$tmp/security.log" 2>&1
	score=$(sed -n "s/.*Overall exposure level for $u: \([0-9.]*\).*/\1/p" "$tmp/security.log")
	if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
		pass "$u offline exposure $score <= 2.0"
	else
		fail "$u offline exposure <= 2.0" "score '${score}': $(tail -n 3 "$tmp/security.log")"
	fi
done

# ---- socket activation and sd_notify with the installed binaries -------------------------
# The options systemd would pass from the installed configuration.
coll_opts=$(set -a; . "$root/etc/opal/opal.env"; echo "$OPAL_COLLECTOR_OPTS")
sym_opts=$(set -a; . "$root/etc/opal/opal.env"; echo "$OPAL_SYMBOLIZER_OPTS")
run=$tmp/run
mkdir -p "$run"
sock=$run/collector.sock
# start_receiver SOCKET OUTPUT: stands in for systemd's notification socket,
# writing one line per datagram (newlines shown as |) until STOPPING=1 or
# 120 s of silence; sets rx to its pid.
start_receiver() {
	python3 - "$1" "$2" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(120)
with open(sys.argv[2], "w", buffering=1) as out:
    try:
        while True:
            msg = s.recv(4096).decode()
            out.write(msg.replace("\n", "|") + "\n")
            if "STOPPING=1" in msg:
                break
    except socket.timeout:
        pass
PY
	rx=$!
	for _ in $(seq 50); do [ -S "$1" ] && break; sleep 0.1; done
	chmod 0777 "$1"   # the symbolizer sends as nobody
	: >>"$2"
}
notify=$tmp/notify.sock
start_receiver "$notify" "$tmp/notify.txt"
sym_rx=$rx
start_receiver "$tmp/coll-notify.sock" "$tmp/coll-notify.txt"

# shellcheck disable=SC2086 # the options are word lists, as systemd splits them
systemd-socket-activate -l "$sock" -E NOTIFY_SOCKET="$notify" \
	"$root/usr/sbin/opal-symbolizer" --socket "$sock" --state-dir "$tmp/state" \
	--out-dir "$tmp/out" --whole-run --user nobody $sym_opts >"$tmp/sym.log" 2>&1 &
sym=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
sleep 0.5
if [ -S "$sock" ] && [ ! -s "$tmp/notify.txt" ] && [ ! -e "$tmp/state" ]; then
	pass "socket held by the activator; symbolizer not started before a connection"
else
	fail "socket held by the activator" "socket: $(ls -l "$sock" 2>&1); notify: $(cat "$tmp/notify.txt")"
fi

# shellcheck disable=SC2086
NOTIFY_SOCKET=$tmp/coll-notify.sock \
	"$root/usr/sbin/opal-collector" --socket "$sock" $coll_opts >"$tmp/collector.log" 2>&1 &
coll=$!
wait_log "$tmp/notify.txt" READY=1 10
if grep -q '^READY=1' "$tmp/notify.txt" && grep -q 'STATUS=' "$tmp/notify.txt"; then
	pass "READY=1 and STATUS= sent once listening ($(grep -m1 STATUS= "$tmp/notify.txt"))"
else
	fail "READY=1 and STATUS= sent" "notifications: $(cat "$tmp/notify.txt"); log: $(tail -n 5 "$tmp/sym.log")"
fi
grep -q 'listening on .* (socket activation)' "$tmp/sym.log" &&
	pass "symbolizer took the socket from LISTEN_FDS" ||
	fail "symbolizer took the socket from LISTEN_FDS" "$(grep listening "$tmp/sym.log")"

# The collector is Type=notify too: READY=1 once it samples.
wait_log "$tmp/coll-notify.txt" READY=1 5
grep -q '^READY=1' "$tmp/coll-notify.txt" &&
	pass "collector sends READY=1 (Type=notify)" ||
	fail "collector sends READY=1 (Type=notify)" \
		"nothing on NOTIFY_SOCKET: under systemd the unit would time out starting"

kill -HUP "$sym"
sleep 0.5
kill -0 "$sym" 2>/dev/null && grep -q 'SIGHUP: nothing to reload' "$tmp/sym.log" &&
	pass "SIGHUP (ExecReload) is accepted and logged" ||
	fail "SIGHUP (ExecReload) is accepted" "$(tail -n 3 "$tmp/sym.log")"

# One interval of the installed configuration, then a clean stop in the
# order systemd uses (collector first: it is ordered after the symbolizer).
interval=$(echo "$coll_opts" | sed -n 's/.*--interval \([0-9]*\).*/\1/p')
busy_load "$(( ${interval:-5} + 1 ))"
kill -TERM "$coll"
wait_for_exit "$coll" 30
[ "$wait_rc" -eq 0 ] || fail "collector stops cleanly" "exit $wait_rc: $(tail -n 5 "$tmp/collector.log")"
grep -q 'STOPPING=1' "$tmp/coll-notify.txt" &&
	pass "collector sends STOPPING=1 on SIGTERM" ||
	fail "collector sends STOPPING=1 on SIGTERM" "got: $(tr '\n' ' ' <"$tmp/coll-notify.txt")"
kill -TERM "$sym"
wait_for_exit "$sym" 30
sym_rc=$wait_rc
wait_for_exit "$sym_rx" 10
if [ "$sym_rc" -eq 0 ] && grep -q '^STOPPING=1' "$tmp/notify.txt"; then
	pass "STOPPING=1 sent on SIGTERM; clean exit"
else
	fail "STOPPING=1 sent on SIGTERM; clean exit" "exit $sym_rc; notifications: $(cat "$tmp/notify.txt")"
fi
[ -S "$sock" ] && pass "the activated socket is left to its owner" ||
	fail "the activated socket is left to its owner" "the symbolizer removed $sock"
n=$(ls "$tmp/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
if [ "$n" -ge 1 ] && "$root/usr/bin/opal-report" check "$tmp/out/profile.pb.gz" >"$tmp/check.txt" 2>&1; then
	pass "intervals written through the activated socket ($n)"
else
	fail "intervals written through the activated socket" "$n intervals; $(cat "$tmp/check.txt")"
fi
check_exit_denials "no seccomp denial" "$tmp/sym.log" 0

# ---- uninstall ------------------------------------------------------------------------------
echo "OPAL_SYMBOLIZER_OPTS=\"--keep-intervals 10\"" >>"$root/etc/opal/opal.env"
if make -s -C "$repo" uninstall PREFIX=/usr DESTDIR="$root" BUILD="$build" >"$tmp/uninstall.log" 2>&1; then
	left=()
	for f in "${expected[@]}"; do
		[ "$f" = etc/opal/opal.env ] && continue
		[ -e "$root/$f" ] && left+=("$f")
	done
	[ -e "$root/usr/share/doc/opal" ] && left+=(usr/share/doc/opal)
	[ -e "$root/usr/bin/opal-debuginfo" ] && left+=(usr/bin/opal-debuginfo)
	[ ${#left[@]} -eq 0 ] && pass "make uninstall removes binaries, units, sysusers.d, tmpfiles.d, man pages and docs" ||
		fail "make uninstall removes everything" "left: ${left[*]}"
	[ -e "$root/etc/opal/opal.env" ] && grep -q 'keeping edited' "$tmp/uninstall.log" &&
		pass "make uninstall keeps an edited configuration" ||
		fail "make uninstall keeps an edited configuration" "$(cat "$tmp/uninstall.log")"
else
	fail "make uninstall" "$(tail -n 10 "$tmp/uninstall.log")"
fi
make -s -C "$repo" install PREFIX=/usr DESTDIR="$root" BUILD="$build" >"$tmp/install2.log" 2>&1 &&
	grep -q -- '--keep-intervals 10' "$root/etc/opal/opal.env" &&
	pass "reinstall keeps the edited configuration" ||
	fail "reinstall keeps the edited configuration" "$(tail -n 5 "$tmp/install2.log")"
sed -i '$d' "$root/etc/opal/opal.env"   # back to the default: now removed as well
make -s -C "$repo" uninstall PREFIX=/usr DESTDIR="$root" BUILD="$build" >"$tmp/uninstall2.log" 2>&1 &&
	[ ! -e "$root/etc/opal" ] &&
	pass "make uninstall removes the unedited configuration and /etc/opal" ||
	fail "make uninstall removes the unedited configuration" "$(ls -la "$root/etc/opal" 2>&1)"

finish
