"""Version 2's frames, byte for byte from PROTOCOL.md ("Version 2: key
handles"), and what version 1's codec refuses of them.

The conformance vectors (test_vectors.py) check the same codec against the
Go codec's bytes; these are laid out here by hand, field by field, from
the tables of PROTOCOL.md, so that each rule is checked on its own.
"""

import random
import struct
import unittest

from kvalloc import Code, FrameError, InvalidArgumentError, MessageType
from kvalloc.enums import Flag, Status
from kvalloc.keys import ObjectKey
from kvalloc.limits import MAX_KEYS
from kvalloc.protocol import (Request, decode_answer, decode_request,
                              encode_answer, encode_request, handle_request,
                              simple_request)
from kvalloc.results import Hello, Result

T = MessageType
EPOCH = 0x0123456789ABCDEF


def header(size, t, id_=7, code=0, epoch=EPOCH):
    return struct.pack("<IHHIIQ", size, t, 0, id_, code, epoch)


def by_handle(t, handles, leases, locks=0, flags=Flag.HANDLES, n=None,
              reserved=0, size=0, mode=0):
    """A call by handle laid out from the spec's table."""
    n = len(handles) if n is None else n
    body = (struct.pack("<qIBBxx", size, locks, mode, flags)
            + struct.pack("<II", n, reserved)
            + struct.pack(f"<{len(handles)}I", *handles)
            + struct.pack(f"<{len(leases)}Q", *leases))
    return header(24 + len(body), t) + body


def result(status, handle, offset=0, size=0, gen=0, lease=0, r=b"\0\0\0"):
    return struct.pack("<B", status) + r + struct.pack(
        "<IqqQQ", handle, offset, size, gen, lease)


def results_answer(t, records, prefix=0):
    body = struct.pack("<II", len(records), prefix) + b"".join(records)
    return header(24 + len(body), 0x8000 | t) + body


class TestRequestsByHandle(unittest.TestCase):

    def test_the_examples_layout(self):
        # PROTOCOL.md's example: finish_write by handle [1, 2], leases
        # [100, 101]. The body is 24 + 12n bytes, the frame 48 + 12n.
        f = by_handle(T.FINISH_WRITE, [1, 2], [100, 101])
        self.assertEqual(len(f), 48 + 12 * 2)
        q = decode_request(f, version=2)
        self.assertEqual((q.type, q.id, q.epoch, q.flags, q.handles,
                          q.leases, q.keys),
                         (T.FINISH_WRITE, 7, EPOCH, Flag.HANDLES, [1, 2],
                          [100, 101], []))
        self.assertEqual(encode_request(q, version=2), f)
        self.assertEqual(handle_request(
            T.FINISH_WRITE, 7, EPOCH, 2, struct.pack("<2I", 1, 2),
            struct.pack("<2Q", 100, 101)), f)

    def test_every_type_that_takes_handles(self):
        cases = [
            (T.FINISH_WRITE, 0, Flag.HANDLES),
            (T.ABORT_WRITE, 0, Flag.HANDLES),
            (T.FINISH_WRITE_AND_RESERVE_READ, 3, Flag.HANDLES),
            (T.FINISH_READ, 128, Flag.HANDLES),
            (T.DELETE, 0, Flag.HANDLES),
            (T.DELETE, 0, Flag.HANDLES | Flag.FORCE),
        ]
        for t, locks, flags in cases:
            with self.subTest(t=t.wire_name, flags=int(flags)):
                f = by_handle(t, [1, 0xFFFFFFFF, 0], [5, 2 ** 64 - 1, 0],
                              locks=locks, flags=flags)
                q = decode_request(f, version=2)
                self.assertEqual((q.locks, q.flags, q.handles, q.leases),
                                 (locks, flags, [1, 0xFFFFFFFF, 0],
                                  [5, 2 ** 64 - 1, 0]))
                self.assertEqual(encode_request(q, version=2), f)
                self.assertEqual(handle_request(
                    t, 7, EPOCH, 3, struct.pack("<3I", *q.handles),
                    struct.pack("<3Q", *q.leases), locks, flags), f)
                # Version 1: 0x10 is an undefined flag.
                with self.assertRaises(FrameError) as cm:
                    decode_request(f)
                self.assertEqual(cm.exception.code, Code.BAD_FRAME)
                with self.assertRaises(InvalidArgumentError):
                    encode_request(q)

    def test_no_handles_is_a_valid_call(self):
        f = by_handle(T.FINISH_READ, [], [], locks=1)
        self.assertEqual(len(f), 48)
        q = decode_request(f, version=2)
        self.assertEqual((q.handles, q.leases, q.flags),
                         ([], [], Flag.HANDLES))
        self.assertEqual(encode_request(Request(
            T.FINISH_READ, 7, EPOCH, locks=1, flags=Flag.HANDLES),
            version=2), f)

    def refused(self, f, version=2, code=Code.BAD_FRAME):
        with self.assertRaises(FrameError) as cm:
            decode_request(f, version)
        self.assertEqual(cm.exception.code, code, cm.exception)

    def test_malformed_calls_by_handle(self):
        t = T.FINISH_WRITE
        good = by_handle(t, [1, 2], [100, 101])
        cases = {
            "count past MaxKeys": by_handle(t, [1], [1], n=MAX_KEYS + 1),
            "count over the body": by_handle(t, [1, 2], [100, 101], n=3),
            "count under the body": by_handle(t, [1, 2], [100, 101], n=1),
            "a lease missing": by_handle(t, [1, 2], [100]),
            "a lease too many": by_handle(t, [1], [100, 101]),
            "reserved field": by_handle(t, [1], [1], reserved=1),
            "unused size": by_handle(t, [1], [1], size=1),
            "unused locks": by_handle(t, [1], [1], locks=1),
            "unused mode": by_handle(t, [1], [1], mode=1),
            "the force flag off delete": by_handle(
                t, [1], [1], flags=Flag.HANDLES | Flag.FORCE),
            "flag 0x10 on reserve_read": by_handle(
                T.RESERVE_READ, [1], [1], locks=1),
            "flag 0x10 on touch": by_handle(T.TOUCH, [1], [1]),
            "flag 0x10 on lookup": by_handle(T.LOOKUP, [1], [1]),
            "flag 0x10 on reserve_write": by_handle(
                T.RESERVE_WRITE, [1], [1], size=1),
            "a trailing byte": good[:0] + struct.pack(
                "<I", len(good) + 1) + good[4:] + b"\0",
            "truncated": struct.pack("<I", len(good) - 1) + good[4:-1],
            "no handles block": struct.pack("<I", 40) + good[4:40],
        }
        for name, f in cases.items():
            with self.subTest(name):
                self.refused(f)

    def test_every_truncation_and_flip_is_refused_or_decoded(self):
        # Every length is checked before use: no prefix or one-byte change
        # of a frame by handle raises anything but FrameError.
        f = by_handle(T.FINISH_READ, [3, 4, 5], [9, 8, 7], locks=2)
        for i in range(len(f)):
            with self.subTest(prefix=i):
                cut = struct.pack("<I", i) + f[4:i] if i >= 4 else f[:i]
                with self.assertRaises(FrameError):
                    decode_request(cut, version=2)
        rnd = random.Random(2)
        for _ in range(3000):
            b = bytearray(f)
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            try:
                q = decode_request(bytes(b), version=2)
            except FrameError:
                continue
            self.assertEqual(encode_request(q, version=2), bytes(b))

    def test_encode_refuses_what_the_frame_cannot_say(self):
        key = ObjectKey(b"k", "m")
        for q, why in (
            (Request(T.FINISH_WRITE, handles=[1], leases=[]), "leases"),
            (Request(T.FINISH_WRITE, handles=[1], leases=[1], keys=[key]),
             "keys"),
            (Request(T.RESERVE_READ, locks=1, handles=[1], leases=[1]),
             "type"),
            (Request(T.FINISH_WRITE, handles=[2 ** 32], leases=[1]),
             "range"),
            (Request(T.FINISH_WRITE, handles=[1] * (MAX_KEYS + 1),
                     leases=[1] * (MAX_KEYS + 1)), "count"),
        ):
            with self.subTest(why):
                with self.assertRaises(InvalidArgumentError):
                    encode_request(q, version=2)

    def test_calls_by_key_stay_valid_in_version_2(self):
        key = ObjectKey(b"k", "m")
        q = Request(T.FINISH_WRITE, 7, EPOCH, keys=[key], leases=[5])
        f = encode_request(q)
        self.assertEqual(encode_request(q, version=2), f)
        self.assertEqual(decode_request(f, version=2), q)


class TestUndefinedFlags(unittest.TestCase):
    """Every flag bit a type does not define, in either version, is
    refused by the decoder and the encoder. (Before, an ``IntFlag``'s
    ``~`` kept only the defined bits under Python 3.11, and 0x20 on
    reserve_write decoded, and was dropped by the encoder.)"""

    DEFINED = {
        T.RESERVE_WRITE: Flag.TEMPORARY | Flag.POSITIONS,
        T.DELETE: Flag.FORCE, T.LOOKUP: Flag.PREFETCH | Flag.SIZES,
        T.RESERVE_READ_PREFIX_WAIT: Flag.SIZES,
    }

    def test_undefined_flag_bits_are_refused(self):
        key = ObjectKey(b"k", "m")
        for t in T:
            if not t.keyed:
                continue
            for version in (1, 2):
                ok = int(self.DEFINED.get(t, 0))
                if version == 2 and t.by_handle:
                    ok |= Flag.HANDLES
                q = Request(t, 1, EPOCH, keys=[key],
                            size=1 if t in (T.RESERVE_WRITE,
                                            T.RESERVE_READ_PREFIX_WAIT)
                            else 0,
                            locks=1 if t in (
                                T.FINISH_WRITE_AND_RESERVE_READ,
                                T.RESERVE_READ, T.RESERVE_READ_PREFIX,
                                T.RESERVE_READ_PREFIX_WAIT, T.FINISH_READ)
                            else 0,
                            leases=[1] if t.has_leases else [])
                good = encode_request(q, version)
                for bit in range(8):
                    flag = 1 << bit
                    if flag & ok:
                        continue
                    with self.subTest(t.wire_name, version=version,
                                      flag=flag):
                        f = bytearray(good)
                        f[24 + 13] = flag
                        with self.assertRaises(FrameError) as cm:
                            decode_request(bytes(f), version)
                        self.assertEqual(cm.exception.code, Code.BAD_FRAME)
                        if flag & (Flag.TEMPORARY | Flag.POSITIONS):
                            continue  # the encoder sets them by the lists
                        q.flags = flag
                        with self.assertRaises(InvalidArgumentError):
                            encode_request(q, version)
                        q.flags = 0


class TestHello(unittest.TestCase):

    def hello(self, version):
        return header(32, T.HELLO, 1, 0, 0) + b"KVAL" + \
            struct.pack("<I", version)

    def test_the_hellos_version(self):
        self.assertEqual(simple_request(T.HELLO, 1, 0, 2), self.hello(2))
        self.assertEqual(simple_request(T.HELLO, 1, 0, 1), self.hello(1))
        self.assertEqual(decode_request(self.hello(2), version=2).version, 2)
        self.assertEqual(decode_request(self.hello(1), version=2).version, 1)
        # A version 1 daemon speaks only 1; none speaks 0 or 3.
        for version, v in ((1, 2), (2, 0), (2, 3), (1, 0), (2, 2 ** 32 - 1)):
            with self.subTest(codec=version, hello=v):
                with self.assertRaises(FrameError) as cm:
                    decode_request(self.hello(v), version)
                self.assertEqual(cm.exception.code, Code.BAD_VERSION)

    def test_the_answers_versions(self):
        body = struct.pack("<IIIIqq", 2, MAX_KEYS, 16 << 20, 0b110, 45 << 30,
                           4096)
        f = header(24 + len(body), 0x8001, 1) + body
        a = decode_answer(f, version=2)
        self.assertEqual(a.hello, Hello(2, MAX_KEYS, 16 << 20, 45 << 30,
                                        4096, 0b110))
        self.assertEqual(encode_answer(a, version=2), f)
        # Version 1: the field is reserved.
        with self.assertRaises(FrameError) as cm:
            decode_answer(f)
        self.assertEqual(cm.exception.code, Code.BAD_FRAME)
        with self.assertRaises(InvalidArgumentError):
            encode_answer(a)


class TestResultsWithHandles(unittest.TestCase):

    def test_the_handle_is_bytes_4_to_7(self):
        f = results_answer(T.RESERVE_WRITE, [
            result(0, 0xA1B2C3D4, 4096, 8192, 3, 100),
            result(Status.OUT_OF_MEMORY, 0)])
        self.assertEqual(f[24 + 8 + 4:24 + 8 + 8], b"\xd4\xc3\xb2\xa1")
        a = decode_answer(f, version=2)
        self.assertEqual(list(a.results), [
            Result(Status.OK, 4096, 8192, 3, 100, 0xA1B2C3D4),
            Result(Status.OUT_OF_MEMORY, 0, 0, 0, 0, 0)])
        self.assertEqual(list(a.results.handles), [0xA1B2C3D4, 0])
        self.assertEqual(list(a.results.select([0]).handles), [0xA1B2C3D4])
        self.assertEqual(encode_answer(a, version=2), f)
        with self.assertRaises(FrameError) as cm:
            decode_answer(f)  # version 1: reserved bytes
        self.assertEqual(cm.exception.code, Code.BAD_FRAME)
        with self.assertRaises(InvalidArgumentError):
            encode_answer(a)

    def test_every_results_type(self):
        for t in (T.RESERVE_WRITE, T.FINISH_WRITE_AND_RESERVE_READ,
                  T.RESERVE_READ, T.RESERVE_READ_PREFIX,
                  T.RESERVE_READ_PREFIX_WAIT):
            with self.subTest(t.wire_name):
                f = results_answer(t, [result(0, 9, 0, 4096, 1, 2)])
                self.assertEqual(decode_answer(f, 2).results.handles[0], 9)

    def test_refused_results(self):
        cases = {
            "reserved byte 1": [result(0, 2, r=b"\1\0\0")],
            "reserved byte 3, later": [result(0, 2),
                                       result(0, 2, r=b"\0\0\x80")],
        }
        for name, recs in cases.items():
            with self.subTest(name):
                with self.assertRaises(FrameError) as cm:
                    decode_answer(results_answer(T.RESERVE_READ, recs), 2)
                self.assertEqual(cm.exception.code, Code.BAD_FRAME)
                self.assertIn(f"result {len(recs) - 1}", str(cm.exception))

    def test_a_handle_on_a_result_not_ok(self):
        # The daemon sets none; a decoder takes the field as it comes (as
        # wire's does), and the client records only OK results.
        f = results_answer(T.RESERVE_READ, [result(Status.KEY_NOT_EXIST, 5)])
        a = decode_answer(f, 2)
        self.assertEqual(list(a.results.handles), [5])
        self.assertEqual(encode_answer(a, version=2), f)

    def test_an_answer_without_handles_decodes_in_both(self):
        f = results_answer(T.RESERVE_READ, [result(0, 0, 0, 4096, 1, 2),
                                            result(1, 0)])
        self.assertEqual(list(decode_answer(f, 1).results),
                         list(decode_answer(f, 2).results))

    def test_statuses_answers_are_version_1s(self):
        body = struct.pack("<II", 2, 0) + bytes([0, Status.NOT_OWNER])
        f = header(24 + len(body), 0x8000 | T.DELETE) + body
        self.assertEqual(list(decode_answer(f, 2).statuses),
                         [Status.OK, Status.NOT_OWNER])

    def test_a_bad_version_is_refused(self):
        for v in (0, 3, "2"):
            with self.subTest(version=v):
                with self.assertRaises(InvalidArgumentError):
                    decode_answer(header(24, 0x8002), v)
                with self.assertRaises(InvalidArgumentError):
                    encode_request(Request(T.PING), v)


if __name__ == "__main__":
    unittest.main()
