#!/usr/bin/env bash
# run-tests.sh [--bites | unittest args]: the end-to-end cases with the
# engine venv's Python, against kvallocd built here (make engine-test runs
# it after make engine-deps): python/engine/tests (case 1), then the
# connector's unit tests and its end-to-end cases (python/tests/vllm/e2e.py
# cases). --bites runs e2e.py bites instead (make engine-bites: the warm
# cases against deliberately broken connectors, each of which must fail
# them; .ci/run runs it after make engine-test). Other arguments go
# to unittest and run python/engine/tests alone (e.g.
# test_e2e.Case1Baseline). A missing venv fails, saying to run make
# engine-deps; it never skips. KVALLOC_ENGINE_KEEP=1 keeps the model and
# the vLLM logs of python/engine/tests.
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
bites=
if [ "${1:-}" = --bites ]; then bites=1; shift; fi
if [ -n "$bites" ]; then
	"$py" "$here/tinymodel.py" "$d/model" >/dev/null
	echo "engine-test: python/tests/vllm/e2e.py bites" >&2
	KVALLOC_ENGINE_MODEL="$d/model" "$py" "$repo/python/tests/vllm/e2e.py" bites || status=$?
elif [ $# != 0 ]; then
	(cd "$here/tests" && "$py" -W error::ResourceWarning -m unittest -v "$@") || status=$?
else
	# 1. The cases of python/engine/tests (the harness's own, case 1 first),
	# 2. the connector's unit tests against a real kvallocd (no model run),
	# 3. the client's numpy and torch views with the real libraries, which
	#    make test's Python may lack (there they skip; here they must run),
	# 4. its end-to-end cases on the tiny model (python/tests/vllm/e2e.py).
	(cd "$here/tests" && "$py" -W error::ResourceWarning -m unittest discover -v) || status=$?
	(cd "$repo/python" && "$py" -m unittest discover -s tests/vllm -p 'test_connector.py') || status=$?
	(cd "$repo/python" && KVALLOC_TENSORS_REQUIRED=1 "$py" -m unittest discover -v -s tests -p 'test_tensors.py') || status=$?
	"$py" "$here/tinymodel.py" "$d/model" >/dev/null
	echo "engine-test: python/tests/vllm/e2e.py cases" >&2
	KVALLOC_ENGINE_MODEL="$d/model" "$py" "$repo/python/tests/vllm/e2e.py" cases || status=$?
fi
if pgrep -f "$d/kvallocd" >/dev/null; then
	echo "engine-test: FAIL: a kvallocd the cases started outlived them" >&2
	pkill -KILL -f "$d/kvallocd"
	status=1
fi
echo "engine-test: $( [ $status = 0 ] && echo ok || echo FAIL ) in $(($(date +%s) - start)) s" >&2
exit $status
