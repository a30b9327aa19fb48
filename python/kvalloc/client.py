"""The client: kvallocd's batch calls, and the pool mapped in this process.

Versions: the client asks for protocol version 2 (key handles) at hello,
and connects again with version 1 when the daemon answers ``BAD_VERSION``
(a version 1 daemon); ``Client(..., protocol=1)`` speaks version 1 from
the start and ``protocol=2`` insists on 2. Without ``protocol`` the
environment variable ``KVALLOC_PROTOCOL_VERSION`` (1 or 2), when set, is
the version, as it is for the Go client, so that a whole test suite, or a
deployment, runs in either. On a version 2 connection the client keeps
the handle of every lock it is granted (:mod:`kvalloc.handles`) and sends
finish_write, abort_write, finish_write_and_reserve_read, finish_read and
delete by handle when it holds a handle for every key of the call; the
calls, their arguments and their answers are the same in both versions.

Thread safety: a :class:`Client` is safe to share between threads. Each
call holds the client's lock from sending its request to reading its
answer, so calls from several threads run one at a time, in the order
they take the lock; a call blocked by another waits for it (its own
deadline starts when it has the lock). For calls in parallel, use one
client per thread: each is a connection of its own, and owns its own
locks. A client is not fork-safe: a child process must make its own (a
call from another process than the one that connected raises).
"""

import math
import mmap
import numbers
import operator
import os
import threading
import time
from array import array
from typing import Iterable, List, Optional, Sequence, Union

from .connection import Connection, trusted_uids
from .enums import Code, Flag, MessageType, Mode
from .errors import (ConnectionLostError, DaemonError, DeadlineExceededError,
                     FrameError, InvalidArgumentError, KvallocError,
                     WrongEpochError, daemon_error)
from .handles import HandleTable
from .keys import KeyBatch, Keys
from .l2 import L2Calls
from .limits import (MAX_INT64, MAX_STRINGS, VERSION, VERSIONS,
                     check_read_locks, default_socket_path)
from .protocol import (Answer, decode_answer, handle_request, keyed_request,
                       pack_array, simple_request)
from .results import Hello, Results, Stats, StatusList

__all__ = ["Client", "Leases", "MAX_TIMEOUT", "PROTOCOL_ENV"]

#: What a finishing call accepts as leases: one per key, in key order. A
#: :class:`Results` gives its ``leases``.
Leases = Union[Results, array, Sequence[int]]

_MT = MessageType

#: The longest deadline a call or a connect takes, in seconds: the longest
#: wait ``poll`` can express (2^31 - 1 ms), about 24.8 days.
MAX_TIMEOUT = (2 ** 31 - 1) // 1000


class Client(L2Calls):
    """A connection to kvallocd, with the daemon's pool mapped.

    Every call is one request frame, answered per key in request order
    (``wire/PROTOCOL.md``), and has a deadline: ``timeout`` seconds (the
    client's default, 10 s, unless the call is given its own), a finite
    number in ``(0, MAX_TIMEOUT]``. Arguments, timeouts included, are
    checked before anything is sent; a bad one raises
    :class:`InvalidArgumentError`, nothing changes and the client stays
    open. A daemon that dies or stalls raises :class:`ConnectionLostError`
    (a :class:`DeadlineExceededError` for a stall) within the deadline,
    and the client is closed: :meth:`reconnect` connects to the next
    daemon. Any failure once a request's first byte has been sent, the
    client's own included, closes the client too, since the connection's
    next answer could be this request's: the failure is raised as a
    :class:`ConnectionLostError` (from the original), or as it is for a
    ``KeyboardInterrupt`` or another ``BaseException`` that is not an
    ``Exception``.

    Everything the connection reserved or read-locked is the
    connection's: when it ends, however, the daemon aborts its writes and
    releases its read locks.
    """

    def __init__(self, path: Optional[str] = None,
                 timeout: float = 10.0, *,
                 daemon_uids: Optional[Iterable[int]] = None,
                 protocol: Optional[int] = None) -> None:
        """Connect to the daemon at ``path`` and map its pool.

        ``path`` None is :func:`~kvalloc.limits.default_socket_path`.
        ``daemon_uids`` are the uids the daemon may run as, None meaning
        root and this process's effective uid: a socket served by another
        uid raises :class:`~kvalloc.errors.UntrustedDaemonError` at connect,
        before anything is sent. ``protocol`` is the protocol version to
        speak: None (the default) asks for 2, key handles, and falls back
        to 1 against a daemon that speaks only 1, unless
        ``$KVALLOC_PROTOCOL_VERSION`` says 1 or 2; 1 speaks version 1; 2
        insists on 2 (a version 1 daemon's ``BAD_VERSION`` is raised).
        :attr:`version` is the one the connection speaks.
        """
        if protocol is None:
            protocol = _env_protocol()
        if protocol is not None and (type(protocol) is not int
                                     or protocol not in VERSIONS):
            raise InvalidArgumentError(
                f"protocol {protocol!r} is not a version this client "
                f"speaks {VERSIONS}")
        #: The protocol version asked for at connect: None asks for the
        #: newest (2) and falls back to 1 against a version 1 daemon.
        self.protocol = protocol
        self.timeout = _timeout(timeout)
        self.path = _path(path) if path is not None else \
            default_socket_path()
        self._trusted = trusted_uids(daemon_uids)
        self._lock = threading.Lock()
        self._conn: Optional[Connection] = None
        self._map: Optional[mmap.mmap] = None
        self._pool: Optional[memoryview] = None
        self._pid = 0
        self._id = 0
        self._version = 1
        # The handles of this connection's records; None in version 1.
        self._handles: Optional[HandleTable] = None
        #: The hello answer: version, limits, pool size and alignment.
        self.hello = Hello(0, 0, 0, 0, 0)
        #: The pool's epoch; new at each daemon start.
        self.epoch = 0
        self.connect()

    # ---- the connection -------------------------------------------------

    def connect(self, timeout: Optional[float] = None) -> None:
        """Connect (again): hello, receive the memfd, map it.

        Closes the current connection first, if any. The hello asks for
        :attr:`protocol`, or for version 2 when it is None; then a daemon
        that answers ``BAD_VERSION`` (one that speaks only version 1)
        closes, and the client connects again with version 1, within the
        same deadline.
        """
        if timeout is not None:
            _timeout(timeout)  # a bad one leaves the connection as it is
        with self._lock:
            self._close_locked()
            deadline = self._deadline(timeout)
            version = self.protocol or VERSION
            fallback = self.protocol is None
            while True:
                conn = Connection(self.path, deadline, self._trusted)
                try:
                    self._hello(conn, deadline, version)
                except DaemonError as e:
                    conn.close()
                    if e.code is Code.BAD_VERSION and fallback and \
                            version > 1:
                        version -= 1
                        continue
                    raise
                except BaseException:
                    conn.close()
                    raise
                break
            self._conn = conn
            self._version = version
            self._handles = HandleTable() if version >= 2 else None
            self._pid = os.getpid()

    @property
    def version(self) -> int:
        """The protocol version the connection speaks: 2 (key handles) or
        1."""
        return self._version

    def _hello(self, conn: Connection, deadline: float, version: int) -> None:
        sent: Optional[ConnectionLostError] = None
        try:
            conn.send(simple_request(_MT.HELLO, 1, 0, version), deadline)
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
            a = decode_answer(frame, version)
            if a.code is not Code.OK:
                raise daemon_error(a.code, a.message)
            h = a.hello
            if a.type is not _MT.HELLO or a.id != 1 or h is None:
                raise FrameError(Code.BAD_FRAME, "the answer to the hello "
                                 f"is a {a.type.wire_name} answer, id {a.id}")
            if h.version != version or \
                    (version >= 2 and not h.versions >> version & 1):
                raise FrameError(Code.BAD_VERSION, f"kvallocd answered a "
                                 f"hello of version {version} with version "
                                 f"{h.version} (versions {h.versions:#x})")
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
        # The daemon drops every record of the connection with it.
        handles, self._handles = self._handles, None
        if handles is not None:
            handles.clear()
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
        n = len(pool)
        raw, offs, sizes = results.statuses.raw, results.offsets, \
            results.sizes
        if raw and raw.count(0) == len(raw) and min(offs) >= 0 and \
                min(sizes) >= 0 and max(map(operator.add, offs, sizes)) <= n:
            # Every block OK and inside the pool, checked in C: the common
            # batch.
            return [pool[o:o + s] for o, s in zip(offs, sizes)]
        out: List[Optional[memoryview]] = []
        for i in range(len(raw)):
            if raw[i]:
                out.append(None)
                continue
            o, s = offs[i], sizes[i]
            if not (0 <= o and 0 <= s and o + s <= n):
                raise InvalidArgumentError(
                    f"result {i}: block [{o}, {o}+{s}) is outside the pool "
                    f"of {n} bytes")
            out.append(pool[o:o + s])
        return out

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
            if isinstance(mode, bool) or not isinstance(mode, int):
                raise ValueError
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
        return self._finish(_MT.FINISH_WRITE, kb,
                            _leases(leases, len(kb), self.epoch), timeout,
                            given=leases)

    def abort_write(self, keys: Keys, leases: Leases,
                    timeout: Optional[float] = None) -> StatusList:
        """Give back write reservations unwritten: one lease per key."""
        kb = self._keys(keys)
        return self._finish(_MT.ABORT_WRITE, kb,
                            _leases(leases, len(kb), self.epoch), timeout,
                            given=leases)

    def finish_write_and_reserve_read(
            self, keys: Keys, leases: Leases, locks: int = 1,
            timeout: Optional[float] = None) -> Results:
        """Publish written objects and read-lock them, ``locks`` each."""
        kb = self._keys(keys)
        return self._finish(_MT.FINISH_WRITE_AND_RESERVE_READ, kb,
                            _leases(leases, len(kb), self.epoch), timeout,
                            locks=_locks(locks), given=leases)

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
        return self._finish(_MT.FINISH_READ, kb,
                            _leases(leases, len(kb), self.epoch), timeout,
                            locks=_locks(locks), given=leases)

    def delete(self, keys: Keys, force: bool = False,
               timeout: Optional[float] = None) -> StatusList:
        """Delete objects; with ``force`` even locked ones.

        A forced delete drops a locked key at once (it is unreadable, and
        writable again under a new block), but its old block is held until
        every holder of its lock has let go: a writer's finish_write then
        answers WRITE_DELETED, a reader's finish_read OK. The held bytes
        count in the stats' quarantined bytes.
        """
        kb = self._keys(keys)
        return self._finish(_MT.DELETE, kb, None, timeout,
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
        """A call that answers results and takes locks: reserve_write and
        the read-locking calls. Its grants go into the handle table."""
        n = len(kb)
        locks = params.get("locks", 0)

        def after(a: Answer) -> Results:
            res = _counted(t, a.results, n, "results")
            table = self._handles
            if table is not None:
                if t is _MT.RESERVE_WRITE:
                    table.wrote(kb._keys, res)
                else:
                    table.read(kb._keys, res, locks)
            return res
        return self._keyed(t, kb, timeout, after=after, **params)

    def _finish(self, t: MessageType, kb: KeyBatch, leases: Optional[array],
                timeout: Optional[float], locks: int = 0,
                flags: int = 0, given: object = None):
        """finish_write, abort_write, finish_write_and_reserve_read,
        finish_read or delete (``leases`` None): by handle when the
        connection speaks version 2 and holds a record of every key (under
        its lease), else by key. Either way the records it frees leave the
        handle table. ``given`` is the leases as the caller gave them (a
        ``Results`` may be a whole grant the table keeps)."""
        n = len(kb)
        keys = kb._keys
        # The handles sent, if any, and the table's batch they were.
        sent: List = [None, None]

        def frame(id_: int, epoch: int) -> bytes:
            table = self._handles
            f = None
            sent[:] = None, None
            if table is not None:
                by, ls = None, leases
                if t is _MT.DELETE:
                    found = table.delete_handles(keys)
                    if found is not None:
                        by, ls = found
                else:
                    by, sent[1] = table.handles(t, keys, given, leases)
                if by is not None:
                    sent[0] = by
                    f = handle_request(t, id_, epoch, n,
                                       pack_array("I", by, "handle"),
                                       pack_array("Q", ls, "lease"),
                                       locks, flags)
            if f is None:
                tail = b"" if leases is None else \
                    pack_array("Q", leases, "lease")
                f = keyed_request(t, id_, epoch, kb, 0, locks, 0, flags,
                                  tail)
            return self._fits(t, n, f)

        def after(a: Answer):
            table = self._handles
            if t.has_results:
                got = res = _counted(t, a.results, n, "results")
                raw = res.statuses.raw
            else:
                got = _counted(t, a.statuses, n, "statuses")
                raw = got.raw
            if table is None or leases is None:
                return got
            table.finished(t, keys, leases, raw, locks, sent[1], sent[0])
            if t is _MT.FINISH_WRITE_AND_RESERVE_READ:
                table.read(keys, res, locks)
            return got

        def refused() -> None:
            table = self._handles
            if table is not None and leases is not None:
                table.forget(keys, leases)
        return self._call(t, frame, timeout, after, refused)

    def _fits(self, t: MessageType, n: int, f: bytes) -> bytes:
        """``f``, unless it is over the daemon's frame limit."""
        if len(f) > self.hello.max_frame:
            raise InvalidArgumentError(
                f"{t.wire_name} of {n} keys is a frame of {len(f)} bytes, "
                f"over the daemon's limit {self.hello.max_frame}")
        return f

    def _keyed(self, t: MessageType, kb: KeyBatch, timeout: Optional[float],
               size: int = 0, locks: int = 0, mode: int = 0, flags: int = 0,
               tail: bytes = b"", after=None):
        def frame(id_: int, epoch: int) -> bytes:
            return self._fits(t, len(kb), keyed_request(
                t, id_, epoch, kb, size, locks, mode, flags, tail))
        return self._call(t, frame, timeout, after)

    def _call(self, t: MessageType, frame, timeout: Optional[float],
              after=None, refused=None):
        """One request and its answer, under the client's lock.

        ``frame(id, epoch)`` makes the request; ``after(answer)``, when
        given, checks the answer and makes the call's value, still under
        the lock (a :class:`FrameError` from it closes the client);
        ``refused()`` runs when the daemon refuses the whole request.
        """
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
            # From the first byte sent, any failure leaves the connection
            # out of step (a half frame, an answer nobody read): close.
            try:
                conn.send(data, deadline)
                raw, _ = conn.recv(deadline)
                a = decode_answer(raw, self._version)
            except (ConnectionLostError, FrameError):
                self._close_locked()
                raise
            except Exception as e:
                self._close_locked()
                raise ConnectionLostError(
                    f"kvalloc: {t.wire_name} failed once its request was "
                    f"being sent ({type(e).__name__}: {e}); the client is "
                    "closed"
                ) from e
            except BaseException:
                self._close_locked()
                raise
            if a.code is not Code.OK:
                err = daemon_error(a.code, a.message)
                if a.code.closes:
                    self._close_locked()
                elif refused is not None:
                    refused()
                raise err
            if a.id != id_ or a.type is not t:
                self._close_locked()
                raise FrameError(Code.BAD_FRAME, f"answer {a.type.wire_name} "
                                 f"id {a.id} to {t.wire_name} id {id_}")
            if after is None:
                return a
            try:
                return after(a)
            except FrameError:
                self._close_locked()
                raise

    def _broken(self, what: str) -> FrameError:
        with self._lock:
            self._close_locked()
        return FrameError(Code.BAD_FRAME, f"kvallocd sent {what}")

    def _deadline(self, timeout: Optional[float]) -> float:
        return time.monotonic() + _timeout(
            self.timeout if timeout is None else timeout)


#: The environment variable that sets the protocol version of a Client
#: made without one (as ``Options.Version`` of the Go client).
PROTOCOL_ENV = "KVALLOC_PROTOCOL_VERSION"


def _env_protocol() -> Optional[int]:
    """``$KVALLOC_PROTOCOL_VERSION``: None when unset or empty, else 1 or
    2; anything else raises :class:`InvalidArgumentError`."""
    v = os.environ.get(PROTOCOL_ENV, "")
    if not v:
        return None
    if v not in ("1", "2"):
        raise InvalidArgumentError(f"${PROTOCOL_ENV}={v!r}: want 1 or 2")
    return int(v)


def _timeout(t: float) -> float:
    """``t`` as seconds, refused unless a finite number in (0,
    MAX_TIMEOUT]: inf or a huge value would overflow the socket's wait."""
    if type(t) is float or type(t) is int:  # the usual case, fast
        if 0 < t <= MAX_TIMEOUT:
            return float(t)
    elif isinstance(t, bool) or not isinstance(t, numbers.Real):
        raise InvalidArgumentError(
            f"timeout {t!r} is not a number of seconds")
    try:
        f = float(t)
    except OverflowError:
        f = math.inf
    if not 0 < f <= MAX_TIMEOUT:  # also nan
        raise InvalidArgumentError(
            f"timeout {t!r} outside (0, {MAX_TIMEOUT}] seconds")
    return f


def _path(path) -> str:
    """A socket path: a str, bytes or os.PathLike without NUL bytes."""
    try:
        p = os.fspath(path)
    except TypeError:
        raise InvalidArgumentError(
            f"socket path {path!r} is not a str or a path") from None
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p or "\x00" in p:
        raise InvalidArgumentError(f"socket path {path!r} is empty or holds "
                                   "a NUL byte")
    return p


def _one_per_key(values: Sequence, n: int, what: str) -> None:
    try:
        m = len(values)
    except TypeError:
        raise InvalidArgumentError(f"{what} must be a sequence") from None
    if m != n:
        raise InvalidArgumentError(f"{m} {what} for {n} keys")


def _counted(t: MessageType, got, n: int, what: str):
    """``got``, checked to hold one entry per key."""
    if got is None or len(got) != n:
        raise FrameError(Code.BAD_FRAME, f"kvallocd sent {t.wire_name} "
                         f"answer with {len(got or ())} {what} for {n} keys")
    return got


def _leases(leases: Leases, n: int, epoch: int) -> array:
    """``leases``, one per key, as an ``array('Q')``; checked."""
    if isinstance(leases, Results):
        if leases.epoch != epoch:
            raise WrongEpochError(
                Code.WRONG_EPOCH, f"leases of epoch {leases.epoch:#x} on a "
                f"connection of epoch {epoch:#x}: an earlier daemon's "
                "leases are void")
        leases = leases.leases
    _one_per_key(leases, n, "leases")
    if isinstance(leases, array) and leases.typecode == "Q":
        return leases
    try:
        return array("Q", leases)
    except (OverflowError, TypeError) as e:
        raise InvalidArgumentError(
            f"a lease is not an unsigned 64-bit integer: {e}") from None


def _size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) \
            or not 0 < size <= MAX_INT64:
        raise InvalidArgumentError(
            f"size {size!r} is not an int in [1, 2^63-1]")
    return size


_locks = check_read_locks
