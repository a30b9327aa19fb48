#!/bin/bash -eu
# check-local.sh runs build.sh without docker, on this machine's Go, with
# stand-ins for the two OSS-Fuzz helpers it calls: compile_native_go_fuzzer_v2
# and go_utils.sh's build_native_go_fuzzer. The stand-ins log their
# arguments and build the fuzz package's test binary (go test -c) in place
# of the libFuzzer binary. It checks what can be checked here: the targets
# build.sh finds, which path each takes, that each defining file is the one
# named, that the package builds, and the seed corpus zips (listed at the
# end). It cannot check the libFuzzer instrumentation, the overlay, or a
# run of the fuzzers: that needs the base-builder-go image
# (python infra/helper.py build_fuzzers, or the ClusterFuzzLite action).
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/src" "$work/out"
ln -s "$PWD" "$work/src/kvalloc"
cat >"$work/bin/go_utils.sh" <<'STUB'
build_native_go_fuzzer() {
	echo "build_native_go_fuzzer $* (fuzzer_filename=$fuzzer_filename)" >>"$OUT/log"
	test -f "$fuzzer_filename" && grep -q "^func $2(f \*testing\.F)" "$fuzzer_filename"
	go test -c -o "$OUT/$1" "$4"
}
STUB
cat >"$work/bin/compile_native_go_fuzzer_v2" <<'STUB'
#!/bin/bash -eu
echo "compile_native_go_fuzzer_v2 $*" >>"$OUT/log"
go test -c -o "$OUT/$3" "$1"
STUB
chmod +x "$work/bin/compile_native_go_fuzzer_v2"
SRC="$work/src" OUT="$work/out" PATH="$work/bin:$PATH" bash .clusterfuzzlite/build.sh
echo "== builder calls"
sed "s|$PWD/||g" "$work/out/log"
echo "== $work/out"
for z in "$work"/out/*_seed_corpus.zip; do
	printf '%s: %s seeds\n' "$(basename "$z")" "$(unzip -Z1 "$z" | wc -l)"
done
ls "$work/out" | grep -v -e '_seed_corpus.zip$' -e '^log$' | sed 's/^/binary: /'
