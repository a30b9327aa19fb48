"""kvalloc.vllm.identity: the key's model field, stable hashes, the
loadable blocks. Standard library only: needs neither vLLM nor torch."""

import os
import subprocess
import sys
import tempfile
import unittest

from kvalloc.vllm import identity as ident

BASE = dict(identity="tiny@1", vllm_version="0.32.0", backend="cpu:None",
            kv_layout="", cache_dtype="auto", block_size=32, num_layers=2,
            group_specs=["FullAttentionSpec(block_size=32, num_kv_heads=2, "
                         "head_size=64, dtype=torch.float32)"],
            tp_size=1, pp_size=1, hash_algo="sha256")


class TestModelField(unittest.TestCase):

    def test_same_config_same_field(self):
        a = ident.model_field(ident.layout_descriptor(**BASE))
        b = ident.model_field(ident.layout_descriptor(**dict(BASE)))
        self.assertEqual(a, b)
        self.assertTrue(a.startswith("tiny@1@"), a)

    def test_every_field_changes_it(self):
        base = ident.model_field(ident.layout_descriptor(**BASE))
        changes = dict(identity="tiny@2", vllm_version="0.33.0",
                       backend="cpu:CPU_ATTN", kv_layout="LBNHC",
                       cache_dtype="fp8", block_size=64, num_layers=3,
                       group_specs=["FullAttentionSpec(block_size=32, "
                                    "num_kv_heads=4, head_size=64, "
                                    "dtype=torch.float32)"],
                       tp_size=2, pp_size=2, hash_algo="sha256_cbor")
        seen = {base}
        for k, v in changes.items():
            d = dict(BASE, **{k: v})
            f = ident.model_field(ident.layout_descriptor(**d))
            self.assertNotIn(f, seen, f"changing {k} kept the field")
            seen.add(f)
        f = ident.model_field(ident.layout_descriptor(
            **BASE, extra={"load_format": "dummy"}))
        self.assertNotIn(f, seen)

    def test_long_identity_is_cut_not_the_digest(self):
        d = ident.layout_descriptor(**dict(BASE, identity="x" * 5000))
        f = ident.model_field(d)
        self.assertLess(len(f), 300)
        d2 = ident.layout_descriptor(**dict(BASE, identity="x" * 4999 + "y"))
        self.assertNotEqual(f, ident.model_field(d2))


class TestWeightsIdentity(unittest.TestCase):

    def write(self, d, files):
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)

    def test_path_free_content_bound(self):
        files = {"config.json": b'{"a": 1}', "model.safetensors": b"w" * 100,
                 "README.md": b"ignored"}
        with tempfile.TemporaryDirectory() as a, \
                tempfile.TemporaryDirectory() as b:
            self.write(a, files)
            self.write(b, dict(files, **{"README.md": b"other"}))
            ia, ib = ident.weights_identity(a), ident.weights_identity(b)
            self.assertEqual(ia, ib)          # another directory, same model
            self.assertNotIn(a, ia)
            self.write(b, {"model.safetensors": b"w" * 99 + b"x"})
            self.assertNotEqual(ia, ident.weights_identity(b))
            self.assertNotEqual(ia, ident.weights_identity(a, '{"x":1}'))

    def test_no_weights_is_an_error(self):
        with tempfile.TemporaryDirectory() as a:
            self.write(a, {"config.json": b"{}"})
            with self.assertRaisesRegex(ValueError, "model_id"):
                ident.weights_identity(a)


class TestStableHashes(unittest.TestCase):

    def test_sha256_is_stable_without_seed(self):
        self.assertIn("fixed seed", ident.check_stable_hashes("sha256", {}))
        self.assertIn("fixed seed",
                      ident.check_stable_hashes("sha256_cbor", {}))

    def test_xxhash_needs_pythonhashseed(self):
        for algo in ("xxhash", "xxhash_cbor"):
            with self.assertRaisesRegex(ident.UnstableHashError,
                                        "PYTHONHASHSEED"):
                ident.check_stable_hashes(algo, {})
            self.assertEqual(ident.check_stable_hashes(
                algo, {"PYTHONHASHSEED": "0"}), "PYTHONHASHSEED=0")

    def test_random_seed_refused(self):
        with self.assertRaisesRegex(ident.UnstableHashError, "random"):
            ident.check_stable_hashes("sha256", {"PYTHONHASHSEED": "random"})


class TestLoadable(unittest.TestCase):

    def test_last_token_and_partial_block(self):
        bs = 16
        # 64 tokens: the block holding token 63 is computed.
        self.assertEqual(ident.loadable_blocks(4, 64, bs), 3)
        # 65 tokens: 4 full blocks, the 65th token in a partial one.
        self.assertEqual(ident.loadable_blocks(4, 65, bs), 4)
        # Never more than the hashes vLLM computed.
        self.assertEqual(ident.loadable_blocks(2, 65, bs), 2)
        self.assertEqual(ident.loadable_blocks(0, 65, bs), 0)
        self.assertEqual(ident.loadable_blocks(5, 1, bs), 0)
        self.assertEqual(ident.loadable_blocks(5, 0, bs), 0)
        self.assertEqual(ident.loadable_blocks(1, 17, bs), 1)
        self.assertEqual(ident.loadable_blocks(1, 16, bs), 0)

    def test_ranks(self):
        self.assertEqual(ident.ranks(2, 2), [0, 1, 2, 3])
        self.assertEqual(ident.rank_of(1, 2, 1), 3)


class TestImport(unittest.TestCase):

    def test_identity_needs_neither_vllm_nor_torch(self):
        code = ("import sys, kvalloc, kvalloc.vllm.identity; "
                "print('vllm' in sys.modules, 'torch' in sys.modules)")
        out = subprocess.run([sys.executable, "-c", code],
                             capture_output=True, text=True, check=True,
                             cwd=os.path.join(os.path.dirname(__file__), ".."))
        self.assertEqual(out.stdout.split(), ["False", "False"])


if __name__ == "__main__":
    unittest.main()
