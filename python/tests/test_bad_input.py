"""Bad input: each refused call raises a clear error and changes nothing."""

import unittest
from array import array

from kvalloc import (DaemonError, InvalidArgumentError, KeyBatch,
                     MessageType, ObjectKey, Status)
from kvalloc.limits import MAX_INT64, MAX_KEYS, MAX_STRING_LEN, MAX_STRINGS
from kvalloc.protocol import keyed_request

from helpers import DaemonTest, keys

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

    def refused(self, f, *args, match=None, **kw):
        with self.assertRaises(InvalidArgumentError) as cm:
            f(*args, **kw)
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
                self.refused(c._call, t, frame, None, match="kvallocd")

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
        # The bad connection's reservations were released; the other
        # client's are intact and it goes on.
        s = other.stats()
        self.assertEqual(s.released_writes, len(self.held))
        self.assertEqual(s.write_locked, 2)
        self.assertTrue(other.finish_write(keys(2, "other"), mine).all_ok())


if __name__ == "__main__":
    unittest.main()
