"""The client: kvallocd's batch calls, and the pool mapped in this process.

Thread safety: a :class:`Client` is safe to share between threads. Each
call holds the client's lock from sending its request to reading its
answer, so calls from several threads run one at a time, in the order
they take the lock; a call blocked by another waits for it (its own
deadline starts when it has the lock). For calls in parallel, use one
client per thread: each is a connection of its own, and owns its own
locks. A client is not fork-safe: a child process must make its own (a
call from another process than the one that connected raises).
"""

import mmap
import os
import threading
import time
from array import array
from typing import List, Optional, Sequence, Union

from .connection import Connection
from .enums import Code, Flag, MessageType, Mode
from .errors import (ConnectionLostError, DeadlineExceededError, FrameError,
                     InvalidArgumentError, KvallocError, WrongEpochError,
                     daemon_error)
from .keys import KeyBatch, Keys
from .l2 import L2Calls
from .limits import (MAX_INT64, MAX_READ_LOCKS, MAX_STRINGS, VERSION,
                     default_socket_path)
from .protocol import (Answer, decode_answer, keyed_request, pack_array,
                       simple_request)
from .results import Hello, Results, Stats, StatusList

__all__ = ["Client", "Leases"]

#: What a finishing call accepts as leases: one per key, in key order. A
#: :class:`Results` gives its ``leases``.
Leases = Union[Results, array, Sequence[int]]

_MT = MessageType


class Client(L2Calls):
    """A connection to kvallocd, with the daemon's pool mapped.

    Every call is one request frame, answered per key in request order
    (``wire/PROTOCOL.md``), and has a deadline: ``timeout`` seconds (the
    client's default, 10 s, unless the call is given its own). Arguments
    are checked before anything is sent; a bad one raises
    :class:`InvalidArgumentError` and nothing changes. A daemon that dies
    or stalls raises :class:`ConnectionLostError` (a
    :class:`DeadlineExceededError` for a stall) within the deadline, and
    the client is closed: :meth:`reconnect` connects to the next daemon.

    Everything the connection reserved or read-locked is the
    connection's: when it ends, however, the daemon aborts its writes and
    releases its read locks.
    """

    def __init__(self, path: Optional[str] = None,
                 timeout: float = 10.0) -> None:
        """Connect to the daemon at ``path`` and map its pool.

        ``path`` None is :func:`~kvalloc.limits.default_socket_path`.
        """
        if not timeout > 0:
            raise InvalidArgumentError(f"timeout {timeout!r} must be > 0")
        self.path = path or default_socket_path()
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._conn: Optional[Connection] = None
        self._map: Optional[mmap.mmap] = None
        self._pool: Optional[memoryview] = None
        self._pid = 0
        self._id = 0
        #: The hello answer: version, limits, pool size and alignment.
        self.hello = Hello(0, 0, 0, 0, 0)
        #: The pool's epoch; new at each daemon start.
        self.epoch = 0
        self.connect()

    # ---- the connection -------------------------------------------------

    def connect(self, timeout: Optional[float] = None) -> None:
        """Connect (again): hello, receive the memfd, map it.

        Closes the current connection first, if any.
        """
        with self._lock:
            self._close_locked()
            deadline = self._deadline(timeout)
            conn = Connection(self.path, deadline)
            try:
                self._hello(conn, deadline)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._pid = os.getpid()

    def _hello(self, conn: Connection, deadline: float) -> None:
        sent: Optional[ConnectionLostError] = None
        try:
            conn.send(simple_request(_MT.HELLO, 1, 0), deadline)
        except DeadlineExceededError:
            raise
        except ConnectionLostError as e:
            # A refused peer's answer may be waiting although the daemon
            # closed before the hello was written: read it.
            sent = e
        try:
            frame, fd = conn.recv(deadline, with_fd=True)
        except ConnectionLostError:
            if sent is not None:
                raise sent from None
            raise
        try:
            a = decode_answer(frame)
            if a.code is not Code.OK:
                raise daemon_error(a.code, a.message)
            h = a.hello
            if a.type is not _MT.HELLO or a.id != 1 or h is None:
                raise FrameError(Code.BAD_FRAME, "the answer to the hello "
                                 f"is a {a.type.wire_name} answer, id {a.id}")
            if h.version != VERSION:
                raise FrameError(Code.BAD_VERSION, f"kvallocd speaks version "
                                 f"{h.version}; this client {VERSION}")
            if fd is None:
                raise FrameError(Code.BAD_FRAME, "the hello answer came "
                                 "without the pool's file descriptor")
            if h.pool_size <= 0 or h.align <= 0 or not a.epoch:
                raise FrameError(Code.BAD_FRAME, f"hello answer with pool "
                                 f"size {h.pool_size}, alignment {h.align}, "
                                 f"epoch {a.epoch}")
            try:
                self._map = mmap.mmap(fd, h.pool_size, flags=mmap.MAP_SHARED,
                                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
            except (OSError, ValueError) as e:
                raise KvallocError(f"kvalloc: mapping the pool of "
                                   f"{h.pool_size} bytes: {e}") from e
        finally:
            if fd is not None:
                os.close(fd)
        self._pool = memoryview(self._map)
        self.hello, self.epoch, self._id = h, a.epoch, 1

    def reconnect(self, timeout: Optional[float] = None) -> None:
        """Close, then connect to whichever daemon serves the path now.

        Blocks and leases of the old connection are void; views of the
        old pool stay readable while you hold them, but mean nothing.
        """
        self.connect(timeout)

    def close(self) -> None:
        """Close the connection and unmap the pool.

        The daemon releases everything the connection held. The mapping is
        unmapped at once unless views of it are still alive; then it goes
        when the last one does.
        """
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.release()
        m, self._map = self._map, None
        if m is not None:
            try:
                m.close()
            except BufferError:
                pass  # views are alive; the mapping goes with the last

    @property
    def closed(self) -> bool:
        """Whether the client has no connection."""
        return self._conn is None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the pool's memory ----------------------------------------------

    @property
    def pool(self) -> memoryview:
        """The whole pool, mapped: a writable ``memoryview`` of its bytes."""
        if self._pool is None:
            raise ConnectionLostError("kvalloc: the client is closed")
        return self._pool

    def block(self, offset: int, size: int) -> memoryview:
        """The pool's bytes ``[offset, offset + size)``, no copy."""
        pool = self.pool
        if not (0 <= offset and 0 <= size and offset + size <= len(pool)):
            raise InvalidArgumentError(
                f"block [{offset}, {offset}+{size}) is outside the pool of "
                f"{len(pool)} bytes")
        return pool[offset:offset + size]

    def view(self, results: Results, i: int) -> memoryview:
        """The block of ``results[i]``, which must be ``OK``; no copy.

        It spans the whole block (the object's size rounded up to the
        alignment); slice it to the object's size.
        """
        self._same_epoch(results)
        if results.statuses.raw[i] != 0:
            raise InvalidArgumentError(
                f"result {i} is {results.statuses[i]!r}: it holds no block")
        return self.block(results.offsets[i], results.sizes[i])

    def _same_epoch(self, results: Results) -> None:
        if results.epoch != self.epoch:
            raise WrongEpochError(
                Code.WRONG_EPOCH, f"results of epoch {results.epoch:#x} on a "
                f"connection of epoch {self.epoch:#x}: an earlier daemon's "
                "blocks and leases are void")

    def views(self, results: Results) -> List[Optional[memoryview]]:
        """Each result's block (:meth:`view`), None where not ``OK``."""
        self._same_epoch(results)
        pool = self.pool
        raw, offs, sizes = results.statuses.raw, results.offsets, \
            results.sizes
        return [pool[offs[i]:offs[i] + sizes[i]] if raw[i] == 0 else None
                for i in range(len(raw))]

    # ---- calls ----------------------------------------------------------

    def ping(self, timeout: Optional[float] = None) -> None:
        """An empty round trip."""
        self._call(_MT.PING, None, timeout)

    def stats(self, timeout: Optional[float] = None) -> Stats:
        """The daemon's figures of this moment."""
        a = self._call(_MT.STATS, None, timeout)
        if a.stats is None:
            raise self._broken("a stats answer without stats")
        return a.stats

    def reserve_write(self, keys: Keys, size: int, mode: Mode = Mode.ALL,
                      temporary: Optional[Sequence[bool]] = None,
                      positions: Optional[Sequence[int]] = None,
                      timeout: Optional[float] = None) -> Results:
        """Reserve a block of ``size`` bytes per key for writing.

        ``mode`` is l1's (``ALL``, ``NEW``, ``UPDATE``). ``temporary``,
        one bool per key, marks temporary objects; ``positions``, one
        ``u32`` per key, are chain positions (``ReserveWriteChain``), with
        :data:`~kvalloc.enums.PARTIAL` OR'ed in for a partial chunk. Each
        ``OK`` carries the block and the write lease that
        :meth:`finish_write` or :meth:`abort_write` must present.
        """
        kb = self._keys(keys)
        n = len(kb)
        size = _size(size)
        try:
            mode = Mode(mode)
        except ValueError:
            raise InvalidArgumentError(
                f"mode {mode!r} is not a Mode (0 all, 1 new, 2 update)"
            ) from None
        flags, tail = 0, []
        if temporary is not None:
            _one_per_key(temporary, n, "temporary flags")
            flags |= Flag.TEMPORARY
            tail.append(bytes(map(bool, temporary)))
        if positions is not None:
            _one_per_key(positions, n, "positions")
            flags |= Flag.POSITIONS
            tail.append(pack_array("I", positions, "position"))
        return self._results(_MT.RESERVE_WRITE, kb, timeout, size=size,
                             mode=mode, flags=flags, tail=b"".join(tail))

    def finish_write(self, keys: Keys, leases: Leases,
                     timeout: Optional[float] = None) -> StatusList:
        """Publish written objects: one write lease per key."""
        kb = self._keys(keys)
        return self._statuses(_MT.FINISH_WRITE, kb, timeout,
                              tail=_leases(leases, len(kb), self.epoch))

    def abort_write(self, keys: Keys, leases: Leases,
                    timeout: Optional[float] = None) -> StatusList:
        """Give back write reservations unwritten: one lease per key."""
        kb = self._keys(keys)
        return self._statuses(_MT.ABORT_WRITE, kb, timeout,
                              tail=_leases(leases, len(kb), self.epoch))

    def finish_write_and_reserve_read(
            self, keys: Keys, leases: Leases, locks: int = 1,
            timeout: Optional[float] = None) -> Results:
        """Publish written objects and read-lock them, ``locks`` each."""
        kb = self._keys(keys)
        return self._results(_MT.FINISH_WRITE_AND_RESERVE_READ, kb, timeout,
                             locks=_locks(locks),
                             tail=_leases(leases, len(kb), self.epoch))

    def reserve_read(self, keys: Keys, locks: int = 1,
                     timeout: Optional[float] = None) -> Results:
        """Read-lock every readable key, ``locks`` each."""
        kb = self._keys(keys)
        return self._results(_MT.RESERVE_READ, kb, timeout,
                             locks=_locks(locks))

    def reserve_read_prefix(self, keys: Keys, locks: int = 1,
                            timeout: Optional[float] = None) -> Results:
        """Read-lock the longest readable prefix of ``keys``.

        ``Results.prefix`` is its length: results ``[0, prefix)`` are
        ``OK``, the first key after it says why it stopped, the rest are
        ``SKIPPED``.
        """
        kb = self._keys(keys)
        return self._results(_MT.RESERVE_READ_PREFIX, kb, timeout,
                             locks=_locks(locks))

    def finish_read(self, keys: Keys, leases: Leases, locks: int = 1,
                    timeout: Optional[float] = None) -> StatusList:
        """Release ``locks`` read locks per key, under their read leases."""
        kb = self._keys(keys)
        return self._statuses(_MT.FINISH_READ, kb, timeout,
                              locks=_locks(locks),
                              tail=_leases(leases, len(kb), self.epoch))

    def delete(self, keys: Keys, force: bool = False,
               timeout: Optional[float] = None) -> StatusList:
        """Delete objects; with ``force`` even locked ones."""
        kb = self._keys(keys)
        return self._statuses(_MT.DELETE, kb, timeout,
                              flags=Flag.FORCE if force else 0)

    def touch(self, keys: Keys, timeout: Optional[float] = None) -> None:
        """Mark objects as used (for the eviction policy)."""
        kb = self._keys(keys)
        self._keyed(_MT.TOUCH, kb, timeout)

    # ---- plumbing -------------------------------------------------------

    def _keys(self, keys: Keys) -> KeyBatch:
        kb = keys if isinstance(keys, KeyBatch) else KeyBatch(keys)
        limit = self.hello.max_keys
        if len(kb) > limit:
            raise InvalidArgumentError(
                f"{len(kb)} keys exceed the daemon's limit {limit}")
        if len(kb._strings) > MAX_STRINGS:
            raise InvalidArgumentError(
                f"the keys name more than {MAX_STRINGS} models and salts")
        return kb

    def _results(self, t: MessageType, kb: KeyBatch,
                 timeout: Optional[float], **params: int) -> Results:
        a = self._keyed(t, kb, timeout, **params)
        return self._counted(t, a.results, len(kb), "results")

    def _statuses(self, t: MessageType, kb: KeyBatch,
                  timeout: Optional[float], **params: int) -> StatusList:
        a = self._keyed(t, kb, timeout, **params)
        return self._counted(t, a.statuses, len(kb), "statuses")

    def _counted(self, t: MessageType, got, n: int, what: str):
        """``got``, checked to hold one entry per key."""
        if got is None or len(got) != n:
            raise self._broken(f"{t.wire_name} answer with "
                               f"{len(got or ())} {what} for {n} keys")
        return got

    def _keyed(self, t: MessageType, kb: KeyBatch, timeout: Optional[float],
               size: int = 0, locks: int = 0, mode: int = 0, flags: int = 0,
               tail: bytes = b"") -> Answer:
        def frame(id_: int, epoch: int) -> bytes:
            f = keyed_request(t, id_, epoch, kb, size, locks, mode, flags,
                              tail)
            if len(f) > self.hello.max_frame:
                raise InvalidArgumentError(
                    f"{t.wire_name} of {len(kb)} keys is a frame of "
                    f"{len(f)} bytes, over the daemon's limit "
                    f"{self.hello.max_frame}")
            return f
        return self._call(t, frame, timeout)

    def _call(self, t: MessageType, frame, timeout: Optional[float]) -> Answer:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise ConnectionLostError(
                    "kvalloc: the client is closed; reconnect()")
            if os.getpid() != self._pid:
                raise KvallocError(
                    "kvalloc: this client was connected by another process "
                    f"(pid {self._pid}); make a new Client after fork")
            deadline = self._deadline(timeout)
            id_ = self._id = (self._id % 0xFFFFFFFF) + 1
            data = frame(id_, self.epoch) if frame is not None else \
                simple_request(t, id_, self.epoch)
            try:
                conn.send(data, deadline)
                raw, _ = conn.recv(deadline)
                a = decode_answer(raw)
            except (ConnectionLostError, FrameError):
                self._close_locked()
                raise
            if a.code is not Code.OK:
                err = daemon_error(a.code, a.message)
                if a.code.closes:
                    self._close_locked()
                raise err
            if a.id != id_ or a.type is not t:
                self._close_locked()
                raise FrameError(Code.BAD_FRAME, f"answer {a.type.wire_name} "
                                 f"id {a.id} to {t.wire_name} id {id_}")
            return a

    def _broken(self, what: str) -> FrameError:
        with self._lock:
            self._close_locked()
        return FrameError(Code.BAD_FRAME, f"kvallocd sent {what}")

    def _deadline(self, timeout: Optional[float]) -> float:
        t = self.timeout if timeout is None else timeout
        if not t > 0:
            raise InvalidArgumentError(f"timeout {t!r} must be > 0")
        return time.monotonic() + t


def _one_per_key(values: Sequence, n: int, what: str) -> None:
    try:
        m = len(values)
    except TypeError:
        raise InvalidArgumentError(f"{what} must be a sequence") from None
    if m != n:
        raise InvalidArgumentError(f"{m} {what} for {n} keys")


def _leases(leases: Leases, n: int, epoch: int) -> bytes:
    if isinstance(leases, Results):
        if leases.epoch != epoch:
            raise WrongEpochError(
                Code.WRONG_EPOCH, f"leases of epoch {leases.epoch:#x} on a "
                f"connection of epoch {epoch:#x}: an earlier daemon's "
                "leases are void")
        leases = leases.leases
    _one_per_key(leases, n, "leases")
    return pack_array("Q", leases, "lease")


def _size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) \
            or not 0 < size <= MAX_INT64:
        raise InvalidArgumentError(
            f"size {size!r} is not an int in [1, 2^63-1]")
    return size


def _locks(locks: int) -> int:
    if isinstance(locks, bool) or not isinstance(locks, int) \
            or not 1 <= locks <= MAX_READ_LOCKS:
        raise InvalidArgumentError(
            f"read locks {locks!r} outside [1, {MAX_READ_LOCKS}]")
    return locks
