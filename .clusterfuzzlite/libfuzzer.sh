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
#     it runs apt-get update and installs Debian's clang and
#     libclang-rt-dev (the runtime); otherwise it says exactly what to
#     install and exits 3.
#     The builder, go-118-fuzz-build, comes from the Go module proxy in
#     build.sh.
#  2. The build: a copy of the working tree (the builder edits its source
#     tree) as $SRC/kvalloc, the OSS-Fuzz image's variables for the address
#     sanitizer (CXX=clang++, the image's CXXFLAGS, LIB_FUZZING_ENGINE=
#     -fsanitize=fuzzer), and build.sh unchanged. Then every target
#     fuzz/targets.sh lists must have its binary and seed zip in $OUT:
#     the count printed is of binaries found, not of targets listed.
#  2b. The build's check, proved: in another copy with a target added
#     whose file uses a helper of another _test.go file (which go test
#     compiles and the builder does not), build.sh must fail naming that
#     target and build nothing; and with a CXX that links nothing, it must
#     fail naming the binary it did not make.
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
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang libclang-rt-dev; } \
			>"$work/apt.log" 2>&1 ||
			{ tail -n 20 "$work/apt.log"; echo "libfuzzer: apt-get update; apt-get install clang libclang-rt-dev failed" >&2; exit 3; }
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
# copy_tree copies the working tree (tracked and untracked, not ignored) to $1.
copy_tree() {
	mkdir -p "$1"
	git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | xargs -0 cp --parents -t "$1"
}
copy_tree "$work/src/kvalloc"
mkdir -p "$work/out" "$work/work"
flags="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
# build runs build.sh with the image's variables: SRC=$1, OUT=$2, WORK=$3,
# then the rest as build.sh's arguments; cxx (default clang++) is its CXX.
build() {
	(
		export SRC="$1" OUT="$2" WORK="$3" SANITIZER=address FUZZING_ENGINE=libfuzzer \
			CC=clang CXX="${cxx:-clang++}" CFLAGS="$flags" CXXFLAGS="$flags" LIB_FUZZING_ENGINE=-fsanitize=fuzzer
		shift 3
		bash .clusterfuzzlite/build.sh "$@"
	)
}
start=$(date +%s)
build "$work/src" "$work/out" "$work/work" >"$work/build.log" 2>&1 || {
	keep=true
	tail -n 40 "$work/build.log"
	echo "libfuzzer: build.sh failed; its log is $work/build.log" >&2
	exit 1
}
listed=$(echo "$targets" | wc -l) found=0 missing=""
while read -r dir t; do
	if [ -x "$work/out/$t" ] && [ -s "$work/out/${t}_seed_corpus.zip" ]; then
		found=$((found + 1))
	else
		missing="$missing $t"
	fi
done <<<"$targets"
if [ -n "$missing" ]; then
	keep=true
	tail -n 40 "$work/build.log"
	echo "libfuzzer: build.sh exited 0 but made $found binaries for $listed targets; no binary or seed zip for:$missing; its log is $work/build.log" >&2
	exit 1
fi
echo "libfuzzer: build.sh made $found binaries for the $listed targets in $(($(date +%s) - start))s"

# 2b. The build's check, proved on a broken target and a linker that links
# nothing, in another copy (the builder edits its tree).
start=$(date +%s)
bite="$work/bite"
copy_tree "$bite/src/kvalloc"
mkdir -p "$bite/out" "$bite/work"
bite_fail() {
	keep=true
	echo "libfuzzer: the build's check did not bite: $*; work directory $bite" >&2
	exit 1
}
# The broken target sorts first and uses a helper of another _test.go file:
# go test compiles it, the builder does not.
broken=FuzzABrokenTarget
printf '%s\n' 'package fuzz' '' 'func brokenTargetHelper(data []byte) int { return len(data) }' \
	>"$bite/src/kvalloc/fuzz/zz_broken_helper_test.go"
printf '%s\n' 'package fuzz' '' 'import "testing"' '' "func $broken(f *testing.F) {" \
	'	f.Fuzz(func(t *testing.T, data []byte) { _ = brokenTargetHelper(data) })' '}' \
	>"$bite/src/kvalloc/fuzz/zz_broken_fuzz_test.go"
# The two files type-check together, as go test compiles them, and the
# target's alone does not, as the builder compiles it.
(cd "$bite/src/kvalloc/fuzz" && go vet zz_broken_helper_test.go zz_broken_fuzz_test.go) >"$bite/vet.log" 2>&1 || {
	cat "$bite/vet.log" >&2
	bite_fail "the broken target does not compile with its helper's file"
}
(cd "$bite/src/kvalloc/fuzz" && go vet zz_broken_fuzz_test.go) >>"$bite/vet.log" 2>&1 &&
	bite_fail "the broken target compiles without its helper's file"
build "$bite/src" "$bite/out" "$bite/work" >"$bite/broken.log" 2>&1 &&
	bite_fail "build.sh passed with $broken, which the builder cannot compile"
grep -q "^build.sh: $broken (fuzz) did not build" "$bite/broken.log" ||
	bite_fail "build.sh failed without naming $broken; log $bite/broken.log"
grep -q 'undefined: brokenTargetHelper' "$bite/broken.log" ||
	bite_fail "build.sh did not show the compiler's error; log $bite/broken.log"
[ -z "$(ls "$bite/out")" ] || bite_fail "build.sh went on past $broken: $(ls "$bite/out" | tr '\n' ' ')"
# The builder left its rewritten copy of the broken file (zz_broken_fuzz_test.go_fuzz.go).
rm -f "$bite/src/kvalloc/fuzz/zz_broken_"*
cxx=true build "$bite/src" "$bite/out" "$bite/work" FuzzAllocator >"$bite/nolink.log" 2>&1 &&
	bite_fail "build.sh passed with a CXX that made no binary"
grep -q '^build.sh: FuzzAllocator (fuzz) did not build: true made no binary' "$bite/nolink.log" ||
	bite_fail "build.sh did not name the binary it did not make; log $bite/nolink.log"
echo "libfuzzer: the build's check bites: build.sh stopped at $broken and at a binary not made, naming each ($(($(date +%s) - start))s)"

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
KVALLOC_FUZZ_TAGS=kvalloc_fuzz_mutant build "$work/src" "$work/self/out" "$work/self/work" FuzzAllocator \
	>"$work/self/build.log" 2>&1 || {
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
