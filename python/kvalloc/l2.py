"""The L2 tier's read path: lookup and reserve_read_prefix_wait.

A daemon started with an L2 store (``kvallocd -l2 redis://...``) reports
how much of a prompt its L1 and the store hold, and loads the L2 part into
L1 on request; ``wire/PROTOCOL.md`` ("The L2 tier") is the contract.
:class:`L2Calls` is the part of :class:`kvalloc.Client` that makes these
calls.
"""

import math
import operator
from typing import Optional, Sequence, Union

from .enums import Flag, MessageType
from .errors import FrameError, InvalidArgumentError
from .keys import Keys
from .limits import check_read_locks as _locks
from .protocol import pack_array
from .results import Lookup, Results

__all__ = ["L2Calls", "MAX_WAIT"]

#: The longest wait reserve_read_prefix_wait takes, in seconds (10 s).
MAX_WAIT = 10.0
_MAX_WAIT_US = 10_000_000


#: Expected sizes: one ``int`` for every key, or one per key.
Sizes = Union[int, Sequence[int]]

_I64_MAX = (1 << 63) - 1


def _sizes(sizes: Optional[Sizes], n: int):
    """The flag and packed tail of expected sizes for ``n`` keys:
    ``(0, b"")`` for None. Each size must be an ``int`` in ``[1, 2**63)``;
    a sequence must hold one per key."""
    if sizes is None:
        return 0, b""
    if _integer(sizes) is not None:
        sizes = [sizes] * n
    elif isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__"):
        raise InvalidArgumentError(f"expected sizes {sizes!r}: an int or "
                                   "one int per key")
    if len(sizes) != n:
        raise InvalidArgumentError(f"{len(sizes)} expected sizes for {n} "
                                   "keys")
    out = []
    for i, z in enumerate(sizes):
        v = _integer(z)
        if v is None or not 1 <= v <= _I64_MAX:
            raise InvalidArgumentError(f"expected size {z!r} of key {i}: "
                                       "an object is at least 1 byte")
        out.append(v)
    return Flag.SIZES, pack_array("q", out, "expected size")


def _integer(v) -> Optional[int]:
    """``v`` as an ``int`` when it is an integer (``__index__``: ``int``,
    numpy's integers), not a bool; else None."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


class L2Calls:
    """lookup and reserve_read_prefix_wait, mixed into the Client."""

    def lookup(self, keys: Keys, prefetch: bool = False,
               timeout: Optional[float] = None,
               budget: float = 0.0,
               sizes: Optional[Sizes] = None) -> Lookup:
        """How much of ``keys``, as a prefix, L1 and L2 hold.

        Keys ``[0, l1)`` are readable in L1 and ``[l1, l1 + l2)`` are in
        the L2 store; nothing is locked and no byte is waited for. With
        ``prefetch`` the daemon also starts loading ``[l1, l1 +
        prefetch)`` into L1; :meth:`reserve_read_prefix_wait` reads them.
        A daemon without L2, or with L2 down, answers ``l2 == 0``.

        The daemon counts only the L2 hits that pay: none while its
        measured L2 load rate is below its break-even (``kvallocd
        -l2-min-rate``), and with a ``budget`` (seconds, ``[0,
        MAX_WAIT]``, rounded up to a microsecond; 0 is none) only those
        it estimates it can load within it.

        ``sizes`` is the payload size the reader expects of each key's
        object (its layout: the KV bytes of a chunk at its TP degree and
        dtype), one ``int`` for all keys or one per key, each at least 1.
        A key is then counted and prefetched only when its object, or its
        L2 value, is exactly that size: the L1 prefix stops at an object
        of another size, and then so does the lookup (``l2 == 0``); the
        L2 run stops at a value of another size. A daemon older than
        expected sizes refuses the frame and closes the connection.
        """
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) \
                or not 0 <= budget <= MAX_WAIT or math.isnan(budget):
            raise InvalidArgumentError(f"budget {budget!r} outside [0, "
                                       f"{MAX_WAIT}] seconds")
        us = min(math.ceil(budget * 1e6), _MAX_WAIT_US)
        kb = self._keys(keys)
        flag, tail = _sizes(sizes, len(kb))
        a = self._keyed(MessageType.LOOKUP, kb, timeout, size=us,
                        flags=(Flag.PREFETCH if prefetch else 0) | flag,
                        tail=tail)
        if a.lookup is None or a.lookup.n != len(kb):
            raise FrameError(a.code, f"lookup answer for {len(kb)} keys "
                             f"says {a.lookup}")
        return a.lookup

    def reserve_read_prefix_wait(self, keys: Keys, locks: int = 1,
                                 wait: float = 0.0,
                                 timeout: Optional[float] = None,
                                 sizes: Optional[Sizes] = None) -> Results:
        """reserve_read_prefix after waiting up to ``wait`` seconds.

        The daemon waits for its prefetch of any of ``keys`` (started by
        :meth:`lookup`) to finish, or for ``wait`` to pass, then locks the
        longest readable prefix. A key still loading stops the prefix as
        ``KEY_NOT_READABLE``: a miss, never an error. ``wait`` is rounded
        up to a microsecond and must be in ``[0, MAX_WAIT]``. ``timeout``
        (the call's own deadline) should exceed ``wait``.

        With ``sizes`` (as in :meth:`lookup`) the prefix also stops at the
        first key whose object is finished in another size: its status is
        ``Status.SIZE_MISMATCH`` (a miss, not locked) and the keys after
        it are ``SKIPPED``. Every key of the prefix is then an object of
        exactly its expected size; its block is that size rounded up to
        the alignment, zeros past the payload when L2 filled it.
        """
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) \
                or not 0 <= wait <= MAX_WAIT or math.isnan(wait):
            raise InvalidArgumentError(f"wait {wait!r} outside [0, "
                                       f"{MAX_WAIT}] seconds")
        us = min(math.ceil(wait * 1e6), _MAX_WAIT_US)
        kb = self._keys(keys)
        flag, tail = _sizes(sizes, len(kb))
        return self._results(MessageType.RESERVE_READ_PREFIX_WAIT, kb,
                             timeout, size=us, locks=_locks(locks),
                             flags=flag, tail=tail)
