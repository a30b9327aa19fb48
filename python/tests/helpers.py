"""Keys and stamps the tests share."""

import hashlib
import unittest
from typing import List, Tuple

from kvalloc import KeyBatch, ObjectKey

from daemon import Daemon

MODEL = "llama-3.1-70b"
STAMP = 16


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
