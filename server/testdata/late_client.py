"""A late client of the restart tests (server/restart_test.go), in Python.

``python3 late_client.py ROLE SOCKET KEY FILL``: as the Go late client,
with the Python client (python/kvalloc). ROLE ``latewriter`` reserves KEY
(16 MiB, model "late"), prints ``reserved``, and at ``write`` on stdin
fills its whole block with the byte FILL, prints ``wrote``, then tries
finish_write and prints how it ended; ``latereader`` read-locks KEY,
prints ``locked``, and at ``check`` prints ``wrong N``, the bytes of its
block that are not FILL.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from kvalloc import Client, KeyBatch, ObjectKey  # noqa: E402

SIZE = 16 << 20


def main() -> None:
    role, sock, key, fill = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    c = Client(sock, timeout=10)
    kb = KeyBatch([ObjectKey(key.encode(), "late")])
    if role == "latewriter":
        res = c.reserve_write(kb, SIZE)
    else:
        res = c.reserve_read(kb, locks=1)
    if not res.all_ok():
        print("lock:", res.statuses, flush=True)
        sys.exit(1)
    v = c.view(res, 0)
    print("reserved" if role == "latewriter" else "locked", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "write":  # after the restart: late bytes
            v[:] = bytes([fill]) * len(v)
            print("wrote", flush=True)
            try:
                c.finish_write(kb, res.leases)
                print("finish: ok", flush=True)
            except Exception as e:  # the connection ended with the restart
                print("finish:", type(e).__name__, flush=True)
        elif cmd == "check":
            n = len(v) - bytes(v).count(bytes([fill]))
            print("wrong", n, flush=True)


if __name__ == "__main__":
    main()
