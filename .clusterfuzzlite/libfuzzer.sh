#!/bin/bash
# libfuzzer.sh builds every native fuzz target as a libFuzzer binary with
# .clusterfuzzlite/build.sh, the script ClusterFuzzLite runs, here and
# without docker, then fuzzes each on its committed corpus.
#
# Usage: .clusterfuzzlite/libfuzzer.sh [-build-only] [TARGET...]
#   (make libfuzzer [LIBFUZZER_TIME=30] [LIBFUZZER_TARGETS='FuzzA FuzzB'])
#   LIBFUZZER_TIME  seconds each target runs (default 30)
#   TARGET          run only these (all are built); default every target
#                   fuzz/targets.sh lists
#   -build-only     build, check the seed layout, run nothing
#   LIBFUZZER_KEEP  non-empty: keep the work directory (binaries, corpora,
#                   logs) and print where it is; a failure always keeps it
#
# Steps:
#  1. What it needs: clang++ with libFuzzer's runtime, probed by linking a
#     one-line fuzzer. When it is missing and apt-get is at hand as root,
#     it installs Debian's clang and libclang-rt-dev (the runtime), with
#     apt-get update only if the install fails without; otherwise it says
#     exactly what to install and exits 3.
#     The builder, go-118-fuzz-build, comes from the Go module proxy in
#     build.sh.
#  2. The build: a copy of the working tree (the builder edits its source
#     tree) as $SRC/kvalloc, the OSS-Fuzz image's variables for the address
#     sanitizer (CXX=clang++, the image's CXXFLAGS, LIB_FUZZING_ENGINE=
#     -fsanitize=fuzzer), and build.sh unchanged.
#  3. The seed layout: internal/seedzip's layout_test.go, behind the
#     libfuzzer_layout tag, runs in the copy against the builder's own
#     testing package and fails unless every committed seed reaches the
#     target byte for byte.
#  4. The crash path, proved: FuzzAllocator built over a broken allocator
#     (the kvalloc_fuzz_mutant tag) must crash within 60 s, and the input
#     written back must fail go test on it and pass on the real one.
#  5. The runs, one target at a time, each on its unzipped seed corpus for
#     LIBFUZZER_TIME seconds, then a summary line per target: executions,
#     executions per second, the corpus it grew to and libFuzzer's edge
#     coverage.
#
# A crash stops the run with exit 1. libfuzzer.sh then writes the input,
# decoded to the []byte the target saw, to DIR/testdata/fuzz/FuzzX/<hex>
# in this working tree, Go's corpus format and name, and prints the
# command that replays it (make fuzz-replay NAME=FuzzX/<hex> for targets
# of ./fuzz); libFuzzer's own artifact stays in the work directory it
# names. Fix the bug and commit the file: plain go test replays it from
# then on.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
time=${LIBFUZZER_TIME:-30}
build_only=false
if [ "${1:-}" = "-build-only" ]; then
	build_only=true
	shift
fi
case $time in '' | *[!0-9]* | 0 | 0*)
	# libFuzzer takes -max_total_time=0 as no limit at all.
	echo "libfuzzer: LIBFUZZER_TIME must be whole seconds, at least 1, not '$time'" >&2
	exit 2
	;;
esac
targets=$(bash fuzz/targets.sh)
for t in "$@"; do
	echo "$targets" | awk -v t="$t" '$2 == t {found = 1} END {exit !found}' || {
		echo "libfuzzer: no fuzz target $t; the targets are:" $(echo "$targets" | awk '{print $2}') >&2
		exit 2
	}
done

work=$(mktemp -d "${TMPDIR:-/tmp}/kvalloc-libfuzzer.XXXXXX")
keep=false
if [ -n "${LIBFUZZER_KEEP:-}" ]; then
	keep=true
	echo "libfuzzer: keeping $work (the binaries are in $work/out)"
fi
trap '$keep || rm -rf "$work"' EXIT

# crash_artifact prints the first input libFuzzer wrote to dir as a failure
# (crash-, leak-, timeout- or oom-); slow-unit- files are only slow.
crash_artifact() {
	ls "$1" | grep -E '^(crash|leak|timeout|oom)-' | head -n 1 || true
}

# 1. clang++ with libFuzzer.
probe() {
	printf '#include <stddef.h>\n#include <stdint.h>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' >"$work/probe.cc"
	clang++ -x c++ -fsanitize=address,fuzzer "$work/probe.cc" -o "$work/probe" >"$work/probe.log" 2>&1
}
if ! probe; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "libfuzzer: installing clang from Debian's packages (apt-get install clang libclang-rt-dev)"
		start=$(date +%s)
		install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang libclang-rt-dev; }
		{ install || { apt-get update -q && install; }; } >"$work/apt.log" 2>&1 ||
			{ tail -n 20 "$work/apt.log"; echo "libfuzzer: apt-get install clang libclang-rt-dev failed" >&2; exit 3; }
		echo "libfuzzer: clang installed in $(($(date +%s) - start))s"
	fi
	if ! probe; then
		cat "$work/probe.log" >&2
		echo "libfuzzer: missing clang++ with libFuzzer's runtime (libclang_rt.fuzzer);" \
			"on Debian: apt-get install clang libclang-rt-dev" >&2
		exit 3
	fi
fi
clang++ --version | head -n 1

# 2. build.sh on a copy, with the image's variables.
mkdir -p "$work/src/kvalloc" "$work/out" "$work/work"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$work/src/kvalloc"
flags="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
start=$(date +%s)
(
	export SRC="$work/src" OUT="$work/out" WORK="$work/work" SANITIZER=address FUZZING_ENGINE=libfuzzer \
		CC=clang CXX=clang++ CFLAGS="$flags" CXXFLAGS="$flags" LIB_FUZZING_ENGINE=-fsanitize=fuzzer
	bash .clusterfuzzlite/build.sh
) >"$work/build.log" 2>&1 || {
	keep=true
	tail -n 40 "$work/build.log"
	echo "libfuzzer: build.sh failed; its log is $work/build.log" >&2
	exit 1
}
echo "libfuzzer: build.sh built $(echo "$targets" | wc -l) targets in $(($(date +%s) - start))s"

# 3. The seed layout, against the builder's testing package.
(cd "$work/src/kvalloc" && go test -count=1 -tags libfuzzer_layout -run '^TestLayoutMatchesBuilder$' ./internal/seedzip/) || {
	echo "libfuzzer: the seed zips are not in the layout the built harness reads" >&2
	exit 1
}
$build_only && exit 0

# 4. The crash path, proved on a broken allocator: FuzzAllocator built with
# the kvalloc_fuzz_mutant tag (fuzz/mutant_build.go) must crash, and the
# input written back must fail go test with the tag and pass without it.
mkdir -p "$work/self/out" "$work/self/work" "$work/self/crash" "$work/self/corpus"
(
	export SRC="$work/src" OUT="$work/self/out" WORK="$work/self/work" SANITIZER=address FUZZING_ENGINE=libfuzzer \
		CC=clang CXX=clang++ CFLAGS="$flags" CXXFLAGS="$flags" LIB_FUZZING_ENGINE=-fsanitize=fuzzer \
		KVALLOC_FUZZ_TAGS=kvalloc_fuzz_mutant
	bash .clusterfuzzlite/build.sh FuzzAllocator
) >"$work/self/build.log" 2>&1 || {
	keep=true
	tail -n 40 "$work/self/build.log"
	echo "libfuzzer: self-test: build.sh failed; log: $work/self/build.log" >&2
	exit 1
}
(cd "$work/self/corpus" && unzip -q "$work/self/out/FuzzAllocator_seed_corpus.zip")
"$work/self/out/FuzzAllocator" -max_total_time=60 -artifact_prefix="$work/self/crash/" "$work/self/corpus" \
	>"$work/self/run.log" 2>&1 </dev/null || true
self_fail() {
	keep=true
	echo "libfuzzer: self-test: $*; work directory $work/self" >&2
	exit 1
}
artifact=$(crash_artifact "$work/self/crash")
[ -n "$artifact" ] || self_fail "libFuzzer found no crash in the broken allocator in 60s"
grep -q -- '!= capacity' "$work/self/run.log" || self_fail "the crash does not report the broken Used (!= capacity)"
file=$(cd "$work/src/kvalloc" && go run ./internal/seedzip -layout consumer -go fuzz/testdata/fuzz/FuzzAllocator "$work/self/crash/$artifact") ||
	self_fail "seedzip cannot decode the crash"
name=$(basename "$file")
(cd "$work/src/kvalloc" && go test -count=1 -tags kvalloc_fuzz_mutant -run "^FuzzAllocator/^$name\$" ./fuzz/) >"$work/self/replay.log" 2>&1 &&
	self_fail "the written input $name passes go test on the broken allocator"
grep -q -- "--- FAIL: FuzzAllocator/$name" "$work/self/replay.log" || self_fail "go test did not run $name"
(cd "$work/src/kvalloc" && go test -count=1 -run "^FuzzAllocator/^$name\$" ./fuzz/) >>"$work/self/replay.log" 2>&1 ||
	self_fail "the written input $name fails go test on the real allocator"
rm -f "$work/src/kvalloc/$file"
echo "libfuzzer: self-test passed: a crash of a broken allocator came back as $name, which go test fails on it and passes on the real one"

# 5. The runs.
: >"$work/summary"
while read -r dir t; do
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$t"; then
		continue
	fi
	corpus="$work/corpus/$t" crash="$work/crash/$t"
	mkdir -p "$corpus" "$crash"
	(cd "$corpus" && unzip -q "$work/out/${t}_seed_corpus.zip")
	echo "== $t for ${time}s ($(ls "$corpus" | wc -l) seeds)"
	status=0
	"$work/out/$t" -max_total_time="$time" -print_final_stats=1 -artifact_prefix="$crash/" \
		"$corpus" >"$work/$t.log" 2>&1 </dev/null || status=$?
	grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$work/$t.log" || true
	artifact=$(crash_artifact "$crash")
	if [ $status -ne 0 ] || [ -n "$artifact" ]; then
		keep=true
		grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)' "$work/$t.log" | tail -n 40
		if [ -z "$artifact" ]; then
			echo "libfuzzer: $t exited $status without a crash input; log: $work/$t.log" >&2
			exit 1
		fi
		file=$(go run ./internal/seedzip -layout consumer -go "$dir/testdata/fuzz/$t" "$crash/$artifact" </dev/null) || {
			echo "libfuzzer: $t crashed on $crash/$artifact, which seedzip cannot decode" >&2
			exit 1
		}
		name=$(basename "$file")
		echo "libfuzzer: $t crashed; the input is now $file (libFuzzer's artifact: $crash/$artifact)" >&2
		if [ "$dir" = fuzz ]; then
			echo "libfuzzer: replay it with: make fuzz-replay NAME=$t/$name" >&2
		else
			echo "libfuzzer: replay it with: go test -count=1 -run '^$t/^$name\$' -v ./$dir/" >&2
		fi
		exit 1
	fi
	awk -v t="$t" '
		/^stat::number_of_executed_units:/ { execs = $2 }
		/^stat::average_exec_per_sec:/ { rate = $2 }
		/^#[0-9]+[[:space:]]+DONE/ { for (i = 1; i <= NF; i++) { if ($i == "cov:") cov = $(i + 1); if ($i == "corp:") corp = $(i + 1) } }
		END { printf "%-22s %d execs in %ss (%d/s), corpus %s, cov %s\n", t, execs, '"$time"', rate, corp, cov }
	' "$work/$t.log" >>"$work/summary"
done <<<"$targets"
echo "== summary (libFuzzer, one process per target)"
cat "$work/summary"
