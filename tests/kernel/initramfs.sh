#!/usr/bin/env bash
# Builds the qemu guest's initramfs (tests/kernel/qemu.sh): Debian's static
# busybox, the guest init (tests/kernel/init.sh) and the modules that
# mounting the host's root over virtio 9p needs (9p, 9pnet_virtio,
# virtio_pci and what they depend on, per the tree's modules.dep), with
# /modules.list naming them in load order.
# usage: tests/kernel/initramfs.sh TREE OUT
# TREE is a folder printed by tests/kernel/kernel.sh; OUT the gzip'd newc
# cpio archive to write. Exits 1 with the reason on stderr.
set -euo pipefail
tree=${1:?usage: initramfs.sh TREE OUT}
out=${2:?usage: initramfs.sh TREE OUT}
here=$(cd "$(dirname "$0")" && pwd)
wanted=(9p 9pnet_virtio virtio_pci)

die() {
	echo "initramfs.sh: $*" >&2
	exit 1
}

busybox=$(command -v busybox) ||
	die "busybox is missing (scripts/install-deps.sh installs busybox-static)"
# a dynamic busybox would need the host's libc in the initramfs
! readelf -l "$(readlink -f "$busybox")" 2>/dev/null | grep -q 'INTERP' ||
	die "$busybox is dynamically linked: install busybox-static"
command -v cpio >/dev/null || die "cpio is missing (scripts/install-deps.sh installs it)"
version=$(find "$tree/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n 1)
moddir=$tree/lib/modules/$version
[ -r "$moddir/modules.dep" ] || die "$moddir/modules.dep is missing (tests/kernel/kernel.sh makes it)"

# Module paths (relative to moddir) in load order: each one's dependencies
# before it. modules.dep lines read "kernel/x.ko: kernel/dep.ko ...".
order=$(awk -v wanted="${wanted[*]}" '
	{ mod = $1; sub(/:$/, "", mod); deps[mod] = ""; for (i = 2; i <= NF; i++) deps[mod] = deps[mod] " " $i
	  name = mod; sub(/^.*\//, "", name); sub(/\.ko(\.[a-z]+)?$/, "", name); path[name] = mod }
	function visit(m,   n, d, i) {
		if (m in done) return
		done[m] = 1
		n = split(deps[m], d, " ")
		for (i = n; i >= 1; i--) visit(d[i])
		print m
	}
	END {
		n = split(wanted, w, " ")
		for (i = 1; i <= n; i++) {
			if (!(w[i] in path)) { print "missing " w[i] > "/dev/stderr"; exit 1 }
			visit(path[w[i]])
		}
	}' "$moddir/modules.dep") || die "a module the guest needs is not in $moddir/modules.dep"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/lib/modules"
cp "$busybox" "$root/bin/busybox"
cp "$here/init.sh" "$root/init"
chmod 0755 "$root/init"
: >"$root/modules.list"
for m in $order; do
	case $m in
	*.ko) ;;
	*) die "$m is compressed: the guest's busybox insmod loads plain .ko files" ;;
	esac
	cp "$moddir/$m" "$root/lib/modules/"
	basename "$m" >>"$root/modules.list"
done
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
