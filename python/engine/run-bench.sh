#!/usr/bin/env bash
# run-bench.sh [bench.py args]: make engine-bench: python/engine/bench.py
# with the engine venv's Python, kvallocd and the Redis Cluster helper
# built here; the table on stdout and in bench/out/engine-bench.md. Needs
# redis-server (make redis). A missing venv fails, saying to run make
# engine-deps.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=$(bash "$here/install.sh" --print-python)
venv=$(dirname "$(dirname "$py")")
if [ ! -x "$py" ] || [ ! -f "$venv/.kvalloc-engine-ok" ]; then
	echo "engine-bench: FAIL: the engine venv $venv is missing or unfinished; run make engine-deps" >&2
	exit 1
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
(cd "$repo" && ${GO:-go} build -o "$d/kvallocd" ./cmd/kvallocd && ${GO:-go} build -o "$d/rediscluster" ./python/tests/vllm/rediscluster)
mkdir -p "$repo/bench/out"
cd "$repo"
KVALLOC_DAEMON="$d/kvallocd" KVALLOC_REDISCLUSTER="$d/rediscluster" \
	HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error \
	"$py" "$here/bench.py" --out "$repo/bench/out/engine-bench.md" "$@"
