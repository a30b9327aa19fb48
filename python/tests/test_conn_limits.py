"""The daemon's per-connection limits, seen from Python: a call past one
is cut, its tail OVER_LIMIT, and another connection is still served."""

import unittest

from kvalloc import InvalidArgumentError, Status

from daemon import Daemon
from helpers import keys

OK, OVER = Status.OK, Status.OVER_LIMIT


class TestConnLimits(unittest.TestCase):

    def setUp(self):
        self.daemon = Daemon(pool=64 << 20, args=[
            "-conn-read-locks", "4", "-conn-write-bytes", "16KiB",
            "-max-frame", "8KiB"]).start()
        self.addCleanup(self.daemon.stop)

    def test_read_locks_are_cut_at_the_limit(self):
        kb = keys(6, "rl")
        with self.daemon.client() as a, self.daemon.client() as b:
            w = a.reserve_write(kb.subset(range(4)), 4096)
            self.assertEqual(w.over_limit_at(), -1)
            a.finish_write(kb.subset(range(4)), w)
            r = a.reserve_read(kb.subset(range(4)))  # at the limit
            self.assertEqual(list(r.statuses), [OK] * 4)
            self.assertEqual(r.over_limit_at(), -1)
            over = a.reserve_read(kb.subset(range(1)))
            self.assertEqual(list(over.statuses), [OVER])
            self.assertEqual(over.over_limit_at(), 0)
            self.assertEqual(list(a.finish_read(kb.subset(range(2)),
                                                r.select(range(2)))), [OK] * 2)
            cut = a.reserve_read(kb.subset(range(4)))  # room for 2
            self.assertEqual(list(cut.statuses), [OK, OK, OVER, OVER])
            self.assertEqual(cut.over_limit_at(), 2)
            self.assertEqual(list(b.reserve_read(kb.subset(range(4))).statuses),
                             [OK] * 4)

    def test_write_bytes_are_cut_at_the_limit(self):
        kb = keys(6, "wb")
        with self.daemon.client() as a:
            w = a.reserve_write(kb, 4096)  # room for 4
            self.assertEqual(list(w.statuses), [OK] * 4 + [OVER] * 2)
            self.assertEqual(w.over_limit_at(), 4)
            self.assertEqual(a.stats().write_locked, 4)

    def test_the_hello_announces_the_frame_limit(self):
        with self.daemon.client() as a:
            self.assertEqual(a.hello.max_frame, 8192)
            a.touch(keys(100, "small"))  # some 5 KB
            with self.assertRaisesRegex(InvalidArgumentError,
                                        "over the daemon's limit 8192"):
                a.touch(keys(200, "large"))  # some 10 KB
            a.ping()


if __name__ == "__main__":
    unittest.main()
