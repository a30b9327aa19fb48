#!/bin/sh
# The Python client as a user installs it, from a copy of python/ (so that
# the build leaves nothing in the tree), into a fresh venv:
# 0. pip install from an index that refuses every connection must fail,
#    and its failure must be named as the network's (below).
# 1. pip install: pip fetches the build backend (pyproject.toml's
#    build-system.requires, setuptools) from the package index into an
#    isolated build environment; without the network or the index this
#    FAILS, saying so, and never skips. The installed files are kvalloc's
#    modules and its metadata alone, with LICENSE, at the version
#    kvalloc.__version__ (tests/dist_check.py installed). Then
#    python/examples/engine.py, copied out of the tree so that only the
#    installed package can serve its import, runs twice against a real
#    daemon: the second run must find every chunk. Then pip uninstall must
#    remove it.
# 2. The sdist, and the wheel built from the unpacked sdist as pypa's build
#    does, by the backend's own hooks (the backend pip installed into the
#    venv): each holds kvalloc's modules, its metadata and LICENSE alone
#    (dist_check.py sdist, wheel).
# 3. pip install -e (with that backend: --no-build-isolation): kvalloc
#    imports from the tree, and nothing else beside it does (tests, bench,
#    examples; dist_check.py editable).
# Usage: install.sh PYTHON KVALLOCD (make python-install-test runs it).
set -u
PYTHON=$1 KVALLOCD=$2
here=$(cd "$(dirname "$0")/.." && pwd)
d=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
fail() { echo "python-install-test: FAIL: $*"; [ -f "$d/log" ] && sed 's/^/  | /' "$d/log"; exit 1; }
check="$here/tests/dist_check.py"
backend=$(sed -n 's/^requires = \["\(.*\)"\]$/\1/p' "$here/pyproject.toml")
[ -n "$backend" ] || fail "no build-system.requires = [\"...\"] line in $here/pyproject.toml"

# pip FAILS (never skips) when it cannot reach the index: pipfail names
# the cause, from pip's log (offline), before the log itself.
offline() {
  grep -q -i -E "NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known|Network is unreachable|Connection refused|timed out|ProxyError|SSLError|No matching distribution found for setuptools|Could not find a version that satisfies the requirement setuptools" "$1"
}
pipfail() {
  offline "$d/log" &&
    fail "$1: pip could not fetch the build backend ($backend) from the package index: no network, or no index reachable. python-install-test needs PyPI, or a mirror named by PIP_INDEX_URL, or the backend's wheel in a PIP_FIND_LINKS directory"
  fail "$1"
}

"$PYTHON" -m venv "$d/venv" >"$d/log" 2>&1 || fail "$PYTHON -m venv (Debian: apt-get install python3-venv)"
py=$d/venv/bin/python
# The copy: python/ without what a build or a run left in it.
mkdir "$d/src" && (cd "$here" && tar cf - --exclude=./build --exclude='./*.egg-info' \
  --exclude=__pycache__ --exclude='*.pyc' .) | (cd "$d/src" && tar xf -) ||
  fail "copying $here"
src=$d/src

# 0. That failure, on purpose: an index that refuses every connection and
#    no local wheels; pip must fail, and pipfail must name the cause.
mkdir "$d/nowheels"
PIP_INDEX_URL=http://127.0.0.1:9/simple/ PIP_FIND_LINKS=$d/nowheels PIP_RETRIES=0 \
  "$py" -m pip install --disable-pip-version-check -q "$src" >"$d/log" 2>&1 &&
  fail "pip install $here (a copy) from an index that is not there did not fail"
offline "$d/log" || fail "pip install from an index that is not there: its failure is not named as the network's"

# 1. pip install, as a user does.
"$py" -m pip install --disable-pip-version-check -q "$src" >"$d/log" 2>&1 ||
  pipfail "pip install $here (a copy)"
(cd "$d" && "$py" "$check" installed "$src") >"$d/log" 2>&1 || fail "the installed package"

mkdir -p "$d/run" && chmod 700 "$d/run" && cp "$here/examples/engine.py" "$d/run/"
sock=$d/run/kvallocd.sock
"$KVALLOCD" -socket "$sock" -pool-size 64MiB -segment-size 8MiB >"$d/daemon.log" 2>&1 &
pid=$!
i=0
while [ ! -S "$sock" ]; do
  i=$((i + 1)); [ $i -gt 300 ] && { cp "$d/daemon.log" "$d/log"; fail "no socket at $sock after 30 s"; }
  kill -0 "$pid" 2>/dev/null || { cp "$d/daemon.log" "$d/log"; fail "kvallocd exited"; }
  sleep 0.1
done
(cd "$d/run" && "$py" engine.py --socket "$sock") >"$d/log" 2>&1 || fail "engine.py, first run"
grep -q "prompt 2: 7 chunks" "$d/log" && grep -q "5 of 7 chunks hit" "$d/log" || fail "engine.py's first run: the second prompt did not find the first's 5 chunks"
(cd "$d/run" && "$py" engine.py --socket "$sock") >"$d/log" 2>&1 || fail "engine.py, second run"
grep -q "7 of 7 chunks hit" "$d/log" || fail "engine.py's second run: not every chunk a hit"
grep -q CORRUPT "$d/log" && fail "engine.py read wrong bytes"
"$py" -m pip uninstall -y -q kvalloc >"$d/log" 2>&1 || fail "pip uninstall"
(cd "$d" && "$py" -c 'import kvalloc') >/dev/null 2>&1 && fail "kvalloc still importable after pip uninstall"

# 2. The sdist, and the wheel built from it, with the backend in the venv.
"$py" -m pip install --disable-pip-version-check -q "$backend" >"$d/log" 2>&1 ||
  pipfail "pip install $backend"
mkdir "$d/dist" "$d/unpacked"
(cd "$src" && "$py" -c 'import sys; from setuptools import build_meta as b
print(b.build_sdist(sys.argv[1]))' "$d/dist") >"$d/log" 2>&1 || fail "build_sdist"
sdist=$(ls "$d/dist"/kvalloc-*.tar.gz 2>/dev/null) || fail "no sdist in $d/dist"
"$py" "$check" sdist "$sdist" "$src" >"$d/log" 2>&1 || fail "the sdist"
tar xzf "$sdist" -C "$d/unpacked" >"$d/log" 2>&1 || fail "unpacking the sdist"
(cd "$d/unpacked"/kvalloc-* && "$py" -c 'import sys; from setuptools import build_meta as b
print(b.build_wheel(sys.argv[1]))' "$d/dist") >"$d/log" 2>&1 || fail "build_wheel from the sdist"
wheel=$(ls "$d/dist"/kvalloc-*.whl 2>/dev/null) || fail "no wheel in $d/dist"
"$py" "$check" wheel "$wheel" "$src" >"$d/log" 2>&1 || fail "the wheel"

# 3. pip install -e, with the backend step 2 installed (no second fetch).
"$py" -m pip install --disable-pip-version-check -q --no-build-isolation -e "$src" >"$d/log" 2>&1 ||
  fail "pip install -e $here (a copy)"
(cd "$d" && "$py" "$check" editable "$src") >"$d/log" 2>&1 || fail "the editable install"
"$py" -m pip uninstall -y -q kvalloc >"$d/log" 2>&1 || fail "pip uninstall of the editable install"
(cd "$d" && "$py" -c 'import kvalloc') >/dev/null 2>&1 && fail "kvalloc still importable after pip uninstall of the editable install"

echo "python-install-test: ok: pip install into a fresh venv ($("$PYTHON" -V 2>&1); build backend $backend from the index): kvalloc's modules, metadata and LICENSE at kvalloc.__version__, engine.py twice against kvallocd (second run 7 of 7 hits), pip uninstall; pip install -e exposes kvalloc alone; the sdist and the wheel built from it hold kvalloc, its metadata and LICENSE alone"
