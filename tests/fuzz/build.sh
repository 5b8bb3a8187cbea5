#!/usr/bin/env bash
# Builds every libFuzzer target tests/fuzz/fuzz_*.c with clang
# -fsanitize=fuzzer,address into OUT_DIR/fuzz_*. The daemons' and shared
# sources are compiled instrumented into thin archives, as the Makefile
# builds its libraries (each daemon's main.c left out, and the collector
# files that need the BPF skeleton, which no target reaches), so a target
# keeps linking whatever the code it tests comes to depend on.
# usage: tests/fuzz/build.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:?usage: build.sh BUILD_DIR OUT_DIR}
out=${2:?usage: build.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
mkdir -p "$out/obj"
out=$(cd "$out" && pwd)

gen=()
while IFS= read -r proto; do
	rel=${proto#proto/}
	gen+=("$build/gen/${rel%.proto}.pb-c.c")
done < <(cd "$root" && find proto -name '*.proto' | sort)
make -C "$root" BUILD="$build" "${gen[@]}" "$build/gen/flamegraph_html.h" >/dev/null

pkgs="libelf libdw sqlite3 libprotobuf-c jansson libmicrohttpd libcurl zlib libcrypto liblzma libzstd \
	libdebuginfod libarchive libseccomp libdeflate"
# shellcheck disable=SC2086 # pkg-config output is a list of flags
cflags="-g -O1 -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE -I$root -I$build/gen -I$build \
	$(pkg-config --cflags $pkgs)"

# archive NAME INCLUDE_FLAGS SOURCE...: instrumented objects, rebuilt when
# their source is newer.
archive() {
	local name=$1 inc=$2 objs=() src o
	shift 2
	for src in "$@"; do
		o=$out/obj/$(echo "${src#"$root"/}" | tr / _ | sed 's/\.c$/.o/')
		if [ ! -e "$o" ] || [ "$src" -nt "$o" ]; then
			# shellcheck disable=SC2086
			clang $cflags $inc -fsanitize=fuzzer-no-link,address -w -c "$src" -o "$o"
		fi
		objs+=("$o")
	done
	rm -f "$out/lib$name.a"
	ar rcsT "$out/lib$name.a" "${objs[@]}"
}

mapfile -t coll < <(find "$root/collector" -name '*.c' ! -path "$root/collector/main.c" | sort)
mapfile -t sym < <(find "$root/symbolizer" -name '*.c' ! -path "$root/symbolizer/main.c" | sort)
coll_nobpf=()
for src in "${coll[@]}"; do
	grep -q 'skel.h' "$src" || coll_nobpf+=("$src")
done
archive collector "-I$root/collector" "${coll_nobpf[@]}"
archive symbolizer "-I$root/symbolizer" "${sym[@]}"
archive shared "" "$root"/shared/*.c "${gen[@]}"

for t in "$root"/tests/fuzz/fuzz_*.c; do
	name=$(basename "$t" .c)
	# shellcheck disable=SC2086
	clang $cflags -I"$root/collector" -I"$root/symbolizer" -fsanitize=fuzzer,address "$t" \
		"$out/libcollector.a" "$out/libsymbolizer.a" "$out/libshared.a" \
		$(pkg-config --libs $pkgs) -liberty -lpthread -o "$out/$name"
done
