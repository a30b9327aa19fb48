"""KvallocConnector's two sides against a real kvallocd, without running a
model: vLLM's config, requests and scheduler output are stand-ins with the
fields the connector reads (vLLM 0.32's names), the KV cache is torch
tensors in the CPU backend's blocks-first layout and in others.

Run in the engine's environment (vLLM and torch), from python/:

    $KVALLOC_ENGINE_PYTHON -m unittest discover -s tests/vllm -p 'test_connector.py'
"""

import hashlib
import os
import sys
import time
import unittest
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import torch  # noqa: E402
from vllm.config import KVTransferConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import \
    KVConnectorRole  # noqa: E402

from kvalloc import KeyBatch, Mode, ObjectKey  # noqa: E402
from kvalloc.vllm import KvallocConnector  # noqa: E402
from kvalloc.vllm.identity import UnstableHashError  # noqa: E402
from kvalloc.vllm.layout import BlockLayout, LayoutError  # noqa: E402

from daemon import GIB, MIB, Daemon  # noqa: E402

BS = 32
NUM_BLOCKS = 16
LAYERS = ("model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn")


def vllm_config(socket, algo="sha256", layers=2, extra=None):
    kt = KVTransferConfig(
        kv_connector="KvallocConnector", kv_role="kv_both",
        kv_connector_module_path="kvalloc.vllm",
        kv_connector_extra_config=dict(
            {"socket": socket, "model_id": "tiny-test", "timeout": 2.0,
             "retry_interval": 0.2, "l2_wait": 0.0}, **(extra or {})))
    return SimpleNamespace(
        kv_transfer_config=kt,
        cache_config=SimpleNamespace(block_size=BS, cache_dtype="auto",
                                     prefix_caching_hash_algo=algo),
        parallel_config=SimpleNamespace(tensor_parallel_size=1,
                                        pipeline_parallel_size=1),
        model_config=SimpleNamespace(model="/nonexistent", dtype="float32",
                                     quantization=None, seed=0,
                                     revision=None),
        load_config=SimpleNamespace(load_format="auto"),
        attention_config=SimpleNamespace(backend=None))


def kv_cache_config(layers=2):
    spec = (f"FullAttentionSpec(block_size={BS}, num_kv_heads=2, "
            "head_size=64, dtype=torch.float32)")
    return SimpleNamespace(num_blocks=NUM_BLOCKS, kv_cache_groups=[
        SimpleNamespace(kv_cache_spec=spec,
                        layer_names=list(LAYERS[:layers]))])


def kv_tensors(seed=0):
    """Two layers of [blocks, kv heads, block size, 2 * head size]."""
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(NUM_BLOCKS, 2, BS, 128, generator=g)
            for n in LAYERS}


def request(rid, tokens, salt=None):
    """A stand-in vLLM Request: block hashes chain the full blocks and
    bind the salt, as vLLM's do."""
    hs, h = [], (salt or "").encode()
    for i in range(len(tokens) // BS):
        h = hashlib.sha256(h + repr(tokens[i * BS:(i + 1) * BS]).encode()
                           ).digest()
        hs.append(h)
    return SimpleNamespace(request_id=rid, block_hashes=hs,
                           num_tokens=len(tokens), prompt_token_ids=tokens,
                           all_token_ids=tokens, cache_salt=salt)


class Blocks:
    def __init__(self, ids):
        self.ids = ids

    def get_block_ids(self):
        return (list(self.ids),)


def sched_output(new=(), num_scheduled=None):
    return SimpleNamespace(
        scheduled_new_reqs=[SimpleNamespace(req_id=r, block_ids=(ids,),
                                            num_computed_tokens=c)
                            for r, ids, c in new],
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=[], resumed_req_ids=set(), new_block_ids=[],
            num_computed_tokens=[]),
        num_scheduled_tokens=num_scheduled or {})


class Engine:
    """A scheduler-side and a worker-side connector, as vLLM makes them."""

    def __init__(self, socket, kv=None, **kw):
        cfg = vllm_config(socket, **kw)
        kcc = kv_cache_config()
        self.s = KvallocConnector(cfg, KVConnectorRole.SCHEDULER, kcc)
        self.w = KvallocConnector(cfg, KVConnectorRole.WORKER, kcc)
        self.kv = kv if kv is not None else kv_tensors()
        self.w.register_kv_caches(self.kv)

    def serve(self, req, block_ids):
        """One prefill: lookup, alloc, meta, load, save. Tokens matched,
        load errors."""
        got, async_ = self.s.get_num_new_matched_tokens(req, 0)
        assert not async_
        self.s.update_state_after_alloc(req, Blocks(block_ids), got)
        meta = self.s.build_connector_meta(sched_output(
            [(req.request_id, block_ids, 0)],
            {req.request_id: req.num_tokens - got}))
        self.w.bind_connector_metadata(meta)
        self.w.start_load_kv(None)
        self.w.wait_for_save()
        self.w.clear_connector_metadata()
        errs = self.w.get_block_ids_with_load_errors()
        self.s.request_finished(req, block_ids)
        return got, errs

    def close(self):
        self.s.shutdown()
        self.w.shutdown()


def tokens(n, seed):
    return [(seed * 7919 + i * 31) % 500 + 3 for i in range(n)]


class ConnectorTest(unittest.TestCase):

    def setUp(self):
        self.daemon = Daemon(pool=4 * GIB).start()
        self.addCleanup(self.daemon.stop)

    def engine(self, **kw):
        e = Engine(self.daemon.socket, **kw)
        self.addCleanup(e.close)
        return e

    def test_save_then_load_across_engines(self):
        a = self.engine()
        req = request("r1", tokens(4 * BS, 1))
        got, errs = a.serve(req, [0, 1, 2, 3])
        self.assertEqual((got, errs), (0, set()))
        self.assertEqual(a.w._counters["blocks_saved"], 4)
        with self.daemon.client() as c:
            self.assertEqual(c.stats().objects, 4)
        # Another engine, its KV elsewhere: loads 3 blocks, not the one
        # holding the last token.
        b = self.engine(kv=kv_tensors(seed=9))
        got, errs = b.serve(request("r2", tokens(4 * BS, 1)),
                            [7, 8, 9, 10])
        self.assertEqual((got, errs), (3 * BS, set()))
        for name in LAYERS:
            for src, dst in ((0, 7), (1, 8), (2, 9)):
                self.assertTrue(torch.equal(a.kv[name][src],
                                            b.kv[name][dst]))
            self.assertFalse(torch.equal(a.kv[name][3], b.kv[name][10]))
        self.assertEqual(b.w._counters["tokens_loaded"], 3 * BS)
        self.assertEqual(b.s._counters["tokens_hit_l1"], 3 * BS)

    def test_connector_stats(self):
        a = self.engine()
        a.serve(request("r1", tokens(4 * BS, 16)), [0, 1, 2, 3])
        a.serve(request("r2", tokens(4 * BS, 16)), [4, 5, 6, 7])
        st = a.w.get_kv_connector_stats()
        self.assertEqual((st.data["blocks_saved"], st.data["tokens_loaded"]),
                         (4, 3 * BS))
        self.assertIsNone(a.w.get_kv_connector_stats())  # reported once
        other = KvallocConnector.build_kv_connector_stats(dict(st.data))
        st.aggregate(other)
        self.assertEqual(st.reduce()["tokens_loaded"], 6 * BS)
        self.assertFalse(st.is_empty())
        st.reset()
        self.assertTrue(st.is_empty())

    def test_partial_block_is_not_a_hit(self):
        a = self.engine()
        a.serve(request("r1", tokens(3 * BS + 5, 2)), [0, 1, 2, 3])
        self.assertEqual(a.w._counters["blocks_saved"], 3)
        got, _ = a.serve(request("r2", tokens(3 * BS + 5, 2)), [4, 5, 6, 7])
        self.assertEqual(got, 3 * BS)
        # One token over a block: its block holds the last token.
        a.serve(request("r3", tokens(BS + 1, 3)), [0, 1])
        got, _ = a.serve(request("r4", tokens(BS, 3)), [2])
        self.assertEqual(got, 0)

    def test_prefix_and_salt(self):
        a = self.engine()
        base = tokens(4 * BS, 4)
        a.serve(request("r1", base), [0, 1, 2, 3])
        other = base[:2 * BS] + tokens(2 * BS, 5)
        got, _ = a.serve(request("r2", other), [4, 5, 6, 7])
        self.assertEqual(got, 2 * BS)
        got, _ = a.serve(request("r3", base, salt="tenant-b"), [8, 9, 10, 11])
        self.assertEqual(got, 0)
        got, _ = a.serve(request("r4", tokens(4 * BS, 6)), [0, 1, 2, 3])
        self.assertEqual(got, 0)

    def test_hashes_of_smaller_blocks_never_hit(self):
        a = self.engine()
        a.serve(request("r1", tokens(4 * BS, 15)), [0, 1, 2, 3])
        req = request("r2", tokens(4 * BS, 15))
        req.block_hashes = [h for h in req.block_hashes for _ in (0, 1)]
        got, _ = a.s.get_num_new_matched_tokens(req, 0)
        self.assertEqual(got, 0)

    def test_block_gone_by_load_time_is_a_load_error(self):
        a = self.engine()
        req = request("r1", tokens(4 * BS, 7))
        a.serve(req, [0, 1, 2, 3])
        req2 = request("r2", tokens(4 * BS, 7))
        got, _ = a.s.get_num_new_matched_tokens(req2, 0)
        self.assertEqual(got, 3 * BS)
        a.s.update_state_after_alloc(req2, Blocks([4, 5, 6, 7]), got)
        meta = a.s.build_connector_meta(sched_output(
            [("r2", [4, 5, 6, 7], 0)], {"r2": BS}))
        # Evicted between the lookup and the load: block 1 goes.
        kb = KeyBatch([ObjectKey(req.block_hashes[1], a.s.model, 0, 0, "")])
        with self.daemon.client() as c:
            self.assertTrue(c.delete(kb, force=True).all_ok())
        before = a.kv[LAYERS[0]][5].clone()
        a.w.bind_connector_metadata(meta)
        a.w.start_load_kv(None)
        self.assertEqual(a.w.get_block_ids_with_load_errors(), {5, 6})
        self.assertTrue(torch.equal(a.kv[LAYERS[0]][5], before))
        self.assertEqual(a.w._counters["blocks_loaded"], 1)
        with self.daemon.client() as c:
            s = c.stats()
        self.assertEqual(s.write_locked, 0)

    def test_wrong_size_or_header_is_a_load_error(self):
        a = self.engine()
        req = request("r1", tokens(4 * BS, 8))
        model = a.s.model
        size = a.w._layout.object_bytes
        kb = KeyBatch(ObjectKey(h, model, 0, 0, "")
                      for h in req.block_hashes)
        with self.daemon.client() as c:
            # Block 0 of another size, block 1 of the right size with a
            # header of another layout.
            r = c.reserve_write(kb.subset([0]), size + 4096, Mode.NEW)
            c.finish_write(kb.subset([0]), r)
            r = c.reserve_write(kb.subset([1]), size, Mode.NEW)
            c.view(r, 0)[:64] = b"\1" * 64
            c.finish_write(kb.subset([1]), r)
        got, errs = a.serve(req, [0, 1, 2, 3])
        self.assertEqual(got, 2 * BS)   # the lookup cannot tell
        self.assertEqual(errs, {0, 1})
        self.assertEqual(a.w._counters["tokens_loaded"], 0)
        self.assertEqual(a.w._counters["load_errors"], 2)

    def test_daemon_down_costs_only_hits(self):
        path = os.path.join(os.path.dirname(self.daemon.socket), "none.sock")
        e = Engine(path)
        self.addCleanup(e.close)
        t = time.monotonic()
        got, errs = e.serve(request("r1", tokens(4 * BS, 9)), [0, 1, 2, 3])
        dt = time.monotonic() - t
        self.assertEqual((got, errs), (0, set()))
        self.assertEqual(e.w._counters["blocks_saved"], 0)
        self.assertGreater(e.s._counters["daemon_errors"], 0)
        print(f"\n  daemon down: a request's lookup and save cost {dt*1e3:.1f}"
              " ms", file=sys.stderr)
        self.assertLess(dt, 2.0)

    def test_daemon_stalled_costs_one_deadline(self):
        e = Engine(self.daemon.socket, extra={"timeout": 0.5,
                                              "retry_interval": 30.0})
        self.addCleanup(e.close)
        e.serve(request("r0", tokens(4 * BS, 13)), [0, 1, 2, 3])
        self.daemon.pause()
        self.addCleanup(self.daemon.resume)
        t = time.monotonic()
        got, errs = e.serve(request("r1", tokens(4 * BS, 13)), [4, 5, 6, 7])
        dt = time.monotonic() - t
        self.assertEqual((got, errs), (0, set()))
        # The scheduler's lookup and the worker's save (two connections)
        # each waited out their deadline; the next request asks neither
        # within the retry interval.
        t = time.monotonic()
        got, errs = e.serve(request("r2", tokens(4 * BS, 14)), [0, 1, 2, 3])
        dt2 = time.monotonic() - t
        self.assertEqual((got, errs), (0, set()))
        print(f"\n  daemon stalled: the first request cost {dt*1e3:.0f} ms "
              f"(timeout 500 ms), the next {dt2*1e3:.1f} ms", file=sys.stderr)
        self.assertGreaterEqual(dt, 0.5)
        self.assertLess(dt, 5.0)      # a hang guard, not the bound
        self.assertLess(dt2, dt)

    def test_daemon_restart_reconnects(self):
        a = self.engine()
        a.serve(request("r1", tokens(4 * BS, 10)), [0, 1, 2, 3])
        self.daemon.kill()
        got, errs = a.serve(request("r2", tokens(4 * BS, 10)), [4, 5, 6, 7])
        self.assertEqual((got, errs), (0, set()))
        self.daemon = Daemon(pool=4 * GIB, socket=self.daemon.socket).start()
        self.addCleanup(self.daemon.stop)
        time.sleep(0.3)   # the retry interval
        a.serve(request("r3", tokens(4 * BS, 11)), [0, 1, 2, 3])
        got, errs = a.serve(request("r4", tokens(4 * BS, 11)), [4, 5, 6, 7])
        self.assertEqual((got, errs), (3 * BS, set()))

    def test_out_of_memory_skips_saves(self):
        small = Daemon(pool=MIB // 2).start()
        self.addCleanup(small.stop)
        e = Engine(small.socket)
        self.addCleanup(e.close)
        size = e.w._layout.object_bytes
        fits = (MIB // 2) // ((size + 4095) // 4096 * 4096)
        got, errs = e.serve(request("r1", tokens(NUM_BLOCKS * BS, 12)),
                            list(range(NUM_BLOCKS)))
        self.assertEqual((got, errs), (0, set()))
        c = e.w._counters
        self.assertEqual(c["blocks_saved"] + c["blocks_not_saved"],
                         NUM_BLOCKS)
        self.assertLessEqual(c["blocks_saved"], fits)
        self.assertGreater(c["blocks_not_saved"], 0)

    def test_model_field(self):
        a = self.engine()
        b = Engine(self.daemon.socket)
        self.addCleanup(b.close)
        self.assertEqual(a.s.model, b.w.model)
        self.assertEqual(a.s.model, a.w.model)
        cfg = vllm_config(self.daemon.socket)
        cfg.cache_config.cache_dtype = "fp8"
        c = KvallocConnector(cfg, KVConnectorRole.SCHEDULER,
                             kv_cache_config())
        self.addCleanup(c.shutdown)
        self.assertNotEqual(c.model, a.s.model)
        c2 = KvallocConnector(vllm_config(self.daemon.socket),
                              KVConnectorRole.SCHEDULER, kv_cache_config(1))
        self.addCleanup(c2.shutdown)
        self.assertNotEqual(c2.model, a.s.model)
        self.assertTrue(a.s.model.startswith("tiny-test@"))

    def test_load_failures_are_recomputed(self):
        cfg = vllm_config(self.daemon.socket)
        self.assertEqual(cfg.kv_transfer_config.kv_load_failure_policy,
                         "fail")   # vLLM's default
        c = KvallocConnector(cfg, KVConnectorRole.SCHEDULER,
                             kv_cache_config())
        self.addCleanup(c.shutdown)
        self.assertEqual(cfg.kv_transfer_config.kv_load_failure_policy,
                         "recompute")
        self.assertFalse(c.requires_kv_delivery)

    def test_unstable_hashes_refused(self):
        saved = os.environ.pop("PYTHONHASHSEED", None)
        try:
            with self.assertRaisesRegex(UnstableHashError, "PYTHONHASHSEED"):
                KvallocConnector(vllm_config(self.daemon.socket,
                                             algo="xxhash"),
                                 KVConnectorRole.SCHEDULER, kv_cache_config())
        finally:
            if saved is not None:
                os.environ["PYTHONHASHSEED"] = saved


class LayoutTest(unittest.TestCase):

    def roundtrip(self, kv, num_blocks, block_size=BS):
        lay = BlockLayout(kv, num_blocks, block_size)
        buf = memoryview(bytearray(lay.object_bytes))
        lay.store(2, buf, b"h" * 32)
        self.assertEqual(lay.check(buf, b"h" * 32), "")
        self.assertNotEqual(lay.check(buf, b"g" * 32), "")
        lay.load(buf, 5)
        for layer in lay.layers:
            self.assertTrue(torch.equal(layer.slice(2), layer.slice(5)))
        return lay

    def test_layouts(self):
        g = torch.Generator().manual_seed(1)
        # Blocks first (vLLM 0.32's CPU backend).
        self.roundtrip({"a": torch.randn(8, 2, BS, 128, generator=g)}, 8)
        # K/V first, blocks second (older and GPU layouts).
        lay = self.roundtrip({"a": torch.randn(2, 8, BS, 2, 64,
                                               generator=g)}, 8)
        self.assertEqual(lay.layers[0].dim, 1)
        # A strided view: layers interleaved in one buffer per block.
        buf = torch.randn(8, 2, 2, BS, 64, generator=g)
        lay = self.roundtrip({"a": buf[:, 0], "b": buf[:, 1]}, 8)
        self.assertEqual(len(lay.layers), 2)
        # A kernel block of half the block: 16 kernel blocks for 8.
        lay = self.roundtrip({"a": torch.randn(16, 2, BS // 2, 64,
                                               generator=g)}, 8)
        self.assertEqual(lay.layers[0].ratio, 2)
        # A shared layer is stored once.
        t = torch.randn(8, 2, BS, 64, generator=g)
        lay = self.roundtrip({"a": t, "b": t}, 8)
        self.assertEqual(len(lay.layers), 1)

    def test_no_block_dim(self):
        with self.assertRaises(LayoutError):
            BlockLayout({"a": torch.zeros(7, 2, BS, 64)}, 8, BS)

    def test_digest_tells_layouts_apart(self):
        a = BlockLayout({"a": torch.zeros(8, 2, BS, 64)}, 8, BS)
        b = BlockLayout({"a": torch.zeros(8, BS, 2, 64)}, 8, BS)
        c = BlockLayout({"a": torch.zeros(9, 2, BS, 64)}, 9, BS)
        self.assertNotEqual(a.digest, b.digest)
        self.assertEqual(a.digest, c.digest)   # the pool's size aside


if __name__ == "__main__":
    unittest.main()
