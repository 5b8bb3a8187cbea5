#!/bin/busybox sh
# shellcheck shell=dash
# The qemu guest's /init (tests/kernel/qemu.sh), run by busybox sh from the
# initramfs: loads the 9p modules listed in /modules.list, mounts the host's
# / (9p tag "hostroot", read-only) on /newroot and the results folder (tag
# "results", read-write) at its host path inside it, gives the chroot its
# own /proc, /sys, /dev, bpffs, debugfs, tracefs, securityfs and tmpfs
# /tmp, /run and /dev/shm, copies the kernel's text symbols into
# RESULTS/kallsyms, runs RESULTS/cmd with bash in the chroot (output
# into RESULTS/output), writes its exit status to RESULTS/status and powers
# off.
# The host path of the results folder is the kernel parameter
# opal_results=PATH.
# A failure of this script itself is written to RESULTS/status as
# "init: WHY" when the results share is mounted, else to the console.
export PATH=/bin
bb=/bin/busybox
$bb --install -s /bin

say() { echo "opal-init: $*" >/dev/console; }

fail() {
	say "$*"
	if [ -n "$results" ] && mountpoint -q "/newroot$results"; then
		echo "init: $*" >"/newroot$results/status"
		sync
	fi
	poweroff -f
}

mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

results=
read -r cmdline </proc/cmdline
for arg in $cmdline; do
	case $arg in
	opal_results=*) results=${arg#opal_results=} ;;
	esac
done
[ -n "$results" ] || fail "no opal_results=PATH on the kernel command line"

while read -r m; do
	insmod "/lib/modules/$m" || fail "insmod $m failed"
done </modules.list

# The read-only root may be cached; the results share is not, so the host
# sees the output as it is written.
opts=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$opts,ro,cache=loose" hostroot /newroot || fail "mounting the host's / over 9p failed"
mount -t 9p -o "$opts,cache=none" results "/newroot$results" ||
	fail "mounting the results share on $results failed"

r=/newroot
mount -t proc proc $r/proc || fail "mounting /proc"
mount -t sysfs sysfs $r/sys || fail "mounting /sys"
mount -t devtmpfs devtmpfs $r/dev || fail "mounting /dev"
mkdir -p $r/dev/pts $r/dev/shm
# what udev or systemd would add: bash's process substitution needs /dev/fd
ln -s /proc/self/fd $r/dev/fd
ln -s /proc/self/fd/0 $r/dev/stdin
ln -s /proc/self/fd/1 $r/dev/stdout
ln -s /proc/self/fd/2 $r/dev/stderr
mount -t devpts devpts $r/dev/pts
mount -t tmpfs tmpfs $r/dev/shm
mount -t bpf bpf $r/sys/fs/bpf || fail "mounting bpffs on /sys/fs/bpf"
mount -t debugfs debugfs $r/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs $r/sys/kernel/tracing 2>/dev/null
mount -t securityfs securityfs $r/sys/kernel/security 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs $r/tmp || fail "mounting /tmp"
mount -t tmpfs -o mode=0755 tmpfs $r/run || fail "mounting /run"
# the kernel's text symbols, for the RIPs of a stuck guest (vcpu_rips.py)
grep ' [tT] ' /proc/kallsyms >"$r$results/kallsyms"
ip link set lo up || fail "bringing up the loopback interface"
hostname opal-guest

env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
	LANG=C.UTF-8 OPAL_GUEST_RESULTS="$results" \
	chroot $r /bin/bash "$results/cmd" </dev/null >"$r$results/output" 2>&1
echo $? >"$r$results/status"
sync
poweroff -f
