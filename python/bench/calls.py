#!/usr/bin/env python3
"""Each call of the 5700-key cycle, protocol version 1 against version 2.

    KVALLOC_DAEMON=kvallocd python3 python/bench/calls.py [CYCLES] [prefix]

It starts a kvallocd (tests/daemon.py: ``$KVALLOC_DAEMON``, or go build)
with a 45 GiB pool that is never written, connects one client of each
version, and runs the cycle of BenchmarkPythonClient (a KeyBatch of 5700
keys of 8 MiB, reserve_write, finish_write, reserve_read, finish_read,
delete, every status checked) CYCLES times on each, the two interleaved.
It prints, per call, the medians of its wall time and of this process's
CPU time (the client's own work) in each version, and their ratio v2/v1:
version 1 is the floor of the same run.

With ``prefix`` the read is an engine's lookup instead: reserve_read_prefix
of the 5700 keys and 100 more that are missing, then finish_read of
``keys.subset(range(prefix))`` with ``results.select(range(prefix))``.
"""

import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..")]

from daemon import Daemon  # noqa: E402
from helpers import keys  # noqa: E402
from kvalloc import KeyBatch, Mode  # noqa: E402

CALLS = ("reserve_write", "finish_write", "reserve_read", "finish_read",
         "delete")


def main() -> int:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    prefix = sys.argv[2:3] == ["prefix"]
    d = Daemon().start()
    try:
        ks = tuple(keys(5700, "calls"))
        missing = tuple(keys(100, "missing"))
        clients = {v: d.client(timeout=60, protocol=v) for v in (1, 2)}
        times = {v: {c: [] for c in CALLS} for v in clients}
        for r in range(cycles + 1):
            for v in ((1, 2) if r % 2 else (2, 1)):
                c = clients[v]

                def timed(name, f, *a):
                    w, p = time.perf_counter(), time.process_time()
                    out = f(*a)
                    if r:  # the first cycle warms
                        times[v][name].append((time.perf_counter() - w,
                                               time.process_time() - p))
                    return out
                kb = KeyBatch(ks)
                res = timed("reserve_write", c.reserve_write, kb, 8 << 20,
                            Mode.ALL)
                assert res.all_ok()
                assert timed("finish_write", c.finish_write, kb, res).all_ok()
                if prefix:
                    lk = KeyBatch(ks + missing)
                    rr = timed("reserve_read", c.reserve_read_prefix, lk)
                    assert rr.prefix == len(ks), rr.prefix
                    hit = range(rr.prefix)
                    assert timed("finish_read", c.finish_read,
                                 lk.subset(hit), rr.select(hit)).all_ok()
                else:
                    rr = timed("reserve_read", c.reserve_read, kb)
                    assert rr.all_ok()
                    assert timed("finish_read", c.finish_read, kb,
                                 rr).all_ok()
                assert timed("delete", c.delete, kb).all_ok()
        med = statistics.median
        print(f"{'call':14s} {'wall v1':>8s} {'wall v2':>8s} {'v2/v1':>6s}"
              f" {'cpu v1':>8s} {'cpu v2':>8s} {'v2/v1':>6s}  (ms, medians "
              f"of {cycles} cycles)")
        tot = {v: [0.0, 0.0] for v in clients}
        for name in CALLS:
            row = []
            for i in (0, 1):
                a = med(x[i] for x in times[1][name]) * 1e3
                b = med(x[i] for x in times[2][name]) * 1e3
                tot[1][i] += a
                tot[2][i] += b
                row.append(f"{a:8.2f} {b:8.2f} {b / a:6.2f}")
            print(f"{name:14s} {' '.join(row)}")
        print(f"{'sum':14s} " + " ".join(
            f"{tot[1][i]:8.2f} {tot[2][i]:8.2f} {tot[2][i] / tot[1][i]:6.2f}"
            for i in (0, 1)))
        for c in clients.values():
            c.close()
    finally:
        d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
