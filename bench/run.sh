#!/bin/sh
# run.sh builds the benchmark suite of package bench and runs it in rounds,
# the step of make bench that measures (make bench-run).
#
# Usage: [BENCH_OUT=DIR] [BENCH_COUNT=N] [BENCH_TIME=D] [BENCH_RE=REGEXP] bench/run.sh
#   BENCH_OUT    where the outputs go (default bench/out)
#   BENCH_COUNT  rounds (default 10); each round runs every benchmark once,
#                so the rounds interleave in time and a slow phase of the
#                machine hits a result and its floor alike
#   BENCH_TIME   -test.benchtime of each benchmark in a round (default 0.3s)
#   BENCH_RE     -test.bench, the benchmarks to run (default ., all)
#
# It writes, in BENCH_OUT:
#   bench.test    the test binary, built once with go test -c
#   bench.commit  two lines: the commit built (git rev-parse HEAD, or
#                 "unknown" outside git) and whether tracked files had
#                 uncommitted changes (true or false), noted before the
#                 first round so that a commit made during the run does not
#                 take its results
#   bench.txt     every round's output (go test -v), appended in order
# and prints a line per round, the total time, and one "skipped:" line per
# benchmark that said it was unavailable here (a region this machine cannot
# make). A failing round stops the run: it prints the end of bench.txt and
# exits 1. A bad knob exits 2.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=${BENCH_OUT:-bench/out}
count=${BENCH_COUNT:-10}
benchtime=${BENCH_TIME:-0.3s}
pattern=${BENCH_RE:-.}
case $count in
'' | *[!0-9]* | 0)
	echo "bench: BENCH_COUNT=$count: want a number of rounds, at least 1" >&2
	exit 2
	;;
esac
mkdir -p "$out"
# The rounds run in bench/, as go test runs a package's tests in its
# directory: benchmarks find the repository's files (python/, testdata/)
# relative to it.
out=$(cd "$out" && pwd)
echo "$GO test -c -o $out/bench.test ./bench/"
$GO test -c -o "$out/bench.test" ./bench/
{
	git rev-parse --verify -q HEAD || echo unknown
	if git status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then echo true; else echo false; fi
} >"$out/bench.commit"
rm -f "$out/bench.txt"
start=$(date +%s)
i=0
while [ "$i" -lt "$count" ]; do
	i=$((i + 1))
	echo "bench: round $i of $count ($(($(date +%s) - start))s so far)"
	(cd bench && exec "$out/bench.test" -test.run='^$' -test.bench="$pattern" -test.benchmem \
		-test.benchtime="$benchtime" -test.count=1 -test.timeout=10m -test.v) >>"$out/bench.txt" 2>&1 || {
		tail -n 30 "$out/bench.txt"
		echo "bench: round $i failed; see $out/bench.txt"
		exit 1
	}
done
echo "bench: $count rounds in $(($(date +%s) - start))s, results in $out/bench.txt"
grep -h 'unavailable:' "$out/bench.txt" | sed 's/^ *[a-z_]*\.go:[0-9]*: /skipped: /' | sort -u
