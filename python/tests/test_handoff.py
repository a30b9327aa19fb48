"""A daemon handing its pool to a successor (kvallocd -takeover)."""

import unittest

from kvalloc import ConnectionLostError, WrongEpochError

from daemon import MIB, Daemon
from helpers import STAMP, DaemonTest, keys, stamps

SIZE = 8 * MIB


class TestHandoff(DaemonTest):
    """The Python client across a handoff: its connection ends, it
    reconnects to the same path, gets the new epoch, and every object it
    finished reads back its stamps; its old leases are refused."""

    def test_takeover_keeps_objects(self):
        c = self.daemon.client(timeout=5)
        self.addCleanup(c.close)
        kb = keys(16, "handoff")
        st = stamps(kb, "python")
        res = c.reserve_write(kb, SIZE)
        self.assertTrue(res.all_ok())
        for i, v in enumerate(c.views(res)):
            v[:STAMP] = st[i][0]
            v[SIZE - STAMP:SIZE] = st[i][1]
        self.assertTrue(c.finish_write(kb, res).all_ok())
        held = c.reserve_read(kb[:4])
        old_epoch = c.epoch

        new = Daemon(pool=self.daemon.pool, socket=self.daemon.socket,
                     args=["-takeover"])
        new.start(ping=False)
        self.addCleanup(new.stop)
        self.assertEqual(self.daemon.proc.wait(20), 0,
                         "the old daemon did not exit 0 after the handoff")

        with self.assertRaises(ConnectionLostError):
            c.ping()
        c.reconnect()
        self.assertNotEqual(c.epoch, old_epoch)
        with self.assertRaises(WrongEpochError):
            c.finish_read(kb[:4], held)
        got = c.reserve_read(kb)
        self.assertTrue(got.all_ok(), got.statuses)
        for i, v in enumerate(c.views(got)):
            self.assertEqual(bytes(v[:STAMP]), st[i][0])
            self.assertEqual(bytes(v[SIZE - STAMP:SIZE]), st[i][1])
        self.assertTrue(c.finish_read(kb, got).all_ok())
        s = c.stats()
        self.assertEqual(s.objects, 16)


if __name__ == "__main__":
    unittest.main()
