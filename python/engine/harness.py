"""Runs vLLM on CPU for the end-to-end cases and the benchmark.

``Engine`` starts one vLLM offline engine (``child.py``, a ``vllm.LLM``) in
a child process of the engine venv's Python and sends it requests: token-id
prompts in, greedy tokens with their logprobs (and prompt logprobs, cached
token counts, wall times) out, plus ``call`` to run a function inside the
engine (a connector's counters). One process serves many requests, since a
start costs a minute or more on 2 cores.

The settings are the ones that make vLLM on CPU deterministic and quick to
start on a small machine: fp32, greedy decoding, a fixed seed,
``enforce_eager``, vLLM's own prefix caching off unless asked (so that a
hit is the connector's), a KV cache of ``kv_cache_gib`` GiB
(``VLLM_CPU_KVCACHE_SPACE``), ``VLLM_HOST_IP=127.0.0.1`` and
``GLOO_SOCKET_IFNAME=lo`` (else gloo may wait minutes resolving the host),
``HF_HUB_OFFLINE=1``, and ``OMP_NUM_THREADS`` with vLLM's thread binding
set to the cores this process may use. ``connector`` is a
``KVTransferConfig`` dict (``kvalloc_connector`` builds kvalloc's).

``engine_python()`` is the venv's interpreter: ``$KVALLOC_ENGINE_PYTHON``,
else the running interpreter when it is a venv ``install.sh`` finished.
Without one, it raises ``EngineMissing`` saying to run ``make engine-deps``:
the cases fail, they never skip.
"""

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)   # python/: the kvalloc package
REPO = os.path.dirname(PYTHON_DIR)

#: The module and class of kvalloc's connector, for kv_connector_module_path.
CONNECTOR_MODULE = "kvalloc.vllm"
CONNECTOR_CLASS = "KvallocConnector"


class EngineMissing(RuntimeError):
    """The engine venv (vLLM for CPU) is not installed or does not load."""


class EngineError(RuntimeError):
    """The engine failed to start or to answer; the message holds its log's
    tail."""


#: The file install.sh writes into a venv once check.py passed in it.
STAMP = ".kvalloc-engine-ok"


def engine_python() -> str:
    """The Python of the engine venv: ``$KVALLOC_ENGINE_PYTHON``, else this
    interpreter when it is a venv install.sh finished (its stamp file is
    there). Raises EngineMissing otherwise."""
    py = os.environ.get("KVALLOC_ENGINE_PYTHON")
    if py:
        if not os.access(py, os.X_OK):
            raise EngineMissing(f"$KVALLOC_ENGINE_PYTHON={py} is not an "
                                "executable; run `make engine-deps`")
        return py
    if os.path.exists(os.path.join(sys.prefix, STAMP)):
        return sys.executable
    raise EngineMissing(
        f"vLLM for CPU is not installed for {sys.executable} (no {STAMP} in "
        f"{sys.prefix}); run `make engine-deps` and run the cases with its "
        "venv's python, or set $KVALLOC_ENGINE_PYTHON to it "
        "(python/engine/install.sh --print-python)")


def usable_cpus() -> List[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


def kvalloc_connector(socket_path: str,
                      transfer: Optional[Dict[str, Any]] = None,
                      module: str = CONNECTOR_MODULE,
                      cls: str = CONNECTOR_CLASS,
                      **extra: Any) -> Dict[str, Any]:
    """A KVTransferConfig dict naming kvalloc's connector on ``socket_path``;
    ``extra`` goes into ``kv_connector_extra_config`` beside the socket,
    ``transfer`` (e.g. ``{"kv_load_failure_policy": "recompute"}``; vLLM's
    default is "fail") into the config itself. ``module`` and ``cls`` name
    another connector class (a deliberately broken one, for a bite run); the
    module must be importable in the engine (``Engine``'s ``env``
    PYTHONPATH)."""
    cfg = {"socket": socket_path}
    cfg.update(extra)
    out = {"kv_connector": cls,
           "kv_connector_module_path": module,
           "kv_role": "kv_both",
           "kv_connector_extra_config": cfg}
    out.update(transfer or {})
    return out


class Engine:
    """One vLLM engine process.

    ``model``: a model directory (tinymodel.build). ``connector``: a
    KVTransferConfig dict or None. ``prefix_caching``: vLLM's own prefix
    cache (off by default). ``llm``: more keyword arguments of ``vllm.LLM``
    (they win). ``env``: more environment. ``log_dir``: where the child's
    log goes (a temporary directory by default). Use as a context manager,
    or ``start()`` and ``close()``.
    """

    def __init__(self, model: str, connector: Optional[Dict[str, Any]] = None,
                 prefix_caching: bool = False, max_model_len: int = 4096,
                 block_size: int = 32, kv_cache_gib: int = 1,
                 llm: Optional[Dict[str, Any]] = None,
                 env: Optional[Dict[str, str]] = None,
                 log_dir: Optional[str] = None,
                 start_timeout: float = 900) -> None:
        self.model = model
        self.connector = connector
        self.start_timeout = start_timeout
        self.dir = log_dir or tempfile.mkdtemp(prefix="kvalloc-engine-")
        self.log = os.path.join(self.dir, f"vllm-{id(self):x}.log")
        args: Dict[str, Any] = dict(
            model=model, tokenizer=model, dtype="float32", seed=0,
            enforce_eager=True, enable_prefix_caching=prefix_caching,
            max_model_len=max_model_len, block_size=block_size,
            max_num_seqs=8, max_num_batched_tokens=max(max_model_len, 2048),
            gpu_memory_utilization=0.9, disable_log_stats=True)
        if connector is not None:
            args["kv_transfer_config"] = connector
            # kvalloc's connector does not implement SupportsHMA.
            args["disable_hybrid_kv_cache_manager"] = True
        args.update(llm or {})
        self.llm_args = args
        cpus = usable_cpus()
        self.env = dict(os.environ)
        self.env.update({
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
            "VLLM_HOST_IP": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo",
            "OMP_NUM_THREADS": str(len(cpus)),
            "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cpus)),
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONHASHSEED": self.env.get("PYTHONHASHSEED", "0"),
            "VLLM_LOGGING_LEVEL": self.env.get("VLLM_LOGGING_LEVEL", "INFO"),
        })
        self.env["PYTHONPATH"] = os.pathsep.join(
            [PYTHON_DIR] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        self.env.update(env or {})
        self.proc: Optional[subprocess.Popen] = None
        self._rfd = -1
        self._buf = b""
        self.ready: Dict[str, Any] = {}

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "Engine":
        """Start the child and wait until vLLM is built (or failed)."""
        py = engine_python()
        cfg = os.path.join(self.dir, f"engine-{id(self):x}.json")
        with open(cfg, "w") as f:
            json.dump({"llm": self.llm_args, "sys_path": [PYTHON_DIR]}, f)
        rfd, wfd = os.pipe()
        log = open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(
                [py, os.path.join(HERE, "child.py"), cfg, str(wfd)],
                stdin=subprocess.PIPE, stdout=log, stderr=log,
                pass_fds=(wfd,), env=self.env, cwd=self.dir)
        finally:
            log.close()
            os.close(wfd)
        self._rfd = rfd
        ans = self._read(self.start_timeout, "start")
        if "error" in ans:
            self.close()
            raise EngineError(f"vLLM did not start:\n{ans['error']}\n"
                              f"--- log tail ---\n{self.log_tail()}")
        self.ready = ans["ready"]
        return self

    def __enter__(self) -> "Engine":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self, timeout: float = 120) -> Optional[int]:
        """Ask the child to quit and reap it (SIGKILL if it hangs); its exit
        status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"op":"quit"}\n')
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        if self._rfd >= 0:
            os.close(self._rfd)
            self._rfd = -1
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the child (a crashed engine) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.close()

    def log_tail(self, n: int = 60) -> str:
        """The last ``n`` lines the child logged."""
        try:
            with open(self.log, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    # -- requests ---------------------------------------------------------
    def _read(self, timeout: float, what: str) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineError(f"vLLM did not answer {what} in {timeout:.0f}"
                                  f" s\n--- log tail ---\n{self.log_tail()}")
            r, _, _ = select.select([self._rfd], [], [], min(left, 1.0))
            if not r:
                if self.proc is not None and self.proc.poll() is not None:
                    # It exited; read what is left, then report.
                    r = [self._rfd]
                else:
                    continue
            chunk = os.read(self._rfd, 1 << 20)
            if not chunk:
                raise EngineError(
                    f"vLLM exited ({self.proc.poll() if self.proc else None})"
                    f" during {what}\n--- log tail ---\n{self.log_tail()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, req: Dict[str, Any], timeout: float = 900) -> Dict[str, Any]:
        """Send one request; its answer. An ``error`` answer raises."""
        if self.proc is None or self.proc.poll() is not None:
            raise EngineError(f"vLLM is not running\n{self.log_tail()}")
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        ans = self._read(timeout, req.get("op", "?"))
        if "error" in ans:
            raise EngineError(f"{req.get('op')}: {ans['error']}")
        return ans

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: int = 8,
                 logprobs: int = 5, prompt_logprobs: Optional[int] = None,
                 **kw: Any) -> List[Dict[str, Any]]:
        """Greedy completions of token-id ``prompts`` (child.py's
        ``generate``); one dict per prompt."""
        req = {"op": "generate", "prompts": [list(map(int, p)) for p in prompts],
               "max_tokens": max_tokens, "logprobs": logprobs,
               "prompt_logprobs": prompt_logprobs}
        req.update(kw)
        return self.request(req)["outputs"]

    def reset_prefix_cache(self) -> bool:
        """Empty vLLM's own prefix cache."""
        return self.request({"op": "reset_prefix_cache"})["result"]

    def call(self, fn: str, *args: Any, pass_llm: bool = False,
             **kwargs: Any) -> Any:
        """``fn`` ("module:attr") called inside the engine process."""
        return self.request({"op": "call", "fn": fn, "args": list(args),
                             "kwargs": kwargs, "pass_llm": pass_llm})["result"]


def max_logprob_diff(a: Sequence[Dict[str, Any]],
                     b: Sequence[Dict[str, Any]]) -> float:
    """The largest difference between two runs' logprobs of the same
    generated tokens (inf when the tokens differ)."""
    worst = 0.0
    for x, y in zip(a, b):
        if x["token_ids"] != y["token_ids"]:
            return float("inf")
        for lx, ly in zip(x["logprobs"], y["logprobs"]):
            worst = max(worst, abs(lx[0][1] - ly[0][1]))
    return worst
