"""The L2 tier's calls against real daemons, without and with an L2 store.

With one: two kvallocd processes (two nodes) over one real redis-server,
started here (Debian's redis-server; ``make redis`` installs it). Without
it the test fails: it never skips.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from kvalloc import InvalidArgumentError, Lookup, Mode, Status

from daemon import MIB, Daemon
from helpers import DaemonTest, keys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One plain redis-server on a free loopback port, in a temp dir."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is missing; run `make redis` "
                               "(it installs Debian's redis-server)")
        self.dir = tempfile.mkdtemp(prefix="kvalloc-pyredis-")
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 1):
                    return
            except OSError:
                if self.proc.poll() is not None or \
                        time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dir, True)


class TestL2Calls(DaemonTest):

    def test_lookup_and_wait_without_l2(self):
        kb = keys(6, "l2calls")
        with self.daemon.client() as c:
            res = c.reserve_write(kb.subset(range(4)), 4096, Mode.ALL)
            self.assertTrue(res.all_ok(), res.statuses)
            self.assertTrue(c.finish_write(kb.subset(range(3)),
                                           res.select(range(3))).all_ok())
            for prefetch in (False, True):
                self.assertEqual(c.lookup(kb, prefetch=prefetch),
                                 Lookup(6, 3, 0, 0))
                self.assertEqual(c.lookup(kb, prefetch=prefetch, budget=1.5),
                                 Lookup(6, 3, 0, 0))
            for bad in (-0.001, 10.5, float("nan"), True):
                with self.assertRaises(InvalidArgumentError):
                    c.lookup(kb, budget=bad)
            rr = c.reserve_read_prefix_wait(kb, wait=0.02)
            self.assertEqual(rr.prefix, 3)
            self.assertEqual(list(rr.statuses)[3:5],
                             [Status.KEY_NOT_READABLE, Status.SKIPPED])
            for bad in (-0.001, 10.5, float("nan"), True):
                with self.assertRaises(InvalidArgumentError):
                    c.reserve_read_prefix_wait(kb, wait=bad)
            self.assertTrue(c.finish_read(kb.subset(range(3)),
                                          rr.select(range(3))).all_ok())
            self.assertTrue(c.abort_write(kb.subset([3]),
                                          res.select([3])).all_ok())


class TestL2TwoNodes(unittest.TestCase):

    def test_node_b_reads_what_node_a_wrote(self):
        redis = RedisServer()
        self.addCleanup(redis.close)
        # The MAC secret both nodes share (kvallocd refuses -l2 without
        # one): a file of mode 0600.
        secret_dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, secret_dir)
        secret = os.path.join(secret_dir, "l2-secret")
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32).hex().encode())
        os.close(fd)
        args = ("-l2", redis.url, "-l2-secret-file", secret)
        a = Daemon(pool=256 * MIB, args=args).start()
        self.addCleanup(a.stop)
        b = Daemon(pool=256 * MIB, args=args).start()
        self.addCleanup(b.stop)
        kb = keys(4, "two-nodes")
        size = 64 * 1024
        with a.client() as ca:
            res = ca.reserve_write(kb, size)
            self.assertTrue(res.all_ok(), res.statuses)
            for i, v in enumerate(ca.views(res)):
                v[:size] = bytes([i + 1]) * size
            self.assertTrue(ca.finish_write(kb, res).all_ok())
        with b.client() as cb:
            deadline = time.monotonic() + 20
            while cb.lookup(kb).l2 < len(kb):  # the write-through lands
                self.assertLess(time.monotonic(), deadline, "no L2 hits")
                time.sleep(0.01)
            self.assertEqual(cb.lookup(kb, prefetch=True), Lookup(4, 0, 4, 4))
            rr = cb.reserve_read_prefix_wait(kb, wait=5.0)
            self.assertEqual(rr.prefix, 4)
            for i, v in enumerate(cb.views(rr)):
                self.assertEqual(bytes(v[:size]), bytes([i + 1]) * size)
            self.assertTrue(cb.finish_read(kb, rr).all_ok())
            self.assertEqual(cb.lookup(kb), Lookup(4, 4, 0, 0))


if __name__ == "__main__":
    unittest.main()
