"""Blocks of vLLM's paged KV cache, found from the registered tensors.

vLLM hands the worker one tensor per attention layer
(``register_kv_caches``). Their layout is the attention backend's and has
changed between versions (the CPU backend moved to a packed blocks-first
layout), so nothing here assumes one: :class:`BlockLayout` finds, in each
tensor, the dimension whose size is the number of blocks (or a multiple of
it, when the kernel splits a block), and copies a block as the slice of
every layer at that index, in the tensor's own element order.

A stored object is a 64-byte header, then each layer's slice in layer-name
order:

====== ===== =====================================================
offset bytes field
====== ===== =====================================================
0      8     magic ``b"KVALVLLM"``
8      4     format version (``identity.FORMAT_VERSION``), u32 LE
12     4     the object's size in bytes (header included), u32 LE
16     32    SHA-256 of the physical layout (:attr:`BlockLayout.digest`)
48     16    the first 16 bytes of the block's chunk hash
====== ===== =====================================================

The header makes a block of another layout or size, or a block filed under
another key, a load error rather than wrong KV, even where the key would not
tell. (The daemon answers a block's size rounded up to the pool's
alignment; the header holds the exact one.)
"""

import hashlib
import struct
from typing import Dict, List, Sequence, Tuple

import torch

from .identity import FORMAT_VERSION

__all__ = ["BlockLayout", "HEADER_BYTES", "LayoutError"]

HEADER_BYTES = 64
_MAGIC = b"KVALVLLM"
_HEADER = struct.Struct("<8sII32s16s")  # magic, format, size, digest, hash
assert _HEADER.size == HEADER_BYTES


class LayoutError(ValueError):
    """The registered KV tensors have no block dimension this connector
    can find, or a block's bytes do not match this layout."""


class _Layer:
    __slots__ = ("names", "tensor", "dim", "ratio", "shape", "nbytes",
                 "offset")

    def __init__(self, names: List[str], tensor: torch.Tensor, dim: int,
                 ratio: int, offset: int) -> None:
        self.names = names
        self.tensor = tensor
        self.dim = dim
        self.ratio = ratio
        s = tensor.narrow(dim, 0, ratio)
        self.shape = tuple(s.shape)
        self.nbytes = s.numel() * tensor.element_size()
        self.offset = offset

    def slice(self, block: int) -> torch.Tensor:
        return self.tensor.narrow(self.dim, block * self.ratio, self.ratio)


def find_block_dim(shape: Sequence[int], stride: Sequence[int],
                   num_blocks: int, block_size: int) -> Tuple[int, int]:
    """The dimension of a KV tensor that indexes blocks, and the kernel
    blocks per vLLM block along it.

    A dimension of exactly ``num_blocks``, the outermost (largest stride)
    where several are; else the outermost dimension if it is of
    ``num_blocks * r`` with ``r`` dividing ``block_size`` (a backend whose
    kernel splits each block in ``r``).
    """
    exact = [d for d, n in enumerate(shape) if n == num_blocks]
    if exact:
        return max(exact, key=lambda d: stride[d]), 1
    # A split block: only the outermost dimension can be the blocks'.
    d = max(range(len(shape)), key=lambda d: stride[d])
    n = shape[d]
    if n > num_blocks and n % num_blocks == 0 \
            and block_size % (n // num_blocks) == 0:
        return d, n // num_blocks
    raise LayoutError(
        f"KV cache tensor of shape {tuple(shape)} has no dimension of "
        f"{num_blocks} blocks (or one multiple of it dividing the block "
        f"size {block_size}): unknown layout")


class BlockLayout:
    """Where block ``b``'s KV is in every registered tensor, and how to
    copy it to and from a stored object."""

    def __init__(self, kv_caches: Dict[str, torch.Tensor], num_blocks: int,
                 block_size: int) -> None:
        if not kv_caches:
            raise LayoutError("no KV cache tensors registered")
        if num_blocks <= 0:
            raise LayoutError(f"num_blocks {num_blocks}")
        self.num_blocks = num_blocks
        seen: Dict[Tuple, _Layer] = {}
        layers: List[_Layer] = []
        desc = [f"format={FORMAT_VERSION}"]
        off = HEADER_BYTES
        for name in sorted(kv_caches):
            t = kv_caches[name]
            if not isinstance(t, torch.Tensor):
                raise LayoutError(f"layer {name}: a {type(t).__name__}, not a"
                                  " tensor (a list per layer is not a layout "
                                  "this connector knows)")
            if t.device.type != "cpu":
                raise LayoutError(f"layer {name}: on {t.device}; this "
                                  "connector copies CPU tensors only")
            ident = (t.data_ptr(), tuple(t.shape), tuple(t.stride()),
                     t.dtype)
            if ident in seen:  # a layer that shares another's KV
                seen[ident].names.append(name)
                continue
            dim, ratio = find_block_dim(t.shape, t.stride(), num_blocks,
                                        block_size)
            layer = _Layer([name], t, dim, ratio, off)
            seen[ident] = layer
            layers.append(layer)
            off += layer.nbytes
        self.layers = layers
        for layer in layers:
            t = layer.tensor
            desc.append(f"{','.join(layer.names)}:{t.dtype}:"
                        f"{tuple(t.shape)}:{tuple(t.stride())}:"
                        f"block_dim={layer.dim}x{layer.ratio}")
        #: A line per unique tensor: names, dtype, shape, strides, block
        #: dimension (logged at start).
        self.description = desc
        #: SHA-256 of the description (with the shapes' block dimension,
        #: which depends on the pool's size, left out).
        self.digest = hashlib.sha256("\n".join(
            _sans_blocks(layer) for layer in layers).encode()
            + f"\nformat={FORMAT_VERSION}".encode()).digest()
        #: The bytes of one stored block: the header and every layer's
        #: slice.
        self.object_bytes = off
        if off >= 1 << 32:
            raise LayoutError(f"a block of {off} bytes: over 4 GiB")

    def header(self, chunk_hash: bytes) -> bytes:
        """The header of the object holding the block of ``chunk_hash``."""
        return _HEADER.pack(_MAGIC, FORMAT_VERSION, self.object_bytes,
                            self.digest,
                            bytes(chunk_hash[:16]).ljust(16, b"\0"))

    def block_bytes(self, align: int) -> int:
        """The size of this layout's block in a pool of alignment
        ``align``: the object's size rounded up to it."""
        return -(-self.object_bytes // align) * align

    def check(self, view: memoryview, chunk_hash: bytes,
              align: int = 1) -> str:
        """Why the block in ``view`` (as the daemon sized it, in a pool of
        alignment ``align``) cannot be loaded as this layout's block of
        ``chunk_hash``; "" when it can."""
        if len(view) != self.block_bytes(align):
            return (f"a block of {len(view)} bytes where this layout's is "
                    f"{self.block_bytes(align)}")
        if bytes(view[:HEADER_BYTES]) != self.header(chunk_hash):
            return "header of another layout, format or block"
        return ""

    def _seg(self, view: memoryview, layer: _Layer) -> torch.Tensor:
        buf = torch.frombuffer(view, dtype=torch.uint8,
                               count=layer.nbytes, offset=layer.offset)
        return buf.view(layer.tensor.dtype).view(layer.shape)

    def store(self, block: int, view: memoryview, chunk_hash: bytes) -> None:
        """Copy vLLM's block ``block`` into the object ``view``: straight
        from the paged tensors into the pool's mapping."""
        self._bounds(block)
        if len(view) < self.object_bytes:
            raise LayoutError(f"object of {len(view)} bytes for a block of "
                              f"{self.object_bytes}")
        view[:HEADER_BYTES] = self.header(chunk_hash)
        for layer in self.layers:
            self._seg(view, layer).copy_(layer.slice(block))

    def load(self, view: memoryview, block: int) -> None:
        """Copy the object ``view`` into vLLM's block ``block`` (checked by
        :meth:`check` first)."""
        self._bounds(block)
        for layer in self.layers:
            layer.slice(block).copy_(self._seg(view, layer))

    def _bounds(self, block: int) -> None:
        if not 0 <= block < self.num_blocks:
            raise LayoutError(f"block {block} outside [0, {self.num_blocks})")


def _sans_blocks(layer: _Layer) -> str:
    t = layer.tensor
    shape = list(t.shape)
    shape[layer.dim] = -layer.ratio
    order = sorted(range(t.dim()), key=lambda d: -t.stride()[d])
    return (f"{','.join(layer.names)}:{t.dtype}:{shape}:order={order}:"
            f"dim={layer.dim}")
