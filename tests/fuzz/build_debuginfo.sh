#!/usr/bin/env bash
# Builds the debuginfo libFuzzer targets (fuzz_json, fuzz_upload) with clang
# -fsanitize=fuzzer,address into OUT_DIR and fills OUT_DIR/corpus-<target>
# with seeds. The symbolizer and shared sources are compiled instrumented
# (every symbolizer/*.c except the *main.c files, as the library is), so the
# targets keep linking whatever those files come to depend on.
# usage: tests/fuzz/build_debuginfo.sh BUILD_DIR OUT_DIR
# Then: OUT_DIR/fuzz_json OUT_DIR/corpus-fuzz_json -max_total_time=60
set -euo pipefail
build=${1:?usage: build_debuginfo.sh BUILD_DIR OUT_DIR}
out=${2:?usage: build_debuginfo.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
mkdir -p "$out/obj"
out=$(cd "$out" && pwd)
# Generated protobuf code, as the Makefile writes it.
gen=()
while IFS= read -r proto; do
	rel=${proto#proto/}
	gen+=("$build/gen/${rel%.proto}.pb-c.c")
done < <(cd "$root" && find proto -name '*.proto' | sort)
# The flame graph page too: the HTTP server's /flamegraph reaches flamegraph.c.
make -C "$root" BUILD="$build" "${gen[@]}" "$build/gen/flamegraph_html.h" >/dev/null
pkgs="libelf libdw sqlite3 libprotobuf-c jansson libmicrohttpd libcurl zlib libcrypto liblzma \
	libdebuginfod libarchive libseccomp"
# shellcheck disable=SC2086 # pkg-config output is a list of flags
cflags="-g -O1 -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE -I$root -I$root/shared \
	-I$build/gen -I$build $(pkg-config --cflags $pkgs)"
objs=()
for src in "$root"/symbolizer/*.c "$root"/shared/*.c "${gen[@]}"; do
	case $(basename "$src") in *main.c) continue ;; esac
	# Files needing the BPF skeletons are not part of what these targets
	# reach.
	grep -q 'skel.h' "$src" && continue
	o=$out/obj/$(echo "${src#"$root"/}" | tr / _ | sed 's/\.c$/.o/')
	# shellcheck disable=SC2086
	clang $cflags -fsanitize=fuzzer-no-link,address -w -c "$src" -o "$o"
	objs+=("$o")
done
for t in fuzz_json fuzz_upload; do
	# shellcheck disable=SC2086
	clang $cflags -fsanitize=fuzzer,address "$root/tests/fuzz/$t.c" "${objs[@]}" \
		$(pkg-config --libs $pkgs) -liberty -lpthread -o "$out/$t"
	mkdir -p "$out/corpus-$t"
done
cp -f "$root"/tests/fuzz/seeds/json/* "$out/corpus-fuzz_json/"
if [ -d "$build/fixtures/debuginfo" ]; then
	cp -f "$build"/fixtures/debuginfo/di_full.debug "$build"/fixtures/debuginfo/di_mini \
		"$build"/fixtures/debuginfo/di_dwz.multi "$build"/fixtures/debuginfo/di_zstd.debug \
		"$build"/fixtures/debuginfo/di_sources.tar.gz "$out/corpus-fuzz_upload/"
fi
