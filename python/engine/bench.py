"""make engine-bench: what kvalloc's connector saves vLLM on prefill.

Run with the engine venv's Python (python/engine/run-bench.sh). A model big
enough that prefill costs real time on CPU (tinymodel.BENCH: 8 layers,
hidden 1024, 16 heads, 8 KV heads, head 64; 32 KiB of fp32 KV per token)
serves ``--prompts`` distinct prompts of ``--tokens`` tokens (2,000), each
timed alone with one generated token, so its wall time is its time to
first token (TTFT). Four ways to serve the same prompts, in one run:

- cold: vLLM without a connector, its prefix cache emptied before each
  pass: every token recomputed (the floor every ratio is against);
- prefix: the same vLLM process's own prefix cache, warm;
- cold+save: vLLM with kvalloc's connector on daemon A, first sight: the
  prompt recomputed and its KV saved to L1 (and copied to L2);
- L1: the same engine again, vLLM's prefix cache off: KV loaded from
  daemon A's pool;
- L2: vLLM with the connector on daemon B, another node over the same Redis
  Cluster, nothing in its pool: KV fetched from L2 into B's L1, loaded.

The cold and prefix passes repeat ``--rounds`` times (prefix cache emptied
between); the L1 pass too; L2 is first sight on node B, once per prompt.
Reported per way: the median TTFT and prompt tokens/s, both as ratios
against cold's median, and the connector's counts (tokens looked up,
loaded, saved). The load rates are the KV bytes loaded per prompt over
the warm TTFT (everything a warm request costs: a lower bound), over the
warm TTFT less vLLM's own prefix-cache TTFT (which computes the same tail
and first token: what the load adds), and the connector's own counters
(bytes over its load time); beside them the prefill rate, the KV bytes a
cold prefill makes per second of its TTFT: a load pays while it is the
faster. Every way must give cold's first tokens (logprobs within
``LP_TOL``) and every warm way must have loaded every full block but the
last token's, else the run fails (``--mutant WrongBlock`` shows it
does). The table goes to stdout and ``--out`` (markdown).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
for _p in (PYTHON_DIR, HERE, os.path.join(PYTHON_DIR, "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import harness  # noqa: E402
import tinymodel  # noqa: E402

GIB = 1 << 30
#: The largest |logprob difference| of a first token against cold's: a load
#: of the right bytes is followed by another kernel call than one whole
#: prefill, so sums may round differently; wrong KV moves it by far more.
LP_TOL = 1e-2


def free_port() -> int:
    """A loopback port free at this moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port: int) -> Dict[str, float]:
    """kvallocd's /metrics, unlabelled samples only."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    out: Dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" in line or " " not in line:
            continue
        k, v = line.rsplit(" ", 1)
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out


def wait_l2_copies(port: int, timeout: float = 300) -> Dict[str, float]:
    """Wait until daemon ``port``'s copies to L2 stop (bytes written steady
    for 3 s, and some written); its metrics then."""
    deadline = time.monotonic() + timeout
    last, since = -1.0, time.monotonic()
    while True:
        m = metrics(port)
        w = m.get("kvallocd_l2_written_bytes_total", 0.0)
        if w != last:
            last, since = w, time.monotonic()
        elif w > 0 and time.monotonic() - since >= 3:
            return m
        if time.monotonic() > deadline:
            raise RuntimeError(f"daemon's L2 copies did not settle in "
                               f"{timeout} s: {m}")
        time.sleep(0.5)


def counters(path: str) -> Dict[str, int]:
    """The connector's counters from its metrics file: the last line of each
    (pid, role), summed over them (they are cumulative per process)."""
    last: Dict[Any, Dict[str, Any]] = {}
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    last[(d.get("pid"), d.get("role"))] = d
    except FileNotFoundError:
        return {}
    out: Dict[str, Any] = {}
    for d in last.values():
        for k, v in d.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and k not in ("pid", "time"):
                out[k] = out.get(k, 0) + v
    return out


def delta(after: Dict[str, int], before: Dict[str, int]) -> Dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items()}


def ttfts(engine: harness.Engine, prompts: List[List[int]]
          ) -> Tuple[List[float], List[Dict[str, Any]]]:
    """Each prompt alone, one token: its wall time."""
    outs = engine.generate(prompts, max_tokens=1, logprobs=1, one_by_one=True)
    return [o["seconds"] for o in outs], outs


class Rows:
    def __init__(self) -> None:
        self.rows: List[Dict[str, Any]] = []

    def add(self, name: str, secs: List[float], tokens: int,
            counts: Optional[Dict[str, int]] = None,
            outs: Optional[List[Dict[str, Any]]] = None) -> None:
        self.rows.append({"name": name, "secs": secs, "tokens": tokens,
                          "counts": counts or {},
                          "first": [o["token_ids"][0] for o in outs or []],
                          "lp": [o["logprobs"][0][0][1] for o in outs or []]})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--small", action="store_true",
                    help="the cases' tiny model (a quick check of the bench)")
    ap.add_argument("--mutant", default="",
                    help="a broken connector of python/tests/vllm/mutants.py "
                    "(WrongBlock, LoadsNothing): the check must fail")
    ap.add_argument("--l2-piece-size", default="",
                    help="kvallocd's -l2-piece-size for both nodes (0: whole "
                         "values; default: kvallocd's own)")
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()

    from daemon import Daemon, binary
    if a.mutant:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(PYTHON_DIR, "tests", "vllm")]
            + [p for p in [os.environ.get("PYTHONPATH")] if p])

    spec = tinymodel.SMALL if a.small else tinymodel.BENCH
    tmp = tempfile.mkdtemp(prefix="kvalloc-engine-bench-")
    print(f"engine-bench: scratch {tmp}", file=sys.stderr)
    t0 = time.monotonic()
    model = tinymodel.build(os.path.join(tmp, "model"), spec)
    print(f"engine-bench: model {spec} built in "
          f"{time.monotonic() - t0:.0f} s", file=sys.stderr)
    prompts = tinymodel.prompts(a.prompts, a.tokens, spec.vocab, seed=2026)
    # A first request pays for code paths run the first time: each engine
    # serves this one, which no timed prompt shares, before it is timed.
    warmup = tinymodel.prompts(1, 300, spec.vocab, seed=1)
    kv_tok = spec.kv_bytes_per_token(4)
    common = dict(max_model_len=max(4096, a.tokens + 64), block_size=32,
                  kv_cache_gib=2, log_dir=tmp,
                  llm={"max_num_batched_tokens": max(4096, a.tokens + 64)})
    rows = Rows()
    procs: List[Any] = []
    try:
        # 1. vLLM alone: cold, then its own prefix cache.
        cold: List[float] = []
        prefix: List[float] = []
        with harness.Engine(model, prefix_caching=True, **common) as e:
            print(f"engine-bench: vLLM started in {e.ready['seconds']:.0f} s",
                  file=sys.stderr)
            ttfts(e, warmup)
            for _ in range(a.rounds):
                e.reset_prefix_cache()
                s, cold_outs = ttfts(e, prompts)
                cold += s
                s, pre_outs = ttfts(e, prompts)
                prefix += s
        rows.add("cold (recompute)", cold, a.tokens, None, cold_outs)
        rows.add("vLLM prefix cache", prefix, a.tokens, None, pre_outs)

        # 2. Two nodes over one Redis Cluster.
        rc = subprocess.Popen([binary("KVALLOC_REDISCLUSTER",
                                      "./python/tests/vllm/rediscluster")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
        procs.append(rc)
        url = rc.stdout.readline().strip()
        if not url.startswith("redis://"):
            raise RuntimeError(f"rediscluster printed {url!r}")
        ports = {n: free_port() for n in "AB"}
        # The MAC secret the nodes share (kvallocd refuses -l2 without one).
        secret = os.path.join(tmp, "l2-secret")
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32).hex().encode())
        os.close(fd)
        daemons = {}
        for n in "AB":
            extra = (["-l2-piece-size", a.l2_piece_size]
                     if a.l2_piece_size else [])
            d = Daemon(pool=4 * GIB, args=["-l2", url, "-l2-min-rate", "0",
                                           "-l2-secret-file", secret,
                                           "-metrics", f"127.0.0.1:{ports[n]}"]
                       + extra)
            daemons[n] = d.start()
            procs.append(d)
        mfile = {n: os.path.join(tmp, f"connector-{n}.jsonl") for n in "AB"}

        def conn(n: str) -> Dict[str, Any]:
            if a.mutant:
                return harness.kvalloc_connector(
                    daemons[n].socket, module="mutants", cls=a.mutant,
                    metrics_file=mfile[n], l2_wait=10.0)
            return harness.kvalloc_connector(
                daemons[n].socket, metrics_file=mfile[n], l2_wait=10.0)

        l1: List[float] = []
        with harness.Engine(model, connector=conn("A"), **common) as e:
            print(f"engine-bench: vLLM with the connector on node A started "
                  f"in {e.ready['seconds']:.0f} s", file=sys.stderr)
            ttfts(e, warmup)
            c0 = counters(mfile["A"])
            s, save_outs = ttfts(e, prompts)
            c1 = counters(mfile["A"])
            rows.add("cold + save (kvalloc)", s, a.tokens, delta(c1, c0),
                     save_outs)
            for _ in range(a.rounds):
                s, l1_outs = ttfts(e, prompts)
                l1 += s
            c2 = counters(mfile["A"])
        rows.add("warm from L1 (kvalloc)", l1, a.tokens, delta(c2, c1), l1_outs)
        wait_l2_copies(ports["A"])
        with harness.Engine(model, connector=conn("B"), **common) as e:
            print(f"engine-bench: vLLM with the connector on node B started "
                  f"in {e.ready['seconds']:.0f} s", file=sys.stderr)
            ttfts(e, warmup)   # in A's pool and L2 already: a hit on B too
            c0 = counters(mfile["B"])
            s, l2_outs = ttfts(e, prompts)
            c1 = counters(mfile["B"])
        rows.add("warm from L2, other node (kvalloc)", s, a.tokens,
                 delta(c1, c0), l2_outs)
        mb = metrics(ports["B"])
    finally:
        for p in reversed(procs):
            if hasattr(p, "stop"):
                p.stop()
            else:
                p.stdin.close()
                p.wait(60)
        if not a.keep:
            import shutil
            shutil.rmtree(tmp, True)

    text = report(rows, a, spec, kv_tok, mb)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    # Every way must give cold's first token, its logprob within LP_TOL: a
    # wrong load shows (python/engine/README.md has the bite run).
    ref = rows.rows[0]
    bad = []
    for r in rows.rows[1:]:
        diff = max(abs(x - y) for x, y in zip(r["lp"], ref["lp"]))
        print(f"engine-bench: {r['name']}: first tokens "
              f"{'equal' if r['first'] == ref['first'] else 'DIFFER'}, "
              f"logprobs within {diff:.2e} of cold's", file=sys.stderr)
        if r["first"] != ref["first"] or diff > LP_TOL:
            bad.append(r["name"])
    # A warm way loads every full block but the one holding the last token
    # (vLLM computes at least that one), for every prompt.
    want = (a.tokens - 1) // 32 * 32
    for r in rows.rows:
        if r["name"].startswith("warm from"):
            got = r["counts"].get("tokens_loaded", 0)
            if got != want * len(r["secs"]):
                print(f"engine-bench: {r['name']}: loaded {got} tokens, not "
                      f"{want} for each of {len(r['secs'])} prompts",
                      file=sys.stderr)
                bad.append(r["name"])
    if bad:
        print(f"engine-bench: FAIL: outputs differ from cold's or loads "
              f"missing: {bad}",
              file=sys.stderr)
        return 1
    return 0


def report(rows: Rows, a: Any, spec: Any, kv_tok: int,
           mb: Dict[str, float]) -> str:
    """The table: per way, the median TTFT and prompt tokens/s against
    cold's, the connector's counts, and two load rates of the KV loaded per
    prompt: over the whole warm TTFT (a lower bound), and over the TTFT
    beyond vLLM's own prefix-cache hit of the same prompts (which computes
    the same tail and first token, so the difference is what the load
    costs); and the connector's own, its bytes loaded over the time its
    loads took (its ``bytes_loaded`` and ``load_seconds`` counters: the
    daemon's calls, L2 waits included, and the copies)."""
    cold = statistics.median(rows.rows[0]["secs"])
    prefix = statistics.median(rows.rows[1]["secs"])
    prefill_rate = a.tokens * kv_tok / cold
    load = os.getloadavg()
    out = [f"engine-bench: {a.prompts} prompts of {a.tokens} tokens, model "
           f"{spec.layers} layers, hidden {spec.hidden}, {spec.kv_heads} KV "
           f"heads x {spec.head_dim}, fp32: {kv_tok / 1024:.0f} KiB of KV per "
           f"token, {a.tokens * kv_tok / 1e6:.1f} MB per prompt; L2 "
           f"-l2-piece-size {a.l2_piece_size or 'default'}; load average "
           f"{load[0]:.1f} at the end",
           "",
           "| way | n | TTFT median (s) | TTFT ÷ cold | prompt tok/s | "
           "tok/s ÷ cold | looked up | loaded | saved | KV loaded ÷ TTFT "
           "(GB/s) | KV loaded ÷ (TTFT − prefix-cache TTFT) (GB/s) | "
           "connector's load rate (GB/s) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.rows:
        med = statistics.median(r["secs"])
        c = r["counts"]
        loaded = c.get("tokens_loaded")
        rate = extra = own = ""
        if c.get("load_seconds") and c.get("bytes_loaded"):
            own = f"{c['bytes_loaded'] / c['load_seconds'] / 1e9:.3f}"
        if loaded:
            per_prompt = loaded / len(r["secs"]) * kv_tok
            rate = f"{per_prompt / med / 1e9:.3f}"
            if med > prefix:
                extra = f"{per_prompt / (med - prefix) / 1e9:.3f}"
        out.append(
            f"| {r['name']} | {len(r['secs'])} | {med:.3f} | {med / cold:.3f} "
            f"| {r['tokens'] / med:.0f} | {cold / med:.2f} | "
            f"{c.get('tokens_looked_up', '')} | "
            f"{loaded if loaded is not None else ''} | "
            f"{c.get('tokens_saved', '')} | {rate} | {extra} | {own} |")
    out += ["",
            f"prefill rate (cold): {prefill_rate / 1e9:.4f} GB/s of KV made "
            f"({a.tokens / cold:.0f} tokens/s); a load pays while its rate is "
            "above this.",
            f"node B's daemon: L2 prefetch loaded "
            f"{mb.get('kvallocd_l2_prefetch_loaded_total', 0):.0f} keys, its "
            f"L2 load-rate estimate "
            f"{mb.get('kvallocd_l2_load_rate_bytes_per_second', 0) / 1e9:.2f}"
            " GB/s.",
            "TTFT samples (s): " + "; ".join(
                f"{r['name']}: " + " ".join(f"{x:.3f}" for x in r["secs"])
                for r in rows.rows)]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
