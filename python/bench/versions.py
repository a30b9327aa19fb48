#!/usr/bin/env python3
"""Protocol version 1 against version 2 in BenchmarkPythonClient, interleaved.

    cd bench && go test -c -o /tmp/bench.test .
    python3 ../python/bench/versions.py /tmp/bench.test [ROUNDS] [BENCHTIME]

Each round runs the benchmark binary (in the current directory, which must
be bench/) twice, once with the Python client asking for version 1 and once
for version 2 (``$KVALLOC_DRIVER_PROTOCOL``, which driver.py reads; the
Go client speaks its default in both), in an order
that alternates from round to round; each run times the Go client's cycle
too, the floor of that run. It prints, per version, the medians over the
rounds of the Python cycle, the Go cycle, and their ratio within each run,
then the median of the v2/v1 ratio of the Python cycle within each round.
"""

import os
import re
import statistics
import subprocess
import sys

PATTERN = "BenchmarkPythonClient/client=(go|python)/op=cycle$"
ROW = re.compile(r"^BenchmarkPythonClient/client=(\w+)/op=cycle-\d+\s+\d+\s+"
                 r"(\d+) ns/op")


def run(binary: str, version: int, benchtime: str) -> dict:
    """One run's cycle times in ms, by client."""
    env = dict(os.environ, KVALLOC_DRIVER_PROTOCOL=str(version))
    p = subprocess.run(
        [binary, "-test.run", "^$", "-test.bench", PATTERN,
         f"-test.benchtime={benchtime}", "-test.count=1"],
        env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"version {version}: {p.stdout}{p.stderr}")
    out = {}
    for line in p.stdout.splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(1)] = int(m.group(2)) / 1e6
    if set(out) != {"go", "python"}:
        raise SystemExit(f"version {version}: no cycle rows in\n{p.stdout}")
    return out


def main() -> int:
    binary = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    benchtime = sys.argv[3] if len(sys.argv) > 3 else "0.3s"
    runs = {1: [], 2: []}
    within = []
    for r in range(rounds):
        got = {}
        for v in ((1, 2) if r % 2 == 0 else (2, 1)):
            got[v] = run(binary, v, benchtime)
            runs[v].append(got[v])
        within.append(got[2]["python"] / got[1]["python"])
        print(f"round {r + 1}: v1 python {got[1]['python']:.1f} ms (go "
              f"{got[1]['go']:.1f}), v2 python {got[2]['python']:.1f} ms "
              f"(go {got[2]['go']:.1f})", flush=True)
    med = statistics.median
    for v in (1, 2):
        py = med(x["python"] for x in runs[v])
        go = med(x["go"] for x in runs[v])
        ratio = med(x["python"] / x["go"] for x in runs[v])
        print(f"version {v}: python {py:.1f} ms, go {go:.1f} ms, "
              f"python/go within a run {ratio:.2f}x (median of {rounds})")
    q = statistics.quantiles(within, n=4) if rounds >= 4 else within
    print(f"v2/v1 python cycle within a round: median {med(within):.3f}x, "
          f"quartiles {q[0]:.3f}x to {q[-1]:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
