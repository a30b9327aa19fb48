"""Bad input: each refused call raises a clear error and changes nothing."""

import math
import time
import unittest
from array import array

from kvalloc import (Client, DaemonError, InvalidArgumentError, KeyBatch,
                     MessageType, ObjectKey, Result, Results, Status)
from kvalloc.client import MAX_TIMEOUT
from kvalloc.limits import MAX_INT64, MAX_KEYS, MAX_STRING_LEN, MAX_STRINGS
from kvalloc.protocol import keyed_request

from helpers import HANG_GUARD, DaemonTest, keys

K = ObjectKey(b"\x01" * 32, "m")


class TestBadInput(DaemonTest):

    def setUp(self):
        super().setUp()
        self.c = self.daemon.client()
        self.addCleanup(self.c.close)
        # Something held, so that "nothing changed" has something to keep.
        self.held = keys(3, "held")
        self.res = self.c.reserve_write(self.held, 4096)
        self.before = self.quiet_stats(self.c)

    def refused(self, f, *args, match=None, by_daemon=False, **kw):
        """f(*args, **kw) raises InvalidArgumentError; unless
        ``by_daemon``, before anything was sent and with the client left
        open. Either way nothing changed in the daemon."""
        conn, sent = self.c._conn, []
        send = conn.send
        conn.send = lambda *a: (sent.append(a[0]), send(*a))[1]
        try:
            with self.assertRaises(InvalidArgumentError) as cm:
                f(*args, **kw)
        finally:
            conn.send = send
        if not by_daemon:
            self.assertEqual(sent, [], f"{f.__name__}{args}: sent before "
                             "refusing")
        self.assertFalse(self.c.closed, f"{f.__name__}{args}: closed")
        if match:
            self.assertRegex(str(cm.exception), match)
        if match:
            self.assertRegex(str(cm.exception), match)
        self.c.ping()
        self.assertEqual(self.quiet_stats(self.c), self.before,
                         f"{f.__name__}{args}: the daemon changed")
        return cm.exception

    def test_sizes(self):
        c, kb = self.c, keys(2)
        for size in (0, -1, MAX_INT64 + 1, 1.5, "4096", True, None):
            with self.subTest(size=size):
                self.refused(c.reserve_write, kb, size, match="size")

    def test_modes_locks_timeouts(self):
        c, kb = self.c, keys(2)
        self.refused(c.reserve_write, kb, 4096, mode=3, match="mode")
        self.refused(c.reserve_write, kb, 4096, mode=-1, match="mode")
        for locks in (0, -1, 129, 2.0, True):
            with self.subTest(locks=locks):
                self.refused(c.reserve_read, kb, locks=locks, match="locks")
                self.refused(c.reserve_read_prefix, kb, locks=locks)
                self.refused(c.finish_read, kb, [1, 2], locks=locks)
                self.refused(c.finish_write_and_reserve_read, kb, [1, 2],
                             locks=locks)
        self.refused(c.ping, timeout=0, match="timeout")
        self.refused(c.reserve_read, kb, timeout=-1, match="timeout")

    BAD_TIMEOUTS = (0, -1, -0.0, math.inf, -math.inf, math.nan, 1e300,
                    10 ** 400, MAX_TIMEOUT * 1.0001, "1", b"1", True, [1],
                    1j)

    def test_timeouts(self):
        c, kb = self.c, self.held
        for t in self.BAD_TIMEOUTS:
            with self.subTest(timeout=t):
                self.refused(c.ping, timeout=t, match="timeout")
                self.refused(c.stats, timeout=t, match="timeout")
                self.refused(c.reserve_write, keys(2), 4096, timeout=t,
                             match="timeout")
                self.refused(c.finish_write, kb, self.res, timeout=t,
                             match="timeout")
                self.refused(c.connect, timeout=t, match="timeout")
        # The edges that are legal: a call under its own deadline (an int,
        # a float; never one short enough to race the machine's load).
        c.ping(timeout=MAX_TIMEOUT)
        c.ping(timeout=int(HANG_GUARD))
        c.ping(timeout=1e-9 + HANG_GUARD)

    def test_timeouts_at_connect(self):
        accepted = self.c.stats().conns_accepted
        for t in self.BAD_TIMEOUTS:
            with self.subTest(timeout=t):
                with self.assertRaisesRegex(InvalidArgumentError, "timeout"):
                    Client(self.daemon.socket, timeout=t).close()
        # Nothing connected: the daemon accepted no connection.
        self.assertEqual(self.c.stats().conns_accepted, accepted)
        with Client(self.daemon.socket, timeout=MAX_TIMEOUT) as c:
            c.ping()
        for path in (7, b"\x00", "a\x00b", [self.daemon.socket]):
            with self.subTest(path=path):
                with self.assertRaisesRegex(InvalidArgumentError, "path"):
                    Client(path).close()

    def test_keys_not_a_sequence(self):
        c, lk = self.c, [1, 2, 3]
        for ks in (None, 7, 1.5, object(), ObjectKey(b"x", "m"), b"ab",
                   "ab", [None], [7], [[b"x", "m", 0, 0, "", 1]]):
            with self.subTest(keys=ks):
                self.refused(c.reserve_write, ks, 4096, match="key")
                self.refused(c.finish_write, ks, lk)
                self.refused(c.abort_write, ks, lk)
                self.refused(c.finish_write_and_reserve_read, ks, lk)
                self.refused(c.reserve_read, ks)
                self.refused(c.reserve_read_prefix, ks)
                self.refused(c.finish_read, ks, lk)
                self.refused(c.delete, ks)
                self.refused(c.touch, ks)
                with self.assertRaises(InvalidArgumentError):
                    KeyBatch(ks)

    def test_other_arguments(self):
        c, kb = self.c, self.held
        for mode in (None, "new", 1.0, True, 7):
            with self.subTest(mode=mode):
                self.refused(c.reserve_write, kb, 4096, mode=mode,
                             match="mode")
        self.refused(c.finish_write, kb, None, match="lease")
        for arr in (7, 1.5, object()):
            with self.subTest(arr=arr):
                self.refused(c.reserve_write, kb, 4096, temporary=arr,
                             match="temporary")
                self.refused(c.reserve_write, kb, 4096, positions=arr,
                             match="positions")
                self.refused(c.finish_write, kb, arr, match="lease")
        self.refused(c.reserve_write, kb, 4096, positions=[1, 2, None],
                     match="position")
        self.refused(c.finish_read, kb, [1, 2, None], match="lease")
        self.refused(c.finish_read, kb, [1, 2, 3.0], match="lease")

    def test_per_key_arrays(self):
        c, kb = self.c, self.held
        for f in (c.finish_write, c.abort_write, c.finish_read):
            with self.subTest(f.__name__):
                self.refused(f, kb, [1, 2], match="3 keys")
                self.refused(f, kb, [1, 2, 3, 4], match="3 keys")
                self.refused(f, kb, [1, 2, -1], match="lease")
                self.refused(f, kb, [1, 2, 1 << 64], match="lease")
                self.refused(f, kb, [1, 2, "3"], match="lease")
                self.refused(f, kb, 7, match="sequence")
        self.refused(c.finish_write, kb, array("Q", [1]), match="3 keys")
        self.refused(c.reserve_write, kb, 4096, temporary=[True],
                     match="temporary")
        self.refused(c.reserve_write, kb, 4096, positions=[1, 2],
                     match="positions")
        self.refused(c.reserve_write, kb, 4096, positions=[1, 2, 1 << 32],
                     match="position")
        self.refused(c.reserve_write, kb, 4096, positions=[1, 2, -1])

    def test_keys(self):
        c = self.c
        bad = [
            ("hash str", [ObjectKey("abc", "m")]),
            ("hash long", [ObjectKey(b"x" * (MAX_STRING_LEN + 1), "m")]),
            ("model long", [ObjectKey(b"x", "m" * (MAX_STRING_LEN + 1))]),
            ("salt long", [ObjectKey(b"x", "m", 0, 0,
                                     "s" * (MAX_STRING_LEN + 1))]),
            ("model int", [ObjectKey(b"x", 7)]),
            ("rank negative", [ObjectKey(b"x", "m", -1)]),
            ("rank 2^32", [ObjectKey(b"x", "m", 1 << 32)]),
            ("group 2^32", [ObjectKey(b"x", "m", 0, 1 << 32)]),
            ("group float", [ObjectKey(b"x", "m", 0, 1.0)]),
            ("not a key", [b"abc"]),
            ("short tuple", [(b"x", "m")]),
            ("second key", [K, ObjectKey(b"x", "m", -5)]),
            ("too many", [K] * (MAX_KEYS + 1)),
            ("strings", [ObjectKey(b"x", f"m{i}")
                         for i in range(MAX_STRINGS + 1)]),
        ]
        for name, ks in bad:
            with self.subTest(name):
                e = self.refused(c.reserve_write, ks, 4096)
                if name == "second key":
                    self.assertIn("key 1", str(e))
                with self.assertRaises(InvalidArgumentError):
                    KeyBatch(ks)

    def test_frame_over_the_limit(self):
        # 5000 keys of 4 KiB hashes: 20 MB, over MaxFrame (16 MiB).
        ks = [ObjectKey(i.to_bytes(4, "little") * 1024, "m")
              for i in range(5000)]
        self.refused(self.c.reserve_read, ks, match="frame")

    def test_a_block_of_no_key(self):
        res = self.c.reserve_read(keys(1, "none"))
        self.assertEqual(res.statuses[0], Status.KEY_NOT_EXIST)
        self.before = self.quiet_stats(self.c)  # the lookup counted
        self.refused(self.c.view, res, 0, match="KEY_NOT_EXIST")
        self.refused(self.c.block, self.c.hello.pool_size - 1, 2,
                     match="outside")
        self.refused(self.c.block, -1, 1, match="outside")

    def test_views_check_every_block(self):
        # Forged results: each bad block alone, among good ones, is
        # refused by views() as by view(), and nothing is returned.
        c, pool = self.c, self.c.hello.pool_size
        good = Result(Status.OK, 0, 4096, 1, 1)
        for off, size in ((-1, 1), (-4096, 4096), (pool, 1),
                          (pool - 4096, 8192), (0, pool + 1), (1, pool),
                          (0, -1), ((1 << 63) - 1, 1), (1, (1 << 63) - 1),
                          ((1 << 62), (1 << 62))):
            for at in (0, 2):
                rs = [good, good, good]
                rs[at] = Result(Status.OK, off, size, 1, 1)
                res = Results.from_list(rs, epoch=c.epoch)
                with self.subTest(off=off, size=size, at=at):
                    self.refused(c.view, res, at, match="outside")
                    self.refused(c.views, res, match="outside")
        # At the bounds: the last byte, the whole pool, an empty block at
        # the end, and a refused result (no block) beside them.
        edge = [Result(Status.OK, pool - 1, 1, 1, 1),
                Result(Status.OK, 0, pool, 1, 1),
                Result(Status.OK, pool, 0, 1, 1),
                Result(Status.KEY_NOT_EXIST, -1, -1, 0, 0)]
        vs = c.views(Results.from_list(edge, epoch=c.epoch))
        self.assertEqual([None if v is None else len(v) for v in vs],
                         [1, pool, 0, None])

    def test_refused_by_the_daemon(self):
        # Values a frame can carry but l1 refuses: the client's checks
        # are bypassed, the daemon answers INVALID_ARGUMENT.
        c, kb = self.c, keys(2)
        for size, locks, mode, t in ((0, 0, 0, MessageType.RESERVE_WRITE),
                                     (-5, 0, 0, MessageType.RESERVE_WRITE),
                                     (4096, 0, 3, MessageType.RESERVE_WRITE),
                                     (0, 0, 0, MessageType.RESERVE_READ),
                                     (0, 200, 0, MessageType.RESERVE_READ)):
            with self.subTest(size=size, locks=locks, mode=mode):
                def frame(id_, epoch):
                    return keyed_request(t, id_, epoch, kb, size, locks, mode)
                self.refused(c._call, t, frame, None, match="kvallocd",
                             by_daemon=True)

    def test_a_malformed_frame_closes_only_its_connection(self):
        other = self.daemon.client()
        self.addCleanup(other.close)
        mine = other.reserve_write(keys(2, "other"), 4096)

        def frame(id_, epoch):
            f = bytearray(keyed_request(MessageType.PING, id_, epoch,
                                        keys(1)))
            return bytes(f)
        with self.assertRaises(DaemonError) as cm:
            self.c._call(MessageType.PING, frame, None)
        self.assertTrue(cm.exception.closes)
        self.assertTrue(self.c.closed)
        # The bad connection's reservations are released (the daemon
        # answers the bad frame before it tears the connection down, so
        # the release may come a moment after the answer); the other
        # client's are intact and it goes on.
        deadline = time.monotonic() + HANG_GUARD
        s = other.stats()
        while s.released_writes < len(self.held):
            self.assertLess(time.monotonic(), deadline,
                            "the daemon did not release the bad "
                            "connection's writes")
            time.sleep(0.005)
            s = other.stats()
        self.assertEqual(s.released_writes, len(self.held))
        self.assertEqual(s.write_locked, 2)
        self.assertTrue(other.finish_write(keys(2, "other"), mine).all_ok())


if __name__ == "__main__":
    unittest.main()
