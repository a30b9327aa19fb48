#!/bin/sh
# run.sh runs every native fuzz target of package fuzz in turn, for a fixed
# time each, and prints one summary line per target: executions, average
# executions per second, and the "new interesting" inputs (new coverage)
# found in this run.
#
# Usage: fuzz/run.sh [FUZZTIME] [TARGET...]
#        fuzz/run.sh -replay TARGET[/FILE]
#   FUZZTIME  go test -fuzztime value, e.g. 10s, 5m, 2h or 100000x; default
#             $FUZZTIME, else 1m.
#   TARGET    target names; default every Fuzz* function in ./fuzz. A name
#             that is not a target fails (exit 2) instead of fuzzing nothing.
#   -replay   run the committed corpus of TARGET, or its one file FILE (a
#             crasher go test wrote to fuzz/testdata/fuzz/TARGET/), with -v.
#             A target or file that does not exist fails (exit 2): go test
#             -run with a pattern that matches nothing would pass.
#
# A failing target stops the run with exit 1, and the last lines say why:
# the failing input go test wrote (fuzz/testdata/fuzz/<Target>/<hex>) and
# the command that replays it; or, when go test wrote none (a fuzzing
# process that hung, was killed or ran out of memory, an internal error),
# go test's reason and the tail of its output, with the last progress
# lines, whose execs stop growing when an input stalled a worker.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
known=$($GO test -list '^Fuzz' ./fuzz/ | grep '^Fuzz' || true)
if [ -z "$known" ]; then
	echo "fuzz: no Fuzz targets in ./fuzz (go test -list failed?)" >&2
	exit 2
fi
# check_target fails unless $1 is one of the package's fuzz targets.
check_target() {
	for k in $known; do
		[ "$k" = "$1" ] && return 0
	done
	echo "fuzz: no fuzz target $1 in ./fuzz; the targets are:" $known >&2
	exit 2
}
if [ "${1:-}" = "-replay" ]; then
	[ $# -eq 2 ] || { echo "usage: fuzz/run.sh -replay TARGET[/FILE]" >&2; exit 2; }
	target=${2%%/*}
	check_target "$target"
	pattern="^$target\$"
	case $2 in
	*/*)
		file=${2#*/}
		if [ ! -f "fuzz/testdata/fuzz/$target/$file" ]; then
			echo "fuzz: no corpus file fuzz/testdata/fuzz/$target/$file" >&2
			exit 2
		fi
		pattern="$pattern/^$file\$"
		;;
	esac
	exec $GO test -count=1 -run="$pattern" -v ./fuzz/
fi
time=${1:-${FUZZTIME:-1m}}
[ $# -gt 0 ] && shift
targets=$*
if [ -z "$targets" ]; then
	targets=$known
fi
for t in $targets; do
	check_target "$t"
done
log=$(mktemp)
trap 'rm -f "$log" "$log.status"' EXIT
# report_failure says why target $1 failed, from go test's output in $log
# and the corpus files before ($2) and after ($3) the run.
report_failure() {
	# go test names the input relative to the package: testdata/fuzz/T/hex.
	written=$(sed -n 's/^[[:space:]]*Failing input written to \(.*\)$/\1/p' "$log" | tail -n 1)
	new=$(printf '%s\n' "$3" | grep -vxF -e "$2" -e '' || true)
	if [ -z "$written" ] && [ -n "$new" ]; then
		written=testdata/fuzz/$1/$(printf '%s\n' "$new" | tail -n 1)
	fi
	if [ -n "$written" ]; then
		written=fuzz/${written#./}
		echo "fuzz: $1 failed; the failing input is $written" >&2
		echo "fuzz: replay it with: make fuzz-replay NAME=$1/$(basename "$written")" >&2
		return
	fi
	reason=$(grep -E 'fuzzing process|context deadline exceeded|communicating with fuzzing|panic:|signal:|out of memory|timed out' "$log" |
		sed 's/^[[:space:]]*//' | head -n 5)
	[ -n "$reason" ] || reason=$(grep -E '^[[:space:]]*--- FAIL' "$log" | sed 's/^[[:space:]]*//' | head -n 5)
	echo "fuzz: $1 failed and go test wrote no failing input; its last lines:" >&2
	grep -v '^fuzz: elapsed:' "$log" | tail -n 15 | sed 's/^/    /' >&2
	echo "fuzz: its last progress lines (execs that stop growing: an input stalled a worker):" >&2
	grep '^fuzz: elapsed:' "$log" | tail -n 3 | sed 's/^/    /' >&2
	echo "fuzz: $1 failed without an input; the reason: ${reason:-(go test printed none; see its output above)}" >&2
}
summary=""
for t in $targets; do
	echo "== $t for $time"
	corpus=fuzz/testdata/fuzz/$t
	before=$(ls "$corpus" 2>/dev/null | sort)
	# go test's status would be lost in the pipe (sh has no pipefail).
	{
		status=0
		$GO test -run='^$' -fuzz="^$t\$" -fuzztime="$time" ./fuzz/ 2>&1 || status=$?
		echo "$status" >"$log.status"
	} | tee "$log"
	status=$(cat "$log.status")
	if [ "$status" -ne 0 ] || grep -q '^FAIL' "$log"; then
		after=$(ls "$corpus" 2>/dev/null | sort)
		# Go 1.26's fuzz coordinator can report the -fuzztime deadline
		# itself as a failure when a busy worker races it
		# (golang/go#75804, fixed in Go 1.27). That failure writes no
		# reproducer; a real one always does.
		if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log" &&
			! grep -q 'Failing input written to' "$log"; then
			echo "fuzz: $t stopped by golang/go#75804 at the -fuzztime deadline (no input failed, none written); not a failure" >&2
		else
			report_failure "$t" "$before" "$after"
			exit 1
		fi
	fi
	line=$(awk '
		/^fuzz: elapsed:/ {
			el = $3; sub(/,$/, "", el); execs = $5
			s = 0
			if (el ~ /h/) { split(el, a, "h"); s += a[1] * 3600; el = a[2] }
			if (el ~ /m/) { split(el, a, "m"); s += a[1] * 60; el = a[2] }
			sub(/s$/, "", el); s += el
			for (i = 1; i <= NF; i++) if ($i == "interesting:") { ni = $(i + 1); tot = $(i + 3) }
			sub(/,$/, "", execs); sub(/\)$/, "", tot)
		}
		END { if (s > 0) printf "%d execs in %ds (%d/s), new interesting %s (corpus %s)", execs, s, execs / s, ni, tot }
	' "$log")
	summary="$summary$(printf '%-22s %s' "$t" "$line")
"
done
echo "== summary"
printf '%s' "$summary"
