"""Blocks as numpy arrays or torch tensors over the same memory.

Neither library is required: each helper imports its own on first use and
raises ``ImportError`` with a clear message where it is missing. The array
or tensor aliases the pool (no copy): writes through it land in the block,
and it is only meaningful while the lock it was read or written under is
held. It keeps the mapping alive while it lives.
"""

from typing import Any, Optional, Sequence

__all__ = ["as_numpy", "as_tensor"]


def as_numpy(block: memoryview, dtype: Any = "uint8",
             shape: Optional[Sequence[int]] = None) -> Any:
    """``block`` as a ``numpy.ndarray`` of ``dtype`` (and ``shape``).

    ``numpy.frombuffer`` over the block: no copy. The block's size must be
    a multiple of the dtype's itemsize.
    """
    try:
        import numpy
    except ImportError as e:
        raise ImportError("kvalloc.as_numpy needs numpy, which is not "
                          "installed; the client itself does not") from e
    a = numpy.frombuffer(block, dtype=dtype)
    return a if shape is None else a.reshape(shape)


def as_tensor(block: memoryview, dtype: Any = None,
              shape: Optional[Sequence[int]] = None) -> Any:
    """``block`` as a CPU ``torch.Tensor`` of ``dtype`` (default uint8).

    ``torch.frombuffer`` over the block: no copy, so a ``.to("cuda")`` of
    it copies straight from the pool.
    """
    try:
        import torch
    except ImportError as e:
        raise ImportError("kvalloc.as_tensor needs torch, which is not "
                          "installed; the client itself does not") from e
    t = torch.frombuffer(block, dtype=dtype if dtype is not None
                         else torch.uint8)
    return t if shape is None else t.reshape(tuple(shape))
