#!/usr/bin/env bash
# Installs the Debian 12 packages opal builds and tests with. Idempotent: it
# asks apt only for packages that are missing.
set -euo pipefail

PKGS=(
  build-essential clang llvm lld libclang-rt-14-dev libbpf-dev bpftool pkg-config curl
  libelf-dev libdw-dev elfutils libsqlite3-dev libprotobuf-c-dev protobuf-c-compiler
  protobuf-compiler libjansson-dev libmicrohttpd-dev libcmocka-dev libcurl4-openssl-dev
  zlib1g-dev libssl-dev libiberty-dev libseccomp-dev libdebuginfod-dev
  liblzma-dev libzstd-dev libarchive-dev libdeflate-dev debuginfod libc6-dbg dwz
  golang-go binutils procps python3 help2man gdb systemd sqlite3 xxd
  python3.11-dbg libpython3.11-dev
  chromium fonts-liberation nodejs
  qemu-system-x86 busybox-static cpio
  debhelper dpkg-dev lintian debootstrap
)

missing=()
# The flame graph browser test runs node + npm; Debian's nodejs ships npm
# separately, other node packages (NodeSource) include it.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
