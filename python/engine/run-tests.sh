#!/usr/bin/env bash
# run-tests.sh [unittest args]: the end-to-end cases (python/engine/tests)
# with the engine venv's Python, against a kvallocd built here (make
# engine-test runs it after make engine-deps). A missing venv fails, saying
# to run make engine-deps; it never skips. Arguments go to unittest (e.g.
# a case: Case1Baseline). KVALLOC_ENGINE_KEEP=1 keeps the model and the
# vLLM logs (their directory is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=$(bash "$here/install.sh" --print-python)
venv=$(dirname "$(dirname "$py")")
if [ ! -x "$py" ] || [ ! -f "$venv/.kvalloc-engine-ok" ]; then
	echo "engine-test: FAIL: the engine venv $venv is missing or unfinished; run make engine-deps" >&2
	exit 1
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
(cd "$repo" && ${GO:-go} build -o "$d/kvallocd" ./cmd/kvallocd && ${GO:-go} build -o "$d/goclient" ./python/tests/goclient &&
	${GO:-go} build -o "$d/rediscluster" ./python/tests/vllm/rediscluster)
export KVALLOC_DAEMON="$d/kvallocd" KVALLOC_GOCLIENT="$d/goclient" KVALLOC_REDISCLUSTER="$d/rediscluster" \
	KVALLOC_ENGINE_PYTHON="$py" HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error
start=$(date +%s)
status=0
# 1. The cases of python/engine/tests (the harness's own, case 1 first).
if [ $# = 0 ]; then set -- discover -v; else set -- -v "$@"; fi
(cd "$here/tests" && "$py" -W error::ResourceWarning -m unittest "$@") || status=$?
if [ "$1" = discover ]; then set --; fi
if [ $# = 0 ]; then
	# 2. The connector's unit tests against a real kvallocd (no model run),
	# 3. its end-to-end cases on the tiny model (python/tests/vllm/e2e.py),
	# 4. and the same cases against deliberately broken connectors, each of
	#    which must fail them (e2e.py bites).
	(cd "$repo/python" && "$py" -m unittest discover -s tests/vllm -p 'test_connector.py') || status=$?
	"$py" "$here/tinymodel.py" "$d/model" >/dev/null
	for what in cases bites; do
		echo "engine-test: python/tests/vllm/e2e.py $what" >&2
		KVALLOC_ENGINE_MODEL="$d/model" "$py" "$repo/python/tests/vllm/e2e.py" "$what" || status=$?
	done
fi
if pgrep -f "$d/kvallocd" >/dev/null; then
	echo "engine-test: FAIL: a kvallocd the cases started outlived them" >&2
	pkill -KILL -f "$d/kvallocd"
	status=1
fi
echo "engine-test: $( [ $status = 0 ] && echo ok || echo FAIL ) in $(($(date +%s) - start)) s" >&2
exit $status
