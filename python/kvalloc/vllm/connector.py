"""KvallocConnector: vLLM's KV connector (KVConnectorBase_V1) over kvallocd.

The scheduler side asks the daemon, with ``lookup`` and without moving a
byte, how many of a request's leading full blocks the node (L1) and the
cluster (L2) hold, and starts the L2 part's prefetch; the worker side
copies blocks between vLLM's paged KV tensors and the pool's mapping
(``torch.frombuffer`` views, no copy in between), loading before the
forward pass and saving the finished full blocks after it.

Every failure of the daemon, the pool or a block costs hits, never a
request: a lookup that fails is a miss, a block gone or wrong by load time
is reported through ``get_block_ids_with_load_errors`` (vLLM recomputes
it), and a save refused (out of memory, busy, the daemon down) is skipped.
Each call has a deadline (``timeout``, 2 s by default); a daemon that is
down is asked again at most every ``retry_interval`` seconds, so it costs a
request no more than one failed connect per interval.

See ``README.md`` beside this file for the settings.
"""

import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import torch

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import \
    KVConnectorStats
from vllm.logger import init_logger

from .. import (Client, ConnectionLostError, DaemonError,
                DeadlineExceededError, FrameError, KeyBatch, KvallocError,
                Mode, ObjectKey, Status, WrongEpochError)
from . import identity as ident
from .layout import BlockLayout

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

# Under vLLM's logger, so that its handlers and level apply.
logger = init_logger("vllm.kvalloc.connector")

__all__ = ["KvallocConnector", "KvallocConnectorMetadata", "KvallocStats",
           "BlockSpec"]

#: The counters, reported in logs, the metrics file and vLLM's stats.
COUNTERS = ("lookups", "tokens_looked_up", "tokens_hit_l1", "tokens_hit_l2",
            "tokens_loaded", "blocks_loaded", "load_errors", "tokens_saved",
            "blocks_saved", "blocks_stored_already", "blocks_not_saved",
            "daemon_errors", "bytes_loaded", "load_seconds", "bytes_saved",
            "save_seconds")


@dataclass
class BlockSpec:
    """Blocks of one request to load or save: vLLM's block ids and the
    chunk hashes of the same blocks, in order."""

    req_id: str
    block_ids: List[int]
    hashes: List[bytes]
    salt: str = ""


@dataclass
class KvallocConnectorMetadata(KVConnectorMetadata):
    """What the scheduler tells the workers for one step."""

    loads: List[BlockSpec] = field(default_factory=list)
    saves: List[BlockSpec] = field(default_factory=list)


@dataclass
class KvallocStats(KVConnectorStats):
    """The worker's counters since the last report, summed across
    workers."""

    def reset(self) -> None:
        self.data = {}

    def aggregate(self, other: KVConnectorStats) -> "KvallocStats":
        for k, v in (other.data or {}).items():
            self.data[k] = self.data.get(k, 0) + v
        return self

    def reduce(self) -> Dict[str, Any]:
        return dict(self.data)

    def is_empty(self) -> bool:
        return not any(self.data.values())


class _Req:
    """The scheduler's state of one request."""

    __slots__ = ("request", "block_ids", "saved_upto", "loaded", "start",
                 "hit")

    def __init__(self, request: "Request") -> None:
        self.request = request
        self.block_ids: List[int] = []
        self.saved_upto = 0          # blocks [0, saved_upto) considered
        self.loaded = (0, 0)         # blocks [lo, hi) loaded by the connector
        self.start = 0               # the last lookup's first block
        self.hit = 0                 # and its blocks found


class KvallocConnector(KVConnectorBase_V1):
    """vLLM's KV connector over kvallocd (see the module's doc)."""

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole,
                 kv_cache_config: "KVCacheConfig" = None) -> None:
        super().__init__(vllm_config=vllm_config, role=role,
                         kv_cache_config=kv_cache_config)
        cfg = self._kv_transfer_config
        get = cfg.get_from_extra_config
        self._socket = get("socket", None) or os.environ.get(
            "KVALLOC_SOCKET") or None
        self._timeout = float(get("timeout", 2.0))
        self._l2_wait = float(get("l2_wait", 2.0))
        self._retry = float(get("retry_interval", 1.0))
        self._metrics_file = get("metrics_file", None)
        cache = vllm_config.cache_config
        self._block_size = int(cache.block_size)
        self._hash_algo = str(getattr(cache, "prefix_caching_hash_algo",
                                      "sha256"))
        seed = ident.check_stable_hashes(self._hash_algo)
        if kv_cache_config is not None and \
                len(kv_cache_config.kv_cache_groups) != 1:
            raise ValueError(
                "KvallocConnector stores one KV cache group; this model has "
                f"{len(kv_cache_config.kv_cache_groups)}: start vLLM with "
                "--disable-hybrid-kv-cache-manager, or use a model of one "
                "attention type")
        if getattr(cfg, "kv_load_failure_policy", "recompute") != "recompute":
            # vLLM's default ("fail") fails a request whose block could not
            # be loaded; kvalloc's blocks are a cache that may lose a block
            # between lookup and load, so a load error must be recomputed.
            # The scheduler reads the policy right after it makes this
            # connector.
            logger.warning(
                "kvalloc connector: kv_load_failure_policy=%s would fail "
                "requests whose cached blocks were evicted between lookup "
                "and load; setting it to 'recompute' (set it yourself in "
                "--kv-transfer-config to silence this)",
                cfg.kv_load_failure_policy)
            cfg.kv_load_failure_policy = "recompute"
        par = vllm_config.parallel_config
        self._tp_size = int(par.tensor_parallel_size)
        self._pp_size = int(par.pipeline_parallel_size)
        self.model = self._model_field(vllm_config, kv_cache_config)
        self._client: Optional[Client] = None
        self._next_try = 0.0
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._reported = dict(self._counters)
        self._stats = dict.fromkeys(COUNTERS, 0)
        # Scheduler side.
        self._reqs: Dict[str, _Req] = {}
        self._loads: List[BlockSpec] = []
        self._warned_hashes = False
        # Worker side.
        self._layout: Optional[BlockLayout] = None
        self._rank = 0
        self._load_errors: set = set()
        logger.info("kvalloc connector (%s, pid %d): model field %s, block "
                    "hashes %s, socket %s", role.name, os.getpid(),
                    self.model, seed, self._socket or "(default)")

    @property
    def requires_kv_delivery(self) -> bool:
        """No: a save that is dropped is only a future miss."""
        return False

    # ---- keys ----------------------------------------------------------

    def _model_field(self, vllm_config: "VllmConfig",
                     kv_cache_config: "KVCacheConfig") -> str:
        get = self._kv_transfer_config.get_from_extra_config
        mc = vllm_config.model_config
        model_id = get("model_id", None)
        if not model_id:
            model_id = _model_identity(mc)
        groups = []
        layers = 0
        if kv_cache_config is not None:
            for g in kv_cache_config.kv_cache_groups:
                groups.append(repr(g.kv_cache_spec))
                layers += len(g.layer_names)
        try:
            import vllm
            version = vllm.__version__
        except Exception:  # pragma: no cover - vllm always has it
            version = "unknown"
        try:
            from vllm.platforms import current_platform
            platform = str(current_platform.device_type)
        except Exception:  # pragma: no cover
            platform = "unknown"
        att = getattr(vllm_config, "attention_config", None)
        backend = f"{platform}:{getattr(att, 'backend', None)}"
        load = getattr(vllm_config, "load_config", None)
        extra = {"model_dtype": str(mc.dtype),
                 "quantization": str(getattr(mc, "quantization", None)),
                 "load_format": str(getattr(load, "load_format", "auto"))}
        if extra["load_format"] == "dummy":
            extra["seed"] = int(getattr(mc, "seed", 0) or 0)
        desc = ident.layout_descriptor(
            identity=str(model_id), vllm_version=version, backend=backend,
            kv_layout="",
            cache_dtype=str(vllm_config.cache_config.cache_dtype),
            block_size=self._block_size, num_layers=layers,
            group_specs=groups, tp_size=self._tp_size,
            pp_size=self._pp_size, hash_algo=self._hash_algo, extra=extra)
        self.descriptor = desc
        return ident.model_field(desc)

    def _key_batch(self, hashes: List[bytes], rank: int,
                   salt: str) -> KeyBatch:
        m = self.model
        return KeyBatch(ObjectKey(bytes(h), m, rank, 0, salt) for h in hashes)

    def _hashes(self, request: "Request", lo: int, hi: int) -> List[bytes]:
        """The chunk hashes of the request's blocks [lo, hi)."""
        return [bytes(h) for h in request.block_hashes[lo:hi]]

    # ---- the daemon ------------------------------------------------------

    def _connect(self) -> Optional[Client]:
        c = self._client
        if c is not None and not c.closed:
            return c
        now = time.monotonic()
        if now < self._next_try:
            return None
        try:
            if c is not None:
                c.reconnect(timeout=self._timeout)
            else:
                c = Client(self._socket, timeout=self._timeout)
            self._client = c
            return c
        except (KvallocError, OSError) as e:
            self._next_try = now + self._retry
            self._count("daemon_errors")
            logger.warning("kvalloc connector: daemon at %s unreachable (%s);"
                           " no hits or saves until it is back (next try in "
                           "%.1f s)", self._socket or "(default)", e,
                           self._retry)
            return None

    def _call(self, what: str, fn: Callable[[Client], Any]) -> Any:
        """``fn(client)``, once more on a new connection if the daemon went
        away (a restart or handoff); None when it cannot be served."""
        for attempt in (0, 1):
            c = self._connect()
            if c is None:
                return None
            try:
                return fn(c)
            except (ConnectionLostError, DeadlineExceededError, FrameError,
                    WrongEpochError) as e:
                self._count("daemon_errors")
                if isinstance(e, DeadlineExceededError):
                    # A stalled daemon: do not wait on it again before the
                    # retry interval.
                    logger.warning("kvalloc connector: %s failed: %s; not "
                                   "asking again for %.1f s", what, e,
                                   self._retry)
                    self._next_try = time.monotonic() + self._retry
                    return None
                logger.warning("kvalloc connector: %s failed: %s%s", what, e,
                               "; reconnecting" if attempt == 0 else "")
            except DaemonError as e:
                self._count("daemon_errors")
                logger.warning("kvalloc connector: %s refused: %s", what, e)
                return None
            except KvallocError as e:
                self._count("daemon_errors")
                logger.warning("kvalloc connector: %s: %s", what, e)
                return None
            except Exception as e:  # a copy or layout error: never the
                # request's failure; logged with its traceback
                self._count("daemon_errors")
                logger.exception("kvalloc connector: %s failed: %s", what, e)
                return None
        return None

    # ---- metrics ---------------------------------------------------------

    def _count(self, name: str, n: float = 1) -> None:
        self._counters[name] += n
        self._stats[name] += n

    def _report(self) -> None:
        """Log and write the counters when they changed."""
        if self._counters == self._reported:
            return
        self._reported = dict(self._counters)
        c = self._counters
        logger.info(
            "kvalloc connector (%s): looked up %d tokens, hit %d in L1 and %d"
            " in L2; loaded %d tokens (%d blocks), %d load errors; saved %d "
            "tokens (%d blocks), %d stored already, %d not saved; %d daemon "
            "errors", self.role.name, c["tokens_looked_up"],
            c["tokens_hit_l1"], c["tokens_hit_l2"], c["tokens_loaded"],
            c["blocks_loaded"], c["load_errors"], c["tokens_saved"],
            c["blocks_saved"], c["blocks_stored_already"],
            c["blocks_not_saved"], c["daemon_errors"])
        if self._metrics_file:
            line = json.dumps({"pid": os.getpid(), "role": self.role.name,
                               "model": self.model, "time": time.time(),
                               **c})
            try:
                with open(self._metrics_file, "a") as f:
                    f.write(line + "\n")
            except OSError as e:
                logger.warning("kvalloc connector: metrics file %s: %s",
                               self._metrics_file, e)

    def get_kv_connector_stats(self) -> Optional[KVConnectorStats]:
        if not any(self._stats.values()):
            return None
        s = KvallocStats(data=dict(self._stats))
        self._stats = dict.fromkeys(COUNTERS, 0)
        return s

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None
                                 ) -> Optional[KVConnectorStats]:
        return KvallocStats(data=dict(data or {}))

    # ==== scheduler side ==================================================

    def get_num_new_matched_tokens(self, request: "Request",
                                   num_computed_tokens: int
                                   ) -> Tuple[Optional[int], bool]:
        bs = self._block_size
        st = self._reqs.get(request.request_id)
        if st is None:
            st = self._reqs[request.request_id] = _Req(request)
        if len(request.block_hashes) > request.num_tokens // bs:
            # Hashes of smaller blocks than the cache's (a hybrid model's
            # hash block size): one hash is not one block. Never a hit.
            if not self._warned_hashes:
                self._warned_hashes = True
                logger.warning(
                    "kvalloc connector: %d block hashes for %d tokens in "
                    "blocks of %d: vLLM hashes smaller blocks than it "
                    "caches; no lookups", len(request.block_hashes),
                    request.num_tokens, bs)
            return 0, False
        n = ident.loadable_blocks(len(request.block_hashes),
                                  request.num_tokens, bs)
        start = num_computed_tokens // bs
        st.start, st.hit = start, 0
        if start >= n:
            return 0, False
        hashes = self._hashes(request, start, n)
        salt = request.cache_salt or ""
        self._count("lookups")
        self._count("tokens_looked_up", len(hashes) * bs)
        hit, l1 = len(hashes), len(hashes)
        for rank in ident.ranks(self._tp_size, self._pp_size):
            kb = self._key_batch(hashes, rank, salt)
            lk = self._call("lookup",
                            lambda c, kb=kb: c.lookup(kb, prefetch=True))
            if lk is None:
                hit = 0
                break
            # L2 blocks count only when the daemon began loading them.
            hit = min(hit, lk.l1 + min(lk.l2, lk.prefetch))
            l1 = min(l1, lk.l1)
        l1 = min(l1, hit)
        st.hit = hit
        self._count("tokens_hit_l1", l1 * bs)
        self._count("tokens_hit_l2", (hit - l1) * bs)
        self._report()
        return hit * bs, False

    def update_state_after_alloc(self, request: "Request",
                                 blocks: "KVCacheBlocks",
                                 num_external_tokens: int) -> None:
        st = self._reqs.get(request.request_id)
        if st is None:
            st = self._reqs[request.request_id] = _Req(request)
        if num_external_tokens <= 0:
            return
        bs = self._block_size
        nb = num_external_tokens // bs
        lo, hi = st.start, st.start + nb
        ids = list(blocks.get_block_ids()[0])
        if hi > len(ids) or hi > len(request.block_hashes):
            logger.warning("kvalloc connector: request %s: %d blocks to load"
                           " from block %d, but %d allocated; not loading",
                           request.request_id, nb, lo, len(ids))
            return
        st.loaded = (lo, hi)
        self._loads.append(BlockSpec(request.request_id, ids[lo:hi],
                                     self._hashes(request, lo, hi),
                                     request.cache_salt or ""))

    def build_connector_meta(self, scheduler_output: "SchedulerOutput"
                             ) -> KVConnectorMetadata:
        meta = KvallocConnectorMetadata(loads=self._loads)
        self._loads = []
        so = scheduler_output
        sched = so.num_scheduled_tokens
        for new in so.scheduled_new_reqs:
            st = self._reqs.get(new.req_id)
            if st is None:
                continue
            st.block_ids = list(new.block_ids[0])
            self._plan_save(st, new.num_computed_tokens +
                            sched.get(new.req_id, 0), meta)
        cached = so.scheduled_cached_reqs
        resumed = getattr(cached, "resumed_req_ids", set())
        for i, req_id in enumerate(cached.req_ids):
            st = self._reqs.get(req_id)
            if st is None:
                continue
            nb = cached.new_block_ids[i]
            if req_id in resumed:
                st.block_ids = list(nb[0]) if nb else []
            elif nb:
                st.block_ids.extend(nb[0])
            self._plan_save(st, cached.num_computed_tokens[i] +
                            sched.get(req_id, 0), meta)
        return meta

    def _plan_save(self, st: _Req, computed: int,
                   meta: KvallocConnectorMetadata) -> None:
        """Save the prompt's full blocks computed by the end of this step
        and not yet saved (nor loaded by this connector)."""
        req = st.request
        bs = self._block_size
        prompt = len(req.prompt_token_ids or ())
        limit = min(prompt // bs, computed // bs, len(req.block_hashes),
                    len(st.block_ids))
        if limit <= st.saved_upto:
            return
        lo, hi = st.loaded
        idx = [i for i in range(st.saved_upto, limit) if not lo <= i < hi]
        st.saved_upto = limit
        if idx:
            hs = self._hashes(req, 0, limit)
            meta.saves.append(BlockSpec(
                req.request_id, [st.block_ids[i] for i in idx],
                [hs[i] for i in idx], req.cache_salt or ""))

    def request_finished(self, request: "Request", block_ids: List[int]
                         ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        self._reqs.pop(request.request_id, None)
        return False, None

    # ==== worker side =====================================================

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]) -> None:
        num_blocks = int(self._kv_cache_config.num_blocks)
        self._layout = BlockLayout(kv_caches, num_blocks, self._block_size)
        try:
            from vllm.distributed.parallel_state import (
                get_pp_group, get_tensor_model_parallel_rank)
            tp_rank = get_tensor_model_parallel_rank()
            pp_rank = get_pp_group().rank_in_group
        except Exception:  # no parallel state: one worker
            tp_rank = pp_rank = 0
        self._rank = ident.rank_of(tp_rank, self._tp_size, pp_rank)
        logger.info("kvalloc connector: rank %d, %d blocks, %d bytes a "
                    "stored block; layout %s", self._rank, num_blocks,
                    self._layout.object_bytes,
                    "; ".join(self._layout.description))

    def start_load_kv(self, forward_context: "ForwardContext",
                      **kwargs: Any) -> None:
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        if not isinstance(meta, KvallocConnectorMetadata) or not meta.loads:
            return
        for spec in meta.loads:
            self._load(spec)
        self._report()

    def _load(self, spec: BlockSpec) -> None:
        """Load a request's blocks; every block not loaded, and every one
        after it, is a load error that vLLM recomputes."""
        layout = self._layout
        n = len(spec.block_ids)
        loaded = 0
        if layout is not None and n:
            kb = self._key_batch(spec.hashes, self._rank, spec.salt)

            def read(c: Client) -> int:
                # An object of another size stops the prefix at the
                # daemon (expected sizes); the header is checked below.
                res = c.reserve_read_prefix_wait(
                    kb, wait=self._l2_wait,
                    timeout=self._l2_wait + self._timeout,
                    sizes=layout.object_bytes)
                got = 0
                try:
                    for i in range(res.prefix):
                        view = c.view(res, i)
                        why = layout.check(view, spec.hashes[i],
                                           c.hello.align)
                        if why:
                            logger.warning(
                                "kvalloc connector: request %s block %d not "
                                "loaded: %s", spec.req_id, i, why)
                            break
                        layout.load(view, spec.block_ids[i])
                        got += 1
                finally:
                    if res.prefix:
                        p = range(res.prefix)
                        try:
                            c.finish_read(kb.subset(p), res.select(p))
                        except KvallocError as e:
                            # The connection's end releases the locks.
                            logger.warning("kvalloc connector: finish_read:"
                                           " %s", e)
                return got

            t = time.perf_counter()
            loaded = self._call("load", read) or 0
            self._count("load_seconds", time.perf_counter() - t)
            self._count("bytes_loaded", loaded * layout.object_bytes)
        if loaded < n:
            self._load_errors.update(spec.block_ids[loaded:])
            self._count("load_errors", n - loaded)
        self._count("blocks_loaded", loaded)
        self._count("tokens_loaded", loaded * self._block_size)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor,
                      attn_metadata: Any, **kwargs: Any) -> None:
        # Whole blocks of every layer are saved in wait_for_save.
        return

    def wait_for_save(self) -> None:
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        if not isinstance(meta, KvallocConnectorMetadata) or not meta.saves:
            return
        for spec in meta.saves:
            self._save(spec)
        self._report()

    def _save(self, spec: BlockSpec) -> None:
        layout = self._layout
        n = len(spec.block_ids)
        if layout is None or not n:
            return
        kb = self._key_batch(spec.hashes, self._rank, spec.salt)

        exist = [0]

        def write(c: Client) -> int:
            res = c.reserve_write(kb, layout.object_bytes, Mode.NEW)
            ok = res.ok_indices()
            # Stored already, or being stored by another engine.
            exist[0] = res.statuses.count_of(Status.KEY_NOT_WRITABLE)
            if not ok:
                return 0
            try:
                for i in ok:
                    layout.store(spec.block_ids[i], c.view(res, i),
                                 spec.hashes[i])
            except BaseException:
                c.abort_write(kb.subset(ok), res.select(ok))
                raise
            st = c.finish_write(kb.subset(ok), res.select(ok))
            return st.count_of(Status.OK)

        t = time.perf_counter()
        saved = self._call("save", write) or 0
        self._count("save_seconds", time.perf_counter() - t)
        self._count("bytes_saved", saved * layout.object_bytes)
        self._count("blocks_saved", saved)
        self._count("tokens_saved", saved * self._block_size)
        self._count("blocks_stored_already", exist[0])
        self._count("blocks_not_saved", n - saved - exist[0])

    def get_block_ids_with_load_errors(self) -> set:
        errs, self._load_errors = self._load_errors, set()
        return errs

    def shutdown(self) -> None:
        self._report()
        c, self._client = self._client, None
        if c is not None:
            c.close()


def _model_identity(mc: Any) -> str:
    """The model's identity from its config and weights (never its path),
    or its hub name and revision when it is not a local directory."""
    path = str(mc.model)
    cfg = ""
    try:
        d = json.loads(mc.hf_config.to_json_string())
        for k in ("_name_or_path", "transformers_version", "name_or_path"):
            d.pop(k, None)
        cfg = json.dumps(d, sort_keys=True)
    except Exception:
        pass
    if os.path.isdir(path):
        return ident.weights_identity(path, cfg)
    logger.warning("kvalloc connector: model %s is not a local directory; "
                   "its identity is its name and revision. Set model_id in "
                   "kv_connector_extra_config to name it.", path)
    return f"hub:{path}@{getattr(mc, 'revision', None)}"
