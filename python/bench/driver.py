#!/usr/bin/env python3
"""The Python side of bench's BenchmarkPythonClient, driven over stdin.

    python3 python/bench/driver.py SOCKET

It connects to the daemon at SOCKET and reads one command per line; each
gets one line on stdout: ``ok``, or ``error`` and why. The Go benchmark
times from writing a command to reading its answer.

``keys JSON``
    The keys of the cycle: ``{"model": ..., "kv_rank": ..., "size": ...,
    "hashes": ["<hex>", ...]}`` (group 0, no salt).
``cycle N``
    N cycles over the keys: make a ``KeyBatch`` of them, then
    reserve_write (size bytes each), finish_write, reserve_read,
    finish_read, delete, every status checked ``OK``. The KeyBatch is
    made once per cycle and sent by all five calls, as an engine that
    looks up, loads and stores one prompt's chunks does.
``cycle-list N``
    The same with the keys passed as a list to every call, so that each
    call encodes them again.
``ping N``
    N empty round trips.

The client asks for the protocol version ``$KVALLOC_DRIVER_PROTOCOL`` (1
or 2; unset, the client's default: 2, key handles, or what
``$KVALLOC_PROTOCOL_VERSION`` says), so that one benchmark binary measures
either with the same Go client:
``KVALLOC_DRIVER_PROTOCOL=1 ./bench.test -test.bench PythonClient``.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kvalloc import Client, KeyBatch, Mode, ObjectKey  # noqa: E402


def cycle(c: Client, keys, size: int) -> None:
    """One cycle; raises unless every status is OK."""
    kb = KeyBatch(keys) if not isinstance(keys, list) else keys
    res = c.reserve_write(kb, size, Mode.ALL)
    if not res.all_ok():
        raise RuntimeError(f"reserve_write: {res.statuses.raw[:8]}...")
    if not c.finish_write(kb, res).all_ok():
        raise RuntimeError("finish_write")
    r = c.reserve_read(kb)
    if not r.all_ok():
        raise RuntimeError("reserve_read")
    if not c.finish_read(kb, r).all_ok():
        raise RuntimeError("finish_read")
    if not c.delete(kb).all_ok():
        raise RuntimeError("delete")


def main() -> int:
    c = Client(sys.argv[1], timeout=60,
               protocol=int(os.environ.get("KVALLOC_DRIVER_PROTOCOL", "0"))
               or None)
    keys, size = (), 0
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        try:
            if cmd == "keys":
                spec = json.loads(arg)
                size = spec["size"]
                keys = tuple(ObjectKey(bytes.fromhex(h), spec["model"],
                                       spec["kv_rank"])
                             for h in spec["hashes"])
            elif cmd == "cycle":
                for _ in range(int(arg)):
                    cycle(c, keys, size)
            elif cmd == "cycle-list":
                for _ in range(int(arg)):
                    cycle(c, list(keys), size)
            elif cmd == "ping":
                for _ in range(int(arg)):
                    c.ping()
            else:
                raise ValueError(f"unknown command {cmd!r}")
            print("ok", flush=True)
        except Exception as e:
            print(f"error {type(e).__name__}: {e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
