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
# A failing target stops the run with go test's exit status; go test has
# then written the minimized input to fuzz/testdata/fuzz/<Target>/ and
# printed the command that replays it.
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
trap 'rm -f "$log"' EXIT
summary=""
for t in $targets; do
	echo "== $t for $time"
	corpus=fuzz/testdata/fuzz/$t
	before=$(ls "$corpus" 2>/dev/null | sort)
	status=0
	$GO test -run='^$' -fuzz="^$t\$" -fuzztime="$time" ./fuzz/ 2>&1 | tee "$log" || status=$?
	# go test's status is lost in the pipe; a failure prints FAIL.
	if [ $status -ne 0 ] || grep -q '^FAIL' "$log"; then
		after=$(ls "$corpus" 2>/dev/null | sort)
		# Go 1.26's fuzz coordinator can report the -fuzztime deadline
		# itself as a failure when a busy worker races it
		# (golang/go#75804, fixed in Go 1.27). That failure writes no
		# reproducer; a real one always does.
		if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log" &&
			! grep -q 'Failing input written to' "$log"; then
			echo "fuzz: $t stopped by golang/go#75804 at the -fuzztime deadline (no input failed, none written); not a failure" >&2
		else
			echo "fuzz: $t failed" >&2
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
