"""End-to-end cases of kvalloc's vLLM connector, with vLLM running.

    python e2e.py cases     # the cases against KvallocConnector
    python e2e.py bites     # the warm cases against each mutant: must fail

Needs ``$KVALLOC_ENGINE_PYTHON`` (a Python with vLLM for CPU: make
engine-deps) and ``$KVALLOC_ENGINE_MODEL`` (a local model directory of
random fp32 weights); kvallocd and the Redis Cluster helper are built with
go (or ``$KVALLOC_DAEMON``). A missing part fails, it never skips.

Greedy decoding, seed 0, fp32, vLLM's prefix caching off (so every hit is
the connector's). The vLLM processes (each start is a minute or more on 2
cores), started in three waves so that a run costs three starts, and what
each one runs:

====  ====  =============================  =================================
wave  proc  where                          steps (cases)
====  ====  =============================  =================================
1     P0    no connector                   every prompt: the baseline (1)
1     P3    daemon D1, SlowSaver           K: SIGKILLed while it holds its
                                           save's write leases (8)
2     P1    D1 (node A, with L2)           X cold (2), X warm (3), Y, Z,
                                           X+salt (6), W cold, W corrupted,
                                           W warm (7), L (10's writer); then
                                           V once P2 is up
2     P2    D1, beside P1                  X (4), V that P1 saved meanwhile
                                           (5)
3     P4    D1                             X, K (8: hits and right tokens
                                           after the kill); D1 hands off; X,
                                           K (9)
3     P6    D3 (node B, same Redis)        L, loaded from L2 (10)
3     P7    D4, EvictsBeforeLoad           X cold, X with its 2nd block
                                           evicted before the load (11)
====  ====  =============================  =================================

``bites`` runs the same waves with ``mutants.LoadsNothing`` as the
connector (without P3 and P7), which must fail cases 3 to 10, and beside
them WrongBlock and IgnoresSalt (P1's steps, wave 1; cases 3 and 6) and
HidesLoadErrors (P7's steps, wave 2; case 11).

Each case prints the tokens looked up, loaded and saved; the last line is
``N passed, N failed``. Logprobs of a warm run are compared with the
baseline's within ``LOGPROB_TOL``, and the largest difference is printed
(0 means exact).
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(PYDIR, "tests"))
sys.path.insert(0, PYDIR)

from kvalloc import Client  # noqa: E402

from daemon import Daemon, binary  # noqa: E402

BLOCK = 32
MAX_TOKENS = 8
#: The largest |logprob difference| a load may cause against the baseline.
#: A loaded block is the computed block's bytes, but the rest of the prompt
#: is then computed by another kernel call than in one prefill, so the sums
#: may round differently.
LOGPROB_TOL = 1e-3
#: The smallest difference corrupted KV must make to count as seen.
CORRUPT_MIN = 1e-2

GIB = 1 << 30


def fail_setup(msg):
    print(f"e2e: {msg}", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)


def engine_env():
    py = os.environ.get("KVALLOC_ENGINE_PYTHON")
    model = os.environ.get("KVALLOC_ENGINE_MODEL")
    if not py or not os.access(py, os.X_OK):
        fail_setup("set $KVALLOC_ENGINE_PYTHON to a Python with vLLM "
                   "(make engine-deps)")
    if not model or not os.path.isdir(model):
        fail_setup("set $KVALLOC_ENGINE_MODEL to a local model directory")
    return py, model


def vocab_size(model):
    with open(os.path.join(model, "config.json")) as f:
        return int(json.load(f)["vocab_size"])


def make_prompts(vocab):
    """Token-id prompts of 4 full blocks (128 tokens): the block holding
    the last token is the 4th, so a warm run loads 3 blocks (96 tokens)."""
    rnd = random.Random(1234)
    lo, hi = 10, min(vocab, 4000) - 1

    def p(n=4 * BLOCK):
        return [rnd.randint(lo, hi) for _ in range(n)]

    x = p()
    y = x[:2 * BLOCK] + p(2 * BLOCK)      # shares its first 2 blocks
    return {"X": x, "Y": y, "Z": p(), "W": p(), "V": p(), "K": p(),
            "L": p()}


class Run:
    """The cases' bookkeeping: results, prints, the final count."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.results = {}

    def check(self, case, ok, what):
        tag = "PASS" if ok else "FAIL"
        print(f"case {case}: {what}  {tag}", flush=True)
        self.results.setdefault(case, []).append(ok)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def describe(rec):
    c = rec.get("counters", {})
    return (f"looked up {c.get('tokens_looked_up', 0)} tokens, loaded "
            f"{c.get('tokens_loaded', 0)}, saved {c.get('tokens_saved', 0)} "
            f"({c.get('blocks_saved', 0)} blocks), load errors "
            f"{c.get('load_errors', 0)}")


def maxdiff(a, b):
    """The largest |a - b|; infinite where they differ in length or a
    value is not a number."""
    if len(a) != len(b):
        return float("inf")
    d = 0.0
    for x, y in zip(a, b):
        e = abs(x - y)
        if e != e:
            return float("inf")
        d = max(d, e)
    return d


class Engines:
    """Starts driver.py processes with the engine's environment."""

    def __init__(self, py, model, tmp):
        self.py, self.model, self.tmp = py, model, tmp
        self.env = dict(os.environ)
        self.env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.env.setdefault("VLLM_HOST_IP", "127.0.0.1")
        self.env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        self.env.setdefault("HF_HUB_OFFLINE", "1")
        self.env.setdefault("TRANSFORMERS_OFFLINE", "1")
        cpus = sorted(os.sched_getaffinity(0))
        self.env.setdefault("OMP_NUM_THREADS", str(len(cpus)))
        self.env.setdefault("VLLM_CPU_OMP_THREADS_BIND",
                            ",".join(map(str, cpus)))
        self.env["PYTHONPATH"] = PYDIR + os.pathsep + HERE + (
            os.pathsep + self.env["PYTHONPATH"]
            if self.env.get("PYTHONPATH") else "")
        self.procs = []

    def start(self, name, steps, connector=None, extra_env=None):
        script = {"model": self.model, "block_size": BLOCK,
                  "max_tokens": MAX_TOKENS, "logprobs": 1,
                  "connector": connector, "steps": steps}
        sp = os.path.join(self.tmp, f"{name}.json")
        out = os.path.join(self.tmp, f"{name}.out.json")
        with open(sp, "w") as f:
            json.dump(script, f)
        log = open(os.path.join(self.tmp, f"{name}.log"), "wb")
        env = dict(self.env, **(extra_env or {}))
        p = subprocess.Popen([self.py, os.path.join(HERE, "driver.py"), sp,
                              out], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        log.close()
        p.name, p.out, p.log = name, out, log.name
        self.procs.append(p)
        return p

    def wait(self, p, timeout=1800):
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(p)
        return self.result(p)

    def result(self, p):
        try:
            with open(p.out) as f:
                r = json.load(f)
        except (OSError, ValueError):
            r = {"steps": []}
        r["rc"] = p.returncode
        if p.returncode not in (0, None) and not r.get("done"):
            with open(p.log, "rb") as f:
                tail = f.read()[-4000:].decode(errors="replace")
            print(f"--- {p.name} exited {p.returncode}; its log's tail:\n"
                  f"{tail}\n---", flush=True)
        return r

    def kill(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(60)

    def close(self):
        for p in self.procs:
            self.kill(p)


def connector(module, cls, socket, metrics, **extra):
    return {"module": module, "class": cls,
            "extra": dict({"socket": socket, "metrics_file": metrics,
                           "timeout": 5.0}, **extra)}


def step(name, prompt, salt=None):
    d = {"op": "generate", "name": name, "prompt": prompt}
    if salt:
        d["salt"] = salt
    return d


def by_name(result):
    return {s["name"]: s for s in result.get("steps", [])}


def p1_steps(P, socket, sync):
    return [
        step("X_cold", P["X"]), step("X_warm", P["X"]),
        step("Y", P["Y"]), step("Z", P["Z"]),
        step("X_salt", P["X"], "tenant-b"),
        step("W_cold", P["W"]),
        {"op": "corrupt", "name": "W_corrupt", "prompt": P["W"],
         "socket": socket},
        step("W_warm", P["W"]),
        step("L", P["L"]),
    ] + ([{"op": "touch", "file": sync["a_ready"]},
          {"op": "wait", "file": sync["b_ready"]},
          step("V", P["V"]),
          {"op": "touch", "file": sync["v_saved"]},
          {"op": "wait", "file": sync["b_done"]}] if sync else [])


def check_p1(run, base, r, label=""):
    """Cases 2, 3, 6 and 7 from P1's record; for a bite, which failed."""
    s = by_name(r)
    B = by_name(base)
    full = 4

    def get(n):
        return s.get(n, {"counters": {}, "tokens": None, "logprobs": []})

    x0, x1 = get("X_cold"), get("X_warm")
    c0 = x0["counters"]
    run.check(f"2{label}", x0["tokens"] == B["X"]["tokens"]
              and c0.get("blocks_saved") == full
              and c0.get("tokens_loaded", 0) == 0,
              f"cold X: {describe(x0)}; same tokens as the baseline: "
              f"{x0['tokens'] == B['X']['tokens']}; blocks saved == the "
              f"prompt's {full} full blocks")
    d = maxdiff(x1["logprobs"], B["X"]["logprobs"])
    run.check(f"3{label}", x1["counters"].get("tokens_loaded") == 3 * BLOCK
              and x1["tokens"] == B["X"]["tokens"] and d <= LOGPROB_TOL,
              f"warm X: {describe(x1)} (want {3 * BLOCK}); same tokens: "
              f"{x1['tokens'] == B['X']['tokens']}; logprobs max |diff| "
              f"{d:.3g} ({'exact' if d == 0 else f'tolerance {LOGPROB_TOL}'})")
    y, z, xs = get("Y"), get("Z"), get("X_salt")
    run.check(f"6{label}", y["counters"].get("tokens_loaded") == 2 * BLOCK
              and y["tokens"] == B["Y"]["tokens"]
              and z["counters"].get("tokens_loaded", -1) == 0
              and z["tokens"] == B["Z"]["tokens"]
              and xs["counters"].get("tokens_loaded", -1) == 0
              and xs["tokens"] == B["X"]["tokens"],
              f"Y sharing 2 blocks: {describe(y)} (want {2 * BLOCK}); "
              f"unrelated Z: {describe(z)} (want 0); X with another "
              f"cache_salt: {describe(xs)} (want 0)")
    w0, w1 = get("W_cold"), get("W_warm")
    corrupted = s.get("W_corrupt", {}).get("blocks", 0)
    d = maxdiff(w1["logprobs"], B["W"]["logprobs"])
    run.check(f"7{label}", corrupted >= 3
              and w1["counters"].get("tokens_loaded") == 3 * BLOCK
              and d >= CORRUPT_MIN,
              f"W: {corrupted} stored blocks overwritten; warm W "
              f"{describe(w1)}; logprobs max |diff| from the baseline "
              f"{d:.3g} (must be >= {CORRUPT_MIN}: the bad KV is seen)")


def wait_file(path, proc, timeout=1800):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def redis_cluster():
    exe = binary("KVALLOC_REDISCLUSTER", "./python/tests/vllm/rediscluster")
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("redis://"):
        p.kill()
        fail_setup(f"rediscluster printed {url!r}")
    return p, url


def l2_secret(tmp):
    """The MAC secret the nodes share (kvallocd refuses -l2 without one):
    a file of mode 0600."""
    path = os.path.join(tmp, "l2-secret")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(32).hex().encode())
    os.close(fd)
    return path


def quiet(stats):
    return {k: stats[k] for k in ("objects", "write_locked", "used_bytes",
                                  "held_bytes", "quarantined_bytes")}


def check_p7(run, base, r, label=""):
    """Case 11 from P7's record: a block evicted between lookup and load."""
    B = by_name(base)
    s = by_name(r)
    w = s.get("X_evicted", {"counters": {}, "tokens": None, "logprobs": []})
    c = w["counters"]
    d = maxdiff(w["logprobs"], B["X"]["logprobs"])
    run.check(f"11{label}", c.get("tokens_loaded") == BLOCK
              and c.get("load_errors") == 2
              and w["tokens"] == B["X"]["tokens"] and d <= LOGPROB_TOL,
              f"X with its 2nd block evicted between lookup and load: "
              f"{describe(w)} (want {BLOCK} loaded, 2 load errors, "
              f"recomputed); same tokens: {w['tokens'] == B['X']['tokens']};"
              f" logprobs max |diff| {d:.3g}")


def p7_steps(P):
    return [step("X_cold", P["X"]), step("X_evicted", P["X"])]


def flow(py, model, tmp, cls="kvalloc.vllm:KvallocConnector", label="",
         bite=False, extras=((), (), ())):
    """The cases, in three waves of vLLM processes started together, with
    ``cls`` as the connector. ``extras``: per wave, (name, mutant, script)
    of more processes to run beside it, each on a daemon of its own; their
    records are returned with the run. ``bite``: the run of a mutant,
    without the SIGKILL of wave 1 (case 8 then judges only the fresh
    engine's hits) and without case 11's engine."""
    run = Run()
    P = make_prompts(vocab_size(model))
    eng = Engines(py, model, tmp)
    rc, url = redis_cluster()
    l2 = ["-l2", url, "-l2-min-rate", "0", "-l2-secret-file",
          l2_secret(tmp)]
    d1 = Daemon(pool=4 * GIB, args=l2).start()
    d3 = Daemon(pool=4 * GIB, args=l2).start()
    daemons = [d1, d3]
    metrics = os.path.join(tmp, "metrics.jsonl")
    sync = {k: os.path.join(tmp, k) for k in
            ("a_ready", "b_ready", "v_saved", "b_done", "p4_ready",
             "handed_off", "saving")}
    mod, cls = cls.split(":")
    newer = None
    extra = {}

    def start_extras(wave):
        procs = {}
        for name, mutant, script in extras[wave]:
            d = Daemon(pool=4 * GIB).start()
            daemons.append(d)
            steps = ([s for s in p1_steps(P, d.socket, None)
                      if s.get("name") != "L"] if script == "p1"
                     else p7_steps(P))
            procs[name] = eng.start(name, steps, connector(
                "mutants", mutant, d.socket,
                os.path.join(tmp, f"metrics.{name}")))
        return procs

    def wait_extras(procs):
        for name, p in procs.items():
            extra[name] = eng.wait(p)

    try:
        t0 = time.monotonic()
        # Wave 1: the baseline, and an engine SIGKILLed while it saves
        # into D1 (empty until then).
        with Client(d1.socket) as c:
            before = quiet(c.stats()._asdict())
        p0 = eng.start("P0", [step(n, P[n]) for n in
                              ("X", "Y", "Z", "W", "V", "K", "L")])
        procs = start_extras(0)
        saving, during, after = True, {"write_locked": "-"}, before
        if not bite:
            p3 = eng.start("P3", [step("K", P["K"])],
                           connector("mutants", "SlowSaver", d1.socket,
                                     metrics + ".p3"),
                           extra_env={"KVALLOC_E2E_SAVING": sync["saving"]})
            saving = wait_file(sync["saving"], p3)
            with Client(d1.socket) as c:
                during = quiet(c.stats()._asdict())
            saving = saving and during["write_locked"] > 0
            eng.kill(p3)
            deadline = time.monotonic() + 30
            with Client(d1.socket) as c:
                while True:
                    after = quiet(c.stats()._asdict())
                    if after == before or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
        base = eng.wait(p0)
        wait_extras(procs)
        B = by_name(base)
        print(f"case 1{label}: baseline without the connector: "
              f"{len(B)} prompts, start {base.get('start_s', 0):.0f} s, "
              f"X -> {B.get('X', {}).get('tokens')}", flush=True)
        if len(B) != 7:
            fail_setup("the baseline run did not finish")

        # Wave 2: A and B on D1 at once.
        p1 = eng.start("P1", p1_steps(P, d1.socket, sync),
                       connector(mod, cls, d1.socket, metrics + ".p1"))
        p2 = eng.start("P2", [
            {"op": "wait", "file": sync["a_ready"]},
            step("X", P["X"]),
            {"op": "touch", "file": sync["b_ready"]},
            {"op": "wait", "file": sync["v_saved"]},
            step("V", P["V"]),
            {"op": "touch", "file": sync["b_done"]},
        ], connector(mod, cls, d1.socket, metrics + ".p2"))
        procs = start_extras(1)
        r1, r2 = eng.wait(p1), eng.wait(p2)
        wait_extras(procs)
        check_p1(run, base, r1, label)
        s2 = by_name(r2)
        x = s2.get("X", {"counters": {}, "tokens": None})
        run.check(f"4{label}", x["counters"].get("tokens_loaded") == 3 * BLOCK
                  and x["tokens"] == B["X"]["tokens"],
                  f"new process P2, X: {describe(x)} (want {3 * BLOCK}); "
                  f"same tokens: {x['tokens'] == B['X']['tokens']}")
        v = s2.get("V", {"counters": {}, "tokens": None})
        v1 = by_name(r1).get("V", {"counters": {}})
        run.check(f"5{label}", v["counters"].get("tokens_loaded") == 3 * BLOCK
                  and v1["counters"].get("blocks_saved") == 4
                  and v["tokens"] == B["V"]["tokens"],
                  f"P1 and P2 at once: P1 saved V ({describe(v1)}); P2 "
                  f"loaded it: {describe(v)}; same tokens: "
                  f"{v['tokens'] == B['V']['tokens']}")

        # Wave 3: a fresh engine on D1 (after the kill; D1 hands off under
        # it), node B on D3 (L from L2), and evictions at load (D4).
        p4 = eng.start("P4", [
            step("X", P["X"]), step("K", P["K"]),
            {"op": "touch", "file": sync["p4_ready"]},
            {"op": "wait", "file": sync["handed_off"]},
            step("X_after", P["X"]), step("K_after", P["K"]),
        ], connector(mod, cls, d1.socket, metrics + ".p4"))
        p6 = eng.start("P6", [step("L", P["L"])],
                       connector(mod, cls, d3.socket, metrics + ".p6",
                                 l2_wait=10.0))
        p7 = None
        if not bite:
            d4 = Daemon(pool=4 * GIB).start()
            daemons.append(d4)
            p7 = eng.start("P7", p7_steps(P),
                           connector("mutants", "EvictsBeforeLoad",
                                     d4.socket, metrics + ".p7"))
        procs = start_extras(2)
        ok4 = wait_file(sync["p4_ready"], p4)
        s4 = by_name(eng.result(p4))
        x, k = s4.get("X", {"counters": {}}), s4.get("K", {"counters": {}})
        run.check(f"8{label}", saving and after == before
                  and x["counters"].get("tokens_loaded") == 3 * BLOCK
                  and x.get("tokens") == B["X"]["tokens"]
                  and k.get("tokens") == B["K"]["tokens"]
                  and k["counters"].get("blocks_saved") == 4,
                  f"P3 SIGKILLed holding its save's write leases "
                  f"(reached, {during['write_locked']} write locks held: "
                  f"{saving}); the daemon after it: {after}, "
                  f"before it: {before}; fresh P4: X {describe(x)}, K "
                  f"{describe(k)}, same tokens: "
                  f"{x.get('tokens') == B['X']['tokens']} and "
                  f"{k.get('tokens') == B['K']['tokens']}")
        handed = False
        if ok4:
            newer = Daemon(pool=d1.pool, socket=d1.socket,
                           args=["-takeover"] + l2)
            newer.start(ping=False)
            daemons.append(newer)
            try:
                handed = d1.proc.wait(30) == 0
            except subprocess.TimeoutExpired:
                handed = False
            with open(sync["handed_off"], "w") as f:
                f.write("1")
        s4 = by_name(eng.wait(p4))
        x, k = s4.get("X_after", {"counters": {}}), \
            s4.get("K_after", {"counters": {}})
        run.check(f"9{label}", handed
                  and x["counters"].get("tokens_loaded") == 3 * BLOCK
                  and k["counters"].get("tokens_loaded") == 3 * BLOCK
                  and x.get("tokens") == B["X"]["tokens"],
                  f"kvallocd -takeover under P4 (old daemon exited 0: "
                  f"{handed}); then X {describe(x)}, K {describe(k)}; same "
                  f"tokens: {x.get('tokens') == B['X']['tokens']}")
        s6 = by_name(eng.wait(p6))
        lb = s6.get("L", {"counters": {}})
        la = by_name(r1).get("L", {"counters": {}})
        run.check(f"10{label}", la["counters"].get("blocks_saved") == 4
                  and lb["counters"].get("tokens_hit_l2") == 3 * BLOCK
                  and lb["counters"].get("tokens_loaded") == 3 * BLOCK
                  and lb.get("tokens") == B["L"]["tokens"],
                  f"node A (P1 on D1) saved L: {describe(la)}; node B (P6 "
                  f"on D3): {describe(lb)}, L2 hits "
                  f"{lb['counters'].get('tokens_hit_l2')}; same tokens: "
                  f"{lb.get('tokens') == B['L']['tokens']}")
        if p7 is not None:
            check_p7(run, base, eng.wait(p7), label)
        wait_extras(procs)
        print(f"e2e: {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        eng.close()
        for d in reversed(daemons):
            d.stop()
        rc.stdin.close()
        rc.wait(60)
    return run, base, extra


def cases(py, model, tmp):
    """Cases 1 to 11 against KvallocConnector."""
    return flow(py, model, tmp)[0]


#: The cases each mutant must fail; LoadsNothing runs every case's flow,
#: the others the cases they break, beside it.
LOADS_NOTHING = ("3", "4", "5", "6", "7", "8", "9", "10")
EXTRAS = ((("bite-WrongBlock", "WrongBlock", "p1"),
           ("bite-IgnoresSalt", "IgnoresSalt", "p1")),
          (("bite-HidesLoadErrors", "HidesLoadErrors", "p7"),),
          ())
MUST = {"bite-WrongBlock": ("p1", ("3",)),
        "bite-IgnoresSalt": ("p1", ("6",)),
        "bite-HidesLoadErrors": ("p7", ("11",))}


def bites(py, model, tmp):
    """The cases against broken connectors: each listed case must fail.
    The whole flow runs with LoadsNothing as its connector, and the other
    mutants run their cases' scripts beside its waves."""
    inner, base, extra = flow(py, model, tmp, cls="mutants:LoadsNothing",
                              label="/LoadsNothing", bite=True,
                              extras=EXTRAS)
    run = Run()
    for case in LOADS_NOTHING:
        failed = not all(inner.results.get(f"{case}/LoadsNothing", [True]))
        run.check(f"bite LoadsNothing {case}", failed,
                  f"case {case} {'failed' if failed else 'PASSED'} against "
                  "LoadsNothing")
    for name, (script, must) in MUST.items():
        mutant = name.split("-", 1)[1]
        per = Run()
        print(f"--- mutant {mutant}: the cases it must fail: "
              f"{', '.join(must)}", flush=True)
        (check_p1 if script == "p1" else check_p7)(
            per, base, extra.get(name, {"steps": []}), label=f"/{mutant}")
        for case in must:
            failed = not all(per.results.get(f"{case}/{mutant}", [True]))
            run.check(f"bite {mutant} {case}", failed,
                      f"case {case} {'failed' if failed else 'PASSED'} "
                      f"against {mutant}")
    return run


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "cases"
    py, model = engine_env()
    tmp = tempfile.mkdtemp(prefix="kvalloc-e2e-")
    try:
        run = (bites if what == "bites" else cases)(py, model, tmp)
    finally:
        if os.environ.get("KVALLOC_E2E_KEEP"):
            print(f"e2e: kept {tmp}")
        else:
            shutil.rmtree(tmp, True)
    print(f"{run.passed} passed, {run.failed} failed")
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
