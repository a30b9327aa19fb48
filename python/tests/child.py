"""A client process for the tests to kill: ``python3 child.py SOCKET MODE N``.

It connects, takes what MODE says on N keys, prints ``ready`` and waits
to be killed:

- ``write``: reserves N keys of 8 MiB and writes the head stamps of half
  of them (killed mid-write);
- ``read``: read-locks N keys another process wrote (3 locks each);
- ``half-frame``: sends the first half of a reserve_write frame.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kvalloc import Client, MessageType  # noqa: E402
from kvalloc.protocol import keyed_request  # noqa: E402

from helpers import keys, stamps  # noqa: E402

SIZE = 8 << 20


def main() -> None:
    socket, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = Client(socket, timeout=10)
    kb = keys(n, "victim")
    if mode == "write":
        res = c.reserve_write(kb, SIZE)
        assert res.all_ok(), res.statuses
        for i, (head, _) in enumerate(stamps(kb, "victim")[:n // 2]):
            c.view(res, i)[:len(head)] = head
    elif mode == "read":
        res = c.reserve_read(kb, locks=3)
        assert res.all_ok(), res.statuses
    elif mode == "half-frame":
        f = keyed_request(MessageType.RESERVE_WRITE, 99, c.epoch, kb, SIZE)
        c._conn._sock.sendall(f[:len(f) // 2])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("ready", flush=True)
    time.sleep(120)


if __name__ == "__main__":
    main()
