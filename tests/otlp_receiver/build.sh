#!/usr/bin/env bash
# Builds the test OTLP receiver: tests/otlp_receiver/build.sh BUILD_DIR
# Output: BUILD_DIR/tests/otlp-receiver. Needs BUILD_DIR/libopal_shared.a
# (the protobuf-c code of proto/), i.e. `make` has run.
set -euo pipefail
build=${1:?usage: build.sh BUILD_DIR}
src=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$src/../.." && pwd)
mkdir -p "$build/tests"
pkgs=(libprotobuf-c jansson libmicrohttpd zlib libcrypto)
read -r -a cflags <<<"$(pkg-config --cflags "${pkgs[@]}")"
read -r -a libs <<<"$(pkg-config --libs "${pkgs[@]}")"
"${CC:-cc}" -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE \
	-I"$root" -I"$build/gen" "${cflags[@]}" \
	"$src/main.c" "$src/receiver.c" "$src/check.c" "$build/libopal_shared.a" \
	"${libs[@]}" -lpthread -o "$build/tests/otlp-receiver"
