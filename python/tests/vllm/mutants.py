"""Broken KvallocConnectors for the bite runs, and a slow saver.

Each is selected only by the e2e harness (``e2e.py bites``), through
``kv_connector``'s class name; none is reachable from kvalloc's own code.

- ``LoadsNothing``: looks up, then reports no hit: every warm case must fail.
- ``WrongBlock``: loads into each block the stored block after it: the
  outputs must change.
- ``IgnoresSalt``: keys on a hash of the token ids alone (the bug of an
  example connector that served another tenant's KV): the case of the
  other ``cache_salt`` must see a hit and fail.
- ``HidesLoadErrors``: a block evicted between lookup and load (as
  ``EvictsBeforeLoad`` does) is not reported as a load error: case 11
  must fail.
- ``SlowSaver`` (not a mutant): stops for good while it holds write leases
  of a save, after touching ``$KVALLOC_E2E_SAVING``, for the SIGKILL case.
- ``EvictsBeforeLoad`` (not a mutant): deletes a block just before it is
  loaded, for case 11.
"""

import hashlib
import os
import time

from kvalloc.vllm.connector import KvallocConnector


class LoadsNothing(KvallocConnector):
    """Finds what is stored, and loads none of it."""

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        super().get_num_new_matched_tokens(request, num_computed_tokens)
        return 0, False


class WrongBlock(KvallocConnector):
    """Loads into block i the stored block i + 1 (an off-by-one in the
    key's index). Shuffling the loaded blocks among themselves would not
    do: attention sums over the set of keys, so a permutation of a
    request's own blocks changes the logprobs by rounding only (4.5e-6
    measured)."""

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        n = len(self._loads)
        super().update_state_after_alloc(request, blocks, num_external_tokens)
        for spec in self._loads[n:]:
            lo = self._reqs[request.request_id].loaded[0]
            hi = lo + len(spec.hashes)
            if hi < len(request.block_hashes):
                spec.hashes = self._hashes(request, lo + 1, hi + 1)


class IgnoresSalt(KvallocConnector):
    """Keys on the prompt's token ids alone: no cache_salt, no LoRA."""

    def _hashes(self, request, lo, hi):
        bs = self._block_size
        toks = list(request.all_token_ids)
        out, h = [], b""
        for i in range(hi):
            blk = toks[i * bs:(i + 1) * bs]
            h = hashlib.sha256(h + repr(blk).encode()).digest()
            out.append(h)
        return out[lo:hi]

    def _key_batch(self, hashes, rank, salt):
        return super()._key_batch(hashes, rank, "")


class SlowSaver(KvallocConnector):
    """Holds its first save's write leases forever (until killed)."""

    def register_kv_caches(self, kv_caches):
        super().register_kv_caches(kv_caches)
        layout = self._layout
        store = layout.store
        flag = os.environ.get("KVALLOC_E2E_SAVING", "")

        def stuck(block, view, chunk_hash):
            store(block, view, chunk_hash)
            if flag:
                with open(flag, "w") as f:
                    f.write(str(os.getpid()))
            while True:
                time.sleep(3600)

        layout.store = stuck


class EvictsBeforeLoad(KvallocConnector):
    """Not a mutant: deletes the second block of every load from the pool
    just before loading it, as an eviction between lookup and load would.
    vLLM must recompute it and every block after it (case 11)."""

    def _load(self, spec):
        if len(spec.hashes) > 1:
            kb = self._key_batch(spec.hashes[1:2], self._rank, spec.salt)
            self._call("evict", lambda c: c.delete(kb, force=True))
        super()._load(spec)


class HidesLoadErrors(EvictsBeforeLoad):
    """Evicts as above, and reports no load error: vLLM then runs on
    blocks it never filled."""

    def get_block_ids_with_load_errors(self):
        super().get_block_ids_with_load_errors()
        return set()
