"""What a key is made of: the model's identity, the KV layout, the hashes.

Standard library only, so that the rules can be read and tested without
vLLM. A key (``kvalloc.ObjectKey``) is

- ``chunk_hash``: vLLM's block hash of the block (``request.block_hashes``),
  which chains every earlier block and binds ``cache_salt``, LoRA,
  multimodal inputs and prompt embeddings;
- ``model``: ``"<identity>@<layout digest>"``, where the identity is the
  name the operator set (``model_id``) or a hash of the model's config and
  weights, and the digest is of everything that decides the KV bytes of a
  block (see :func:`layout_descriptor`);
- ``kv_rank``: the worker's rank, ``pp_rank * tp_size + tp_rank``;
- ``group_id``: the KV cache group;
- ``cache_salt``: the request's ``cache_salt`` (already bound by the hash;
  kept in the key too so that the daemon's view of a key names it).

Two engines whose KV bytes differ differ in the digest (or in the hash),
so they never share a key; two engines of the same vLLM version, model,
dtype, block size, parallelism and attention backend compute the same
digest and share every key.
"""

import hashlib
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = [
    "FORMAT_VERSION", "layout_descriptor", "model_field", "weights_identity",
    "check_stable_hashes", "UnstableHashError", "loadable_blocks",
]

#: The version of the stored object's format (header and payload order).
#: Part of the layout digest: a new format never reads an old one's bytes.
FORMAT_VERSION = 1

#: Hash algorithms whose block-hash chain vLLM seeds randomly per process
#: unless PYTHONHASHSEED is set (vllm.v1.core.kv_cache_utils, 0.32).
NON_CRYPTO_HASH_ALGOS = frozenset({"xxhash", "xxhash_cbor"})

#: The longest identity string kept in the key (the digest follows it).
MAX_IDENTITY = 200


class UnstableHashError(RuntimeError):
    """vLLM's block hashes would differ between processes: no hit across
    processes or restarts is possible, so the connector refuses to start."""


def check_stable_hashes(hash_algo: str,
                        env: Optional[Mapping[str, str]] = None) -> str:
    """Check that vLLM's block hashes are the same in every process.

    In vLLM 0.32 the first block's parent hash (``NONE_HASH``) is derived
    from ``PYTHONHASHSEED`` when it is set; otherwise from a fixed seed for
    the cryptographic algorithms (``sha256``, the default, and
    ``sha256_cbor``) and from ``os.urandom`` for ``xxhash`` and
    ``xxhash_cbor``. Returns the seed's description (part of the log
    line); raises :class:`UnstableHashError`, naming the settings, when the
    hashes are random per process.
    """
    env = os.environ if env is None else env
    seed = env.get("PYTHONHASHSEED")
    if seed is not None:
        if seed == "random":
            raise UnstableHashError(
                "PYTHONHASHSEED=random makes vLLM's block hashes random per "
                "process: kvalloc could never find a block stored by another "
                "process. Set PYTHONHASHSEED to the same number in every "
                "engine (or unset it and use prefix_caching_hash_algo "
                "sha256)")
        return f"PYTHONHASHSEED={seed}"
    if hash_algo in NON_CRYPTO_HASH_ALGOS:
        raise UnstableHashError(
            f"prefix_caching_hash_algo={hash_algo} without PYTHONHASHSEED "
            "seeds vLLM's block hashes randomly in each process: kvalloc "
            "could never find a block stored by another process or before a "
            "restart. Set PYTHONHASHSEED to the same value in every engine "
            "that shares the pool, or use --prefix-caching-hash-algo sha256 "
            "(vLLM's default, seeded by a fixed value)")
    return f"{hash_algo} with vLLM's fixed seed"


def layout_descriptor(*, identity: str, vllm_version: str, backend: str,
                      kv_layout: str, cache_dtype: str, block_size: int,
                      num_layers: int, group_specs: Sequence[str],
                      tp_size: int, pp_size: int, hash_algo: str,
                      extra: Optional[Mapping[str, Any]] = None
                      ) -> Dict[str, Any]:
    """Everything that decides a block's KV bytes and its key, as a dict.

    ``group_specs`` are the KV cache groups' specs as vLLM prints them
    (block size, KV heads, head size, dtype, quantisation); ``backend`` and
    ``kv_layout`` the attention backend and vLLM's resolved cache layout.
    The vLLM version is part of it because the CPU backend's layout has
    changed between versions under the same name; the hash algorithm,
    because two algorithms' hashes of the same tokens differ anyway and a
    collision between them must not be possible.
    """
    d = {
        "format": FORMAT_VERSION,
        "identity": identity,
        "vllm": vllm_version,
        "backend": backend,
        "kv_layout": kv_layout,
        "cache_dtype": cache_dtype,
        "block_size": int(block_size),
        "num_layers": int(num_layers),
        "groups": list(group_specs),
        "tp_size": int(tp_size),
        "pp_size": int(pp_size),
        "hash_algo": hash_algo,
    }
    if extra:
        d["extra"] = dict(extra)
    return d


def model_field(descriptor: Mapping[str, Any]) -> str:
    """The key's model field: ``"<identity>@<digest>"``.

    The digest is the first 16 bytes (hex) of the SHA-256 of the
    descriptor's canonical JSON: any change of any field changes it.
    """
    blob = json.dumps(descriptor, sort_keys=True,
                      separators=(",", ":")).encode()
    digest = hashlib.sha256(blob).hexdigest()[:32]
    ident = str(descriptor["identity"])[:MAX_IDENTITY]
    return f"{ident}@{digest}"


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_CONFIG_NAMES = ("config.json", "generation_config.json")


def weights_identity(model_dir: str, config_json: str = "",
                     chunk: int = 1 << 20) -> str:
    """A model's identity from its config and weights, never its path.

    ``"sha256:<hex>"`` of the model's config (``config_json``, the config
    as vLLM resolved it, and ``config.json`` in ``model_dir``) and of every
    weight file in ``model_dir`` (name and content, in name order). Two
    copies of one model in different directories get one identity; any
    changed weight gets another. Reads every weight byte once: for a large
    model set ``model_id`` in the connector's config instead.
    """
    h = hashlib.sha256()
    h.update(b"kvalloc-model-identity-1\0")
    h.update(config_json.encode())
    h.update(b"\0")
    names = sorted(os.listdir(model_dir))
    found = 0
    for name in names:
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            continue
        if name in _CONFIG_NAMES or name.endswith(_WEIGHT_SUFFIXES):
            found += name.endswith(_WEIGHT_SUFFIXES)
            h.update(name.encode() + b"\0")
            with open(path, "rb") as f:
                while True:
                    b = f.read(chunk)
                    if not b:
                        break
                    h.update(b)
            h.update(b"\0")
    if not found:
        raise ValueError(
            f"no weight file ({', '.join(_WEIGHT_SUFFIXES)}) in {model_dir}: "
            "set model_id in kv_connector_extra_config to name the model")
    return "sha256:" + h.hexdigest()[:32]


def loadable_blocks(num_hashes: int, num_tokens: int, block_size: int) -> int:
    """How many leading blocks of a request may be loaded at most.

    Only full blocks that have a hash, and never the block holding the
    request's last token: vLLM must compute at least that token to sample
    the next one. So a 64-token prompt of 16-token blocks loads at most 3
    blocks, a 65-token one 4.
    """
    if num_tokens <= 0 or block_size <= 0:
        return 0
    return max(0, min(num_hashes, (num_tokens - 1) // block_size))


def rank_of(tp_rank: int, tp_size: int, pp_rank: int) -> int:
    """The key's rank field: one per worker of a (PP x TP) engine."""
    return pp_rank * tp_size + tp_rank


def ranks(tp_size: int, pp_size: int) -> List[int]:
    """Every worker's rank field, the scheduler's to look up."""
    return list(range(tp_size * pp_size))
