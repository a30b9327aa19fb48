#!/bin/bash -eu
# Builds every native fuzz target of the module (each `func FuzzX(f
# *testing.F)` that fuzz/targets.sh finds, in fuzz/ or any other package)
# as a libFuzzer binary $OUT/FuzzX, and ships the committed corpus
# DIR/testdata/fuzz/FuzzX/ as $OUT/FuzzX_seed_corpus.zip.
#
# ClusterFuzzLite runs it in the OSS-Fuzz Go image; make libfuzzer
# (.clusterfuzzlite/libfuzzer.sh) runs the same script here, without
# docker, and then the binaries. The image supplies SRC, OUT, WORK,
# SANITIZER, CXX, CXXFLAGS and LIB_FUZZING_ENGINE; libfuzzer.sh sets them
# as the image does for the address sanitizer, the only one Go targets
# use.
#
# The builder is pinned here, from the Go module proxy, instead of the
# image's compile_native_go_fuzzer_v2, so that the binaries ClusterFuzzLite
# fuzzes come from the tool, version and commands that make libfuzzer
# proves here: go-118-fuzz-build at FUZZBUILD_VERSION (the one version the
# proxy serves; the image's v2 build of it is not served), then the link
# line OSS-Fuzz's build_native_go_fuzzer uses. What that builder does, and
# what the fuzz package is shaped for:
#   - It compiles the package of the target without its _test.go files,
#     except the one that defines the target, which it copies to
#     <file>_fuzz.go with "testing" replaced by its own testing package
#     (F and T only; t.Fatal panics, which libFuzzer reports as a crash).
#     So a target's file may use only code of that file and non-test
#     files: the fuzz package keeps its checks in such files
#     (fuzz/l1_ops.go, internal/reference) and the helpers of a target's
#     file take no testing.TB.
#   - It edits the source tree while it builds (it removes the target's
#     file and puts it back; a failed build leaves it removed): run this
#     on a copy, as docker and libfuzzer.sh do.
#   - Its generated main imports its testing package, which the module
#     must require: `go get` adds it to go.mod here, in the copy.
#   - Its F.Fuzz decodes the []byte argument from the libFuzzer input with
#     go-fuzz-headers (a 4-byte length, then the bytes); F.Add does
#     nothing, so the seeds reach the fuzzer only through the zip, which
#     internal/seedzip builds in that layout ("consumer").
#   - It overlays nothing in GOROOT, but the go command may still fetch
#     go.mod's toolchain into GOMODCACHE when the image's Go is older,
#     whose files are read-only: that toolchain is copied to a writable
#     directory and pinned with GOTOOLCHAIN=local.
#
# It stops at the first target that does not build, naming it (exit 1),
# and checks that each target it built left its binary in $OUT: the count
# it prints is of binaries made. The shebang's -eu is not enough, as
# libfuzzer.sh runs it with `bash build.sh`, which ignores the shebang.
set -euo pipefail
cd "$SRC/kvalloc"

FUZZBUILD=github.com/AdamKorcz/go-118-fuzz-build
FUZZBUILD_VERSION=v0.0.0-20250520111509-a70c2aa677fa

if [ "${SANITIZER:-address}" = coverage ]; then
	echo "build.sh: SANITIZER=coverage is not supported (the workflows use address)" >&2
	exit 1
fi

go version # fetches go.mod's toolchain if the image's Go is older
goroot=$(go env GOROOT)
case "$goroot" in
"$(go env GOMODCACHE)"*)
	tmp=$(mktemp -d)
	cp -r "$goroot/." "$tmp/goroot"
	chmod -R u+w "$tmp/goroot"
	export GOROOT="$tmp/goroot" PATH="$tmp/goroot/bin:$PATH" GOTOOLCHAIN=local
	go version
	;;
esac
go mod download

bin=$(mktemp -d)
GOBIN="$bin" go install "$FUZZBUILD@$FUZZBUILD_VERSION"
GOFLAGS=-mod=mod go get "$FUZZBUILD/testing@$FUZZBUILD_VERSION"

# Arguments, if any, name the targets to build (libfuzzer.sh's self-test);
# ClusterFuzzLite passes none. KVALLOC_FUZZ_TAGS adds build tags.
targets=$(bash fuzz/targets.sh)
for t in "$@"; do
	echo "$targets" | awk -v t="$t" '$2 == t {found = 1} END {exit !found}' || {
		echo "build.sh: no fuzz target $t" >&2
		exit 1
	}
done
work=${WORK:-$(mktemp -d)}
# fail names the target that did not build and stops the build.
fail() {
	echo "build.sh: $t ($dir) did not build: $*" >&2
	exit 1
}
# The loop reads the targets on stdin; the commands in it read none.
want=0 built=0
while read -r dir t; do
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$t"; then
		continue
	fi
	want=$((want + 1))
	echo "build.sh: $t ($dir)"
	rm -f "$work/$t.a" "$OUT/$t"
	"$bin/go-118-fuzz-build" -tags "gofuzz${KVALLOC_FUZZ_TAGS:+,$KVALLOC_FUZZ_TAGS}" -o "$work/$t.a" -func "$t" "$PWD/$dir" </dev/null ||
		fail "go-118-fuzz-build failed (above)"
	[ -s "$work/$t.a" ] || fail "go-118-fuzz-build made no archive $work/$t.a"
	# shellcheck disable=SC2086 # the flags are lists
	$CXX $CXXFLAGS $LIB_FUZZING_ENGINE "$work/$t.a" -o "$OUT/$t" </dev/null || fail "$CXX failed to link it (above)"
	[ -x "$OUT/$t" ] || fail "$CXX made no binary $OUT/$t"
	go run ./internal/seedzip -layout consumer -o "$OUT/${t}_seed_corpus.zip" "$dir/testdata/fuzz/$t" </dev/null ||
		fail "its seed corpus $dir/testdata/fuzz/$t did not zip"
	built=$((built + 1))
done <<<"$targets"
if [ "$built" -ne "$want" ] || [ "$built" -eq 0 ]; then
	echo "build.sh: built $built binaries of $want targets" >&2
	exit 1
fi
echo "build.sh: built $built binaries, one per target"
