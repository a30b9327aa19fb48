"""The frame codec: ``wire/PROTOCOL.md`` in Python, byte for byte.

Two halves:

- the client's fast path, :func:`keyed_request`, :func:`handle_request`
  and :func:`simple_request`, which build request frames from a
  :class:`~kvalloc.keys.KeyBatch` (or packed handles) and packed per-key
  arrays, and :func:`decode_answer`;
- the whole codec over plain values, :class:`Request` / :class:`Answer`
  with :func:`encode_request`, :func:`decode_request` and
  :func:`encode_answer`, which the conformance vectors check and a test
  double can serve with.

Every decoder and encoder takes the ``version`` the connection speaks, 1
(the default) or 2. Version 2 adds key handles (``PROTOCOL.md``, "Version
2: key handles"): the hello answer's ``versions``, the handle in a
result's bytes 4 to 7, and the flag ``0x10`` with its handles block on
finish_write, abort_write, finish_write_and_reserve_read, finish_read and
delete. Under version 1 each of them is refused as the reserved field or
undefined flag it is there.

Decoders refuse a malformed frame with :class:`~kvalloc.errors.FrameError`
whose ``code`` is the one the Go codec gives (``BAD_FRAME``, ``TOO_LARGE``,
``UNKNOWN_TYPE``, ``BAD_VERSION``); the encoders refuse what a frame cannot
express with :class:`~kvalloc.errors.InvalidArgumentError`. Every length
and count is checked against the bytes left before it is used.
"""

import struct
from array import array
from dataclasses import dataclass, field
from typing import List, NamedTuple, Optional, Sequence, Tuple

from .enums import Code, Flag, MessageType
from .errors import FrameError, InvalidArgumentError
from .keys import KeyBatch, ObjectKey
from .limits import (HEADER_SIZE, MAGIC, MAX_FRAME, MAX_KEYS,
                     MAX_MESSAGE_LEN, MAX_STATS, MAX_STRING_LEN, MAX_STRINGS,
                     VERSION, VERSIONS)
from .results import (RESULT_SIZE, STATS_NAMES, Hello, Lookup, Results,
                      Stats, StatusList, pack_results)

__all__ = [
    "Header", "Request", "Answer", "parse_header", "keyed_request",
    "handle_request", "simple_request", "encode_request", "decode_request",
    "encode_answer", "decode_answer", "pack_results",
]

_HEADER = struct.Struct("<IHHIIQ")
_PARAMS = struct.Struct("<qIBBxx")
_HELLO_REQ = struct.Struct("<4sI")
_HELLO_ANS = struct.Struct("<IIIIqq")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U32X2 = struct.Struct("<II")
_LOOKUP = struct.Struct("<IIII")
_PARAMS_SIZE = 16
_KEY_RECORD = 16
_TYPES = frozenset(int(t) for t in MessageType) - {int(MessageType.ANSWER)}
_ANSWER = int(MessageType.ANSWER)
# Enum members by value: a dict lookup is several times cheaper than the
# enum's own call, and a call's answer needs two.
_TYPE_OF = {int(t): t for t in MessageType}
_CODE_OF = {int(c): c for c in Code}
_EMPTY_ANSWERS = frozenset({_ANSWER | MessageType.PING,
                            _ANSWER | MessageType.TOUCH})


# ---- headers ---------------------------------------------------------


class Header(NamedTuple):
    """A frame's 24-byte header."""

    size: int
    type: int
    id: int
    code: int
    epoch: int


def _known(t: int) -> bool:
    return (t & ~_ANSWER) in _TYPES or t == _ANSWER


def parse_header(b: bytes) -> Header:
    """The header in ``b[:24]``, checked as ``wire.ParseHeader`` does.

    The size must lie in [24, MAX_FRAME] (``TOO_LARGE``), the type be known
    (``UNKNOWN_TYPE``), the reserved field 0 and a request's code 0
    (``BAD_FRAME``). It does not check that the frame holds ``size`` bytes.
    """
    if len(b) < HEADER_SIZE:
        raise FrameError(Code.BAD_FRAME,
                         f"header truncated: {len(b)} of {HEADER_SIZE} bytes")
    size, t, reserved, id_, code, epoch = _HEADER.unpack_from(b)
    if size < HEADER_SIZE or size > MAX_FRAME:
        raise FrameError(Code.TOO_LARGE, f"frame size {size} outside "
                         f"[{HEADER_SIZE}, {MAX_FRAME}]")
    if not _known(t):
        raise FrameError(Code.UNKNOWN_TYPE, f"unknown message type {t:#06x}")
    if reserved:
        raise FrameError(Code.BAD_FRAME,
                         f"reserved header field is {reserved:#06x}, not 0")
    if not t & _ANSWER and code:
        raise FrameError(Code.BAD_FRAME, f"request carries code {code}")
    return Header(size, t, id_, code, epoch)


def _header(size: int, t: int, id_: int, code: int, epoch: int) -> bytes:
    return _HEADER.pack(size, t, 0, id_, code, epoch)


# ---- the client's requests ---------------------------------------------


def simple_request(t: MessageType, id_: int, epoch: int,
                   version: int = VERSION) -> bytes:
    """A request frame with no body (ping, stats) or the hello's, which
    asks for protocol ``version``."""
    if t is MessageType.HELLO:
        return _header(HEADER_SIZE + 8, t, id_, 0, 0) + \
            _HELLO_REQ.pack(MAGIC, version)
    return _header(HEADER_SIZE, t, id_, 0, epoch)


def keyed_request(t: MessageType, id_: int, epoch: int, keys: KeyBatch,
                  size: int = 0, locks: int = 0, mode: int = 0,
                  flags: int = 0, tail: bytes = b"") -> bytes:
    """A keyed request frame: parameters, ``keys``' block, then ``tail``.

    ``tail`` is the per-key arrays the type and flags call for, already
    packed (temporary flags, positions, leases, in that order). The caller
    has checked the arguments; this only lays out the bytes.
    """
    block = keys.block
    n = HEADER_SIZE + _PARAMS_SIZE + len(block) + len(tail)
    return b"".join((_header(n, t, id_, 0, epoch),
                     _PARAMS.pack(size, locks, mode, flags), block, tail))


def handle_request(t: MessageType, id_: int, epoch: int, n: int,
                   handles: bytes, leases: bytes, locks: int = 0,
                   flags: int = 0) -> bytes:
    """A version 2 request by handle: parameters (``flags`` with
    ``Flag.HANDLES`` set), the handles block of ``n`` packed ``u32``
    handles, then their ``n`` packed ``u64`` leases. The caller has checked
    the arguments; this only lays out the bytes."""
    size = HEADER_SIZE + _PARAMS_SIZE + 8 + len(handles) + len(leases)
    return b"".join((_header(size, t, id_, 0, epoch),
                     _PARAMS.pack(0, locks, 0, flags | Flag.HANDLES),
                     _U32X2.pack(n, 0), handles, leases))


# ---- the whole codec over values -----------------------------------------


@dataclass
class Request:
    """One request, decoded or to encode. Unused fields are 0 or empty.

    A version 2 call by handle has ``handles`` (and ``Flag.HANDLES`` in
    ``flags``) and one lease per handle in ``leases``, and no ``keys``.
    """

    type: MessageType
    id: int = 0
    epoch: int = 0
    version: int = 0
    size: int = 0
    locks: int = 0
    mode: int = 0
    flags: int = 0
    keys: List[ObjectKey] = field(default_factory=list)
    temporary: List[bool] = field(default_factory=list)
    positions: List[int] = field(default_factory=list)
    #: With ``Flag.SIZES`` (lookup, reserve_read_prefix_wait): the payload
    #: size the reader expects of each key's object, one per key.
    sizes: List[int] = field(default_factory=list)
    leases: List[int] = field(default_factory=list)
    handles: List[int] = field(default_factory=list)


@dataclass
class Answer:
    """One answer, decoded or to encode.

    ``type`` is the request's type (``MessageType.ANSWER`` for the error
    answer); an answer whose ``code`` is not ``OK`` carries only
    ``message``. ``results`` is set for the results answers, ``statuses``
    for the statuses answers, ``hello`` and ``stats`` for theirs.
    """

    type: MessageType
    id: int = 0
    code: Code = Code.OK
    epoch: int = 0
    message: str = ""
    hello: Optional[Hello] = None
    results: Optional[Results] = None
    statuses: Optional[StatusList] = None
    stats: Optional[Stats] = None
    lookup: Optional[Lookup] = None

    @property
    def prefix(self) -> int:
        """reserve_read_prefix's count of locked keys (0 otherwise)."""
        return self.results.prefix if self.results is not None else 0


def _params_allowed(t: MessageType,
                    version: int = 1) -> Tuple[bool, bool, bool, int]:
    """Which parameters a keyed type takes: size, locks, mode, flag bits.

    The bits are a plain ``int``: ``~`` of an ``IntFlag`` keeps only the
    defined bits (Python 3.11 on), so ``flags & ~allowed`` would let an
    undefined bit through.
    """
    size_ok, locks_ok, mode_ok, flags_ok = _params_v1(t)
    if version >= 2 and t.by_handle:
        flags_ok |= Flag.HANDLES
    return size_ok, locks_ok, mode_ok, int(flags_ok)


def _check_version(version: int) -> None:
    if version not in VERSIONS:
        raise InvalidArgumentError(f"protocol version {version!r}: this "
                                   f"codec speaks {VERSIONS}")


def _params_v1(t: MessageType) -> Tuple[bool, bool, bool, int]:
    if t is MessageType.RESERVE_WRITE:
        return True, False, True, Flag.TEMPORARY | Flag.POSITIONS
    if t in (MessageType.FINISH_WRITE_AND_RESERVE_READ,
             MessageType.RESERVE_READ, MessageType.RESERVE_READ_PREFIX,
             MessageType.FINISH_READ):
        return False, True, False, 0
    if t is MessageType.RESERVE_READ_PREFIX_WAIT:
        return True, True, False, Flag.SIZES
    if t is MessageType.DELETE:
        return False, False, False, Flag.FORCE
    if t is MessageType.LOOKUP:
        return True, False, False, Flag.PREFETCH | Flag.SIZES
    return False, False, False, 0


def encode_request(q: Request, version: int = 1) -> bytes:
    """``q`` as one frame of a connection of ``version``, as
    ``wire.Encoder.AppendRequest`` encodes it.

    The temporary and positions flags follow the lists (a non-empty list
    sets its flag), and so does the handles flag (version 2). What the
    frame cannot express (parameters a type does not take, lists that are
    not one per key, more than MAX_KEYS keys, a frame over MAX_FRAME,
    handles in version 1) raises :class:`InvalidArgumentError`.
    """
    _check_version(version)
    t = MessageType(q.type)
    if t is MessageType.ANSWER:
        raise InvalidArgumentError(f"{t.wire_name} is not a request type")
    if t is MessageType.HELLO:
        return _header(HEADER_SIZE + 8, t, q.id, 0, q.epoch) + \
            _HELLO_REQ.pack(MAGIC, q.version)
    if not t.keyed:
        return _header(HEADER_SIZE, t, q.id, 0, q.epoch)
    size_ok, locks_ok, mode_ok, flags_ok = _params_allowed(t, version)
    flags = int(q.flags) & ~int(Flag.TEMPORARY | Flag.POSITIONS)
    if q.temporary:
        flags |= Flag.TEMPORARY
    if q.positions:
        flags |= Flag.POSITIONS
    if q.sizes:
        flags |= Flag.SIZES
    if q.handles:
        flags |= Flag.HANDLES
    n = len(q.keys)
    if ((not size_ok and q.size) or (not locks_ok and q.locks)
            or (not mode_ok and q.mode) or flags & ~flags_ok):
        raise InvalidArgumentError(
            f"{t.wire_name} takes no such parameter in version {version} "
            f"(size {q.size}, locks {q.locks}, mode {q.mode}, flags "
            f"{int(flags):#x})")
    if flags & Flag.HANDLES:
        return _encode_by_handle(q, t, flags)
    if q.temporary and len(q.temporary) != n:
        raise InvalidArgumentError(
            f"{len(q.temporary)} temporary flags for {n} keys")
    if q.positions and len(q.positions) != n:
        raise InvalidArgumentError(
            f"{len(q.positions)} positions for {n} keys")
    if flags & Flag.SIZES and len(q.sizes) != n:
        raise InvalidArgumentError(
            f"{len(q.sizes)} expected sizes for {n} keys")
    if t.has_leases and len(q.leases) != n:
        raise InvalidArgumentError(f"{len(q.leases)} leases for {n} keys")
    if not t.has_leases and q.leases:
        raise InvalidArgumentError(f"{t.wire_name} takes no leases")
    try:
        _PARAMS.pack(q.size, q.locks, q.mode, flags)
    except struct.error as e:
        raise InvalidArgumentError(f"parameters out of range: {e}") from None
    tail = b"".join((
        bytes(map(bool, q.temporary)),
        pack_array("I", q.positions, "position"),
        pack_array("q", q.sizes, "expected size"),
        pack_array("Q", q.leases, "lease"),
    ))
    frame = keyed_request(t, q.id, q.epoch, KeyBatch(q.keys), q.size,
                          q.locks, q.mode, flags, tail)
    if len(frame) > MAX_FRAME:
        raise InvalidArgumentError(f"{t.wire_name} frame of {len(frame)} "
                                   f"bytes exceeds MAX_FRAME ({MAX_FRAME})")
    return frame


def _encode_by_handle(q: Request, t: MessageType, flags: int) -> bytes:
    n = len(q.handles)
    if q.keys or q.temporary or q.positions or q.sizes:
        raise InvalidArgumentError(f"{t.wire_name} by handle carries no "
                                   "keys, temporary flags, positions or "
                                   "expected sizes")
    if len(q.leases) != n:
        raise InvalidArgumentError(f"{len(q.leases)} leases for {n} "
                                   "handles")
    if n > MAX_KEYS:
        raise InvalidArgumentError(f"{n} handles exceed MAX_KEYS")
    try:
        _PARAMS.pack(q.size, q.locks, q.mode, flags)
    except struct.error as e:
        raise InvalidArgumentError(f"parameters out of range: {e}") from None
    frame = handle_request(t, q.id, q.epoch, n,
                           pack_array("I", q.handles, "handle"),
                           pack_array("Q", q.leases, "lease"), q.locks,
                           flags)
    if len(frame) > MAX_FRAME:
        raise InvalidArgumentError(f"{t.wire_name} frame of {len(frame)} "
                                   f"bytes exceeds MAX_FRAME ({MAX_FRAME})")
    return frame


def pack_array(typecode: str, values: Sequence[int], what: str) -> bytes:
    """``values`` as little-endian ``typecode`` integers (``I``, ``Q`` or
    ``q``).

    A value out of range raises :class:`InvalidArgumentError`.
    """
    if isinstance(values, array) and values.typecode == typecode:
        a = values
    else:
        try:
            a = array(typecode, values)
        except (OverflowError, TypeError) as e:
            bits = 8 * array(typecode).itemsize
            kind = "a signed" if typecode.islower() else "an unsigned"
            raise InvalidArgumentError(
                f"a {what} is not {kind} {bits}-bit integer: {e}"
            ) from None
    if _BIG:
        a = array(typecode, a)
        a.byteswap()
    return a.tobytes()


_BIG = struct.pack("=H", 1) != struct.pack("<H", 1)
assert array("I").itemsize == 4 and array("Q").itemsize == 8 \
    and array("q").itemsize == 8


class _Reader:
    """Little-endian fields of a frame body; each read checks the bytes."""

    __slots__ = ("b", "off")

    def __init__(self, b: memoryview) -> None:
        self.b = b
        self.off = 0

    def need(self, n: int, what: str) -> None:
        left = len(self.b) - self.off
        if n < 0 or n > left:
            raise FrameError(Code.BAD_FRAME, f"{what}: {n} bytes needed at "
                             f"offset {self.off + HEADER_SIZE}, {left} left")

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def unpack(self, s: struct.Struct, what: str) -> tuple:
        self.need(s.size, what)
        v = s.unpack_from(self.b, self.off)
        self.off += s.size
        return v

    def u16(self, what: str) -> int:
        return self.unpack(_U16, what)[0]

    def u32(self, what: str) -> int:
        return self.unpack(_U32, what)[0]

    def zero(self, v: int, what: str) -> None:
        if v:
            raise FrameError(Code.BAD_FRAME, f"{what} is {v}, must be 0")

    def end(self) -> None:
        if self.off != len(self.b):
            raise FrameError(Code.BAD_FRAME, f"{len(self.b) - self.off} "
                             "trailing bytes after the body")

    def count(self, size: int, limit: int, what: str) -> int:
        n = self.u32(what)
        left = len(self.b) - self.off
        if n > limit:
            raise FrameError(Code.BAD_FRAME,
                             f"{what} {n} exceeds the limit {limit}")
        if n * size > left:
            raise FrameError(Code.BAD_FRAME, f"{what} {n}: {n * size} bytes "
                             f"needed, {left} left")
        return n


def _frame(frame: bytes, answer: bool) -> Tuple[Header, _Reader]:
    h = parse_header(frame)
    if h.size != len(frame):
        raise FrameError(Code.BAD_FRAME, f"header says {h.size} bytes, "
                         f"frame has {len(frame)}")
    if bool(h.type & _ANSWER) != answer:
        raise FrameError(Code.BAD_FRAME, "a request sent as an answer"
                         if answer else "an answer sent as a request")
    return h, _Reader(memoryview(frame)[HEADER_SIZE:])


def _text(b: bytes) -> str:
    return bytes(b).decode("utf-8", "surrogateescape")


def decode_request(frame: bytes, version: int = 1) -> Request:
    """The request in ``frame`` (exactly one frame, header included), of a
    connection of ``version``.

    Malformed frames raise :class:`FrameError` with ``wire``'s code; a
    hello with another magic, or a version this side does not speak
    (version 1: only 1; version 2: 1 and 2), is ``BAD_VERSION``.
    """
    _check_version(version)
    h, r = _frame(frame, answer=False)
    t = _TYPE_OF[h.type]
    q = Request(type=t, id=h.id, epoch=h.epoch)
    if t is MessageType.HELLO:
        magic = bytes(r.take(len(MAGIC), "hello magic"))
        q.version = r.u32("hello version")
        r.end()
        if magic != MAGIC:
            raise FrameError(Code.BAD_VERSION,
                             f"hello magic {magic!r}, want {MAGIC!r}")
        if not 1 <= q.version <= version:
            speaks = "1" if version == 1 else f"1 to {version}"
            raise FrameError(Code.BAD_VERSION, f"protocol version "
                             f"{q.version}; this side speaks {speaks}")
        return q
    if t.keyed:
        _read_keyed(r, q, version)
    r.end()
    return q


def _read_keyed(r: _Reader, q: Request, version: int) -> None:
    t = q.type
    size_ok, locks_ok, mode_ok, flags_ok = _params_allowed(t, version)
    size, locks, mode, flags, reserved = r.unpack(
        struct.Struct("<qIBBH"), "parameters")
    r.zero(reserved, "parameters reserved field")
    q.size, q.locks, q.mode, q.flags = size, locks, mode, flags
    if not size_ok:
        r.zero(size, f"size (unused by {t.wire_name})")
    if not locks_ok:
        r.zero(locks, f"locks (unused by {t.wire_name})")
    if not mode_ok:
        r.zero(mode, f"mode (unused by {t.wire_name})")
    r.zero(flags & ~flags_ok, f"flags not defined for {t.wire_name} in "
           f"version {version}")
    if flags & Flag.HANDLES:
        _read_handles(r, q)
        return
    q.keys = _read_keys(r)
    n = len(q.keys)
    if flags & Flag.TEMPORARY:
        b = bytes(r.take(n, "temporary flags"))
        for i, v in enumerate(b):
            if v > 1:
                raise FrameError(Code.BAD_FRAME,
                                 f"temporary flag {i} is {v}, not 0 or 1")
        q.temporary = [v == 1 for v in b]
    if flags & Flag.POSITIONS:
        q.positions = _unpack_array("I", r.take(4 * n, "positions"))
    if flags & Flag.SIZES:
        q.sizes = _unpack_array("q", r.take(8 * n, "expected sizes"))
    if t.has_leases:
        q.leases = _unpack_array("Q", r.take(8 * n, "leases"))


def _read_handles(r: _Reader, q: Request) -> None:
    """A call by handle's handles block: n, reserved, n handles, n
    leases; the body must end there."""
    n = r.u32("handle count")
    if n > MAX_KEYS:
        raise FrameError(Code.BAD_FRAME,
                         f"handle count {n} exceeds the limit {MAX_KEYS}")
    r.zero(r.u32("handles reserved"), "handles reserved field")
    left = len(r.b) - r.off
    if left != 12 * n:
        raise FrameError(Code.BAD_FRAME, f"handle count {n}: {12 * n} bytes "
                         f"of handles and leases needed, {left} left")
    q.handles = _unpack_array("I", r.take(4 * n, "handles"))
    q.leases = _unpack_array("Q", r.take(8 * n, "leases"))


def _unpack_array(typecode: str, b: memoryview) -> List[int]:
    a = array(typecode)
    a.frombytes(b)
    if _BIG:
        a.byteswap()
    return a.tolist()


def _read_keys(r: _Reader) -> List[ObjectKey]:
    n = r.count(_KEY_RECORD, MAX_KEYS, "key count")
    ns = r.u16("string count")
    r.zero(r.u16("keys reserved"), "keys reserved field")
    if ns > MAX_STRINGS:
        raise FrameError(Code.BAD_FRAME,
                         f"string count {ns} exceeds the limit {MAX_STRINGS}")
    strs = []
    for i in range(ns):
        n_ = r.u16("string length")
        if n_ > MAX_STRING_LEN:
            raise FrameError(Code.BAD_FRAME, f"string {i}: length {n_} "
                             f"exceeds the limit {MAX_STRING_LEN}")
        strs.append(_text(r.take(n_, "string")))
    keys = []
    rec = struct.Struct("<HHHHII")
    for i in range(n):
        hl, mi, si, res, rank, group = r.unpack(rec, "key")
        if hl > MAX_STRING_LEN:
            raise FrameError(Code.BAD_FRAME, f"key {i}: hash length {hl} "
                             f"exceeds the limit {MAX_STRING_LEN}")
        if mi >= ns or si >= ns:
            raise FrameError(Code.BAD_FRAME, f"key {i}: string index {mi} or "
                             f"{si} out of the table's {ns}")
        if res:
            raise FrameError(Code.BAD_FRAME, f"key {i}: reserved field is "
                             "not 0")
        h = bytes(r.take(hl, "chunk hash"))
        keys.append(ObjectKey(h, strs[mi], rank, group, strs[si]))
    return keys


def _message_bytes(message: str) -> bytes:
    b = message.encode("utf-8", "surrogateescape")
    return b[:MAX_MESSAGE_LEN]


def encode_answer(a: Answer, version: int = 1) -> bytes:
    """``a`` as one frame of a connection of ``version``, as
    ``wire.Encoder.AppendAnswer`` encodes it.

    What version 2 adds (a hello answer's ``versions``, a result's handle)
    raises :class:`InvalidArgumentError` in version 1.
    """
    _check_version(version)
    t = MessageType(a.type)
    wire_type = _ANSWER | int(t)
    code = Code(a.code)
    if t is MessageType.ANSWER and code is Code.OK:
        raise InvalidArgumentError("an error answer needs a code")
    if code is not Code.OK:
        m = _message_bytes(a.message)
        body = _U16.pack(len(m)) + m
    elif t is MessageType.HELLO:
        h = a.hello or Hello(0, 0, 0, 0, 0)
        if version < 2 and h.versions:
            raise InvalidArgumentError(f"a version 1 hello answer has no "
                                       f"versions ({h.versions:#x})")
        try:
            body = _HELLO_ANS.pack(h.version, h.max_keys, h.max_frame,
                                   h.versions, h.pool_size, h.align)
        except struct.error as e:
            raise InvalidArgumentError(f"hello answer out of range: {e}"
                                       ) from None
    elif t is MessageType.STATS:
        s = a.stats or Stats()
        body = _U32X2.pack(len(s), 0) + struct.pack(f"<{len(s)}Q", *s)
    elif t is MessageType.LOOKUP:
        lk = a.lookup or Lookup(0, 0, 0, 0)
        if (lk.n > MAX_KEYS or lk.l1 + lk.l2 > lk.n or lk.prefetch > lk.l2
                or min(lk) < 0):
            raise InvalidArgumentError(f"lookup counts {lk} are not "
                                       "consistent")
        body = _LOOKUP.pack(*lk)
    elif t.has_results:
        res = a.results if a.results is not None else Results.from_list([])
        if len(res) > MAX_KEYS:
            raise InvalidArgumentError(f"{len(res)} results exceed MAX_KEYS")
        if version < 2 and any(res.handles):
            raise InvalidArgumentError("a result's handle on a version 1 "
                                       "connection")
        body = _U32X2.pack(len(res), res.prefix) + pack_results(list(res))
    elif t.has_statuses:
        st = a.statuses if a.statuses is not None else StatusList(b"")
        if len(st) > MAX_KEYS:
            raise InvalidArgumentError(f"{len(st)} statuses exceed MAX_KEYS")
        body = _U32X2.pack(len(st), 0) + st.raw
    else:
        body = b""
    size = HEADER_SIZE + len(body)
    if size > MAX_FRAME:
        raise InvalidArgumentError(f"answer frame of {size} bytes exceeds "
                                   "MAX_FRAME")
    return _header(size, wire_type, a.id, code, a.epoch) + body


def decode_answer(frame: bytes, version: int = 1) -> Answer:
    """The answer in ``frame`` (exactly one frame, header included), of a
    connection of ``version``.

    A malformed frame raises :class:`FrameError`. An answer whose code is
    not ``OK`` decodes without error; its ``code`` and ``message`` are the
    daemon's refusal. The results and statuses view ``frame``. Version 1
    refuses a hello answer's ``versions`` and a result's handle (its
    reserved fields).
    """
    if version not in VERSIONS:
        _check_version(version)
    if len(frame) == HEADER_SIZE:  # the fast path of ping and touch
        size, t, res, id_, code, epoch = _HEADER.unpack_from(frame)
        if size == HEADER_SIZE and not res and not code and \
                t in _EMPTY_ANSWERS:
            return Answer(_TYPE_OF[t & ~_ANSWER], id_, Code.OK, epoch)
    h, r = _frame(frame, answer=True)
    if h.type == _ANSWER and h.code == Code.OK:
        raise FrameError(Code.BAD_FRAME, "an error answer with code OK")
    t = _TYPE_OF[h.type & ~_ANSWER or _ANSWER]
    code = _CODE_OF.get(h.code)
    if code is None:
        raise FrameError(Code.BAD_FRAME, f"answer with unknown code {h.code}")
    a = Answer(t, h.id, code, h.epoch)
    if code is not Code.OK:
        n = r.u16("message length")
        if n > MAX_MESSAGE_LEN:
            raise FrameError(Code.BAD_FRAME, f"message length {n} exceeds "
                             f"the limit {MAX_MESSAGE_LEN}")
        a.message = _text(r.take(n, "message"))
    elif t is MessageType.HELLO:
        v, keys, frame_max, vs, size, align = r.unpack(_HELLO_ANS, "hello")
        if version < 2:
            r.zero(vs, "hello reserved field (version 2's versions)")
        a.hello = Hello(v, keys, frame_max, size, align, vs)
    elif t is MessageType.STATS:
        n = r.count(8, MAX_STATS, "stats count")
        r.zero(r.u32("stats reserved"), "stats reserved field")
        vals = _unpack_array("Q", r.take(8 * n, "stats values"))
        a.stats = Stats(*vals[:len(STATS_NAMES)])
    elif t is MessageType.LOOKUP:
        lk = Lookup(*r.unpack(_LOOKUP, "lookup"))
        if lk.n > MAX_KEYS:
            raise FrameError(Code.BAD_FRAME,
                             f"lookup n {lk.n} exceeds MAX_KEYS")
        if lk.l1 + lk.l2 > lk.n:
            raise FrameError(Code.BAD_FRAME, f"lookup l1 {lk.l1} + l2 "
                             f"{lk.l2} exceeds n {lk.n}")
        if lk.prefetch > lk.l2:
            raise FrameError(Code.BAD_FRAME, f"lookup prefetch "
                             f"{lk.prefetch} exceeds l2 {lk.l2}")
        a.lookup = lk
    elif t.has_results:
        a.results = _read_results(r, t, h.epoch, version)
    elif t.has_statuses:
        n = r.count(1, MAX_KEYS, "status count")
        r.zero(r.u32("statuses reserved"), "statuses reserved field")
        a.statuses = StatusList(bytes(r.take(n, "statuses")))
    r.end()
    return a


def _read_results(r: _Reader, t: MessageType, epoch: int,
                  version: int) -> Results:
    n = r.count(RESULT_SIZE, MAX_KEYS, "result count")
    prefix = r.u32("prefix")
    if t not in (MessageType.RESERVE_READ_PREFIX,
                 MessageType.RESERVE_READ_PREFIX_WAIT):
        r.zero(prefix, f"prefix (unused by {t.wire_name})")
    elif prefix > n:
        raise FrameError(Code.BAD_FRAME,
                         f"prefix {prefix} exceeds the {n} results")
    records = r.take(n * RESULT_SIZE, "results")
    # Version 1: bytes 1 to 7 reserved; version 2: 1 to 3, and bytes 4 to
    # 7 are the handle (which the daemon sets only on an OK result; a
    # decoder takes it as it comes, as wire's does).
    for j in range(1, 8 if version < 2 else 4):
        reserved = records[j::RESULT_SIZE].tobytes()
        if reserved.count(0) != n:
            i = next(i for i, v in enumerate(reserved) if v)
            what = "reserved bytes are not 0" if j < 4 else \
                "a handle on a version 1 connection"
            raise FrameError(Code.BAD_FRAME, f"result {i}: {what}")
    return Results(records, prefix, epoch)
