"""The client against a daemon that breaks the protocol: a Python fake.

Each case serves one connection from a thread: it answers the hello as
kvallocd does (or not), then misbehaves in one way. The client must raise
the right error within its deadline and close, never hang or crash.
"""

import os
import socket
import struct
import tempfile
import threading
import time
import unittest
from unittest import mock

from kvalloc import (Client, ConnectionLostError, DeadlineExceededError,
                     FrameError, KeyBatch, KvallocError, MessageType,
                     ObjectKey)
from kvalloc.client import PROTOCOL_ENV
from kvalloc.enums import Code
from kvalloc.protocol import Answer, decode_request, encode_answer
from kvalloc.results import Hello, Result, Results

EPOCH = 0x1234
POOL = 1 << 20
KB = KeyBatch([ObjectKey(b"k1", "m"), ObjectKey(b"k2", "m")])
# Set when a case ends: a fake that stalls waits on it, not on a clock.
_END = threading.Event()
# The client's deadline where a case is about the deadline: the fake stalls
# (on _END) or trickles, so the deadline is what ends the call.
DEADLINE = 0.5
# The client's deadline in every other case, where the fake's answer or
# close ends the call: a bound on a hang only, never a race with the
# machine's load (a 16 MiB answer takes seconds on a loaded 2-core box).
HANG_GUARD = 60.0


def _stall(s=None) -> None:
    _END.wait(10)


def _recv_frame(s: socket.socket) -> bytes:
    head = b""
    while len(head) < 24:
        got = s.recv(24 - len(head))
        if not got:
            raise EOFError
        head += got
    size = struct.unpack_from("<I", head)[0]
    body = b""
    while len(body) < size - 24:
        body += s.recv(size - 24 - len(body))
    return head + body


def _hello_answer(id_: int = 1, **kw) -> bytes:
    h = dict(version=2, max_keys=1 << 16, max_frame=16 << 20,
             pool_size=POOL, align=4096, versions=0b110)
    h.update(kw)
    return encode_answer(Answer(MessageType.HELLO, id_, Code.OK, EPOCH,
                                hello=Hello(**h)), version=2)


class Fake:
    """One connection served by ``script(sock)`` on a thread, after the
    refused hellos of the versions it does not speak."""

    def __init__(self, script, fd: bool = True, hello: bytes = None,
                 versions=(1, 2)):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "fake.sock")
        self.ls = socket.socket(socket.AF_UNIX)
        self.ls.bind(self.path)
        self.ls.listen(2)
        self.script, self.fd, self.hello = script, fd, hello
        self.versions = versions
        #: The version of each hello received, in order.
        self.hellos = []
        self.error = None
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def _serve(self):
        _END.clear()
        try:
            while self._serve_one():
                pass
        except Exception as e:  # the test reports it
            self.error = e

    def _serve_one(self) -> bool:
        """Serve one connection; True when it was refused for its
        version, and the next one is to be served."""
        s, _ = self.ls.accept()
        with s:
            q = decode_request(_recv_frame(s), version=2)
            self.hellos.append(q.version)
            if q.version not in self.versions:
                s.sendall(encode_answer(Answer(
                    MessageType.HELLO, q.id, Code.BAD_VERSION, EPOCH,
                    message=f"protocol version {q.version}; this daemon "
                    f"speaks {list(self.versions)}")))
                return True
            ans = self.hello if self.hello is not None else \
                _hello_answer(version=q.version,
                              versions=0b110 if q.version == 2 else 0)
            if self.fd:
                mfd = os.memfd_create("fake-pool")
                os.ftruncate(mfd, POOL)
                socket.send_fds(s, [ans[:1]], [mfd])
                os.close(mfd)
                s.sendall(ans[1:])
            else:
                s.sendall(ans)
            if self.script:
                self.script(s)
        return False

    def close(self):
        _END.set()
        self.ls.close()
        self.t.join(5)
        os.unlink(self.path)
        os.rmdir(self.dir)


def no_protocol_env(test: unittest.TestCase) -> None:
    """Run ``test`` without ``$KVALLOC_PROTOCOL_VERSION``: a Client made
    without ``protocol`` then asks for 2 and falls back to 1."""
    p = mock.patch.dict(os.environ)
    p.start()
    test.addCleanup(p.stop)
    os.environ.pop(PROTOCOL_ENV, None)


def _answer_next(s, make):
    q = decode_request(_recv_frame(s), version=2)
    s.sendall(make(q))


class TestFakeDaemon(unittest.TestCase):

    def setUp(self):
        no_protocol_env(self)

    def run_case(self, script, exc, fd=True, hello=None, call="ping",
                 timeout=HANG_GUARD):
        """Connect to a fake serving ``script`` with a client of deadline
        ``timeout`` and make one call: it must raise ``exc``. A case about
        the deadline passes DEADLINE; the others keep HANG_GUARD, so that
        their outcome is the fake's doing, whatever the load."""
        f = Fake(script, fd, hello)
        self.addCleanup(f.close)
        t = time.monotonic()
        with self.assertRaises(exc) as cm:
            c = Client(f.path, timeout=timeout)
            self.addCleanup(c.close)
            if call == "ping":
                c.ping()
            else:
                c.reserve_write(KB, 4096)
        self.assertLess(time.monotonic() - t, HANG_GUARD)
        return cm.exception

    def test_a_good_fake_works(self):
        def script(s):
            _answer_next(s, lambda q: encode_answer(Answer(
                MessageType.RESERVE_WRITE, q.id, Code.OK, EPOCH,
                results=Results.from_list([Result(0, 0, 4096, 1, 7),
                                           Result(0, 4096, 4096, 2, 8)]))))
        f = Fake(script)
        self.addCleanup(f.close)
        with Client(f.path, timeout=HANG_GUARD) as c:
            res = c.reserve_write(KB, 4096)
            c.view(res, 1)[:3] = b"abc"
            self.assertEqual(list(res.leases), [7, 8])
            self.assertEqual(bytes(c.pool[4096:4099]), b"abc")
        self.assertIsNone(f.error)

    def test_hello_without_the_pool(self):
        e = self.run_case(None, FrameError, fd=False)
        self.assertIn("file descriptor", str(e))

    def test_hello_of_another_version(self):
        # The answer must confirm the version the hello asked for, and a
        # version 2 answer must say the daemon speaks 2.
        for asked, kw in ((2, dict(version=1, versions=0)),
                          (2, dict(version=3)),
                          (2, dict(versions=0b010)),
                          (1, dict(version=2, versions=0))):
            with self.subTest(asked=asked, answer=kw):
                f = Fake(None, hello=_hello_answer(**kw))
                self.addCleanup(f.close)
                with self.assertRaises(FrameError) as cm:
                    Client(f.path, timeout=HANG_GUARD,
                           protocol=asked).close()
                self.assertEqual(cm.exception.code, Code.BAD_VERSION)
                self.assertEqual(f.hellos, [asked])

    def test_hello_with_no_pool(self):
        self.run_case(None, FrameError, hello=_hello_answer(pool_size=0))

    def test_a_pool_smaller_than_the_hello_says(self):
        e = self.run_case(None, KvallocError,
                          hello=_hello_answer(pool_size=2 * POOL))
        self.assertIn("mapping the pool", str(e))

    def test_a_hello_never_answered(self):
        self.run_case(_stall, DeadlineExceededError, hello=b"", fd=False,
                      timeout=DEADLINE)

    def test_closed_before_the_hello_answer(self):
        self.run_case(None, ConnectionLostError, hello=b"", fd=False)

    def test_closed_mid_answer(self):
        def script(s):
            q = decode_request(_recv_frame(s))
            a = encode_answer(Answer(MessageType.PING, q.id, Code.OK, EPOCH))
            s.sendall(a[:10])
        self.run_case(script, ConnectionLostError)

    def test_stalled_mid_answer(self):
        def script(s):
            q = decode_request(_recv_frame(s))
            a = encode_answer(Answer(MessageType.PING, q.id, Code.OK, EPOCH))
            s.sendall(a[:10])
            _stall()
        self.run_case(script, DeadlineExceededError, timeout=DEADLINE)

    def test_a_trickle_past_the_deadline(self):
        # A byte every 0.1 s: each recv succeeds, the deadline still holds.
        # The answer would take 2.4 s; a deadline renewed by each recv
        # would see it whole and raise nothing.
        def script(s):
            q = decode_request(_recv_frame(s))
            a = encode_answer(Answer(MessageType.PING, q.id, Code.OK, EPOCH))
            for b in a:
                s.sendall(bytes([b]))
                if _END.wait(0.1):
                    return
        self.run_case(script, DeadlineExceededError, timeout=DEADLINE)

    def test_an_oversized_header(self):
        def script(s):
            decode_request(_recv_frame(s))
            s.sendall(struct.pack("<IHHIIQ", 1 << 30, 0x8002, 0, 2, 0,
                                  EPOCH))
            _stall()
        e = self.run_case(script, FrameError)
        self.assertEqual(e.code, Code.TOO_LARGE)

    def test_an_answer_at_max_frame(self):
        # A frame of MAX_FRAME bytes is read whole and its body judged (no
        # answer can fill it: its zeros are trailing bytes); one byte more
        # is refused from the header.
        from kvalloc.limits import MAX_FRAME
        for size, code in ((MAX_FRAME - 1, Code.BAD_FRAME),
                           (MAX_FRAME, Code.BAD_FRAME),
                           (MAX_FRAME + 1, Code.TOO_LARGE)):
            def script(s, size=size):
                q = decode_request(_recv_frame(s))
                head = struct.pack("<IHHIIQ", size, 0x8002, 0, q.id, 0,
                                   EPOCH)
                s.sendall(head + bytes(min(size, MAX_FRAME) - len(head)))
                _stall()
            with self.subTest(size=size):
                e = self.run_case(script, FrameError)
                self.assertEqual(e.code, code, e)
                if code is Code.BAD_FRAME:
                    self.assertIn(f"{size - 24} trailing", str(e))

    def test_a_garbled_body(self):
        def script(s):
            q = decode_request(_recv_frame(s))
            a = bytearray(encode_answer(Answer(
                MessageType.RESERVE_WRITE, q.id, Code.OK, EPOCH,
                results=Results.from_list([Result(0, 0, 4096, 1, 7)] * 2))))
            a[33] = 1  # a reserved byte of the first result
            s.sendall(a)
        self.run_case(script, FrameError, call="reserve")

    def test_the_wrong_count(self):
        def script(s):
            _answer_next(s, lambda q: encode_answer(Answer(
                MessageType.RESERVE_WRITE, q.id, Code.OK, EPOCH,
                results=Results.from_list([Result(0, 0, 4096, 1, 7)]))))
        e = self.run_case(script, FrameError, call="reserve")
        self.assertIn("1 results for 2 keys", str(e))

    def test_the_wrong_id_or_type(self):
        for make in (
            lambda q: encode_answer(Answer(MessageType.PING, q.id + 1,
                                           Code.OK, EPOCH)),
            lambda q: encode_answer(Answer(MessageType.STATS, q.id, Code.OK,
                                           EPOCH)),
        ):
            with self.subTest():
                self.run_case(lambda s: _answer_next(s, make), FrameError)

    def test_a_block_outside_the_pool(self):
        def script(s):
            _answer_next(s, lambda q: encode_answer(Answer(
                MessageType.RESERVE_WRITE, q.id, Code.OK, EPOCH,
                results=Results.from_list([Result(0, POOL, 4096, 1, 7)] * 2))))
        f = Fake(script)
        self.addCleanup(f.close)
        with Client(f.path, timeout=HANG_GUARD) as c:
            res = c.reserve_write(KB, 4096)
            with self.assertRaises(ValueError):
                c.view(res, 0)
            with self.assertRaises(ValueError):
                c.views(res)


if __name__ == "__main__":
    unittest.main()
