#!/usr/bin/env bash
# Fetches Debian 12's own 6.1 kernel for the qemu harness (tests/kernel/qemu.sh)
# without touching the host's /boot: `apt-get download` of the newest
# linux-image-6.1.0-NN-amd64 that apt offers, unpacked with `dpkg-deb -x`
# into BUILD_DIR/kernel/<package>/, with a modules.dep made by busybox
# depmod (dpkg's postinst is what makes it on a real install). The .deb and
# the tree are kept: a later run reuses them. When apt offers no package
# (no network, no lists), the newest tree already unpacked is used.
# OPAL_KERNEL_PACKAGE=linux-image-6.1.0-NN-amd64 picks another package.
# usage: tests/kernel/kernel.sh BUILD_DIR
# Prints the tree's folder (holding boot/vmlinuz-VERSION and
# lib/modules/VERSION/) on stdout; exits 1 with the reason on stderr when no
# kernel can be had.
set -euo pipefail
build=${1:?usage: kernel.sh BUILD_DIR}
mkdir -p "$build/kernel"
dir=$(cd "$build/kernel" && pwd)

die() {
	echo "kernel.sh: $*" >&2
	exit 1
}

command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (package dpkg)"
command -v busybox >/dev/null || die "busybox is missing (scripts/install-deps.sh installs busybox-static)"

# One fetch at a time per build folder (matrix runs may start together).
exec 9>"$dir/.lock"
flock 9

pkg=${OPAL_KERNEL_PACKAGE:-}
if [ -z "$pkg" ]; then
	pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
		awk '{ print $1 }' | sort -V | tail -n 1)
fi
if [ -z "$pkg" ]; then
	# apt knows no 6.1 package: the newest tree fetched before, if any
	pkg=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-6.1.0-*-amd64' \
		-printf '%f\n' | sort -V | tail -n 1)
	[ -n "$pkg" ] || die "apt offers no linux-image-6.1.0-NN-amd64 package and none is cached in $dir: run 'apt-get update' (Debian 12's bookworm main must be in apt's sources)"
	echo "kernel.sh: apt offers no 6.1 kernel package; using the cached $pkg" >&2
fi
case $pkg in
linux-image-6.1.0-*-amd64) ;;
*) die "'$pkg' is not a linux-image-6.1.0-NN-amd64 package name" ;;
esac

tree=$dir/$pkg
if [ ! -e "$tree/.complete" ]; then
	deb=$(find "$dir" -maxdepth 1 -name "${pkg}_*_amd64.deb" | sort -V | tail -n 1)
	if [ -z "$deb" ]; then
		echo "kernel.sh: downloading $pkg" >&2
		# apt's sandbox user cannot write into a root-owned folder: a
		# private one it can, then the file moves in
		dl=$(mktemp -d "$dir/download.XXXXXX")
		chmod 0777 "$dl"
		if ! (cd "$dl" && apt-get download -q "$pkg" >&2); then
			rm -rf "$dl"
			die "apt-get download $pkg failed (see above): the package is not in apt's lists, or Debian's mirror is unreachable"
		fi
		mv "$dl"/*.deb "$dir/"
		rm -rf "$dl"
		deb=$(find "$dir" -maxdepth 1 -name "${pkg}_*_amd64.deb" | sort -V | tail -n 1)
		[ -n "$deb" ] || die "apt-get download $pkg left no .deb"
	fi
	echo "kernel.sh: unpacking $(basename "$deb")" >&2
	rm -rf "$tree" "$tree.tmp"
	mkdir -p "$tree.tmp"
	dpkg-deb -x "$deb" "$tree.tmp" || die "dpkg-deb -x $deb failed"
	version=$(find "$tree.tmp/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -n 1)
	if [ -z "$version" ] || [ ! -e "$tree.tmp/boot/vmlinuz-$version" ]; then
		die "$deb holds no boot/vmlinuz-VERSION with lib/modules/VERSION"
	fi
	busybox depmod -b "$tree.tmp" "$version" || die "depmod of $version failed"
	touch "$tree.tmp/.complete"
	mv "$tree.tmp" "$tree"
fi
echo "$tree"
