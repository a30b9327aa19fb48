"""A call that fails once its request has been sent closes the client.

Whatever ends the call after the first byte went out (a signal during the
wait, a failure in the client itself), the connection's answers can no
longer be matched to its requests: the client closes, the daemon releases
what the connection held, and the next call says the client is closed
instead of reading the stale answer as its own.
"""

import time
import unittest

from kvalloc import ConnectionLostError

from helpers import HANG_GUARD, DaemonTest, keys


class Boom(Exception):
    """A failure the client did not expect."""


class TestFailureAfterSend(DaemonTest):

    def setUp(self):
        super().setUp()
        self.watch = self.daemon.client()
        self.addCleanup(self.watch.close)

    def wait_closed(self, closed_before: int) -> None:
        """Until the daemon has closed one more connection."""
        deadline = time.monotonic() + HANG_GUARD
        while self.watch.stats().conns_closed == closed_before:
            self.assertLess(time.monotonic(), deadline,
                            "the daemon did not see the client close")
            time.sleep(0.005)

    def wait_for(self, done):
        """The watch's stats once done(stats) holds (within HANG_GUARD)."""
        deadline = time.monotonic() + HANG_GUARD
        while True:
            s = self.watch.stats()
            if done(s):
                return s
            self.assertLess(time.monotonic(), deadline,
                            "the daemon did not release the connection")
            time.sleep(0.005)

    def fail_after_send(self, where: str, exc: BaseException,
                        raised: type) -> None:
        c = self.daemon.client()
        self.addCleanup(c.close)
        kb = keys(3, f"{where}-{type(exc).__name__}")
        res = c.reserve_write(kb, 4096)
        before = self.watch.stats()
        conn = c._conn
        if where == "recv":
            def recv(*a, **kw):
                raise exc
            conn.recv = recv
        else:  # half the frame out, then the failure
            send = conn.send

            def half(frame, deadline):
                send(frame[:len(frame) // 2], deadline)
                raise exc
            conn.send = half
        with self.assertRaises(raised) as cm:
            c.finish_write(kb, res)
        if raised is ConnectionLostError:
            self.assertIs(cm.exception.__cause__, exc)
            self.assertIn("closed", str(cm.exception))
        self.assertTrue(c.closed, "the client stayed open after a failure "
                        "past sending")
        self.assertTrue(conn.closed)
        with self.assertRaisesRegex(ConnectionLostError, "closed"):
            c.finish_write(kb, res)
        self.wait_closed(before.conns_closed)
        # The close counted above may be another connection's (the
        # daemon's start check, a subtest's): wait for this one's release.
        s = self.wait_for(lambda s: s.write_locked == 0 and (
            where != "send"
            or s.released_writes - before.released_writes >= len(kb)))
        self.assertEqual(s.write_locked, 0)
        if where == "send":
            # The half frame was never carried out: the daemon aborted
            # the writes when the connection ended.
            self.assertEqual(s.objects, 0)
            self.assertEqual(s.released_writes - before.released_writes,
                             len(kb))
        # A reconnected client goes on.
        c.reconnect()
        again = c.reserve_write(kb, 4096)
        self.assertEqual(len(again), len(kb))
        c.abort_write(kb, again)
        c.delete(kb, force=True)

    def test_while_waiting_for_the_answer(self):
        for exc, raised in ((Boom("poll"), ConnectionLostError),
                            (OverflowError("timeout too large"),
                             ConnectionLostError),
                            (MemoryError(), ConnectionLostError),
                            (KeyboardInterrupt(), KeyboardInterrupt)):
            with self.subTest(exc=exc):
                self.fail_after_send("recv", exc, raised)

    def test_half_way_through_sending(self):
        for exc, raised in ((Boom("send"), ConnectionLostError),
                            (KeyboardInterrupt(), KeyboardInterrupt)):
            with self.subTest(exc=exc):
                self.fail_after_send("send", exc, raised)


if __name__ == "__main__":
    unittest.main()
