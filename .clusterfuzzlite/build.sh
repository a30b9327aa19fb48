#!/bin/bash -eu
# Builds every native fuzz target of package github.com/kvalloc/kvalloc/fuzz
# (each `func FuzzX(f *testing.F)` in fuzz/*_test.go) as a libFuzzer binary
# $OUT/FuzzX with compile_native_go_fuzzer_v2, and ships the committed
# corpus fuzz/testdata/fuzz/FuzzX/ as $OUT/FuzzX_seed_corpus.zip.
#
# What the v2 builder (go-118-fuzz-build_v2) does, and what this script
# relies on:
#   - It overlays $GOROOT/src/testing/fuzz.go, so F.Fuzz runs the body once
#     per libFuzzer input and F.Add does nothing: the seeds reach the
#     fuzzer only through the zip built here.
#   - It decodes an input as: fixed-size arguments, one weight byte per
#     []byte or string argument, then those arguments. Every kvalloc target
#     takes one []byte, so a seed is a zero byte and the payload;
#     internal/seedzip converts Go's "go test fuzz v1" files to that.
#   - It compiles every *_test.go file of the fuzzer's directory as an
#     ordinary file of package fuzz (renamed *_libFuzzer.go in an overlay),
#     so the helpers in fuzz/*_test.go are visible; test files of other
#     packages are not (kvalloc's checks live in internal/reference, which
#     is not test code). t.Fatal panics, which libFuzzer reports as a crash.
#   - It cannot overlay files under GOMODCACHE, where the go command puts a
#     toolchain it fetches for go.mod's `go 1.26`: that toolchain is copied
#     to a writable directory first.
#   - compile_native_go_fuzzer_v2 finds the target's file with
#     `grep -r -l FuzzX fuzz/`, which also matches the files that mention
#     the name (doc.go, the seeds and the bite tests). ASan builds accept
#     that; the coverage build passes the list to a tool that takes one
#     file. So a target whose name appears in more than its own file is
#     built through build_native_go_fuzzer (go_utils.sh, the function
#     compile_native_go_fuzzer_v2 calls) with its defining file named.
cd "$SRC/kvalloc"

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

pkg=github.com/kvalloc/kvalloc/fuzz
targets=$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F) {$/\1/p' fuzz/*_test.go | sort)
if [ -z "$targets" ]; then
	echo "build.sh: no func FuzzX(f *testing.F) in fuzz/*_test.go" >&2
	exit 1
fi
v2=$(command -v compile_native_go_fuzzer_v2)
for t in $targets; do
	def=$(grep -l "^func $t(f \*testing\.F) {\$" fuzz/*_test.go)
	mentions=$(grep -r -l --include='*.go' -s "$t" fuzz/ | wc -l)
	if [ "$mentions" -eq 1 ]; then
		compile_native_go_fuzzer_v2 "$pkg" "$t" "$t"
	else
		# What compile_native_go_fuzzer_v2 does, with the one file.
		(
			abs_file_dir=$(go list -tags gofuzz -f '{{.Dir}}' "$pkg")
			export abs_file_dir
			export fuzzer_filename="$abs_file_dir/$(basename "$def")"
			# shellcheck source=/dev/null
			source "$(dirname "$v2")/go_utils.sh"
			build_native_go_fuzzer "$t" "$t" "$abs_file_dir" "$pkg"
		)
	fi
	if [ ! -e "$OUT/$t" ]; then
		echo "build.sh: $t was not built into $OUT" >&2
		exit 1
	fi
	go run ./internal/seedzip -o "$OUT/${t}_seed_corpus.zip" "fuzz/testdata/fuzz/$t"
done
