#!/usr/bin/env bash
# Runs a command on Debian 12's own 6.1 kernel under qemu: the kernel from
# tests/kernel/kernel.sh, the initramfs from tests/kernel/initramfs.sh, and
# this machine's / shared read-only over virtio 9p and chrooted into
# (tests/kernel/init.sh), so the guest runs the host's binaries, build
# folder and tests as they are. TCG, not KVM: on this VM `-cpu host`
# fails on MSR 0x10a. Boots to /init in ~4 s.
# The command runs as root in the current folder with a clean environment
# (PATH, HOME, LANG; OPAL_GUEST_RESULTS names a folder it may write files
# into for the host) and with /tmp, /run and /dev/shm on guest tmpfs; the
# rest of / is read-only. Its output is streamed here as it runs; the
# guest's console (kernel log) goes to console.log in the results folder
# (BUILD_DIR/kernel/run.XXXXXX, kept when the run fails).
# usage: tests/kernel/qemu.sh [--timeout SECONDS] [--keep] BUILD_DIR COMMAND [ARG...]
#   --timeout  wall-clock limit of the whole boot and run (default 300)
#   --keep     keep the results folder (else removed unless the run failed)
# Exits with the command's exit status; 124 when the limit was reached
# (after printing where each vCPU was: tests/kernel/vcpu_rips.py);
# 125 when the harness itself failed (no qemu, no kernel, the guest did
# not start the command), with the reason on stderr.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
limit=300
keep=0
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) limit=${2:?--timeout needs SECONDS}; shift 2 ;;
	--keep) keep=1; shift ;;
	--) shift; break ;;
	-*) echo "qemu.sh: unknown option $1" >&2; exit 125 ;;
	*) break ;;
	esac
done
build=${1:?usage: qemu.sh [--timeout SECONDS] [--keep] BUILD_DIR COMMAND [ARG...]}
shift
[ $# -gt 0 ] || { echo "qemu.sh: no command given" >&2; exit 125; }

die() {
	echo "qemu.sh: $*" >&2
	exit 125
}

qemu=$(command -v qemu-system-x86_64) ||
	die "qemu-system-x86_64 is missing (scripts/install-deps.sh installs qemu-system-x86)"
[ "$(id -u)" -eq 0 ] || die "run as root: the 9p share of / must read every file as its owner"
mkdir -p "$build/kernel" || die "cannot create $build/kernel"
kdir=$(cd "$build/kernel" && pwd)
tree=$("$here/kernel.sh" "$build") || die "no Debian 6.1 kernel (see above)"
version=$(find "$tree/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n 1)
results=$(mktemp -d "$kdir/run.XXXXXX") || die "cannot create a results folder in $kdir"
chmod 0755 "$results"
initrd=$results/initramfs.cpio.gz
"$here/initramfs.sh" "$tree" "$initrd" || die "building the initramfs failed (see above)"

# The command, quoted for the guest's bash.
{
	printf 'cd %q || exit 125\n' "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$results/cmd"
: >"$results/output"
console=$results/console.log

# nokaslr: a stuck guest's RIPs (vcpu_rips.py) read against its kallsyms
monitor=$results/monitor.sock
start=$(date +%s.%N)
"$qemu" -accel tcg -cpu max -smp 2 -m 4G -nographic -no-reboot \
	-kernel "$tree/boot/vmlinuz-$version" -initrd "$initrd" \
	-append "console=ttyS0 quiet nokaslr panic=-1 opal_results=$results" \
	-monitor "unix:$monitor,server=on,wait=off" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$results,mount_tag=results,security_model=none" \
	</dev/null >"$console" 2>&1 &
qemu_pid=$!
trap 'kill -KILL "$qemu_pid" 2>/dev/null' EXIT
# the output as the guest writes it; tail ends soon after qemu
tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$results/output" &
tail_pid=$!
# At the limit: where the vCPUs are, then qemu stopped (TERM, then KILL).
timed_out=0
deadline=$(($(date +%s) + limit))
while kill -0 "$qemu_pid" 2>/dev/null; do
	if [ "$(date +%s)" -ge "$deadline" ]; then
		timed_out=1
		/usr/bin/python3 "$here/vcpu_rips.py" "$monitor" "$results/kallsyms" \
			>"$results/vcpus.txt" 2>&1
		kill -TERM "$qemu_pid" 2>/dev/null
		for _ in $(seq 100); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$qemu_pid" 2>/dev/null
		break
	fi
	sleep 1
done
wait "$qemu_pid"
qemu_rc=$?
wait "$tail_pid"
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

status=$(cat "$results/status" 2>/dev/null)
if [ "$timed_out" -eq 1 ]; then
	echo "qemu.sh: $version: no result within $limit s (guest console: $console)" >&2
	tail -n 20 "$console" | sed 's/^/    /' >&2
	echo "qemu.sh: the vCPUs at the limit (vcpu_rips.py):" >&2
	sed 's/^/    /' "$results/vcpus.txt" >&2
	rc=124
elif [[ $status =~ ^[0-9]+$ ]]; then
	echo "qemu.sh: $version: command exited $status after $elapsed s of wall time" >&2
	rc=$status
else
	echo "qemu.sh: $version: the guest did not run the command (qemu exited $qemu_rc; ${status:-no status written}; guest console: $console)" >&2
	tail -n 20 "$console" | sed 's/^/    /' >&2
	rc=125
fi
if [ "$keep" -eq 1 ] || [ "$rc" -ne 0 ]; then
	echo "qemu.sh: kept $results" >&2
else
	rm -rf "$results"
fi
exit "$rc"
