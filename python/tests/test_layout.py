"""Expected sizes: two engines that lay out one key differently.

Two kvallocd processes over one real redis-server (``test_l2calls``'s
RedisServer; the test fails without redis-server, it never skips), blocks
aligned to 1 MiB. Node A stores each key at 64 KiB; node B's reader passes
``sizes`` to ``lookup`` and ``reserve_read_prefix_wait``: expecting
128 KiB it gets misses and never A's bytes, expecting 64 KiB it gets A's
exact bytes and zeros past them.
"""

import time
import unittest

from kvalloc import InvalidArgumentError, Lookup, Mode, Status

from daemon import MIB, Daemon
from helpers import keys
from test_l2calls import RedisServer

S1, S2 = 64 * 1024, 128 * 1024


class TestLayoutMismatch(unittest.TestCase):

    def test_another_layout_is_a_miss(self):
        redis = RedisServer()
        self.addCleanup(redis.close)
        args = ("-l2", redis.url, "-align", str(MIB), "-l2-min-rate", "0")
        a = Daemon(pool=64 * MIB, args=args).start()
        self.addCleanup(a.stop)
        b = Daemon(pool=8 * MIB, args=args).start()
        self.addCleanup(b.stop)
        kb = keys(4, "layout")
        with a.client() as ca:
            res = ca.reserve_write(kb, S1)
            self.assertTrue(res.all_ok(), res.statuses)
            for i, v in enumerate(ca.views(res)):
                v[:S1] = bytes([i + 1]) * S1
            self.assertTrue(ca.finish_write(kb, res).all_ok())
        with b.client() as cb:
            # Every block of B's pool holds another object's bytes.
            stale = keys(8, "stale")
            res = cb.reserve_write(stale, MIB)
            self.assertTrue(res.all_ok(), res.statuses)
            for v in cb.views(res):
                v[:] = b"\xab" * MIB
            self.assertTrue(cb.finish_write(stale, res).all_ok())
            deadline = time.monotonic() + 20
            left = list(range(8))
            while left:  # the copies to L2 hold read locks until sent
                sts = list(cb.delete(stale.subset(left)))
                self.assertLessEqual(set(sts), {Status.OK,
                                                Status.KEY_IS_LOCKED})
                left = [k for k, s in zip(left, sts) if s != Status.OK]
                self.assertLess(time.monotonic(), deadline, "stale locked")
                time.sleep(0.01)
            deadline = time.monotonic() + 20
            while cb.lookup(kb, sizes=S1).l2 < len(kb):  # A's copies land
                self.assertLess(time.monotonic(), deadline, "no L2 hits")
                time.sleep(0.01)

            # Expecting another size: no hit, nothing loaded, no bytes.
            self.assertEqual(cb.lookup(kb, prefetch=True, sizes=S2),
                             Lookup(4, 0, 0, 0))
            rr = cb.reserve_read_prefix_wait(kb, wait=1.0, sizes=[S2] * 4)
            self.assertEqual(rr.prefix, 0)
            self.assertEqual(rr.statuses[0], Status.KEY_NOT_EXIST)

            # Expecting A's size: A's exact bytes, zeros past them.
            self.assertEqual(cb.lookup(kb, prefetch=True, sizes=S1),
                             Lookup(4, 0, 4, 4))
            rr = cb.reserve_read_prefix_wait(kb, wait=5.0, sizes=S1)
            self.assertEqual(rr.prefix, 4)
            for i, v in enumerate(cb.views(rr)):
                self.assertEqual(len(v), MIB)
                self.assertEqual(bytes(v[:S1]), bytes([i + 1]) * S1)
                self.assertEqual(bytes(v[S1:]).count(0), MIB - S1,
                                 f"key {i}: another object's bytes past "
                                 "the payload")
            self.assertTrue(cb.finish_read(kb, rr).all_ok())

            # B's L1 holds them at S1 now: S2 is SIZE_MISMATCH there.
            self.assertEqual(cb.lookup(kb, sizes=S2), Lookup(4, 0, 0, 0))
            rr = cb.reserve_read_prefix_wait(kb, sizes=[S1, S2, S1, S1])
            self.assertEqual(rr.prefix, 1)
            self.assertEqual(list(rr.statuses)[1:3],
                             [Status.SIZE_MISMATCH, Status.SKIPPED])
            self.assertTrue(cb.finish_read(kb.subset([0]),
                                           rr.select([0])).all_ok())
            self.assertEqual(cb.lookup(kb, sizes=S1), Lookup(4, 4, 0, 0))

            # Bad sizes are refused before anything is sent.
            for bad in (0, -1, True, 1.5, "x", [S1] * 3, [S1, S1, 0, S1],
                        [S1, S1, S1, 1 << 63]):
                with self.assertRaises(InvalidArgumentError, msg=bad):
                    cb.lookup(kb, sizes=bad)
                with self.assertRaises(InvalidArgumentError, msg=bad):
                    cb.reserve_read_prefix_wait(kb, sizes=bad)
            self.assertEqual(cb.lookup(kb, sizes=S1), Lookup(4, 4, 0, 0))


if __name__ == "__main__":
    unittest.main()
