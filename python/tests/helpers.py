"""Keys and stamps the tests share."""

import hashlib
import unittest
from typing import List, Tuple

from kvalloc import KeyBatch, ObjectKey

from daemon import Daemon

MODEL = "llama-3.1-70b"
STAMP = 16
# How long a test waits on the daemon's doing (a release, a close, an
# answer) before it calls it a hang: a bound on a hang only, never a race
# with the machine's load.
HANG_GUARD = 60.0


def keys(n: int, tag: str = "k", model: str = MODEL, rank: int = 0,
         salt: str = "") -> KeyBatch:
    """``n`` distinct keys, 32-byte chunk hashes like an engine's."""
    return KeyBatch(ObjectKey(hashlib.sha256(f"{tag}{i}".encode()).digest(),
                              model, rank, 0, salt) for i in range(n))


def stamps(kb, writer: str) -> List[Tuple[bytes, bytes]]:
    """A head and a tail stamp per key, unique to the key and the writer."""
    out = []
    for k in kb:
        h = hashlib.sha256(writer.encode() + bytes(k.chunk_hash)).digest()
        out.append((h[:STAMP], h[STAMP:]))
    return out


def python_to_go(daemon: Daemon, c, kb: KeyBatch, size: int) -> List[str]:
    """Write stamps through ``c``'s mapping, have the Go client read them
    back; what differed (empty when all is well). Leaves nothing behind."""
    from daemon import key_json
    problems = []
    st = stamps(kb, "python")
    res = c.reserve_write(kb, size)
    if not res.all_ok():
        return [f"reserve_write: {res.statuses}"]
    for i, v in enumerate(c.views(res)):
        v[:STAMP] = st[i][0]
        v[size - STAMP:size] = st[i][1]
    fin = c.finish_write(kb, res)
    if not fin.all_ok():
        problems.append(f"finish_write: {fin}")
    got = daemon.go("-size", str(size), "-stamp", str(STAMP), "read",
                    stdin=key_json(kb))
    for i, g in enumerate(got):
        want = ("OK", res.offsets[i], st[i][0].hex(), st[i][1].hex())
        have = (g["status"], g["offset"], g.get("head"), g.get("tail"))
        if have != want:
            problems.append(f"key {i}: Go read {have}, Python wrote {want}")
    c.delete(kb, force=True)
    return problems


class DaemonTest(unittest.TestCase):
    """A test case with a daemon of its own for each test."""

    daemon_args: Tuple[str, ...] = ()

    def setUp(self):
        self.daemon = Daemon(args=self.daemon_args).start()
        self.addCleanup(self.daemon.stop)

    def quiet_stats(self, c) -> dict:
        """The figures a refused call must leave as they were."""
        s = c.stats()._asdict()
        for k in ("conns_open", "conns_accepted", "conns_closed"):
            s.pop(k)
        return s
