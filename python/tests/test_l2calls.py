"""The L2 tier's calls against a real daemon without an L2 store."""

import unittest

from kvalloc import InvalidArgumentError, Lookup, Mode, Status

from helpers import DaemonTest, keys


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


if __name__ == "__main__":
    unittest.main()
