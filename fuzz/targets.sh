#!/bin/sh
# targets.sh prints every native fuzz target of the module, one line each:
#
#	DIR TARGET
#
# DIR is the package directory relative to the module root (fuzz, or any
# other package that has one), TARGET a `func FuzzX(f *testing.F)` of one
# of its _test.go files. The lines are sorted by TARGET. Nothing is
# hard-coded: a target added anywhere in the module is listed, so
# .clusterfuzzlite/build.sh (the libFuzzer build) picks it up.
#
# Two targets of one name in different packages would build to one
# libFuzzer binary name; targets.sh then fails (exit 1) naming both. With
# no target at all it fails too, rather than building nothing.
#
# It reads the sources with sed, not the go command, so that it runs
# before any toolchain is set up; fuzz's TestTargetsScript checks it
# against go/parser.
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
list=$(find . -name '*_test.go' -not -path './.git/*' -not -path '*/testdata/*' -type f |
	sort |
	while read -r f; do
		dir=$(dirname "$f" | sed 's|^\./||; s|^\.$||')
		sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)([A-Za-z_][A-Za-z0-9_]* \*testing\.F) {$/\1/p' "$f" |
			while read -r t; do
				echo "${dir:-.} $t"
			done
	done | sort -k2,2 -k1,1)
if [ -z "$list" ]; then
	echo "targets.sh: no func FuzzX(f *testing.F) in any _test.go file" >&2
	exit 1
fi
dups=$(echo "$list" | awk '{print $2}' | uniq -d)
if [ -n "$dups" ]; then
	for t in $dups; do
		echo "targets.sh: $t is defined in more than one package:" $(echo "$list" | awk -v t="$t" '$2 == t {print $1}') >&2
	done
	exit 1
fi
echo "$list"
