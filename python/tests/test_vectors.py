"""The Python codec against the conformance vectors, and that they bite."""

import copy
import unittest

from kvalloc.enums import Code, Flag, MessageType

from vectors import VectorMismatch, check_vector, load


class TestVectors(unittest.TestCase):
    """Every vector decodes, encodes and is refused as it says."""

    @classmethod
    def setUpClass(cls):
        cls.vectors = load()

    def test_every_vector(self):
        for v in self.vectors:
            with self.subTest(v["name"]):
                check_vector(v)

    def test_every_type_both_ways(self):
        seen = {(v["kind"], v["message"]["type"])
                for v in self.vectors if "message" in v}
        for t in MessageType:
            if t is MessageType.ANSWER:
                continue
            for kind in ("request", "answer"):
                self.assertIn((kind, t.wire_name), seen)
        refused = {v["error"] for v in self.vectors if "error" in v}
        self.assertEqual(refused, {"BAD_FRAME", "TOO_LARGE", "UNKNOWN_TYPE",
                                   "BAD_VERSION"})
        self.assertGreaterEqual(len(self.vectors), 40)

    def test_version_2_is_covered(self):
        # Every type that goes by handle has a v2_ request by handle, the
        # results answers carry handles, and the refusals of PROTOCOL.md
        # are there.
        v2 = {v["name"]: v for v in self.vectors if v.get("version") == 2}
        by_handle = {v["message"]["type"] for v in v2.values()
                     if v["kind"] == "request" and "message" in v
                     and v["message"].get("flags", 0) & Flag.HANDLES}
        self.assertEqual(by_handle, {t.wire_name for t in MessageType
                                     if t.by_handle})
        self.assertTrue(any(r.get("handle") for v in v2.values()
                            for r in v.get("message", {}).get("results", [])))
        names = {v["name"] for v in self.vectors}
        self.assertLessEqual({"v2_hello", "v2_hello_answer",
                              "bad_v1_handles_flag", "bad_v1_result_handle",
                              "bad_v2_hello_version_3"}, names)
        self.assertGreaterEqual(sum(n.startswith("bad_v2_") for n in names),
                                5)


class TestVectorsBite(unittest.TestCase):
    """A changed byte, field or code of any vector fails the check."""

    @classmethod
    def setUpClass(cls):
        cls.vectors = load()

    def assertMismatch(self, v):
        with self.assertRaises(VectorMismatch, msg=v["name"]):
            check_vector(v)

    def test_every_byte_of_every_valid_frame(self):
        flips = 0
        for v in self.vectors:
            if "error" in v:
                continue
            frame = bytes.fromhex(v["frame"])
            for i in range(len(frame)):
                for x in (0x01, 0x80):
                    b = bytearray(frame)
                    b[i] ^= x
                    w = dict(v, frame=b.hex())
                    with self.subTest(v["name"], byte=i, xor=x):
                        self.assertMismatch(w)
                    flips += 1
        self.assertGreater(flips, 5000)

    def test_a_dropped_or_added_byte(self):
        for v in self.vectors:
            if "error" in v:
                continue
            frame = bytes.fromhex(v["frame"])
            with self.subTest(v["name"], edit="drop"):
                self.assertMismatch(dict(v, frame=frame[:-1].hex()))
            with self.subTest(v["name"], edit="add"):
                self.assertMismatch(dict(v, frame=(frame + b"\0").hex()))

    def test_every_message_field(self):
        for v in self.vectors:
            if "error" in v:
                continue
            for path in _leaves(v["message"]):
                w = copy.deepcopy(v)
                _bump(w["message"], path)
                with self.subTest(v["name"], field=path):
                    self.assertMismatch(w)

    def test_every_refusal_code(self):
        for v in self.vectors:
            if "error" not in v:
                continue
            for c in Code:
                if c.name == v["error"]:
                    continue
                with self.subTest(v["name"], code=c.name):
                    self.assertMismatch(dict(v, error=c.name))

    def test_every_refused_frame_made_good(self):
        ping = {v["kind"]: v["frame"] for v in self.vectors
                if v["name"] in ("ping", "ping_answer")}
        for v in self.vectors:
            if "error" in v:
                with self.subTest(v["name"]):
                    self.assertMismatch(dict(v, frame=ping[v["kind"]]))

    def test_every_version_2_vector_needs_version_2(self):
        # Each v2_ entry of what version 2 adds (a hello of version 2, a
        # call by handle, versions, a result's handle) is refused, or
        # decodes to another message, under version 1's rules.
        n = 0
        for v in self.vectors:
            m = v.get("message", {})
            if v.get("version") != 2 or not (
                    m.get("version") == 2 or m.get("flags", 0) & Flag.HANDLES
                    or m.get("hello", {}).get("versions")
                    or any(r.get("handle") for r in m.get("results", []))):
                continue
            n += 1
            with self.subTest(v["name"]):
                self.assertMismatch(dict(v, version=1))
        self.assertGreaterEqual(n, 10)


def _leaves(m, path=()):
    if isinstance(m, dict):
        for k, x in m.items():
            yield from _leaves(x, path + (k,))
    elif isinstance(m, list):
        for i, x in enumerate(m):
            yield from _leaves(x, path + (i,))
    else:
        yield path


def _bump(m, path):
    for p in path[:-1]:
        m = m[p]
    x = m[path[-1]]
    if isinstance(x, bool):
        m[path[-1]] = not x
    elif isinstance(x, int):
        m[path[-1]] = x + 1 if x < (1 << 63) - 1 else x - 1
    elif path[-1] == "chunk_hash":
        m[path[-1]] = x + "00"
    elif path[-1] in ("status", "code") or isinstance(path[-1], int):
        m[path[-1]] = "OK" if x != "OK" else "KEY_NOT_EXIST"
    elif path[-1] == "type":
        m[path[-1]] = "ping" if x != "ping" else "stats"
    else:
        m[path[-1]] = x + "x"


if __name__ == "__main__":
    unittest.main()
