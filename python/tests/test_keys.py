"""KeyBatch against a plain encoder of PROTOCOL.md's keys block."""

import random
import struct
import unittest

from kvalloc import InvalidArgumentError, KeyBatch, MessageType, ObjectKey
from kvalloc.protocol import decode_request, keyed_request


def reference_block(keys, table=None):
    """The keys block, field by field, canonical unless ``table`` is given."""
    if table is None:
        table = []
        for k in keys:
            for s in (k.model, k.cache_salt):
                if s not in table:
                    table.append(s)
    out = struct.pack("<IHH", len(keys), len(table), 0)
    for s in table:
        b = s.encode()
        out += struct.pack("<H", len(b)) + b
    for k in keys:
        out += struct.pack("<HHHHII", len(k.chunk_hash), table.index(k.model),
                           table.index(k.cache_salt), 0, k.kv_rank,
                           k.group_id) + k.chunk_hash
    return out, table


def random_keys(rng, n, uniform):
    models = ["llama", "qwen", ""] if not uniform else ["llama"]
    salts = ["", "tenant-a", "llama"] if not uniform else [rng.choice(
        ["", "s", "llama"])]
    hlen = rng.choice([0, 1, 16, 32])
    rank, group = rng.randrange(1 << 32), rng.randrange(1 << 32)
    out = []
    for _ in range(n):
        if not uniform:
            hlen = rng.choice([0, 1, 16, 32])
            rank, group = rng.randrange(1 << 32), rng.randrange(1 << 32)
        out.append(ObjectKey(rng.randbytes(hlen), rng.choice(models), rank,
                             group, rng.choice(salts)))
    return out


class TestKeyBatch(unittest.TestCase):

    def test_against_the_reference(self):
        rng = random.Random(7)
        for trial in range(300):
            uniform = trial % 2 == 0
            keys = random_keys(rng, rng.randrange(0, 40), uniform)
            kb = KeyBatch(keys)
            want, table = reference_block(keys)
            self.assertEqual(kb.block, want, (uniform, keys))
            idx = [rng.randrange(len(keys)) for _ in range(
                rng.randrange(0, 10))] if keys else []
            sub = kb.subset(idx)
            self.assertEqual(list(sub), [keys[i] for i in idx])
            self.assertEqual(sub.block,
                             reference_block([keys[i] for i in idx],
                                             table)[0])
            frame = keyed_request(MessageType.TOUCH, 1, 2, sub)
            self.assertEqual(decode_request(frame).keys,
                             [keys[i] for i in idx])

    def test_negative_and_bad_indices(self):
        kb = KeyBatch(random_keys(random.Random(1), 5, True))
        self.assertEqual(list(kb.subset([-1])), [kb[4]])
        with self.assertRaises(IndexError):
            kb.subset([5])
        with self.assertRaises(IndexError):
            kb.subset([-6])

    def test_a_uniform_batch_with_one_bad_value(self):
        good = ObjectKey(b"x" * 32, "m", 1, 2, "")
        for bad in (ObjectKey(b"x" * 32, "m", 1 << 32, 2, ""),
                    ObjectKey("x" * 32, "m", 1, 2, ""),
                    ObjectKey(bytearray(32), "m", 1, 2, ""),
                    (b"x" * 32, "m", 1, 2, "", "extra"),
                    ObjectKey(b"x" * 4097, "m", 1, 2, "")):
            with self.subTest(bad=bad[:1] + bad[1:]):
                try:
                    kb = KeyBatch([good, bad])
                except InvalidArgumentError as e:
                    self.assertIn("key 1", str(e))
                    continue
                # A bytearray hash is fine: it encodes as bytes.
                self.assertEqual(kb.block,
                                 reference_block([good, ObjectKey(
                                     bytes(bad[0]), *bad[1:])])[0])


if __name__ == "__main__":
    unittest.main()
