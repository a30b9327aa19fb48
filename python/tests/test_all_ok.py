"""all_ok() means every key: a partial grant and a partly refused finish
are not OK, whichever key was refused."""

import unittest

from kvalloc import Results, Status, StatusList

from daemon import MIB, Daemon
from helpers import DaemonTest, keys

OK = Status.OK


class TestAllOkOfAnswers(DaemonTest):
    """all_ok() on what a real daemon answered."""

    def test_a_partial_grant_is_not_all_ok(self):
        # 8 MiB of pool, 10 write-locked 1 MiB objects asked for: the
        # first 8 fit, the tail is OUT_OF_MEMORY.
        d = Daemon(pool=8 * MIB).start()
        self.addCleanup(d.stop)
        with d.client() as c:
            kb = keys(10, "partial")
            res = c.reserve_write(kb, MIB)
            ok = res.ok_indices()
            self.assertTrue(0 < len(ok) < len(kb), res.statuses)
            self.assertEqual(res.statuses[len(kb) - 1], Status.OUT_OF_MEMORY)
            self.assertFalse(res.all_ok())
            self.assertFalse(res.statuses.all_ok())
            self.assertEqual(c.stats().partial_grants, 1)
            # The granted part alone is all OK, and finishes all OK.
            granted = res.select(ok)
            self.assertTrue(granted.all_ok())
            self.assertTrue(c.finish_write(kb.subset(ok), granted).all_ok())

    def test_a_partly_refused_finish_is_not_all_ok(self):
        c = self.daemon.client()
        self.addCleanup(c.close)
        kb = keys(4, "finish")
        res = c.reserve_write(kb, 4096)
        self.assertTrue(res.all_ok())
        for refused in (0, 3):  # the first key, then the last
            with self.subTest(refused=refused):
                leases = list(res.leases)
                leases[refused] ^= 1 << 40  # no lease of this connection's
                ks = kb.subset(range(len(kb)))
                fin = c.finish_write(ks, leases)
                self.assertEqual(fin[refused], Status.NOT_OWNER)
                self.assertEqual(fin.count_of(OK), len(kb) - 1)
                self.assertFalse(fin.all_ok())
                # The refused key's write lock is still this
                # connection's: finish it alone, and it is OK.
                self.assertTrue(c.finish_write(kb.subset([refused]),
                                               res.select([refused])).all_ok())
                res = c.reserve_write(kb, 4096)  # for the next round
        # A finish_read that over-releases one key of two.
        rk = keys(2, "finish")
        c.abort_write(kb, res)
        c.finish_write(rk, c.reserve_write(rk, 4096))
        r = c.reserve_read(rk)
        fin = c.finish_read(rk.subset([0]), r.select([0]), locks=2)
        self.assertEqual(list(fin), [Status.OVER_RELEASE])
        fin = c.finish_read(rk, r)
        self.assertTrue(fin.all_ok())
        self.assertFalse(c.finish_read(rk, r).all_ok())

    def test_a_partly_missing_read_is_not_all_ok(self):
        c = self.daemon.client()
        self.addCleanup(c.close)
        kb = keys(3, "read")
        c.finish_write(kb.subset([0, 1]),
                       c.reserve_write(kb.subset([0, 1]), 4096))
        r = c.reserve_read(kb)
        self.assertEqual(list(r.statuses), [OK, OK, Status.KEY_NOT_EXIST])
        self.assertFalse(r.all_ok())
        p = c.reserve_read_prefix(kb)
        self.assertEqual(p.prefix, 2)
        self.assertFalse(p.all_ok())


class TestAllOkValues(unittest.TestCase):
    """all_ok() on answers made by hand: one status off anywhere."""

    def test_one_status_off_anywhere(self):
        self.assertTrue(StatusList(b"").all_ok())
        self.assertTrue(StatusList(bytes(5)).all_ok())
        for n in (1, 2, 5):
            for i in range(n):
                for bad in (1, 6, 32, 255):
                    raw = bytearray(n)
                    raw[i] = bad
                    with self.subTest(n=n, i=i, bad=bad):
                        self.assertFalse(StatusList(bytes(raw)).all_ok())
                        rs = Results.from_list(
                            [(Status(0) if j != i else bad, 0, 0, 0, 0)
                             for j in range(n)])
                        self.assertFalse(rs.all_ok())


if __name__ == "__main__":
    unittest.main()
