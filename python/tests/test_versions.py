"""Version negotiation and calls by handle, against the Python fake.

The client asks for version 2 and, against a daemon that answers
``BAD_VERSION`` (one of version 1), connects again with version 1; with
``protocol=1`` it asks for 1 only. On a version 2 connection the finishing
calls go by handle exactly when the client holds a handle for every (key,
lease) of the call, and the fake sees which frames were sent.
"""

import os
import time
import unittest

from kvalloc import (Client, DaemonError, DeadlineExceededError,
                     InvalidArgumentError, MessageType, Status)
from kvalloc.client import PROTOCOL_ENV
from kvalloc.enums import Code, Flag
from kvalloc.protocol import Answer, decode_request, encode_answer
from kvalloc.results import Result, Results, StatusList

from test_fake_daemon import (DEADLINE, EPOCH, HANG_GUARD, KB, Fake,
                              _recv_frame, _stall, no_protocol_env)

OK = Status.OK


def _serve(steps, log):
    """A fake's script: for each step, read a request (decoded with the
    connection's version), log it, and send ``step(request)``."""
    def script(s):
        for step in steps:
            q = decode_request(_recv_frame(s), version=2)
            log.append(q)
            s.sendall(step(q))
    return script


def _results(t, hs, leases, version=2):
    def make(q):
        return encode_answer(Answer(t, q.id, Code.OK, EPOCH,
                                    results=Results.from_list(
                                        [Result(0, 4096 * i, 4096, 1, lease,
                                                h)
                                         for i, (h, lease)
                                         in enumerate(zip(hs, leases))])),
                             version=version)
    return make


def _statuses(t, sts):
    def make(q):
        n = len(q.handles) or len(q.keys)
        assert n == len(sts), (n, sts)
        return encode_answer(Answer(t, q.id, Code.OK, EPOCH,
                                    statuses=StatusList(bytes(sts))))
    return make


class TestNegotiation(unittest.TestCase):

    def setUp(self):
        no_protocol_env(self)

    def fake(self, **kw):
        f = Fake(kw.pop("script", None), **kw)
        self.addCleanup(f.close)
        return f

    def test_a_version_2_daemon(self):
        f = self.fake()
        with Client(f.path, timeout=HANG_GUARD) as c:
            self.assertEqual((c.version, c.hello.version, c.hello.versions),
                             (2, 2, 0b110))
        self.assertEqual(f.hellos, [2])
        self.assertIsNone(f.error)

    def test_falls_back_to_version_1(self):
        log = []
        f = self.fake(versions=(1,), script=_serve([
            _results(MessageType.RESERVE_WRITE, [0, 0], [7, 8], version=1),
            _statuses(MessageType.FINISH_WRITE, [0, 0])], log))
        with Client(f.path, timeout=HANG_GUARD) as c:
            self.assertEqual((c.version, c.hello.versions), (1, 0))
            res = c.reserve_write(KB, 4096)
            self.assertEqual(list(c.finish_write(KB, res)), [OK, OK])
        self.assertEqual(f.hellos, [2, 1])
        # Version 1's frames: by key, no handles flag.
        self.assertEqual([(q.flags, q.handles, len(q.keys)) for q in log],
                         [(0, [], 2), (0, [], 2)])
        self.assertIsNone(f.error)

    def test_protocol_1_asks_for_1(self):
        f = self.fake()
        with Client(f.path, timeout=HANG_GUARD, protocol=1) as c:
            self.assertEqual((c.version, c.hello.versions), (1, 0))
        self.assertEqual(f.hellos, [1])

    def test_no_version_in_common(self):
        f = self.fake(versions=())
        with self.assertRaises(DaemonError) as cm:
            Client(f.path, timeout=HANG_GUARD)
        self.assertEqual(cm.exception.code, Code.BAD_VERSION)
        self.assertEqual(f.hellos, [2, 1])

    def test_protocol_2_insists(self):
        f = self.fake(versions=(1,))
        with self.assertRaises(DaemonError) as cm:
            Client(f.path, timeout=HANG_GUARD, protocol=2)
        self.assertEqual(cm.exception.code, Code.BAD_VERSION)
        self.assertEqual(f.hellos, [2])

    def test_the_environment_sets_the_version(self):
        # $KVALLOC_PROTOCOL_VERSION, as for the Go client: 1 asks for 1,
        # 2 insists on 2; an explicit protocol wins.
        for env, protocol, hellos, version in (
                ("1", None, [1], 1), ("2", None, [2], 2),
                ("", None, [2], 2), ("2", 1, [1], 1), ("1", 2, [2], 2)):
            with self.subTest(env=env, protocol=protocol):
                f = self.fake()
                os.environ[PROTOCOL_ENV] = env
                with Client(f.path, timeout=HANG_GUARD,
                            protocol=protocol) as c:
                    self.assertEqual(c.version, version)
                self.assertEqual(f.hellos, hellos)
        f = self.fake(versions=(1,))
        os.environ[PROTOCOL_ENV] = "2"
        with self.assertRaises(DaemonError):
            Client(f.path, timeout=HANG_GUARD)
        self.assertEqual(f.hellos, [2])

    def test_a_bad_protocol_is_refused_before_connecting(self):
        f = self.fake()
        for p in (0, 3, "2", 2.0, True):
            with self.subTest(protocol=p):
                with self.assertRaises(InvalidArgumentError):
                    Client(f.path, timeout=HANG_GUARD, protocol=p)
        for v in ("0", "3", "v2", " 1"):
            with self.subTest(env=v):
                os.environ[PROTOCOL_ENV] = v
                with self.assertRaises(InvalidArgumentError) as cm:
                    Client(f.path, timeout=HANG_GUARD)
                self.assertIn(PROTOCOL_ENV, str(cm.exception))
        self.assertEqual(f.hellos, [])

    def test_the_fallback_keeps_the_deadline(self):
        # The version 1 hello's answer never comes: the connect's deadline
        # covers both connections.
        f = self.fake(versions=(1,), hello=b"", fd=False, script=_stall)
        t = time.monotonic()
        with self.assertRaises(DeadlineExceededError):
            Client(f.path, timeout=DEADLINE)
        self.assertLess(time.monotonic() - t, HANG_GUARD)
        self.assertEqual(f.hellos, [2, 1])


class TestCallsByHandle(unittest.TestCase):
    """Which frames a version 2 client sends, seen by the fake."""

    def run_script(self, steps, calls, protocol=2):
        log = []
        f = Fake(_serve(steps, log))
        self.addCleanup(f.close)
        with Client(f.path, timeout=HANG_GUARD, protocol=protocol) as c:
            out = calls(c)
        self.assertIsNone(f.error)
        return log, out

    def test_finish_write_by_handle_then_by_key(self):
        T = MessageType

        def calls(c):
            res = c.reserve_write(KB, 4096)
            self.assertEqual(list(res.handles), [5, 9])
            a = c.finish_write(KB, res)
            # The records are gone: the same call again goes by key.
            b = c.finish_write(KB, res)
            return list(a), list(b)
        log, out = self.run_script([
            _results(T.RESERVE_WRITE, [5, 9], [7, 8]),
            _statuses(T.FINISH_WRITE, [0, 0]),
            _statuses(T.FINISH_WRITE, [32, 32])], calls)
        self.assertEqual(out, ([OK, OK], [Status.NOT_OWNER] * 2))
        fin, again = log[1], log[2]
        self.assertEqual((fin.flags, fin.handles, fin.leases, fin.keys),
                         (Flag.HANDLES, [5, 9], [7, 8], []))
        self.assertEqual((again.flags, again.handles, again.leases),
                         (0, [], [7, 8]))
        self.assertEqual(list(again.keys), list(KB))

    def test_a_lease_not_held_goes_by_key(self):
        T = MessageType

        def calls(c):
            res = c.reserve_write(KB, 4096)
            c.abort_write(KB, [7, 99])  # 99: no record under that lease
            c.abort_write(KB.subset([0]), [7])
        log, _ = self.run_script([
            _results(T.RESERVE_WRITE, [5, 9], [7, 8]),
            _statuses(T.ABORT_WRITE, [0, 32]),
            _statuses(T.ABORT_WRITE, [32])], calls)
        self.assertEqual([(q.flags, q.handles) for q in log[1:]],
                         [(0, []), (0, [])])

    def test_reads_by_handle_until_the_last_lock(self):
        T = MessageType

        def calls(c):
            r = c.reserve_read(KB, locks=3)
            c.finish_read(KB, r, locks=2)    # 1 left each: by handle
            c.finish_read(KB, r, locks=2)    # OVER_RELEASE: kept
            c.finish_read(KB, r, locks=1)    # the last: by handle
            c.finish_read(KB, r, locks=1)    # gone: by key
        log, _ = self.run_script([
            _results(T.RESERVE_READ, [3, 4], [20, 21]),
            _statuses(T.FINISH_READ, [0, 0]),
            _statuses(T.FINISH_READ, [33, 33]),
            _statuses(T.FINISH_READ, [0, 0]),
            _statuses(T.FINISH_READ, [32, 32])], calls)
        self.assertEqual([(q.flags, q.handles, q.locks) for q in log[1:]],
                         [(Flag.HANDLES, [3, 4], 2),
                          (Flag.HANDLES, [3, 4], 2),
                          (Flag.HANDLES, [3, 4], 1), (0, [], 1)])

    def test_a_refused_finish_read_drops_the_record(self):
        T = MessageType

        def calls(c):
            r = c.reserve_read(KB, locks=2)
            c.finish_read(KB, r)    # STALE_LEASE for key 0, OK for key 1
            c.finish_read(KB.subset([1]), r.select([1]))  # by handle
            c.finish_read(KB.subset([0]), r.select([0]))  # by key
        log, _ = self.run_script([
            _results(T.RESERVE_READ, [3, 4], [20, 21]),
            _statuses(T.FINISH_READ, [7, 0]),
            _statuses(T.FINISH_READ, [0]),
            _statuses(T.FINISH_READ, [32])], calls)
        self.assertEqual([q.handles for q in log[1:]], [[3, 4], [4], []])

    def test_delete_by_handle_keeps_the_record(self):
        T = MessageType

        def calls(c):
            w = c.reserve_write(KB, 4096)
            c.delete(KB, force=True)
            c.delete(KB.subset([1]))
            c.abort_write(KB, w)
            c.delete(KB, force=True)
        log, _ = self.run_script([
            _results(T.RESERVE_WRITE, [5, 9], [7, 8]),
            _statuses(T.DELETE, [0, 0]),
            _statuses(T.DELETE, [1]),
            _statuses(T.ABORT_WRITE, [0, 0]),
            _statuses(T.DELETE, [1, 1])], calls)
        self.assertEqual([(q.type, q.flags, q.handles, q.leases)
                          for q in log[1:]],
                         [(T.DELETE, Flag.HANDLES | Flag.FORCE, [5, 9],
                           [7, 8]),
                          (T.DELETE, Flag.HANDLES, [9], [8]),
                          (T.ABORT_WRITE, Flag.HANDLES, [5, 9], [7, 8]),
                          (T.DELETE, Flag.FORCE, [], [])])

    def test_finish_write_and_reserve_read(self):
        T = MessageType

        def calls(c):
            w = c.reserve_write(KB, 4096)
            rr = c.finish_write_and_reserve_read(KB, w, locks=2)
            # Key 1 was past the cut: its write record stays; key 0's read
            # record is new.
            c.abort_write(KB.subset([1]), w.select([1]))
            c.finish_read(KB.subset([0]), rr.select([0]), locks=2)

        def fwrr(q):
            return encode_answer(Answer(
                T.FINISH_WRITE_AND_RESERVE_READ, q.id, Code.OK, EPOCH,
                results=Results.from_list([
                    Result(0, 0, 4096, 1, 30, 6),
                    Result(Status.OVER_LIMIT, 0, 0, 0, 0, 0)])), version=2)
        log, _ = self.run_script([
            _results(T.RESERVE_WRITE, [5, 9], [7, 8]), fwrr,
            _statuses(T.ABORT_WRITE, [0]),
            _statuses(T.FINISH_READ, [0])], calls)
        self.assertEqual([(q.handles, q.leases, q.locks) for q in log[1:]],
                         [([5, 9], [7, 8], 2), ([9], [8], 0),
                          ([6], [30], 2)])

    def test_a_refused_call_forgets_its_records(self):
        T = MessageType

        def calls(c):
            w = c.reserve_write(KB, 4096)
            with self.assertRaises(DaemonError):
                c.finish_write(KB, w)
            c.finish_write(KB, w)

        def internal(q):
            return encode_answer(Answer(T.FINISH_WRITE, q.id, Code.INTERNAL,
                                        EPOCH, message="broken"))
        log, _ = self.run_script([
            _results(T.RESERVE_WRITE, [5, 9], [7, 8]), internal,
            _statuses(T.FINISH_WRITE, [0, 0])], calls)
        self.assertEqual([q.handles for q in log[1:]], [[5, 9], []])

    def test_version_1_never_sends_a_handle(self):
        # A version 1 connection sees no handle (the fake's results carry
        # none) and sends every finishing call by key.
        T = MessageType

        def calls(c):
            self.assertEqual(c.version, 1)
            w = c.reserve_write(KB, 4096)
            c.finish_write(KB, w)
        log, _ = self.run_script([
            _results(T.RESERVE_WRITE, [0, 0], [7, 8], version=1),
            _statuses(T.FINISH_WRITE, [0, 0])], calls, protocol=1)
        self.assertEqual([(q.flags, q.handles) for q in log], [(0, [])] * 2)


if __name__ == "__main__":
    unittest.main()
