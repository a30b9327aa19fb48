"""Broken KvallocConnectors for the bite runs, and a slow saver.

Each is selected only by the e2e harness (``e2e.py bites``), through
``kv_connector``'s class name; none is reachable from kvalloc's own code.

- ``LoadsNothing``: looks up, then reports no hit: every warm case must fail.
- ``WrongBlock``: loads each stored block into the next block of the
  request (the last into the first): the outputs must change.
- ``IgnoresSalt``: keys on a hash of the token ids alone (the bug of an
  example connector that served another tenant's KV): the case of the
  other ``cache_salt`` must see a hit and fail.
- ``SlowSaver`` (not a mutant): stops for good while it holds write leases
  of a save, after touching ``$KVALLOC_E2E_SAVING``, for the SIGKILL case.
"""

import hashlib
import os
import time

from kvalloc.vllm.connector import BlockSpec, KvallocConnector


class LoadsNothing(KvallocConnector):
    """Finds what is stored, and loads none of it."""

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        super().get_num_new_matched_tokens(request, num_computed_tokens)
        return 0, False


class WrongBlock(KvallocConnector):
    """Loads block i's KV into the request's block i + 1."""

    def _load(self, spec):
        ids = spec.block_ids[1:] + spec.block_ids[:1]
        super()._load(BlockSpec(spec.req_id, ids, spec.hashes, spec.salt))


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
