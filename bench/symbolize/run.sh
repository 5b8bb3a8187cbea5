#!/usr/bin/env bash
# Symbolization benchmark (docs/performance.md, "Symbolization").
#
# usage: bench/symbolize/run.sh [--build DIR] [--runs N] [--eu-cxx N] [--budget MIB]
#
# Resolves a fixed set of 100,000 addresses in two files:
#   libc   /lib/x86_64-linux-gnu/libc.so.6 with its libc6-dbg debug file
#          (/usr/lib/debug/.build-id/xx/rest.debug);
#   cxx    a generated C++ program (bench/symbolize/gen_cxx.py: > 50,000
#          functions, templates, forced inlining) built with g++ -O2 -g;
# with opal (bench_symbolize: cold = empty caches, warm = the same
# addresses again; also cold with the SQLite cache, in one transaction and
# through the daemon's write queue, and a restart answered from it),
# llvm-symbolizer --inlines and eu-addr2line -i, and prints the
# times, the speed-ups over llvm-symbolizer, peak RSS, and the comparison
# of the answers (bench/symbolize/compare.py: every difference is written
# with its category to DIR/bench/symbolize/<file>.differences).
#
# Times are the best of --runs runs (default 5) for opal and
# llvm-symbolizer, which take turns so that both see the same machine
# load; eu-addr2line runs once, and on the C++ program only on
# the first --eu-cxx addresses (default 3,000: it walks the unit's DIEs per
# address, ~4 ms each there), its time scaled to 100,000 and marked "*".
# The C++ program is built once into DIR/bench/symbolize/cxx (a few
# minutes on 2 cores) and reused while its generated sources are unchanged.
set -euo pipefail

BUILD=build RUNS=5 EU_CXX=3000 BUDGET=0 N=100000
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--eu-cxx) EU_CXX=$2; shift 2 ;;
	--budget) BUDGET=$2; shift 2 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
out=$BUILD/bench/symbolize
mkdir -p "$out"
die() { echo "run.sh: $*" >&2; exit 1; }
for t in llvm-symbolizer eu-addr2line g++ python3 readelf; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install llvm elfutils g++ python3 binutils)"
done

make -s BUILD="$BUILD" bench-symbolize
driver=$BUILD/bench/bench_symbolize

# ---- inputs -----------------------------------------------------------------
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
bid=$(readelf -n "$libc" | sed -n 's/.*Build ID: *//p')
libc_dbg=/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug
[ -r "$libc_dbg" ] || die "no $libc_dbg: apt-get install libc6-dbg"

cxxdir=$out/cxx
python3 "$here/gen_cxx.py" "$cxxdir"
cxx=$cxxdir/opalbench_cxx
stale=()
for src in "$cxxdir"/*.cc; do
	obj=${src%.cc}.o
	[ "$obj" -nt "$src" ] || stale+=("$src")
done
if [ ${#stale[@]} -gt 0 ] || [ ! -x "$cxx" ]; then
	echo "run.sh: compiling ${#stale[@]} generated C++ units (g++ -O2 -g, once)" >&2
	start=$(date +%s)
	printf '%s\n' "${stale[@]}" | xargs -r -P 2 -I{} sh -c 'g++ -O2 -g -c "$1" -o "${1%.cc}.o"' _ {}
	g++ -O2 -g "$cxxdir"/*.o -o "$cxx"
	echo "run.sh: built $cxx in $(( $(date +%s) - start )) s" >&2
fi
nfuncs=$(readelf -sW "$cxx" | awk '$4 == "FUNC" && $3 > 0' | wc -l)

python3 "$here/gen_addrs.py" "$libc_dbg" "$N" 1 > "$out/libc.addrs"
python3 "$here/gen_addrs.py" "$cxx" "$N" 2 > "$out/cxx.addrs"
head -n "$EU_CXX" "$out/cxx.addrs" > "$out/cxx.eu.addrs"

# ---- runs -----------------------------------------------------------------------
# min of a key over the runs' key=value outputs
best() { grep -h "^$1=" "${@:2}" | cut -d= -f2 | sort -g | head -1; }
val() { grep -h "^$1=" "$2" | cut -d= -f2 | head -1; }

# time_cmd OUTFILE INPUT CMD...: wall seconds and max RSS (KiB) of one run
time_cmd() {
	python3 -c '
import resource, subprocess, sys, time
with open(sys.argv[1]) as i, open(sys.argv[2], "w") as o:
    t = time.monotonic()
    subprocess.run(sys.argv[3:], stdin=i, stdout=o, check=True)
    t = time.monotonic() - t
print("%.3f %d" % (t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
' "$2" "$1" "${@:3}"
}

budget_opt=()
[ "$BUDGET" -gt 0 ] && budget_opt=(--budget "$BUDGET")

declare -A R
for name in libc cxx; do
	if [ $name = libc ]; then elf=$libc; syms=(--symbols "$libc" --symbols "$libc_dbg")
	else elf=$cxx; syms=(--symbols "$cxx"); fi
	syms+=(--binary "$elf")
	addrs=$out/$name.addrs
	# opal and llvm-symbolizer take turns, so that both see the same load.
	echo "run.sh: $name: opal and llvm-symbolizer --inlines, $RUNS runs each" >&2
	lt=
	for i in $(seq 1 "$RUNS"); do
		ans=()
		[ "$i" = 1 ] && ans=(--answers "$out/$name.opal.tsv")
		"$driver" "${budget_opt[@]}" "${ans[@]}" "$elf" "$addrs" > "$out/$name.opal.$i"
		t=$(time_cmd "$out/$name.llvm.json" "$addrs" \
			llvm-symbolizer --inlines --output-style=JSON --obj="$elf")
		lt+="${t%% *} "
		R[$name.llvm_rss]=${t##* }
	done
	R[$name.llvm]=$(printf '%s\n' $lt | sort -g | head -1)
	"$driver" "${budget_opt[@]}" --sqlite "$out/$name.db" "$elf" "$addrs" > "$out/$name.sqlite"
	rm -f "$out/$name.db" "$out/$name.db-wal" "$out/$name.db-shm"
	# as the daemon writes: its queue flushed every 2,000 new addresses
	"$driver" "${budget_opt[@]}" --sqlite "$out/$name.db" --flush-every 2000 "$elf" "$addrs" \
		> "$out/$name.sqlite_queue"
	rm -f "$out/$name.db" "$out/$name.db-wal" "$out/$name.db-shm"
	R[$name.cold]=$(best cold_s "$out"/$name.opal.[0-9]*)
	R[$name.warm]=$(best warm_s "$out"/$name.opal.[0-9]*)
	R[$name.rss]=$(best rss_peak_kib "$out"/$name.opal.[0-9]*)
	R[$name.index]=$(val index_peak_bytes "$out/$name.opal.1")
	R[$name.frames]=$(val frames "$out/$name.opal.1")
	R[$name.cold_sql]=$(val cold_s "$out/$name.sqlite")
	R[$name.cold_queue]=$(val cold_s "$out/$name.sqlite_queue")
	R[$name.restart]=$(val restart_s "$out/$name.sqlite")

	echo "run.sh: $name: eu-addr2line -i" >&2
	euin=$addrs
	[ $name = cxx ] && euin=$out/cxx.eu.addrs
	t=$(time_cmd "$out/$name.eu.txt" "$euin" eu-addr2line -a -i -f -C -A -e "$elf")
	n_eu=$(wc -l < "$euin")
	R[$name.eu]=$(awk -v t="${t%% *}" -v n="$n_eu" -v N="$N" 'BEGIN { printf "%.2f", t * N / n }')
	R[$name.eu_mark]=$([ "$n_eu" -lt "$N" ] && echo "*" || echo "")

	echo "run.sh: $name: comparing answers" >&2
	python3 "$here/compare.py" --opal "$out/$name.opal.tsv" --llvm "$out/$name.llvm.json" \
		--eu "$out/$name.eu.txt" "${syms[@]}" --details "$out/$name.differences" \
		> "$out/$name.compare"
done

# ---- report ------------------------------------------------------------------------
echo
echo "Symbolization of $N addresses (best of $RUNS runs; * = scaled from a subset)"
echo "  libc: $libc with $libc_dbg"
echo "  cxx:  $cxx ($nfuncs functions)"
echo
printf '%-6s %10s %10s %12s %12s %14s %10s %10s %10s %12s\n' file "opal cold" "opal warm" \
	"cold+SQLite" "llvm-symb." "eu-addr2line" "cold/llvm" "warm/llvm" "RSS MiB" "index MiB"
for name in libc cxx; do
	printf '%-6s %9.3fs %9.4fs %11.3fs %11.3fs %13.2fs%1s %9.1fx %9.0fx %10.0f %12.1f\n' $name \
		"${R[$name.cold]}" "${R[$name.warm]}" "${R[$name.cold_sql]}" "${R[$name.llvm]}" \
		"${R[$name.eu]}" "${R[$name.eu_mark]}" \
		"$(awk -v a="${R[$name.llvm]}" -v b="${R[$name.cold]}" 'BEGIN { print a / b }')" \
		"$(awk -v a="${R[$name.llvm]}" -v b="${R[$name.warm]}" 'BEGIN { print a / b }')" \
		"$(awk -v k="${R[$name.rss]}" 'BEGIN { print k / 1024 }')" \
		"$(awk -v b="${R[$name.index]}" 'BEGIN { print b / 1048576 }')"
done
echo
for name in libc cxx; do
	echo "  $name: opal frames ${R[$name.frames]}; restart from SQLite ${R[$name.restart]} s;" \
		"cold+SQLite through the write queue (a transaction per 2,000 addresses)" \
		"${R[$name.cold_queue]} s; llvm-symbolizer RSS $(( ${R[$name.llvm_rss]} / 1024 )) MiB"
done
for name in libc cxx; do
	echo
	echo "Answers, $name (every difference: $out/$name.differences)"
	sed 's/^/  /' "$out/$name.compare"
done
