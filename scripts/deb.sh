#!/usr/bin/env bash
# Builds opal's Debian package, opal_VERSION_amd64.deb, with debhelper
# (dpkg-buildpackage and debian/), offline, from a copy of the source tree:
# dpkg-buildpackage writes its results into the parent of the tree it
# builds, so the copy goes to OUT/opal-VERSION and the results (the .deb,
# the -dbgsym .deb, .buildinfo, .changes) land in OUT, not in the parent of
# the checkout. The copy holds the files git tracks or would track (so an
# uncommitted change is built, and the version says "dirty"), plus a
# debian/changelog made here, and is removed after a successful build.
#
# VERSION, unless given: `git describe` made a Debian version:
#   tag vX.Y.Z (or X.Y.Z) on HEAD      X.Y.Z
#   N commits after that tag           X.Y.Z+gitN.HASH
#   no tag                             0.0~gitN.HASH   (N: commits in HEAD)
#   uncommitted changes                +dirty (.dirty after a +git part)
# Build dependencies: debian/control (scripts/install-deps.sh installs them).
# usage: scripts/deb.sh --out DIR [--version VERSION]
# Prints the path of the .deb as its last line.
set -euo pipefail

out=
version=
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out DIR}; shift 2 ;;
	--version) version=${2:?--version VERSION}; shift 2 ;;
	*) echo "usage: scripts/deb.sh --out DIR [--version VERSION]" >&2; exit 2 ;;
	esac
done
[ -n "$out" ] || { echo "deb.sh: --out DIR is required" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)

die() {
	echo "deb.sh: $*" >&2
	exit 1
}

for t in dpkg-buildpackage dh git; do
	command -v "$t" >/dev/null || die "$t is not installed (scripts/install-deps.sh installs it)"
done
git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 || die "$repo is not a git checkout: give --version"

# debian_version: the Debian version of HEAD, from git describe.
debian_version() {
	local desc tag n hash dirty='' v
	git -C "$repo" update-index -q --refresh >/dev/null 2>&1 || true
	git -C "$repo" diff-index --quiet HEAD -- || dirty=1
	hash=$(git -C "$repo" rev-parse --short=7 HEAD)
	if desc=$(git -C "$repo" describe --tags --long --match '[v0-9]*' 2>/dev/null); then
		# TAG-N-gHASH; the tag itself may contain dashes.
		n=${desc%-g*}
		n=${n##*-}
		tag=${desc%-*-g*}
		tag=${tag#v}
		v=$tag
		[ "$n" -eq 0 ] || v="$tag+git$n.$hash"
	else
		n=$(git -C "$repo" rev-list --count HEAD)
		v="0.0~git$n.$hash"
	fi
	if [ -n "$dirty" ]; then
		case $v in *+*) v="$v.dirty" ;; *) v="$v+dirty" ;; esac
	fi
	echo "$v"
}

[ -n "$version" ] || version=$(debian_version)
# A native package's version: no revision, so no dash.
case $version in *-*) die "version '$version' has a dash (a native package has no revision)" ;; esac
dpkg --validate-version "$version" 2>/dev/null || die "'$version' is not a valid Debian version"

mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/opal-$version
rm -rf "$src"
mkdir -p "$src"
# Tracked and untracked-but-not-ignored files that exist (a deletion not
# yet committed stays deleted).
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done |
	tar --null --no-recursion -cf - --files-from=-) | tar -xf - -C "$src"
[ -e "$src/debian/control" ] || die "no debian/control in the copied tree"

# debian/changelog: one entry naming the commit; its date (the commit's)
# is also the build's SOURCE_DATE_EPOCH.
maint=$(sed -n 's/^Maintainer: //p' "$src/debian/control")
when=$(date -R -u -d "@$(git -C "$repo" log -1 --format=%ct HEAD)")
desc=$(git -C "$repo" describe --always --tags --dirty)
cat >"$src/debian/changelog" <<EOF
opal ($version) unstable; urgency=medium

  * Built by \`make deb\` from git $desc.

 -- $maint  $when
EOF

jobs=${DEB_JOBS:-2}
echo "deb.sh: building opal $version in $src" >&2
if ! (cd "$src" && DEB_BUILD_OPTIONS="parallel=$jobs ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -b -us -uc >"$out/opal_$version.build.log" 2>&1); then
	tail -n 30 "$out/opal_$version.build.log" >&2
	die "dpkg-buildpackage failed: $out/opal_$version.build.log (tree kept in $src)"
fi
deb=$out/opal_${version}_amd64.deb
[ -e "$deb" ] || die "dpkg-buildpackage made no $deb"
rm -rf "$src"
echo "$deb"
