"""The handles of one version 2 connection's records.

On a version 2 connection (``PROTOCOL.md``, "Version 2: key handles") the
daemon hands out, with every lock, a ``u32`` handle that names the lock's
record in the connection's ledger, and the finishing calls may name the
record by handle and lease instead of sending the key again. The client
keeps one :class:`HandleTable` per connection and sends a call by handle
only when the table holds a handle for every (key, lease) of the call;
otherwise the call goes by key, as in version 1. The answers are the same
either way.

The table mirrors the daemon's records exactly, so that a handle is never
sent after its record was freed (the daemon may hand a freed handle out
again, to a later record of the connection):

- a **write record** (key, write lease) per ``OK`` of reserve_write; it
  goes once finish_write, abort_write or finish_write_and_reserve_read has
  answered for it, with any status but ``OVER_LIMIT`` (a key past the cut
  was not passed on, and keeps its reservation);
- a **read record** (key, read lease) per key read-locked under a lease,
  with the locks the connection holds under it: each ``OK`` of
  reserve_read, reserve_read_prefix, reserve_read_prefix_wait and
  finish_write_and_reserve_read adds the call's ``locks`` (a key locked
  again under the same lease adds to the same record, with the same
  handle); finish_read's ``OK`` takes its ``locks`` back and the record
  goes with the last; ``OVER_RELEASE`` changes nothing; any other status
  (``STALE_LEASE``, ``KEY_IN_WRONG_STATE``, ``KEY_NOT_EXIST``,
  ``NOT_OWNER``) drops it;
- delete, touch and lookup change no record; a call the daemon refused
  whole drops the records it named (dropping is always safe: a record the
  table does not know is finished by key); the connection's end drops
  every record (the table goes with the connection).

Where the table and the daemon could disagree, the table forgets: a
record it does not hold only costs a call by key, while a record it held
too long could send a freed handle. A key that is not hashable (a
``bytearray`` chunk hash) is never in the table.

**Cost.** Kept record by record (:class:`Records`, dicts by (key, lease))
the table costs some 1 to 2 ms of Python per call of 5,700 keys, more than
the daemon saves. So the ``OK`` records of a grant are kept together, as
a *batch* (the answer's :class:`~kvalloc.results.Results`, the positions
of its ``OK`` keys and those keys), and the finishing call that presents
that ``Results`` with the same keys when every key is ``OK``, or
``results.select(ok)`` with ``keys.subset(ok)`` for exactly the ``OK``
positions (a partial grant, reserve_read_prefix's prefix), goes by the
batch's handles at no cost per key; its answer frees the batch whole
when it frees every record of it (finish_write and abort_write but for
``OVER_LIMIT``; finish_read with every key ``OK`` and the batch's locks).
Anything else first moves the batches it could touch into
:class:`Records`, which then decides as above. A read batch is kept only
while the connection holds no other read record, so that no read record
is in two places.

Not thread-safe: the :class:`~kvalloc.client.Client` reads and changes it
only under its lock, in the order of the answers.
"""

from array import array
from collections import deque
from itertools import repeat
from operator import itemgetter
from typing import Dict, List, Optional, Sequence, Tuple

from .enums import MessageType, Status
from .results import Results

__all__ = ["HandleTable", "Records"]

_OK = int(Status.OK)
_OVER_RELEASE = int(Status.OVER_RELEASE)
_OVER_LIMIT = int(Status.OVER_LIMIT)

Pair = Tuple[object, int]


def _consume(it) -> None:
    deque(it, maxlen=0)


class Records:
    """One connection's records, by (key, lease): write and read records.

    ``writes`` maps (key, write lease) to the record's handle; ``reads``
    maps (key, read lease) to its handle and ``counts`` to the read locks
    the connection holds under it.
    """

    __slots__ = ("writes", "reads", "counts")

    def __init__(self) -> None:
        self.writes: Dict[Pair, int] = {}
        self.reads: Dict[Pair, int] = {}
        self.counts: Dict[Pair, int] = {}

    def __len__(self) -> int:
        """The records held."""
        return len(self.writes) + len(self.reads)

    def clear(self) -> None:
        """Forget every record (the connection ended)."""
        self.writes.clear()
        self.reads.clear()
        self.counts.clear()

    # ---- grants ---------------------------------------------------------

    @staticmethod
    def _granted(keys: Sequence, raw: bytes, leases: array,
                 handles: array) -> Tuple[List[Pair], Sequence[int]]:
        """The (key, lease) pairs and handles of the ``OK`` results that
        carry a handle."""
        n = len(raw)
        if raw.count(_OK) == n and (n == 0 or min(handles)):
            return list(zip(keys, leases)), handles
        ok = [i for i in range(n) if not raw[i] and handles[i]]
        return [(keys[i], leases[i]) for i in ok], [handles[i] for i in ok]

    def wrote(self, keys: Sequence, raw: bytes, leases: array,
              handles: array) -> None:
        """reserve_write answered: a write record per ``OK``."""
        pairs, hs = self._granted(keys, raw, leases, handles)
        try:
            self.writes.update(zip(pairs, hs))
        except TypeError:
            pass  # an unhashable key: it and the keys after it go by key

    def read(self, keys: Sequence, raw: bytes, leases: array,
             handles: array, locks: int) -> None:
        """A read-locking call answered: ``locks`` more under each ``OK``
        key's read record (a new one unless the key already has one under
        that lease)."""
        pairs, hs = self._granted(keys, raw, leases, handles)
        reads, counts = self.reads, self.counts
        try:
            if not reads or reads.keys().isdisjoint(pairs):
                before = len(reads)
                reads.update(zip(pairs, hs))
                if len(reads) - before == len(pairs):
                    counts.update(zip(pairs, repeat(locks)))
                    return
                for p in pairs:  # a key repeated in the call
                    counts[p] = counts.get(p, 0) + locks
                return
            for p, h in zip(pairs, hs):
                if reads.get(p) == h:
                    counts[p] += locks
                else:
                    # A new record (or one the table had wrong): its count
                    # starts here; too low a count only forgets it early.
                    reads[p] = h
                    counts[p] = locks
        except TypeError:
            pass  # an unhashable key: it and the keys after it go by key

    # ---- lookups --------------------------------------------------------

    def write_handles(self, keys: Sequence,
                      leases: array) -> Optional[array]:
        """The handles of the write records (key, lease), one per key, or
        None unless the table holds every one."""
        return _lookup(self.writes, keys, leases)

    def read_handles(self, keys: Sequence, leases: array) -> Optional[array]:
        """The handles of the read records (key, lease), or None unless
        the table holds every one."""
        return _lookup(self.reads, keys, leases)

    def any_handles(self, keys: Sequence
                    ) -> Optional[Tuple[array, array]]:
        """For delete: a record of each key, write or read, as handles and
        their leases; None unless every key has one."""
        if not (self.writes or self.reads) or not keys:
            return None
        by_key: Dict[object, Pair] = {}
        for (k, lease), h in self.writes.items():
            by_key[k] = (h, lease)
        for (k, lease), h in self.reads.items():
            by_key[k] = (h, lease)
        try:
            found = list(map(by_key.__getitem__, keys))
        except (KeyError, TypeError):
            return None
        return (array("I", [h for h, _ in found]),
                array("Q", [lease for _, lease in found]))

    # ---- what the finishing calls free ----------------------------------

    def finished_writes(self, keys: Sequence, leases: array, raw: bytes,
                        handles: Optional[array] = None) -> None:
        """finish_write, abort_write or finish_write_and_reserve_read
        answered ``raw`` (one status per key): every key's write record
        goes but one past a per-connection cut (``OVER_LIMIT``).
        ``handles``: the call's, when it went by handle."""
        writes = self.writes
        if not writes:
            return
        if _OVER_LIMIT not in raw:
            if handles is not None and len(handles) == len(writes) and \
                    len(set(handles)) == len(handles):
                # Distinct handles name distinct records: the call named
                # every record the table holds.
                writes.clear()
                return
            try:
                _consume(map(writes.pop, zip(keys, leases), repeat(None)))
            except TypeError:
                self.forget(keys, leases)
            return
        for p, s in zip(zip(keys, leases), raw):
            if s != _OVER_LIMIT:
                try:
                    writes.pop(p, None)
                except TypeError:
                    pass

    def finished_reads(self, keys: Sequence, leases: array, raw: bytes,
                       locks: int, handles: Optional[array] = None) -> None:
        """finish_read answered ``raw``: ``OK`` takes ``locks`` back from
        the key's read record, which goes with its last lock;
        ``OVER_RELEASE`` changes nothing; any other status drops it."""
        reads, counts = self.reads, self.counts
        if not reads:
            return
        n = len(raw)
        if handles is not None and raw.count(_OK) == n and \
                len(handles) == len(reads) and \
                len(set(handles)) == n and set(counts.values()) == {locks}:
            # Every record the table holds, each giving back its last
            # locks.
            reads.clear()
            counts.clear()
            return
        for p, s in zip(zip(keys, leases), raw):
            try:
                c = counts.get(p)
            except TypeError:
                continue
            if c is None or s == _OVER_RELEASE:
                continue
            if s == _OK and c > locks:
                counts[p] = c - locks
            else:
                del reads[p], counts[p]

    def forget(self, keys: Sequence, leases: array) -> None:
        """Drop every record of these (key, lease) pairs, of either kind:
        the daemon refused a call that named them, and the table no
        longer knows for sure that they are held."""
        for p in zip(keys, leases):
            try:
                self.writes.pop(p, None)
                if self.reads.pop(p, None) is not None:
                    del self.counts[p]
            except TypeError:
                pass


def _lookup(table: Dict[Pair, int], keys: Sequence,
            leases: array) -> Optional[array]:
    if not table:
        return None
    try:
        return array("I", map(table.__getitem__, zip(keys, leases)))
    except (KeyError, TypeError):
        return None


class _Batch:
    """The ``OK`` records of a grant: its ``Results``, the positions of
    its ``OK`` keys (``ok``, None when every key is), those keys, and the
    read locks per key (read)."""

    __slots__ = ("write", "keys", "results", "ok", "locks")

    def __init__(self, write: bool, keys: tuple, results: Results,
                 ok: Optional[Tuple[int, ...]], locks: int) -> None:
        self.write, self.keys, self.results = write, keys, results
        self.ok, self.locks = ok, locks

    def columns(self) -> Tuple[array, array]:
        """The leases and handles of the batch's records."""
        r, ok = self.results, self.ok
        if ok is None:
            return r.leases, r.handles
        if ok[-1] == len(ok) - 1:  # a prefix
            return r.leases[:len(ok)], r.handles[:len(ok)]
        return (array("Q", _pick(self.ok, r.leases)),
                array("I", _pick(self.ok, r.handles)))

    def presented(self, given: object) -> Optional[array]:
        """The handles to send when a call presents ``given`` as its
        leases: those of every record of the batch, in order; else None."""
        r = self.results
        if given is r:
            return r.handles if self.ok is None else None
        origin = getattr(given, "origin", None)
        if origin is None or origin[0] is not r:
            return None
        want = self.ok if self.ok is not None else tuple(range(len(r)))
        return given.handles if origin[1] == want else None


def _pick(idx: Tuple[int, ...], seq: Sequence) -> tuple:
    """``seq``'s items at ``idx``, in C."""
    return itemgetter(*idx)(seq) if len(idx) > 1 else (seq[idx[0]],)


class HandleTable:
    """One connection's handles: whole grants (batches) and, for the
    rest, :class:`Records`."""

    __slots__ = ("records", "batches", "reading")

    def __init__(self) -> None:
        self.records = Records()
        #: Batches by the id of their Results (which they keep alive).
        self.batches: Dict[int, _Batch] = {}
        #: The read batch, if any: while there is one, it holds every read
        #: record of the connection.
        self.reading: Optional[_Batch] = None

    def __len__(self) -> int:
        """The records held (a key repeated in a read batch counts
        twice)."""
        return len(self.records) + sum(len(b.keys)
                                       for b in self.batches.values())

    def clear(self) -> None:
        """Forget every record (the connection ended)."""
        self.records.clear()
        self.batches.clear()
        self.reading = None

    def _settle(self, write: Optional[bool] = None) -> None:
        """Move the batches (of writes, of reads, or all when None) into
        :attr:`records`."""
        for k, b in list(self.batches.items()):
            if write is None or b.write == write:
                del self.batches[k]
                self._unbatch(b)

    def _unbatch(self, b: _Batch) -> None:
        leases, handles = b.columns()
        raw = bytes(len(b.keys))  # every record of a batch is OK
        if b.write:
            self.records.wrote(b.keys, raw, leases, handles)
        else:
            if self.reading is b:
                self.reading = None
            self.records.read(b.keys, raw, leases, handles, b.locks)

    @staticmethod
    def _batch(write: bool, keys: tuple, res: Results,
               locks: int) -> Optional[_Batch]:
        """``res``'s OK records as a batch, or None when there are none or
        one lacks a handle."""
        raw = res.statuses.raw
        n = len(raw)
        if not n or len(keys) != n:
            return None
        hs = res.handles
        if raw.count(_OK) == n:
            return _Batch(write, keys, res, None, locks) if min(hs) else None
        k = raw.count(_OK)
        if not k:
            return None
        if raw.count(_OK, 0, k) == k:  # a prefix: reserve_read_prefix's,
            ok = tuple(range(k))       # an OUT_OF_MEMORY tail's
            if 0 in hs[:k]:
                return None
            return _Batch(write, keys[:k], res, ok, locks)
        ok = tuple([i for i, v in enumerate(raw) if v == _OK])
        if 0 in _pick(ok, hs):
            return None
        return _Batch(write, _pick(ok, keys), res, ok, locks)

    def wrote(self, keys: tuple, res: Results) -> None:
        """reserve_write answered ``res``: a write record per ``OK``."""
        b = self._batch(True, keys, res, 0)
        if b is not None:
            self.batches[id(res)] = b
        else:
            self.records.wrote(keys, res.statuses.raw, res.leases,
                               res.handles)

    def read(self, keys: tuple, res: Results, locks: int) -> None:
        """A read-locking call answered ``res``: ``locks`` more under each
        ``OK`` key's read record."""
        if self.reading is None and not self.records.reads:
            b = self._batch(False, keys, res, locks)
            if b is not None:
                self.reading = self.batches[id(res)] = b
                return
        self._settle(write=False)
        self.records.read(keys, res.statuses.raw, res.leases, res.handles,
                          locks)

    def handles(self, t: MessageType, keys: tuple, given: object,
                leases: array) -> Tuple[Optional[array], Optional[_Batch]]:
        """The handles to send a finishing call of ``keys`` and ``leases``
        (``given`` as the caller gave them) by, and the batch they are,
        if one; (None, None) when the call goes by key."""
        write = t is not MessageType.FINISH_READ
        if isinstance(given, Results):
            origin = given.origin
            b = self.batches.get(id(given if origin is None else origin[0]))
            if b is not None and b.write == write and \
                    (b.keys is keys or b.keys == keys):
                hs = b.presented(given)
                if hs is not None:
                    return hs, b
        self._settle(write)
        r = self.records
        return (r.write_handles(keys, leases) if write else
                r.read_handles(keys, leases)), None

    def finished(self, t: MessageType, keys: tuple, leases: array,
                 raw: bytes, locks: int, b: Optional[_Batch],
                 handles: Optional[array]) -> None:
        """A finishing call answered ``raw``; ``b`` the batch it went by,
        ``handles`` the handles it sent (None: by key)."""
        read = t is MessageType.FINISH_READ
        if b is not None:
            del self.batches[id(b.results)]
            if read:
                self.reading = None
                if raw.count(_OK) == len(raw) and locks == b.locks:
                    return  # each record gave back its last locks
            elif _OVER_LIMIT not in raw:
                return  # every write record went
            self._unbatch(b)
        if read:
            self.records.finished_reads(keys, leases, raw, locks, handles)
        else:
            self.records.finished_writes(keys, leases, raw, handles)

    def delete_handles(self, keys: Sequence
                       ) -> Optional[Tuple[array, array]]:
        """For delete: a record of each key, as handles and leases."""
        if not self.batches and not len(self.records):
            return None
        self._settle()
        return self.records.any_handles(keys)

    def forget(self, keys: Sequence, leases: array) -> None:
        """The daemon refused a call that named these (key, lease) pairs:
        drop their records."""
        self._settle()
        self.records.forget(keys, leases)
