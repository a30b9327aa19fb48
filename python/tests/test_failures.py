"""A killed client, a killed or stalled daemon, and the way back."""

import os
import subprocess
import sys
import time
import unittest

from kvalloc import (Client, ConnectionLostError, DaemonClosedError,
                     DeadlineExceededError, MessageType, NotAllowedError,
                     Status, TooManyConnectionsError, WrongEpochError)
from kvalloc.protocol import simple_request

from daemon import MIB, Daemon, key_json
from helpers import HANG_GUARD, DaemonTest, keys, stamps

CHILD = os.path.join(os.path.dirname(__file__), "child.py")
SIZE = 8 * MIB


class TestKilledClient(DaemonTest):
    """A Python client SIGKILLed while it holds locks leaves none."""

    def start_child(self, mode: str, n: int) -> subprocess.Popen:
        """Run child.py in ``mode`` and wait until it is ready."""
        p = subprocess.Popen([sys.executable, CHILD, self.daemon.socket,
                              mode, str(n)], stdout=subprocess.PIPE)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        line = p.stdout.readline()
        p.stdout.close()
        self.assertEqual(line, b"ready\n", "the child did not get ready")
        return p

    def setUp(self):
        super().setUp()
        # A connection of its own that stays open, so that its close is
        # never the one a wait below sees (the Go helper's connections
        # close after they answer, and are counted a moment later).
        self.watch = self.daemon.client()
        self.addCleanup(self.watch.close)

    def kill_child(self, mode: str, n: int, released) -> float:
        """Run child.py in ``mode``, SIGKILL it once ready; seconds until
        the daemon holds no connection but the watch's and ``released``
        (given the stats before and now) holds."""
        before = self.watch.stats()
        p = self.start_child(mode, n)
        p.kill()
        killed = time.monotonic()
        p.wait(10)
        while True:
            now = self.watch.stats()
            # Every connection but the watch's ended and was released.
            if now.conns_open == 1 and released(before, now):
                return time.monotonic() - killed
            self.assertLess(time.monotonic() - killed, HANG_GUARD,
                            "the daemon did not release the dead client "
                            f"within {HANG_GUARD:.0f} s")
            time.sleep(0.005)

    def test_mid_write(self):
        n = 32
        self.kill_child("write", n, lambda b, s: (
            s.released_writes - b.released_writes == n
            and s.write_locked == 0))
        self.assert_nothing_locked(n)

    def assert_nothing_locked(self, n: int) -> None:
        """The dead writer's n keys: released, and free for a Go writer."""
        s = self.daemon.go_stats()
        self.assertEqual(s["write_locked"], 0)
        self.assertEqual(s["released_writes"], n)
        self.assertEqual(s["released_bytes"], n * SIZE)
        self.assertEqual((s["objects"], s["used_bytes"]), (0, 0))
        # A Go client reserves and finishes every one of the dead
        # client's keys: none is locked.
        kb = keys(n, "victim")
        out = self.daemon.go("-size", str(SIZE), "write",
                             stdin=key_json(kb, stamps(kb, "go")))
        self.assertEqual(out["reserved"], ["OK"] * n)
        self.assertEqual(out["finished"], ["OK"] * n)

    def test_holding_read_locks(self):
        n = 16
        kb = keys(n, "victim")
        self.daemon.go("-size", str(SIZE), "write",
                       stdin=key_json(kb, stamps(kb, "go")))
        self.kill_child("read", n, lambda b, s: (
            s.released_read_locks - b.released_read_locks == 3 * n))
        s = self.daemon.go_stats()
        self.assertEqual(s["released_read_locks"], 3 * n)
        with self.daemon.client() as c:
            self.assertTrue(c.delete(kb).all_ok(), "a key is still locked")
            self.assertEqual(c.stats().objects, 0)

    def test_mid_frame(self):
        self.kill_child("half-frame", 64, lambda b, s: True)
        s = self.daemon.go_stats()
        self.assertEqual((s["write_locked"], s["objects"], s["used_bytes"]),
                         (0, 0, 0))
        self.assertEqual(s["write_reservations"], 0)


class TestLostDaemon(unittest.TestCase):
    """A dead or stalled daemon is an error within the deadline: a dead
    one's is the loss the client sees, never its deadline running out (the
    client's deadline there is HANG_GUARD, so the outcome is the daemon's
    doing whatever the load); a stalled one's is the deadline."""

    def setUp(self):
        self.daemon = Daemon().start()
        self.addCleanup(self.daemon.stop)

    def assertRaisesPromptly(self, exc, f, *args, **kw):
        """``f(*args, **kw)`` raises ``exc`` within HANG_GUARD; unless
        ``exc`` is the deadline's error, not by a deadline running out
        (DeadlineExceededError is a ConnectionLostError)."""
        t = time.monotonic()
        with self.assertRaises(exc) as cm:
            f(*args, **kw)
        took = time.monotonic() - t
        e = cm.exception
        if not issubclass(exc, DeadlineExceededError):
            self.assertNotIsInstance(e, DeadlineExceededError,
                                     f"{exc.__name__} by the deadline: {e}")
        self.assertLess(took, HANG_GUARD, f"{exc.__name__} after {took:.2f}s")
        return e

    def test_killed_then_a_new_daemon(self):
        c = self.daemon.client(timeout=HANG_GUARD)
        self.addCleanup(c.close)
        kb = keys(4, "lost")
        res = c.reserve_write(kb, SIZE)
        old_epoch = c.epoch
        self.daemon.kill()
        self.assertRaisesPromptly(ConnectionLostError, c.finish_write, kb,
                                  res)
        self.assertTrue(c.closed)
        self.assertRaisesPromptly(ConnectionLostError, c.ping)
        # The next daemon on the same socket path.
        self.daemon = Daemon(socket=self.daemon.socket).start()
        self.addCleanup(self.daemon.stop)
        c.reconnect()
        self.assertNotEqual(c.epoch, old_epoch)
        with self.assertRaises(WrongEpochError):
            c.finish_write(kb, res)
        with self.assertRaises(WrongEpochError):
            c.view(res, 0)
        again = c.reserve_write(kb, SIZE)
        self.assertTrue(again.all_ok())
        self.assertTrue(c.finish_write(kb, again).all_ok())

    def test_stalled(self):
        # Connected, and reconnected below, under HANG_GUARD; the calls to
        # the stopped daemon under a deadline of 0.5 s.
        c = self.daemon.client(timeout=HANG_GUARD)
        self.addCleanup(c.close)
        self.daemon.pause()
        self.addCleanup(self.daemon.resume)
        self.assertRaisesPromptly(DeadlineExceededError, c.ping, timeout=0.5)
        self.assertTrue(c.closed)
        self.assertRaisesPromptly(DeadlineExceededError, Client,
                                  self.daemon.socket, timeout=0.5)
        self.daemon.resume()
        c.reconnect()
        c.ping()

    def test_shutdown(self):
        c = self.daemon.client(timeout=HANG_GUARD)
        self.addCleanup(c.close)
        self.daemon.stop()
        e = self.assertRaisesPromptly(ConnectionLostError, c.ping)
        self.assertTrue(c.closed, e)
        if isinstance(e, DaemonClosedError):
            self.assertEqual(e.code.name, "CLOSED")

    def test_no_daemon(self):
        self.daemon.kill()
        os.unlink(self.daemon.socket)
        self.assertRaisesPromptly(ConnectionLostError, Client,
                                  self.daemon.socket, timeout=HANG_GUARD)

    def test_wrong_epoch(self):
        with self.daemon.client() as c:
            def ping(id_, epoch):
                return simple_request(MessageType.PING, id_, epoch ^ 1)
            with self.assertRaises(WrongEpochError):
                c._call(MessageType.PING, ping, None)
            c.ping()  # the connection stays

    def test_not_allowed(self):
        d = Daemon(args=["-allow-uid", str(os.getuid() + 4242)])
        d.start(ping=False)
        self.addCleanup(d.stop)
        e = self.assertRaisesPromptly(NotAllowedError, d.client)
        self.assertIn(f"uid {os.getuid()}", str(e))
        self.assertIsInstance(e, PermissionError)

    def test_too_many_connections(self):
        d = Daemon(args=["-max-conns", "2"])
        d.start(ping=False)
        self.addCleanup(d.stop)
        with d.client() as a, d.client():
            e = self.assertRaisesPromptly(TooManyConnectionsError, d.client)
            self.assertIn("-max-conns", str(e))
            self.assertIsInstance(e, ConnectionRefusedError)
            a.ping()
        deadline = time.monotonic() + 10
        while True:  # served once the others have closed
            try:
                with d.client() as c:
                    c.ping()
                break
            except TooManyConnectionsError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


class TestStatusesAcrossConnections(DaemonTest):
    """Another connection's leases are refused: NOT_OWNER."""

    def test_not_owner(self):
        kb = keys(2, "own")
        with self.daemon.client() as a, self.daemon.client() as b:
            res = a.reserve_write(kb, 4096)
            self.assertEqual(list(b.finish_write(kb, res.leases)),
                             [Status.NOT_OWNER] * 2)
            self.assertEqual(list(b.abort_write(kb, res.leases)),
                             [Status.NOT_OWNER] * 2)
            self.assertTrue(a.finish_write(kb, res).all_ok())


if __name__ == "__main__":
    unittest.main()
