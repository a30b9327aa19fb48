#!/bin/sh
# The Python client as a user installs it: a fresh venv, pip install of
# python/ offline (no index: the in-tree build backend needs no download),
# then python/examples/engine.py, copied out of the tree so that only the
# installed package can serve its import, run twice against a real daemon:
# the second run must find every chunk. Then pip uninstall must remove it.
# Usage: install.sh PYTHON KVALLOCD (make python-install-test runs it).
set -u
PYTHON=$1 KVALLOCD=$2
here=$(cd "$(dirname "$0")/.." && pwd)
d=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
fail() { echo "python-install-test: FAIL: $*"; [ -f "$d/log" ] && sed 's/^/  | /' "$d/log"; exit 1; }

"$PYTHON" -m venv "$d/venv" >"$d/log" 2>&1 || fail "$PYTHON -m venv (Debian: apt-get install python3-venv)"
py=$d/venv/bin/python
"$py" -m pip install --no-index --disable-pip-version-check -q "$here" >"$d/log" 2>&1 ||
  fail "pip install --no-index $here"
where=$(cd "$d" && "$py" -c 'import kvalloc; print(kvalloc.__file__)') || fail "import kvalloc in the venv"
case $where in "$d/venv/"*) ;; *) fail "kvalloc imported from $where, not the venv";; esac
(cd "$d" && "$py" -c 'import importlib.metadata as m, sys
assert m.version("kvalloc"), "no version"
extras = m.metadata("kvalloc").get_all("Provides-Extra")
assert sorted(extras) == ["numpy", "torch"], extras
assert not m.requires("kvalloc") or all("extra ==" in r for r in m.requires("kvalloc")), m.requires("kvalloc")
files = [str(f) for f in m.files("kvalloc")]
assert all(f.startswith(("kvalloc/", "kvalloc-")) for f in files), files') >"$d/log" 2>&1 ||
  fail "the installed metadata"

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
echo "python-install-test: ok: pip install --no-index into a fresh venv ($("$PYTHON" -V 2>&1)), engine.py twice against kvallocd (second run 7 of 7 hits), pip uninstall"
