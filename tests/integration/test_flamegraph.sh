#!/usr/bin/env bash
# Flame graph page in a real browser: opal-report flamegraph writes the page
# of a pprof profile, headless Debian chromium loads it and
# tests/integration/flamegraph/check.js drives it over the DevTools protocol
# (playwright-core): frame names in the DOM, kinds, hover, search, click to
# zoom, Escape, no network access.
# usage: tests/integration/test_flamegraph.sh BUILD_DIR [--profile FILE.pb.gz
#        --expect NAME,NAME,... --click NAME]
# Without --profile the profile is tests/integration/flamegraph/fixture.txtpb
# (the frames of the tests/fixtures/fp programs), encoded with protoc.
# Needs chromium (apt) and node/npm; playwright-core is installed once into
# BUILD_DIR/tests/flamegraph-node (npm, pinned version, no browser
# download). Missing prerequisites are failures, not skips. Prints PASS/FAIL
# lines and "N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"

PLAYWRIGHT_VERSION=1.60.0
need_build "${1:?usage: test_flamegraph.sh BUILD_DIR [--profile FILE --expect A,B --click NAME]}"
shift
profile=
expect=spin_inline,leaf,level3,level2,level1,main,read_zero_loop,do_syscalls,do_syscall_64,ksys_read,libc.so.6+0x29d90
click=level2
while [ $# -gt 0 ]; do
	case $1 in
	--profile) profile=$2; shift 2 ;;
	--expect) expect=$2; shift 2 ;;
	--click) click=$2; shift 2 ;;
	*) echo "test_flamegraph.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

need_bins "$report"
chromium_bin=$(command -v chromium || true)
need_tools chromium node npm
[ "$prereq_ok" -eq 1 ] || finish
make_tmp opal-fg

nodedir=$build/tests/flamegraph-node
if [ ! -f "$nodedir/node_modules/playwright-core/package.json" ] ||
	! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$nodedir/node_modules/playwright-core/package.json"; then
	mkdir -p "$nodedir"
	if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$nodedir" --no-save --no-audit \
		--no-fund --silent "playwright-core@$PLAYWRIGHT_VERSION" >"$tmp/npm.log" 2>&1; then
		fail "playwright-core installed" "$(tail -n 3 "$tmp/npm.log" | tr '\n' ' ')"
		finish
	fi
fi
pass "playwright-core $PLAYWRIGHT_VERSION available"

if [ -z "$profile" ]; then
	profile=$tmp/fixture.pb
	if ! protoc --encode=perftools.profiles.Profile -I"$repo/proto" \
		"$repo/proto/pprof/profile.proto" <"$repo/tests/integration/flamegraph/fixture.txtpb" \
		>"$profile" 2>"$tmp/protoc.err"; then
		fail "fixture profile encoded" "$(head -n 3 "$tmp/protoc.err" | tr '\n' ' ')"
		finish
	fi
fi

html=$tmp/flamegraph.html
if "$report" flamegraph "$profile" -o "$html" --title "opal flame graph test" \
	>"$tmp/report.out" 2>&1 && [ -s "$html" ]; then
	pass "opal-report flamegraph wrote the page ($(cat "$tmp/report.out"))"
else
	fail "opal-report flamegraph" "$(head -n 3 "$tmp/report.out" | tr '\n' ' ')"
	finish
fi

# Root needs --no-sandbox (given by check.js); HOME keeps chromium's
# profile and crash folders inside the temp dir.
out=$(HOME=$tmp NODE_PATH=$nodedir/node_modules timeout 120 \
	node "$repo/tests/integration/flamegraph/check.js" "$html" "$chromium_bin" "$expect" "$click" 2>&1)
rc=$?
report_lines <<<"$out"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	fail "browser check" "exit status $rc"
fi
finish
