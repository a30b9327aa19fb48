"""What answers carry: per-key results and statuses, the hello, the stats.

:class:`Results` and :class:`StatusList` read their frame lazily: the
per-key columns (statuses, offsets, sizes, generations, leases) are cut out
of the answer's bytes in C (strided ``memoryview`` copies into ``array``),
so a 10,000-key answer costs no Python loop until you index it.
"""

import struct
import sys
from array import array
from typing import (Iterable, Iterator, List, NamedTuple, Optional,
                    Sequence, Tuple, Union)

from .enums import Status
from .errors import InvalidArgumentError

__all__ = [
    "Result", "Results", "StatusList", "Hello", "Stats", "STATS_NAMES",
    "RESULT_SIZE", "Lookup", "pack_results",
]

#: The size of one result record on the wire.
RESULT_SIZE = 40

# One result record: status, 3 reserved bytes, handle (version 2; 0 in
# version 1), offset, size, generation, lease.
_RESULT = struct.Struct("<B3xIqqQQ")

_LITTLE = sys.byteorder == "little"


def _status(v: int) -> Union[Status, int]:
    try:
        return Status(v)
    except ValueError:
        return v


class Result(NamedTuple):
    """One key's outcome in a results answer.

    ``offset`` and ``size`` are the block's bytes in the pool, ``gen`` the
    allocator's generation of the block, ``lease`` the lock's lease; all 0
    unless ``status`` is ``OK``. ``handle`` is the connection's handle of
    the lock's record on a version 2 connection (``PROTOCOL.md``, "Version
    2: key handles"); 0 in version 1 and unless ``OK``.
    """

    status: Union[Status, int]
    offset: int
    size: int
    gen: int
    lease: int
    handle: int = 0


class StatusList(Sequence[Union[Status, int]]):
    """One status per key, in request order.

    Items are :class:`~kvalloc.enums.Status` members (an unknown value
    stays an ``int``); :attr:`raw` is the bytes as they came.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return StatusList(self.raw[i])
        return _status(self.raw[i])

    def __iter__(self) -> Iterator[Union[Status, int]]:
        return map(_status, self.raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StatusList):
            return self.raw == other.raw
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def all_ok(self) -> bool:
        """Whether every key is ``OK``."""
        return self.raw.count(0) == len(self.raw)

    def count_of(self, status: Status) -> int:
        """How many keys have ``status``."""
        return self.raw.count(int(status))

    def indices(self, status: Status = Status.OK) -> List[int]:
        """The positions of the keys with ``status``, in order."""
        raw, want, out, i = self.raw, int(status), [], -1
        while True:
            i = raw.find(want, i + 1)
            if i < 0:
                return out
            out.append(i)

    def __repr__(self) -> str:
        return f"StatusList({[getattr(s, 'name', s) for s in self]})"


def _column(words: memoryview, field: int, typecode: str) -> array:
    out = array(typecode)
    out.frombytes(words[field::5].tobytes())
    if not _LITTLE:
        out.byteswap()
    return out


def pack_results(results: Sequence[Result]) -> bytes:
    """Result records, 40 bytes each, as a results answer lays them out.

    A record may be a :class:`Result` or a tuple of its first five fields
    (handle 0).
    """
    try:
        return b"".join(_RESULT.pack(x[0], x[5] if len(x) > 5 else 0,
                                     x[1], x[2], x[3], x[4])
                        for x in results)
    except (struct.error, TypeError, IndexError) as e:
        raise InvalidArgumentError(f"a result is out of range: {e}") from None


class Results(Sequence[Result]):
    """One :class:`Result` per key, in request order, over the answer.

    ``statuses`` is a :class:`StatusList`; ``offsets``, ``sizes``,
    ``gens`` are ``array('q')``/``array('Q')`` columns and ``leases`` an
    ``array('Q')`` that the finishing calls take as it is; ``handles``
    (``array('I')``) are version 2's handles, all 0 in version 1. ``prefix`` is
    reserve_read_prefix's count of keys locked (results ``[0, prefix)``
    are ``OK``), 0 for the other calls. ``epoch`` is the daemon's that
    handed out the blocks and leases: a client refuses them under another.
    """

    __slots__ = ("statuses", "prefix", "epoch", "_records", "_words",
                 "_cols", "origin")

    def __init__(self, records: memoryview, prefix: int = 0,
                 epoch: int = 0) -> None:
        """``records`` is the answer's ``40 * n`` bytes of results."""
        self.statuses = StatusList(records[0::RESULT_SIZE].tobytes())
        self.prefix = prefix
        self.epoch = epoch
        self._records = records
        self._words = records.cast("Q")
        self._cols: dict = {}
        #: For results made by :meth:`select`: the Results they were
        #: selected from and the indices, as a tuple; else None.
        self.origin: Optional[Tuple["Results", Tuple[int, ...]]] = None

    @classmethod
    def from_list(cls, results: Sequence[Result], prefix: int = 0,
                  epoch: int = 0) -> "Results":
        """Results made from Python values (for tests and fakes)."""
        return cls(memoryview(pack_results(results)), prefix, epoch)

    def _col(self, field: int, typecode: str) -> array:
        c = self._cols.get(field)
        if c is None:
            c = self._cols[field] = _column(self._words, field, typecode)
        return c

    @property
    def offsets(self) -> array:
        """Each block's offset in the pool (0 unless ``OK``)."""
        return self._col(1, "q")

    @property
    def sizes(self) -> array:
        """Each block's size: the object's size rounded up to the alignment."""
        return self._col(2, "q")

    @property
    def gens(self) -> array:
        """Each block's allocator generation."""
        return self._col(3, "Q")

    @property
    def leases(self) -> array:
        """Each key's lease, ``array('Q')``; 0 unless ``OK``."""
        return self._col(4, "Q")

    @property
    def handles(self) -> array:
        """Each key's handle, ``array('I')``: on a version 2 connection the
        handle of the lock's record, 0 unless ``OK``; 0 in version 1."""
        c = self._cols.get(-1)
        if c is None:
            c = self._cols[-1] = array("I")
            c.frombytes(self._records.cast("I")[1::RESULT_SIZE // 4]
                        .tobytes())
            if not _LITTLE:
                c.byteswap()
        return c

    def all_ok(self) -> bool:
        """Whether every key is ``OK``."""
        return self.statuses.all_ok()

    def ok_indices(self) -> List[int]:
        """The positions of the ``OK`` keys, in order."""
        return self.statuses.indices(Status.OK)

    def over_limit_at(self) -> int:
        """The position of the first key the daemon cut for its
        per-connection limits (``Status.OVER_LIMIT``), or -1 when none.

        The keys before it were carried out as without the limit; that key
        and every later one were not passed on and nothing changed for them
        (after a ``reserve_read_prefix`` cut, the later ones are
        ``SKIPPED``). Give back what the connection holds, then send the
        rest again.
        """
        i = self.statuses.indices(Status.OVER_LIMIT)
        return i[0] if i else -1

    def select(self, indices: Iterable[int]) -> "Results":
        """The results at ``indices``, in that order (prefix 0).

        With :meth:`KeyBatch.subset <kvalloc.keys.KeyBatch.subset>` of the
        same indices it makes the finishing call of a partial grant:
        ``finish_write(keys.subset(ok), res.select(ok))``.
        """
        rec, n, parts, idx = self._records, len(self), [], []
        for i in indices:
            if not -n <= i < n:
                raise IndexError(f"result {i} of {n}")
            i %= n
            idx.append(i)
            parts.append(rec[i * RESULT_SIZE:(i + 1) * RESULT_SIZE])
        out = Results(memoryview(b"".join(parts)), 0, self.epoch)
        out.origin = (self, tuple(idx))
        return out

    def __len__(self) -> int:
        return len(self.statuses)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return Result(self.statuses[i], self.offsets[i], self.sizes[i],
                      self.gens[i], self.leases[i], self.handles[i])

    def __iter__(self) -> Iterator[Result]:
        return map(Result, self.statuses, self.offsets, self.sizes,
                   self.gens, self.leases, self.handles)

    def __repr__(self) -> str:
        return f"Results({len(self)} keys, prefix {self.prefix})"


class Lookup(NamedTuple):
    """The lookup answer: how much of the keys, as a prefix, each tier holds.

    Keys ``[0, l1)`` are readable in L1, ``[l1, l1 + l2)`` are in L2, and
    the daemon began loading ``[l1, l1 + prefetch)`` into L1.
    """

    n: int
    l1: int
    l2: int
    prefetch: int


class Hello(NamedTuple):
    """The hello answer: the daemon's version and limits, and the pool.

    ``version`` is the version the connection speaks (the hello's);
    ``versions`` is, in the answer to a version 2 hello, the versions the
    daemon speaks, bit v for version v (``0b110``: 1 and 2), and 0 in the
    answer to a version 1 hello.
    """

    version: int
    max_keys: int
    max_frame: int
    pool_size: int
    align: int
    versions: int = 0


#: The names of the stats answer's values, in wire order.
STATS_NAMES = (
    "objects", "write_locked", "temporary_read_locked",
    "held_bytes", "used_bytes", "capacity_bytes", "quarantined_bytes",
    "pool_bytes", "ready_bytes",
    "conns_open", "conns_accepted", "conns_closed", "conns_refused",
    "released_writes", "released_read_locks", "released_bytes",
    "write_reservations", "partial_grants", "failed_reservations",
    "oom_keys", "evictions", "on_demand_evictions", "expired",
    "free_errors", "quarantines",
    "lookups_read_calls", "lookups_read_hits", "lookups_read_misses",
    "lookups_read_skipped",
    "lookups_read_prefix_calls", "lookups_read_prefix_hits",
    "lookups_read_prefix_misses", "lookups_read_prefix_skipped",
    "lookups_unsafe_read_calls", "lookups_unsafe_read_hits",
    "lookups_unsafe_read_misses", "lookups_unsafe_read_skipped",
    "lookups_write_calls", "lookups_write_hits", "lookups_write_misses",
    "lookups_write_skipped",
)


class Stats(NamedTuple):
    """The daemon's figures of one moment (``PROTOCOL.md``, stats answer).

    A value the daemon did not send is 0; values past these are ignored.
    """

    objects: int = 0
    write_locked: int = 0
    temporary_read_locked: int = 0
    held_bytes: int = 0
    used_bytes: int = 0
    capacity_bytes: int = 0
    quarantined_bytes: int = 0
    pool_bytes: int = 0
    ready_bytes: int = 0
    conns_open: int = 0
    conns_accepted: int = 0
    conns_closed: int = 0
    conns_refused: int = 0
    released_writes: int = 0
    released_read_locks: int = 0
    released_bytes: int = 0
    write_reservations: int = 0
    partial_grants: int = 0
    failed_reservations: int = 0
    oom_keys: int = 0
    evictions: int = 0
    on_demand_evictions: int = 0
    expired: int = 0
    free_errors: int = 0
    quarantines: int = 0
    lookups_read_calls: int = 0
    lookups_read_hits: int = 0
    lookups_read_misses: int = 0
    lookups_read_skipped: int = 0
    lookups_read_prefix_calls: int = 0
    lookups_read_prefix_hits: int = 0
    lookups_read_prefix_misses: int = 0
    lookups_read_prefix_skipped: int = 0
    lookups_unsafe_read_calls: int = 0
    lookups_unsafe_read_hits: int = 0
    lookups_unsafe_read_misses: int = 0
    lookups_unsafe_read_skipped: int = 0
    lookups_write_calls: int = 0
    lookups_write_hits: int = 0
    lookups_write_misses: int = 0
    lookups_write_skipped: int = 0


assert Stats._fields == STATS_NAMES
