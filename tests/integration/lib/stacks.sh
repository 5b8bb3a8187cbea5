# shellcheck shell=bash
# Per-stack checks on a profile, sourced after common.sh by the scripts
# that assert exact user stacks:
#     . "$(dirname "$0")/lib/stacks.sh"
# user_stacks turns `opal-report stacks` output into one line per stack
# with the kernel frames cut; check_share asserts the share of a set of
# samples whose stack is the expected one.

# The outermost frames of a dynamically linked glibc program.
libc_root='__libc_start_call_main;__libc_start_main_impl;_start'

# user_stacks STACKS OUT: writes OUT with "PID<tab>COMM<tab>COUNT<tab>
# user frames" per line of the `opal-report stacks` file STACKS (leaf
# first; the kernel frames a stack taken in the kernel starts with, known
# from /proc/kallsyms or marked " [kind]", are cut).
user_stacks() {
	local ksyms
	ksyms=$(mktemp)
	awk '$2 ~ /^[tTwW]$/ { print $3 }' /proc/kallsyms | sort -u >"$ksyms"
	awk -v ksyms="$ksyms" '
		BEGIN { while ((getline k < ksyms) > 0) kernel[k] = 1 }
		{
			pid = $1; sub(/^pid=/, "", pid)
			comm = $3; sub(/^comm=/, "", comm)
			c = $0; sub(/^.* count=/, "", c)
			s = $0; sub(/^[^:]*: /, "", s)
			n = split(s, f, ";")
			for (u = 1; u <= n && ((f[u] in kernel) || f[u] ~ / \[[a-z_0-9]+\]$/); u++) ;
			out = ""
			for (i = u; i <= n; i++) out = out (out == "" ? "" : ";") f[i]
			printf "%s\t%s\t%d\t%s\n", pid, comm, c + 0, out
		}' "$1" >"$2"
	rm -f "$ksyms"
}

# check_share NAME USER PIDS SELECT WANT MIN_PERCENT [MIN_SAMPLES]: of the
# samples in USER (a user_stacks file) of the processes PIDS (space
# separated) whose "COMM<tab>STACK" matches the ERE SELECT (at least
# MIN_SAMPLES, default 10), MIN_PERCENT must match the ERE WANT (both
# anchored). PASS or FAIL NAME with the counts and the most frequent
# other stack.
check_share() {
	local msg
	if msg=$(awk -F'\t' -v pids=" $3 " -v sel="^($4)\$" -v want="^($5)\$" -v min="$6" \
		-v min_n="${7:-10}" '
		index(pids, " " $1 " ") == 0 || ($2 "\t" $4) !~ sel { next }
		{
			total += $3
			if (($2 "\t" $4) ~ want) good += $3
			else { other[$2 "\t" $4] += $3 }
		}
		END {
			for (k in other) if (other[k] > worst) { worst = other[k]; bad = k }
			if (total < min_n) { printf "only %d samples (want %d)", total, min_n; exit 1 }
			if (good * 100 < total * min) {
				printf "%d of %d samples match (want %d%%); most frequent other (%d): %s",
					good, total, min, worst, substr(bad, 1, 400)
				exit 1
			}
			printf "%d of %d samples", good, total
		}' "$2"); then
		pass "$1 ($msg)"
	else
		fail "$1" "$msg"
	fi
}
