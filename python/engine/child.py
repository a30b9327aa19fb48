"""One vLLM offline engine (``vllm.LLM``) serving requests from its parent.

Run by ``harness.Engine`` with the engine venv's Python, never imported by
the tests themselves:

    python child.py CONFIG.json RESULT_FD

CONFIG.json is ``harness.Engine``'s engine configuration (``llm``: keyword
arguments of ``vllm.LLM``). The child builds the engine in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``: scheduler, worker and both halves of
a KV connector all live here, so ``call`` reaches a connector's counters),
then writes ``{"ready": ...}`` to RESULT_FD and serves one JSON request per
line on stdin, one JSON answer per line on RESULT_FD, until ``quit`` or end
of input. vLLM logs to stdout and stderr, which the parent sends to a log
file; answers never mix with them. An exception in a request is answered
``{"error": ...}`` and the child goes on; one while starting exits 1.

Requests (``op``):

- ``generate``: ``prompts`` (lists of token ids), ``max_tokens``,
  ``logprobs`` (top-k of each generated token, default 5),
  ``prompt_logprobs`` (null, or k: the logprob of every prompt token),
  ``skip_reading_prefix_cache`` (null keeps vLLM's rule: true exactly when
  prompt logprobs are asked, which also keeps a KV connector from loading),
  ``cache_salt`` (one per prompt or null), ``one_by_one`` (each prompt its
  own ``generate`` call, timed alone: the benchmark's TTFT with
  ``max_tokens`` 1). Answers ``outputs``: per prompt its ``token_ids``,
  ``logprobs`` (per generated token, ``[[id, logprob], ...]`` best first),
  ``prompt_logprobs`` (per prompt position, the prompt token's logprob or
  null), ``num_cached_tokens``, ``seconds`` (its call's wall time when one
  by one); and ``seconds``, the whole request's wall time.
- ``reset_prefix_cache``: vLLM's own prefix cache emptied.
- ``call``: ``fn`` ("module:attr", a callable) called with ``args`` and
  ``kwargs``, ``llm`` passed as keyword ``llm`` when ``pass_llm``; answers
  ``result`` (it must be JSON-serializable).
- ``quit``.
"""

import importlib
import json
import os
import sys
import time
import traceback


def _answer(fd: int, obj) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _top(lp_dict, k):
    """A vLLM logprob dict as ``[[id, logprob], ...]``, best first."""
    items = sorted(lp_dict.items(), key=lambda kv: -kv[1].logprob)
    return [[int(t), float(lp.logprob)] for t, lp in items[:max(k, 1)]]


def _generate(llm, req):
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    prompts = req["prompts"]
    salts = req.get("cache_salt") or [None] * len(prompts)
    k = int(req.get("logprobs", 5))
    kw = dict(temperature=0.0, max_tokens=int(req.get("max_tokens", 8)),
              logprobs=k, ignore_eos=True, seed=0,
              prompt_logprobs=req.get("prompt_logprobs"))
    if req.get("skip_reading_prefix_cache") is not None:
        kw["skip_reading_prefix_cache"] = bool(req["skip_reading_prefix_cache"])
    params = SamplingParams(**kw)

    def tp(ids, salt):
        p = TokensPrompt(prompt_token_ids=[int(t) for t in ids])
        if salt is not None:
            p["cache_salt"] = salt
        return p

    t0 = time.perf_counter()
    if req.get("one_by_one"):
        outs, secs = [], []
        for ids, salt in zip(prompts, salts):
            s = time.perf_counter()
            outs += llm.generate([tp(ids, salt)], params, use_tqdm=False)
            secs.append(time.perf_counter() - s)
    else:
        outs = llm.generate([tp(i, s) for i, s in zip(prompts, salts)],
                            params, use_tqdm=False)
        secs = [None] * len(outs)
    total = time.perf_counter() - t0
    res = []
    for o, sec in zip(outs, secs):
        c = o.outputs[0]
        plp = None
        if o.prompt_logprobs is not None:
            plp = []
            for pos, d in enumerate(o.prompt_logprobs):
                tok = o.prompt_token_ids[pos]
                plp.append(None if d is None or tok not in d
                           else float(d[tok].logprob))
        res.append({
            "token_ids": [int(t) for t in c.token_ids],
            "logprobs": [_top(d, k) for d in (c.logprobs or [])],
            "prompt_logprobs": plp,
            "num_cached_tokens": o.num_cached_tokens,
            "seconds": sec,
        })
    return {"outputs": res, "seconds": total}


def _call(llm, req):
    mod, _, attr = req["fn"].partition(":")
    fn = importlib.import_module(mod)
    for part in attr.split("."):
        fn = getattr(fn, part)
    kwargs = dict(req.get("kwargs") or {})
    if req.get("pass_llm"):
        kwargs["llm"] = llm
    return {"result": fn(*(req.get("args") or []), **kwargs)}


def main() -> int:
    cfg_path, fd = sys.argv[1], int(sys.argv[2])
    with open(cfg_path) as f:
        cfg = json.load(f)
    for p in cfg.get("sys_path", []):
        sys.path.insert(0, p)
    t0 = time.perf_counter()
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import check
        check.load_kernels()   # a clear error if the kernels cannot load
        from vllm import LLM
        llm = LLM(**cfg["llm"])
    except BaseException:
        _answer(fd, {"error": traceback.format_exc()})
        return 1
    import vllm
    _answer(fd, {"ready": {"seconds": time.perf_counter() - t0,
                           "vllm": vllm.__version__, "pid": os.getpid()}})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req["op"]
            if op == "quit":
                _answer(fd, {"ok": True})
                break
            if op == "generate":
                ans = _generate(llm, req)
            elif op == "reset_prefix_cache":
                ans = {"result": bool(llm.reset_prefix_cache())}
            elif op == "call":
                ans = _call(llm, req)
            else:
                ans = {"error": f"unknown op {op!r}"}
        except Exception:
            ans = {"error": traceback.format_exc()}
        _answer(fd, ans)
    # Tear the engine down here, while the interpreter is whole, so that a
    # connector's shutdown runs before exit.
    try:
        del llm
        import gc
        gc.collect()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
