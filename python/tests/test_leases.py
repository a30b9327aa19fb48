"""Leases: whose they are, how read locks are counted, and their lapse."""

import time
import unittest

from kvalloc import Status

from daemon import Daemon
from helpers import HANG_GUARD, DaemonTest, keys

OK, NOT_OWNER = Status.OK, Status.NOT_OWNER


class TestLeases(DaemonTest):

    def test_readers_share_a_lease_and_count_their_own_locks(self):
        kb = keys(1, "shared")
        with self.daemon.client() as a, self.daemon.client() as b:
            w = a.reserve_write(kb, 4096)
            a.finish_write(kb, w)
            ra = a.reserve_read(kb)
            rb = b.reserve_read(kb, locks=2)
            self.assertEqual(ra.leases[0], rb.leases[0])
            self.assertEqual(ra.offsets[0], rb.offsets[0])
            self.assertEqual(list(a.finish_read(kb, ra, locks=2)),
                             [Status.OVER_RELEASE])
            self.assertEqual(list(a.finish_read(kb, ra)), [OK])
            self.assertEqual(list(a.finish_read(kb, ra)), [NOT_OWNER])
            self.assertEqual(list(a.delete(kb)), [Status.KEY_IS_LOCKED])
            self.assertEqual(list(b.finish_read(kb, rb, locks=2)), [OK])
            self.assertEqual(list(a.delete(kb)), [OK])

    def test_a_write_lease_is_good_once_and_for_its_writer(self):
        kb = keys(2, "once")
        with self.daemon.client() as a, self.daemon.client() as b:
            w = a.reserve_write(kb, 4096)
            self.assertEqual(list(b.finish_write(kb, w)), [NOT_OWNER] * 2)
            self.assertEqual(list(a.finish_write(kb, w)), [OK] * 2)
            self.assertEqual(list(a.finish_write(kb, w)), [NOT_OWNER] * 2)
            self.assertEqual(list(a.abort_write(kb, w)), [NOT_OWNER] * 2)
            # A write lock on an existing key: the reader waits.
            w2 = a.reserve_write(kb, 4096)
            self.assertEqual(list(b.reserve_read(kb).statuses),
                             [Status.KEY_NOT_READABLE] * 2)
            self.assertEqual(list(a.abort_write(kb, w2)), [OK] * 2)
            s = a.stats()
            self.assertEqual(s.write_locked, 0)

    def test_closing_releases_everything(self):
        kb, rk = keys(4, "close-w"), keys(4, "close-r")
        with self.daemon.client() as a:
            a.finish_write(rk, a.reserve_write(rk, 4096))
            # The daemon's start was checked by a connection of its own,
            # which may be counted closed already: wait for one more.
            closed = a.stats().conns_closed
            with self.daemon.client() as b:
                b.reserve_write(kb, 4096)
                b.reserve_read(rk, locks=5)
            # The close counted may still be that other connection's:
            # wait for b's release itself.
            deadline = time.monotonic() + HANG_GUARD
            while True:
                s = a.stats()
                if s.conns_closed > closed and (
                        s.released_writes, s.released_read_locks) == (4, 20):
                    break
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.005)
            self.assertEqual((s.released_writes, s.released_read_locks),
                             (4, 20))
            self.assertEqual(s.write_locked, 0)
            self.assertTrue(a.delete(rk).all_ok())

    def test_a_forced_delete_holds_the_block_of_anothers_locks(self):
        """A forced delete drops the key; the block waits for its holders."""
        kw, kr = keys(2, "force-w"), keys(1, "force-r")
        with self.daemon.client() as a, self.daemon.client() as b, \
                self.daemon.client() as c:
            # A write another connection holds.
            w = a.reserve_write(kw, 4096)
            self.assertEqual(list(c.delete(kw, force=True)), [OK] * 2)
            self.assertEqual(c.stats().quarantined_bytes, 2 * 4096)
            w2 = b.reserve_write(kw, 4096)
            self.assertTrue(w2.all_ok())
            self.assertEqual(set(w.offsets) & set(w2.offsets), set())
            for v in b.views(w2):
                v[:4] = b"bbbb"
            for v in a.views(w):
                v[:4] = b"aaaa"
            self.assertEqual(list(a.finish_write(kw, w)),
                             [Status.WRITE_DELETED] * 2)
            self.assertTrue(b.finish_write(kw, w2).all_ok())
            r = c.reserve_read(kw)
            self.assertTrue(r.all_ok())
            self.assertEqual([bytes(v[:4]) for v in c.views(r)],
                             [b"bbbb"] * 2)
            self.assertTrue(c.finish_read(kw, r).all_ok())
            # A read lock another connection holds.
            a.finish_write(kr, a.reserve_write(kr, 4096))
            r = a.reserve_read(kr)
            self.assertEqual(list(c.delete(kr, force=True)), [OK])
            self.assertEqual(c.stats().quarantined_bytes, 4096)
            w3 = b.reserve_write(kr, 4096)
            self.assertNotIn(r.offsets[0], list(w3.offsets))
            self.assertEqual(list(a.finish_read(kr, r)), [OK])
            self.assertEqual(c.stats().quarantined_bytes, 0)
            self.assertTrue(b.abort_write(kr, w3).all_ok())


class TestLapses(unittest.TestCase):
    """The TTLs are a backstop: a lapsed lock never hands out its object."""

    # Long enough that the steps between a lock's grant and its use
    # (a few calls and a wait for another connection's release) cannot
    # outlast it on a loaded machine; the tests sleep two TTLs to lapse one.
    TTL = 1.0

    def setUp(self):
        ms = f"{int(self.TTL * 1000)}ms"
        self.daemon = Daemon(args=["-write-ttl", ms, "-read-ttl", ms]).start()
        self.addCleanup(self.daemon.stop)

    def test_a_lapsed_write_never_becomes_readable(self):
        kb = keys(2, "lapse")
        with self.daemon.client() as a, self.daemon.client() as b:
            w = a.reserve_write(kb, 4096)
            time.sleep(2 * self.TTL)
            self.assertNotIn(OK, list(b.reserve_read(kb).statuses))
            self.assertEqual(a.stats().quarantined_bytes, 2 * 4096)
            fin = a.finish_write(kb, w)
            self.assertEqual(list(fin), [Status.WRITE_LAPSED] * 2)
            self.assertNotIn(OK, list(b.reserve_read(kb).statuses))
            s = a.stats()
            self.assertEqual((s.quarantined_bytes, s.quarantines), (0, 2))
            self.assertTrue(a.reserve_write(kb, 4096).all_ok())

    def test_a_lapsed_writers_block_goes_to_no_other_writer(self):
        kb = keys(2, "quarantine")
        with self.daemon.client() as b:
            a = self.daemon.client()
            w = a.reserve_write(kb, 4096)
            for v in a.views(w):
                v[:4] = b"mine"
            time.sleep(2 * self.TTL)
            other = b.reserve_write(kb, 4096)
            self.assertTrue(other.all_ok())
            self.assertEqual(set(w.offsets) & set(other.offsets), set())
            for v in b.views(other):
                v[:4] = b"othr"
            # The stuck writer's bytes are its own until it lets go.
            for v in a.views(w):
                self.assertEqual(bytes(v[:4]), b"mine")
            self.assertEqual(b.stats().quarantined_bytes, 2 * 4096)
            a.close()
            deadline = time.monotonic() + HANG_GUARD
            while b.stats().quarantined_bytes:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.005)
            self.assertTrue(b.finish_write(kb, other).all_ok())

    def test_a_lapsed_read_lock(self):
        kb = keys(1, "read-lapse")
        with self.daemon.client() as a, self.daemon.client() as b:
            a.finish_write(kb, a.reserve_write(kb, 4096))
            r = a.reserve_read(kb, locks=3)
            time.sleep(2 * self.TTL)
            # Lapsed: the key can be written again, and the old lease
            # releases nothing.
            w = b.reserve_write(kb, 4096)
            self.assertEqual(list(w.statuses), [OK])
            self.assertNotIn(OK, list(a.finish_read(kb, r, locks=3)))
            self.assertEqual(list(b.finish_write(kb, w)), [OK])
            self.assertEqual(list(b.delete(kb)), [OK])


if __name__ == "__main__":
    unittest.main()
