#!/usr/bin/env bash
# The Debian package (`make deb`, debian/), installed into a clean Debian 12
# root made by debootstrap:
# - `make deb` builds opal_VERSION_amd64.deb offline (in a network
#   namespace of its own), VERSION from git describe; a second build with a
#   lower version stands for the previous release; Depends are computed;
#   the description states the minimum kernel of docs/deployment.md;
#   lintian reports nothing that debian/opal.lintian-overrides does not
#   name, and docs/deployment.md explains each override;
# - `apt-get install ./opal_*.deb` in the root resolves Depends from the
#   Debian mirror; binaries, units, configuration (a conffile), man pages,
#   the user _opal and its /var/lib/opal (0700) are as docs/deployment.md
#   states; the units are enabled; with no systemd running (no
#   /run/systemd/system) the maintainer scripts start nothing and call no
#   systemctl for opal;
# - the installed units pass `systemd-analyze verify` and have the exposure
#   scores docs/deployment.md gives;
# - the daemons, started from the installed files as the units would
#   (User=, CapabilityBoundingSet=, NoNewPrivileges=, UMask=, LimitNOFILE=,
#   EnvironmentFile=, ExecStart=; the socket held across restarts as
#   opal-symbolizer.socket holds it: lib/socket_unit.py), profile a busy
#   loop: interval files with samples that `opal-report top` reads;
# - with systemd "running" (a /run/systemd/system folder and a systemctl
#   that records its calls), an upgrade asks systemd to restart both
#   services and the socket in one transaction; done in the order systemd
#   gives that transaction (src/core/job.c, job_compare: the collector,
#   ordered After= the others, stops first and starts last) no interval is
#   lost, while stopping the symbolizer and its socket first loses the
#   collector's final interval; the edited conffile and the SQLite cache
#   are kept;
# - remove asks systemd to stop the units and keeps configuration, state
#   and user; purge deletes them; a fresh install asks systemd to start
#   the units.
# The debootstrap root is cached in BUILD_DIR/deb-root (made once, about a
# minute, from the mirror OPAL_DEB_MIRROR, default deb.debian.org); each run
# works on an overlay of it, in a mount namespace of its own, so nothing is
# left mounted. Downloaded packages are cached in BUILD_DIR/deb-root/archives.
# usage: tests/integration/test_deb.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"

# Every mount below dies with this namespace.
if [ "${OPAL_DEB_NS:-}" != 1 ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	OPAL_DEB_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi

need_build "${1:?usage: test_deb.sh BUILD_DIR}"
need_root "debootstrap, chroot, mounts and the collector's BPF"
need_bpf
need_tools debootstrap dpkg-buildpackage dh lintian unshare chroot setpriv python3 sqlite3 \
	systemd-analyze git mount
[ "${OPAL_DEB_NS:-}" = 1 ] || need mount-namespace "unshare --mount did not run"
[ "$prereq_ok" -eq 1 ] || finish

mirror=${OPAL_DEB_MIRROR:-http://deb.debian.org/debian}
security=${OPAL_DEB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cache=$build/deb-root
base=$cache/bookworm
make_tmp opal-deb
t0=$SECONDS

# ---- make deb -------------------------------------------------------------------------
debs=$tmp/debs
# build_deb NAME [VERSION]: `make deb` without network into $debs; sets deb
# to the package's path.
build_deb() {
	local log=$tmp/make-deb-$1.log
	deb=
	# make run by `make test` inherits -w and prints directory lines around the
	# path: take the last line that names a package.
	if unshare --net make -s --no-print-directory -C "$repo" deb DEB_OUT="$debs" \
		${2:+DEB_VERSION="$2"} >"$log" 2>&1; then
		deb=$(grep -E '\.deb$' "$log" | tail -n 1)
	fi
	if [ -n "$deb" ] && [ -f "$deb" ]; then
		return 0
	fi
	fail "make deb ($1)" "$(tail -n 15 "$log")"
	finish
}
build_deb new
new_deb=$deb
new_ver=$(dpkg-deb -f "$new_deb" Version)
head7=$(git -C "$repo" rev-parse --short=7 HEAD)
if [ "$(basename "$new_deb")" = "opal_${new_ver}_amd64.deb" ] && [[ $new_ver == *"$head7"* ]] &&
	dpkg --validate-version "$new_ver"; then
	pass "make deb, offline: $(basename "$new_deb") (version from git describe, HEAD $head7)"
else
	fail "make deb names the package by its git version" "$new_deb, version $new_ver, HEAD $head7"
fi
old_ver="$new_ver~prev"
build_deb old "$old_ver"
old_deb=$deb
dpkg --compare-versions "$old_ver" lt "$new_ver" &&
	pass "second build, version $old_ver, older than $new_ver ($((SECONDS - t0)) s for both)" ||
	fail "second build is older" "$old_ver is not lower than $new_ver"

depends=$(dpkg-deb -f "$new_deb" Depends)
[[ $depends == *libbpf1* && $depends == *libdw1* && $depends == *libsqlite3-0* &&
	$depends == *"systemd | systemd-standalone-sysusers"* && $depends == *procps* ]] &&
	pass "Depends computed (shlibs, sysusers): $(echo "$depends" | tr -s ' ' | cut -c1-90)..." ||
	fail "Depends computed" "$depends"
# The minimum kernel as the Kernel section of docs/deployment.md states it.
min=$(sed -nE 's/^opal needs \*\*Linux ([0-9.]+) or newer, built with BTF\*\*.*/\1/p' "$repo/docs/deployment.md")
kernel="Linux $min or newer, built with BTF"
dpkg-deb -f "$new_deb" Description | tr '\n' ' ' | tr -s ' ' | grep -qF "$kernel" && [ -n "$min" ] &&
	pass "the description states the kernel docs/deployment.md gives: $kernel" ||
	fail "minimum kernel stated" "the Description does not say '$kernel' (docs/deployment.md, Kernel)"
[ "$(dpkg-deb -f "$new_deb" Architecture)" = amd64 ] || fail "Architecture amd64" "$(dpkg-deb -f "$new_deb" Architecture)"
dpkg-deb --ctrl-tarfile "$new_deb" | tar -xOf - ./conffiles 2>/dev/null | grep -qx /etc/opal/opal.env &&
	pass "/etc/opal/opal.env is a conffile" || fail "/etc/opal/opal.env is a conffile" "not in the conffiles"

# ---- lintian ------------------------------------------------------------------------------
lintian --pedantic -I -E --color=never "$new_deb" >"$tmp/lintian.txt" 2>"$tmp/lintian.err"
lint_rc=$?
if [ "$lint_rc" -eq 0 ] && [ ! -s "$tmp/lintian.txt" ]; then
	pass "lintian --pedantic -I -E: no tag besides the overridden ones"
else
	fail "lintian clean" "exit $lint_rc: $(head -n 10 "$tmp/lintian.txt" "$tmp/lintian.err")"
fi
undocumented=()
while read -r tag; do
	grep -q "\`$tag\`" "$repo/docs/deployment.md" || undocumented+=("$tag")
done < <(grep -vE '^[[:space:]]*(#|$)' "$repo/debian/opal.lintian-overrides" | awk '{ print $1 }' | sort -u)
[ ${#undocumented[@]} -eq 0 ] &&
	pass "every lintian override is explained in docs/deployment.md" ||
	fail "lintian overrides explained in docs/deployment.md" "not named there: ${undocumented[*]}"

# ---- the clean root ------------------------------------------------------------------------
# The cached base: debootstrap's minbase with the Debian 12 sources a host
# has; made in a new folder and renamed when complete.
if [ ! -e "$base/.opal-complete" ]; then
	t1=$SECONDS
	rm -rf "$base.new"
	mkdir -p "$cache"
	if debootstrap --variant=minbase bookworm "$base.new" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
		rm -f "$base.new/etc/apt/sources.list"
		cat >"$base.new/etc/apt/sources.list.d/debian.sources" <<-EOF
			Types: deb
			URIs: $mirror
			Suites: bookworm bookworm-updates
			Components: main
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

			Types: deb
			URIs: $security
			Suites: bookworm-security
			Components: main
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOF
		chroot "$base.new" apt-get clean
		rm -rf "$base"
		touch "$base.new/.opal-complete"
		mv "$base.new" "$base"
		pass "debootstrap --variant=minbase bookworm into $base ($((SECONDS - t1)) s, cached)"
	else
		fail "debootstrap --variant=minbase bookworm $mirror" "$(tail -n 5 "$tmp/debootstrap.log")"
		finish
	fi
fi
mkdir -p "$cache/archives/partial"

# The root: an overlay of the base (writes go to $tmp/upper), outside $tmp
# so that removing $tmp never reaches into a mount.
root=$(mktemp -d /tmp/opal-deb-root.XXXXXX)
mkdir -p "$tmp/upper" "$tmp/work"
mount_root() {
	mount -t overlay overlay -o "lowerdir=$base,upperdir=$tmp/upper,workdir=$tmp/work" "$root" &&
		mount --bind "$cache/archives" "$root/var/cache/apt/archives" &&
		mount -t proc proc "$root/proc" &&
		mount --bind /sys "$root/sys" && mount -o remount,bind,ro "$root/sys"
}
unmount_root() {
	umount -R "$root" 2>/dev/null
	rmdir "$root" 2>/dev/null
}
if ! mount_root 2>"$tmp/mount.log"; then
	fail "root mounted (overlay, proc, sys)" "$(cat "$tmp/mount.log")"
	unmount_root
	finish
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/debs"
cp "$new_deb" "$old_deb" "$root/tmp/debs/"

# in_root COMMAND...: runs COMMAND in the root with a clean environment,
# /usr/local/sbin first in PATH (the recording systemctl).
in_root() {
	chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin \
		LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# A systemctl that records each call in /var/log/systemctl.calls. Offline
# calls (--root=, as deb-systemd-helper's presets) and every call while no
# systemd "runs" go to the real one. With /run/systemd/system, the others
# are answered as a systemd would: is-enabled from the enablement links,
# units inactive, anything else done.
mkdir -p "$root/usr/local/sbin"
cat >"$root/usr/local/sbin/systemctl" <<'EOF'
#!/bin/sh
echo "$*" >>/var/log/systemctl.calls
case " $* " in *" --root="*) exec /usr/bin/systemctl "$@" ;; esac
if [ ! -d /run/systemd/system ]; then
	[ -x /usr/bin/systemctl ] && exec /usr/bin/systemctl "$@"
	exit 1
fi
verb=
for a in "$@"; do
	case $a in -*) ;; *) [ -z "$verb" ] && verb=$a ;; esac
	last=$a
done
case $verb in
is-enabled)
	if ls /etc/systemd/system/*.wants/"$last" >/dev/null 2>&1; then echo enabled; exit 0; fi
	echo disabled
	exit 1 ;;
is-active) exit 3 ;;
esac
exit 0
EOF
chmod 0755 "$root/usr/local/sbin/systemctl"
calls=$root/var/log/systemctl.calls
systemd_runs() { mkdir -p "$root/run/systemd/system"; : >"$calls"; }

# apt_in_root NAME ARGS...: apt-get ARGS in the root; PASS/FAIL NAME. apt
# gives dpkg a PATH of its own (DPkg::Path): this one keeps the recording
# systemctl first.
apt_in_root() {
	local name=$1
	shift
	if in_root apt-get -y -q --no-install-recommends \
		-o DPkg::Path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		"$@" </dev/null >"$tmp/apt.log" 2>&1; then
		pass "$name"
		return 0
	fi
	fail "$name" "$(grep -E '^(E:|W:|dpkg)' "$tmp/apt.log" | head -n 5; tail -n 5 "$tmp/apt.log")"
	return 1
}

t1=$SECONDS
if ! in_root apt-get -q update >"$tmp/apt-update.log" 2>&1; then
	fail "apt-get update in the root" "$(tail -n 5 "$tmp/apt-update.log")"
	unmount_root
	finish
fi

# ---- install where systemd does not run ----------------------------------------------------
: >"$calls"
if ! apt_in_root "apt-get install ./$(basename "$old_deb") resolves Depends ($((SECONDS - t1)) s)" \
	install "/tmp/debs/$(basename "$old_deb")"; then
	unmount_root
	finish
fi
[ "$(in_root dpkg-query -W -f='${Version} ${db:Status-Abbrev}' opal)" = "$old_ver ii " ] &&
	in_root dpkg-query -W -f='${db:Status-Abbrev}' libbpf1 libmicrohttpd12 systemd | grep -q '^ii' &&
	pass "opal $old_ver installed with libbpf1, libmicrohttpd12, systemd" ||
	fail "opal installed with its Depends" "$(in_root dpkg-query -W opal libbpf1 systemd 2>&1)"

# owner PATH: "MODE USER:GROUP" of PATH in the root, names from the root's
# passwd and group.
owner() {
	local mode uid gid
	read -r mode uid gid < <(stat -c '%a %u %g' "$root$1" 2>/dev/null) || { echo missing; return; }
	echo "$mode $(awk -F: -v i="$uid" '$3 == i { print $1; exit }' "$root/etc/passwd"):$(
		awk -F: -v i="$gid" '$3 == i { print $1; exit }' "$root/etc/group")"
}
# mode_is PATH MODE OWNER: PATH in the root has MODE and OWNER (user:group).
modes_bad=()
mode_is() {
	local got
	got=$(owner "$1")
	[ "$got" = "$2 $3" ] || modes_bad+=("$1: $got (want $2 $3)")
}
for f in /usr/sbin/opal-collector /usr/sbin/opal-symbolizer /usr/bin/opal-report /usr/bin/opal-debuginfo; do
	mode_is "$f" 755 root:root
done
for f in /lib/systemd/system/opal-collector.service /lib/systemd/system/opal-symbolizer.service \
	/lib/systemd/system/opal-symbolizer.socket /etc/opal/opal.env /usr/lib/sysusers.d/opal.conf \
	/usr/lib/tmpfiles.d/opal.conf /usr/share/man/man8/opal-collector.8.gz \
	/usr/share/man/man8/opal-symbolizer.8.gz /usr/share/man/man1/opal-report.1.gz \
	/usr/share/man/man1/opal-debuginfo.1.gz /usr/share/doc/opal/deployment.md \
	/usr/share/doc/opal/copyright; do
	mode_is "$f" 644 root:root
done
mode_is /var/lib/opal 700 _opal:_opal
mode_is /var/cache/opal-collector 700 root:root
[ ${#modes_bad[@]} -eq 0 ] &&
	pass "files and modes: daemons in /usr/sbin, tools in /usr/bin (0755), units in /lib/systemd/system, conffile, man pages (0644), /var/lib/opal 0700 _opal, /var/cache/opal-collector 0700 root" ||
	fail "files and modes" "${modes_bad[*]}"
pw=$(grep '^_opal:' "$root/etc/passwd")
IFS=: read -r _ _ opal_uid opal_gid _ opal_home opal_shell <<<"$pw"
[ -n "$pw" ] && [ "$opal_uid" -lt 1000 ] && [ "$opal_home" = /var/lib/opal ] &&
	[ "$opal_shell" = /usr/sbin/nologin ] && grep -q "^_opal:x:$opal_gid:" "$root/etc/group" &&
	pass "system user and group _opal (uid $opal_uid, home /var/lib/opal, no login)" ||
	fail "system user _opal" "passwd: '$pw'; group: $(grep '^_opal:' "$root/etc/group")"
links_ok=1
for l in multi-user.target.wants/opal-collector.service multi-user.target.wants/opal-symbolizer.service \
	sockets.target.wants/opal-symbolizer.socket; do
	[ "$(readlink "$root/etc/systemd/system/$l")" = "/lib/systemd/system/${l#*/}" ] || links_ok=0
done
[ "$links_ok" -eq 1 ] && pass "units enabled (collector, symbolizer, socket)" ||
	fail "units enabled" "$(ls -l "$root"/etc/systemd/system/*.wants/opal-* 2>&1)"
# opal_procs: processes running a binary of the root's opal.
opal_procs() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		case $exe in "$root"/usr/sbin/opal-*) echo "${p#/proc/} $exe" ;; esac
	done
}
# Offline calls (--root=/ preset: the enablement links) are fine.
online=$(grep opal "$calls" | grep -v -- '--root=')
if [ -z "$online" ] && [ -z "$(opal_procs)" ] && [ ! -e "$root/run/opal" ]; then
	pass "no systemd running: the maintainer scripts start nothing, no systemctl call for opal but offline presets"
else
	fail "nothing started without systemd" "calls: $online; processes: $(opal_procs)"
fi

# ---- systemd-analyze on the installed units ----------------------------------------------
for u in opal-symbolizer.socket opal-symbolizer.service opal-collector.service; do
	MANPATH=$root/usr/share/man systemd-analyze verify --root="$root" "/lib/systemd/system/$u" \
		>"$tmp/verify.log" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] && [ ! -s "$tmp/verify.log" ] && pass "systemd-analyze verify $u (installed)" ||
		fail "systemd-analyze verify $u (installed)" "exit $rc: $(cat "$tmp/verify.log")"
done
for u in opal-symbolizer.service opal-collector.service; do
	want=$(sed -nE "s/^\| $u \| \*\*([0-9.]+)\*\* \|.*/\1/p" "$repo/docs/deployment.md")
	systemd-analyze security --offline=true --root="$root" "/lib/systemd/system/$u" >"$tmp/security.log" 2>&1
	got=$(sed -n "s/.*Overall exposure level for $u: \([0-9.]*\).*/\1/p" "$tmp/security.log")
	[ -n "$want" ] && [ "$got" = "$want" ] &&
		pass "$u exposure $got, as docs/deployment.md states" ||
		fail "$u exposure as documented" "got '$got', docs/deployment.md says '$want'"
done

# ---- the daemons as the units would start them -----------------------------------------------
# unit_launch UNIT: sets unit_env, `env -i` with the variables of UNIT's
# EnvironmentFile=, and launch, the command that runs its ExecStart= in the
# root as the unit would in that environment: umask and descriptor limit,
# then chroot, setpriv with User=, Group=, CapabilityBoundingSet=,
# NoNewPrivileges=, and the command with $VAR words split as systemd splits
# them. Apart so that the socket unit can add LISTEN_* in between.
unit_launch() {
	local f=$root/lib/systemd/system/$1 key val exec='' user='' group='' caps='' capset=0
	local envfile='' nnp='' mask=0022 nofile='' n envs=() argv=()
	while IFS='=' read -r key val; do
		case $key in
		ExecStart) exec=$val ;;
		User) user=$val ;;
		Group) group=$val ;;
		CapabilityBoundingSet) caps=$val capset=1 ;;
		EnvironmentFile) envfile=${val#-} ;;
		NoNewPrivileges) nnp=$val ;;
		UMask) mask=$val ;;
		LimitNOFILE) nofile=$val ;;
		esac
	done < <(grep -E '^[A-Za-z]+=' "$f")
	for n in $(sed -nE 's/^([A-Za-z_][A-Za-z0-9_]*)=.*/\1/p' "$root$envfile"); do
		envs+=("$n=$(env -i bash -c 'set -a; . "$1"; printf %s "${!2}"' _ "$root$envfile" "$n")")
	done
	mapfile -d '' -t argv < <(env -i bash -c 'set -a; . "$1"; eval "printf \"%s\\0\" $2"' \
		_ "$root$envfile" "$exec")
	unit_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin "${envs[@]}")
	launch=(bash -c 'umask "$1"; [ -z "$2" ] || ulimit -n "$2"; shift 2; exec "$@"' _ "$mask" "$nofile"
		chroot "$root" setpriv)
	[ -n "$user" ] && launch+=(--reuid="$user" --regid="${group:-$user}" --init-groups)
	if [ "$capset" -eq 1 ]; then
		caps=$(echo "$caps" | tr 'A-Z' 'a-z' | sed -E 's/cap_/+/g; s/ +/,/g')
		launch+=(--bounding-set="-all${caps:+,$caps}")
	fi
	[ "$nnp" = yes ] && launch+=(--no-new-privs)
	launch+=(-- "${argv[@]}")
}

sock_unit=$root/lib/systemd/system/opal-symbolizer.socket
sock_path=$(sed -n 's/^ListenStream=//p' "$sock_unit")
sock_mode=$(sed -n 's/^SocketMode=//p' "$sock_unit")
dir_mode=$(sed -n 's/^DirectoryMode=//p' "$sock_unit")
backlog=$(sed -n 's/^Backlog=//p' "$sock_unit")
fifo=$tmp/socket.ctl
mkfifo "$fifo"
run_n=0
sym_pid=
# The symbolizer is the socket unit's child, not a job of this script:
# killed here when the run ends early (cleanup kills the jobs).
kill_symbolizer() {
	[ -n "$sym_pid" ] && kill -KILL "$sym_pid" 2>/dev/null
	cleanup
}
trap kill_symbolizer EXIT
# socket_start: "starts opal-symbolizer.socket": lib/socket_unit.py binds
# the socket in the root and waits to start the service; sets holder.
socket_start() {
	unit_launch opal-symbolizer.service
	holder_log=$tmp/socket-unit.$run_n.log
	"${unit_env[@]}" python3 "$lib_dir/socket_unit.py" "$root$sock_path" "$sock_mode" "$dir_mode" "$backlog" "$fifo" -- \
		bash -c 'exec "$@" >>"$0" 2>&1' "$tmp/symbolizer.$run_n.log" "${launch[@]}" >"$holder_log" 2>&1 &
	holder=$!
	wait_log "$holder_log" '^listening ' 10 "$holder"
}
# ctl COMMAND ANSWER_ERE: one command to the socket unit; sets answer.
ctl() {
	local n
	n=$(wc -l <"$holder_log")
	echo "$1" >"$fifo"
	for _ in $(seq 400); do
		[ "$(wc -l <"$holder_log")" -gt "$n" ] && break
		sleep 0.1
	done
	answer=$(tail -n 1 "$holder_log")
	[[ $answer =~ $2 ]]
}
# start_daemons NAME: socket, symbolizer, collector, in the order systemd
# starts them; PASS/FAIL NAME. Sets sym_pid, coll_pid, run_hex, clog, slog.
start_daemons() {
	run_n=$((run_n + 1))
	slog=$tmp/symbolizer.$run_n.log
	clog=$tmp/collector.$run_n.log
	if ! socket_start; then
		fail "$1" "socket unit: $(cat "$holder_log")"
		return 1
	fi
	if ! ctl start '^started [0-9]+$' || ! wait_symbolizer "${answer#started }" "$slog" 30; then
		fail "$1" "symbolizer not ready: $answer; $(tail -n 5 "$slog")"
		return 1
	fi
	sym_pid=${answer#started }
	unit_launch opal-collector.service
	"${unit_env[@]}" "${launch[@]}" >"$clog" 2>&1 &
	coll_pid=$!
	if ! wait_log "$clog" 'opal-collector: run [0-9a-f]{16}:' 20 "$coll_pid"; then
		fail "$1" "collector not sampling: $(grep -v libbpf: "$clog" | tail -n 5)"
		return 1
	fi
	run_hex=$(sed -nE 's/^<6>opal-collector: run ([0-9a-f]{16}):.*/\1/p' "$clog" | head -n 1)
	pass "$1"
}
# stop_collector: SIGTERM as systemd stops it; sets final_seq (empty when
# its final interval was not acknowledged).
stop_collector() {
	kill -TERM "$coll_pid" 2>/dev/null
	wait_for_exit "$coll_pid" 30
	final_seq=$(sed -nE 's/^<6>opal-collector: final interval ([0-9]+) acknowledged$/\1/p' "$clog")
}
# stop_symbolizer_and_socket: the service, then the socket (RemoveOnStop=);
# a symbolizer that does not exit with status 0 fails the check.
stop_symbolizer_and_socket() {
	ctl stop '^stopped ' && sym_pid=   # reaped: its pid may be reused
	[ "$answer" = "stopped 0" ] || fail "symbolizer stops cleanly" "$answer; $(tail -n 3 "$slog")"
	ctl quit '^quit$' || fail "socket unit stops" "$answer"
	wait_for_exit "$holder" 10
}
# ledger SQL: a query on the state database, as _opal (nothing root-owned
# may appear next to its WAL).
ledger() {
	setpriv --reuid="$opal_uid" --regid="$opal_gid" --clear-groups \
		sqlite3 "file:$root/var/lib/opal/state.db?mode=ro" "$1" 2>&1
}
# run_complete RUN_HEX FINAL: the ledger holds seqs 1..FINAL of that run.
run_complete() {
	local got
	got=$(ledger "SELECT group_concat(seq, ' ') FROM (SELECT seq FROM intervals_written
		WHERE run_id = $((16#$1)) ORDER BY seq)")
	[ -n "$2" ] && [ "$got" = "$(seq -s ' ' 1 "$2")" ]
}

if ! start_daemons "daemons started from the installed units: symbolizer as _opal through the socket, collector as root"; then
	show_log symbolizer "$tmp/symbolizer.$run_n.log"
	show_log collector "$tmp/collector.$run_n.log"
	unmount_root
	finish
fi
status=$(grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs):' "/proc/$sym_pid/status" | awk '{ print $2 }' | tr '\n' ' ')
[ "$status" = "$opal_uid 0000000000000000 0000000000000000 1 " ] &&
	pass "symbolizer runs as _opal, no capabilities, no_new_privs" ||
	fail "symbolizer runs as the unit says" "Uid CapEff CapBnd NoNewPrivs: $status"
grep -q 'listening on .* (socket activation)' "$slog" &&
	pass "symbolizer took $sock_path from the socket unit" ||
	fail "symbolizer took the socket" "$(grep listening "$slog")"
interval=$(sed -nE 's/.*--interval ([0-9]+).*/\1/p' "$root/etc/opal/opal.env")
busy_load "$(( ${interval:-5} + 2 ))"
profile=$(ls "$root"/var/lib/opal/out/intervals/interval-*.pb.gz 2>/dev/null | head -n 1)
top=$(in_root opal-report top -n 3 "/var/lib/opal/out/intervals/${profile##*/}" 2>&1)
total=$(echo "$top" | sed -nE 's/.*total ([0-9]+) samples.*/\1/p' | head -n 1)
if [ -n "$profile" ] && [ "${total:-0}" -gt 0 ]; then
	pass "a profile: ${profile##*/}, $total samples ($(owner "${profile#"$root"}")), read by opal-report top"
else
	fail "a profile from the installed daemons" "file '${profile##*/}': $(echo "$top" | head -n 3)"
	show_log symbolizer "$slog"
	show_log collector "$clog"
fi

# ---- upgrade ---------------------------------------------------------------------------------
sed -i 's/^OPAL_SYMBOLIZER_OPTS=.*/OPAL_SYMBOLIZER_OPTS="--keep-intervals 50"/' "$root/etc/opal/opal.env"
frames_before=$(ledger "SELECT COUNT(*) FROM frames")
old_run=$run_hex
systemd_runs
apt_in_root "upgrade $old_ver -> $new_ver with apt-get install (systemd running)" \
	install "/tmp/debs/$(basename "$new_deb")"
[ "$(in_root dpkg-query -W -f='${Version}' opal)" = "$new_ver" ] ||
	fail "upgraded version" "$(in_root dpkg-query -W -f='${Version}' opal)"
restart=$(grep -c '^--quiet --system restart opal-collector.service opal-symbolizer.service opal-symbolizer.socket$' "$calls")
if grep -q 'daemon-reload' "$calls" && [ "$restart" -eq 1 ] && ! grep -q ' stop ' "$calls"; then
	pass "upgrade: daemon-reload, then one restart of both services and the socket (one transaction), no stop before"
else
	fail "upgrade asks systemd to restart both services at once" "calls: $(tr '\n' ';' <"$calls")"
fi
# Until restarted, the old daemons run the replaced binaries.
if kill -0 "$coll_pid" && [[ $(readlink "/proc/$sym_pid/exe") == *" (deleted)" ]]; then
	pass "the running daemons are left alone by the upgrade itself (old binaries, deleted)"
else
	fail "the running daemons are left alone by dpkg" "exe: $(readlink "/proc/$sym_pid/exe")"
fi
# The restart in systemd's order: stop collector, symbolizer, socket; start
# socket, symbolizer, collector.
stop_collector
old_final=$final_seq
stop_symbolizer_and_socket
start_daemons "restart in systemd's order: collector stopped first, started last"
[ -n "$old_final" ] && run_complete "$old_run" "$old_final" &&
	pass "no interval lost across the upgrade: run $old_run has intervals 1..$old_final, the last acknowledged" ||
	fail "no interval lost across the upgrade" "final '$old_final'; ledger: $(ledger "SELECT seq FROM intervals_written WHERE run_id = $((16#$old_run))" | tr '\n' ' ')"
[[ $(readlink "/proc/$sym_pid/exe") != *deleted* ]] && [[ $(readlink "/proc/$coll_pid/exe") != *deleted* ]] &&
	pass "the restarted daemons run the upgraded binaries" ||
	fail "restarted daemons run the new binaries" "$(readlink "/proc/$sym_pid/exe" "/proc/$coll_pid/exe")"
grep -q '^OPAL_SYMBOLIZER_OPTS="--keep-intervals 50"$' "$root/etc/opal/opal.env" &&
	[ -z "$(ls "$root"/etc/opal/opal.env.dpkg-* 2>/dev/null)" ] &&
	pass "the edited conffile is kept (no .dpkg-new, no prompt)" ||
	fail "the edited conffile is kept" "$(grep OPTS "$root/etc/opal/opal.env"; ls "$root"/etc/opal)"
busy_load "$(( ${interval:-5} + 2 ))"
frames_after=$(ledger "SELECT COUNT(*) FROM frames")
if [ "${frames_before:-0}" -gt 0 ] && [ "$frames_after" -ge "$frames_before" ] &&
	grep -qE "interval [0-9]+: [0-9]+ samples" "$slog"; then
	pass "the SQLite cache is kept: $frames_before cached frames before, $frames_after after, new intervals written"
else
	fail "the SQLite cache is kept" "frames $frames_before -> $frames_after; $(tail -n 3 "$slog")"
fi

# The wrong order: the symbolizer and its socket stopped before the
# collector. Its final interval finds no symbolizer and is lost.
wrong_run=$run_hex
stop_symbolizer_and_socket
stop_collector
if [ -z "$final_seq" ] && grep -q 'final interval [0-9]* not acknowledged' "$clog"; then
	pass "order matters: a collector stopped after the symbolizer and socket loses its final interval"
else
	fail "a collector stopped last loses its final interval" "final '$final_seq' (run $wrong_run): $(grep 'final interval' "$clog")"
fi

# ---- remove and purge --------------------------------------------------------------------------
start_daemons "started again for the removal" || true
systemd_runs
apt_in_root "apt-get remove opal (systemd running)" remove opal
grep -qx -- '--quiet --system stop opal-collector.service opal-symbolizer.service opal-symbolizer.socket' "$calls" ||
	grep -qx 'stop opal-collector.service opal-symbolizer.service opal-symbolizer.socket' "$calls"
stop_call=$?
stop_collector
remove_final=$final_seq
stop_symbolizer_and_socket
[ "$stop_call" -eq 0 ] && [ -n "$remove_final" ] && run_complete "$run_hex" "$remove_final" &&
	pass "remove asks systemd to stop the three units in one call; stopped in its order, the collector's final interval $remove_final is written" ||
	fail "remove stops the units" "calls: $(tr '\n' ';' <"$calls"); final '$remove_final'"
left=()
for f in /usr/sbin/opal-collector /usr/sbin/opal-symbolizer /usr/bin/opal-report /usr/bin/opal-debuginfo \
	/lib/systemd/system/opal-collector.service /lib/systemd/system/opal-symbolizer.socket \
	/usr/lib/sysusers.d/opal.conf /usr/share/man/man8/opal-collector.8.gz /usr/share/doc/opal; do
	[ -e "$root$f" ] && left+=("$f")
done
[ ${#left[@]} -eq 0 ] && grep -q 'keep-intervals 50' "$root/etc/opal/opal.env" &&
	[ -s "$root/var/lib/opal/state.db" ] && grep -q '^_opal:' "$root/etc/passwd" &&
	[ "$(in_root dpkg-query -W -f='${db:Status-Abbrev}' opal)" = "rc " ] &&
	pass "remove: programs, units and docs gone; configuration, state and user _opal kept (rc)" ||
	fail "remove leaves what it should" "left: ${left[*]}; $(ls -la "$root/etc/opal" "$root/var/lib/opal" 2>&1 | head -n 8)"

: >"$calls"
apt_in_root "apt-get purge opal" purge opal
gone=()
for f in /etc/opal /var/lib/opal /var/cache/opal-collector \
	/etc/systemd/system/multi-user.target.wants/opal-collector.service \
	/etc/systemd/system/sockets.target.wants/opal-symbolizer.socket; do
	{ [ -e "$root$f" ] || [ -L "$root$f" ]; } && gone+=("$f")
done
grep -q '^_opal:' "$root/etc/passwd" && gone+=(user)
grep -q '^_opal:' "$root/etc/group" && gone+=(group)
[ ${#gone[@]} -eq 0 ] && [ -z "$(in_root dpkg-query -W -f='${db:Status-Abbrev}' opal 2>/dev/null)" ] &&
	pass "purge deletes configuration, state and cache, enablement links, user and group _opal" ||
	fail "purge deletes everything" "left: ${gone[*]}"

# ---- a fresh install where systemd runs -------------------------------------------------------
systemd_runs
apt_in_root "fresh install with systemd running" install "/tmp/debs/$(basename "$new_deb")"
grep -qx -- '--quiet --system start opal-collector.service opal-symbolizer.service opal-symbolizer.socket' "$calls" &&
	pass "install enables and starts the units (systemctl start of the enabled units)" ||
	fail "install starts the units" "calls: $(tr '\n' ';' <"$calls")"

unmount_root
echo "test_deb.sh: $((SECONDS - t0)) s"
finish
