"""Blocks as numpy arrays and torch tensors over the same memory.

numpy and torch are optional: the tests that need the real library run
where it is installed (make PYTHON=/usr/bin/python3 with Debian's
python3-numpy, for example) and say they were skipped elsewhere; the
plumbing and the missing-library error are tested everywhere. With
KVALLOC_TENSORS_REQUIRED=1 (make engine-test, in the engine's venv, which
has both) they never skip: a missing library fails them.
"""

import importlib.util
import os
import sys
import types
import unittest
from unittest import mock

from kvalloc import as_numpy, as_tensor

from helpers import DaemonTest, keys

REQUIRED = os.environ.get("KVALLOC_TENSORS_REQUIRED") == "1"
HAVE_NUMPY = REQUIRED or importlib.util.find_spec("numpy") is not None
HAVE_TORCH = REQUIRED or importlib.util.find_spec("torch") is not None


class TestTensors(DaemonTest):

    def block(self, c, size=1 << 20):
        kb = keys(1, "tensor")
        res = c.reserve_write(kb, size)
        self.assertTrue(res.all_ok())
        return kb, res, c.view(res, 0)

    @unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
    def test_numpy_aliases_the_pool(self):
        import numpy
        with self.daemon.client() as c:
            kb, res, v = self.block(c)
            a = as_numpy(v, numpy.float16, (256, 2048))
            self.assertEqual(a.shape, (256, 2048))
            a[0, 0], a[-1, -1] = 1.5, -2.0
            self.assertEqual(bytes(v[:2]),
                             numpy.float16(1.5).tobytes())
            self.assertEqual(bytes(v[-2:]),
                             numpy.float16(-2.0).tobytes())
            off = res.offsets[0]
            self.assertEqual(bytes(c.pool[off:off + 2]),
                             numpy.float16(1.5).tobytes())
            del a
            c.finish_write(kb, res)

    @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
    def test_torch_aliases_the_pool(self):
        import torch
        with self.daemon.client() as c:
            kb, res, v = self.block(c)
            t = as_tensor(v, torch.bfloat16, (512, 1024))
            t[0, 0] = 3.0
            self.assertEqual(bytes(v[:2]),
                             torch.tensor([3.0], dtype=torch.bfloat16)
                             .view(torch.uint8).numpy().tobytes())
            del t
            c.finish_write(kb, res)

    def test_torch_plumbing(self):
        # A stand-in torch: the helper hands it the block itself.
        seen = {}

        def frombuffer(buf, dtype):
            seen["buf"], seen["dtype"] = buf, dtype
            return types.SimpleNamespace(reshape=lambda s: ("reshaped", s))
        fake = types.SimpleNamespace(frombuffer=frombuffer, uint8="u8")
        with self.daemon.client() as c, \
                mock.patch.dict(sys.modules, {"torch": fake}):
            kb, res, v = self.block(c)
            self.assertEqual(as_tensor(v, shape=[2, 3]),
                             ("reshaped", (2, 3)))
            self.assertIs(seen["buf"], v)
            self.assertEqual(seen["dtype"], "u8")
            c.abort_write(kb, res)

    def test_missing_libraries(self):
        with mock.patch.dict(sys.modules, {"numpy": None, "torch": None}):
            with self.assertRaisesRegex(ImportError, "needs numpy"):
                as_numpy(memoryview(b"x"))
            with self.assertRaisesRegex(ImportError, "needs torch"):
                as_tensor(memoryview(b"x"))


if __name__ == "__main__":
    unittest.main()
