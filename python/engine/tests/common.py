"""What the end-to-end cases share: the tiny model, the prompts, the
baseline engine, daemons, and the per-case report.

The cases run with the engine venv's Python (make engine-test runs
``python/engine/run-tests.sh``), which has vLLM, torch and transformers;
``python/`` (the kvalloc package), ``python/engine`` (the harness) and
``python/tests`` (daemon.py, how the client's tests start a real kvallocd)
are put on ``sys.path`` here. Without the engine venv every case fails
with harness.EngineMissing's message; none skips.

Everything heavy is made once per test process and only when a case asks
for it: the model directory (``model_dir()``), the engine without a
connector (``baseline_engine()``, one vLLM process for every case that
wants plain vLLM) and its outputs for ``PROMPTS`` (``baseline()``).
``close_all()`` (the test module's tearDownModule) stops what was started.
"""

import atexit
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_DIR = os.path.dirname(HERE)
PYTHON_DIR = os.path.dirname(ENGINE_DIR)
for _p in (PYTHON_DIR, ENGINE_DIR, os.path.join(PYTHON_DIR, "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import harness  # noqa: E402
import tinymodel  # noqa: E402

#: The cases' model (2 layers, hidden 256, 4 heads, 2 KV heads, head 64).
SPEC = tinymodel.SMALL
#: vLLM's block size in the cases (tokens); the CPU backend takes multiples
#: of 32.
BLOCK = 32
#: Tokens generated per prompt.
MAX_TOKENS = 8
#: Four prompts of 200 tokens, the first 128 (4 blocks) shared: a store of
#: one gives the others a prefix hit; the remaining 72 tokens are 2 full
#: blocks and a partial one.
PROMPTS: List[List[int]] = tinymodel.prompts(4, 200, SPEC.vocab, seed=7,
                                             shared_prefix=128)
#: Prompts no other case uses (cold for any cache).
OTHER_PROMPTS: List[List[int]] = tinymodel.prompts(2, 160, SPEC.vocab, seed=99)

_tmp: Optional[str] = None
_model: Optional[str] = None
_baseline_engine: Optional[harness.Engine] = None
_baseline: Dict[str, Any] = {}
_started: List[Any] = []


def tmpdir() -> str:
    """This test process's scratch directory (removed at exit, unless
    $KVALLOC_ENGINE_KEEP is set, for the logs)."""
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="kvalloc-engine-test-")
        if not os.environ.get("KVALLOC_ENGINE_KEEP"):
            atexit.register(shutil.rmtree, _tmp, True)
    return _tmp


def model_dir() -> str:
    """The tiny model, built on first use."""
    global _model
    if _model is None:
        harness.engine_python()   # EngineMissing before anything else
        _model = tinymodel.build(os.path.join(tmpdir(), "model"), SPEC)
    return _model


def engine(connector: Optional[Dict[str, Any]] = None, **kw: Any) -> harness.Engine:
    """A started engine on the tiny model (``kw``: harness.Engine's), to be
    closed by ``close_all`` unless the case closes it first."""
    kw.setdefault("block_size", BLOCK)
    kw.setdefault("max_model_len", 1024)
    kw.setdefault("log_dir", tmpdir())
    e = harness.Engine(model_dir(), connector=connector, **kw)
    _started.append(e)
    return e.start()


def baseline_engine() -> harness.Engine:
    """vLLM without a connector, its own prefix cache off: shared by the
    cases."""
    global _baseline_engine
    if _baseline_engine is None:
        _baseline_engine = engine()
    return _baseline_engine


def baseline(key: str = "prompts") -> List[Dict[str, Any]]:
    """The baseline engine's outputs for ``PROMPTS`` (key "prompts") or
    ``OTHER_PROMPTS`` ("other"), computed once."""
    if key not in _baseline:
        ps = PROMPTS if key == "prompts" else OTHER_PROMPTS
        _baseline[key] = baseline_engine().generate(
            ps, max_tokens=MAX_TOKENS, prompt_logprobs=0)
    return _baseline[key]


def daemon(**kw: Any):
    """A started kvallocd (python/tests/daemon.py's Daemon; ``kw`` its
    arguments), stopped by ``close_all``."""
    from daemon import Daemon
    kw.setdefault("pool", 2 << 30)
    d = Daemon(**kw).start()
    _started.append(d)
    return d


def close_all() -> None:
    """Stop every engine and daemon the cases started, engines first."""
    global _baseline_engine
    for obj in reversed(_started):
        if isinstance(obj, harness.Engine):
            obj.close()
    for obj in reversed(_started):
        if not isinstance(obj, harness.Engine):
            obj.stop()
    _started.clear()
    _baseline_engine = None


def report(case: str, looked_up: int, loaded: int, saved: int,
           note: str = "") -> None:
    """The line make engine-test prints for each case: the prompt tokens the
    connector looked up, the tokens it loaded into vLLM and the tokens it
    saved."""
    line = (f"engine-test: {case}: looked up {looked_up}, loaded {loaded}, "
            f"saved {saved} tokens")
    print(line + (f" ({note})" if note else ""), file=sys.stderr, flush=True)
