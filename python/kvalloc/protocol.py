"""The frame codec: ``wire/PROTOCOL.md`` in Python, byte for byte.

Two halves:

- the client's fast path, :func:`keyed_request` and :func:`simple_request`,
  which build request frames from a :class:`~kvalloc.keys.KeyBatch` and
  packed per-key arrays, and :func:`decode_answer`;
- the whole codec over plain values, :class:`Request` / :class:`Answer`
  with :func:`encode_request`, :func:`decode_request` and
  :func:`encode_answer`, which the conformance vectors check and a test
  double can serve with.

Decoders refuse a malformed frame with :class:`~kvalloc.errors.FrameError`
whose ``code`` is the one the Go codec gives (``BAD_FRAME``, ``TOO_LARGE``,
``UNKNOWN_TYPE``, ``BAD_VERSION``); the encoders refuse what a frame cannot
express with :class:`~kvalloc.errors.InvalidArgumentError`.
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
                     VERSION)
from .results import (RESULT_SIZE, STATS_NAMES, Hello, Lookup, Result,
                      Results, Stats, StatusList)

__all__ = [
    "Header", "Request", "Answer", "parse_header", "keyed_request",
    "simple_request", "encode_request", "decode_request", "encode_answer",
    "decode_answer", "pack_results",
]

_HEADER = struct.Struct("<IHHIIQ")
_PARAMS = struct.Struct("<qIBBxx")
_HELLO_REQ = struct.Struct("<4sI")
_HELLO_ANS = struct.Struct("<IIIIqq")
_RESULT = struct.Struct("<B7xqqQQ")
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


def simple_request(t: MessageType, id_: int, epoch: int) -> bytes:
    """A request frame with no body (ping, stats) or the hello's."""
    if t is MessageType.HELLO:
        return _header(HEADER_SIZE + 8, t, id_, 0, 0) + \
            _HELLO_REQ.pack(MAGIC, VERSION)
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


# ---- the whole codec over values -----------------------------------------


@dataclass
class Request:
    """One request, decoded or to encode. Unused fields are 0 or empty."""

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
    leases: List[int] = field(default_factory=list)


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


def _params_allowed(t: MessageType) -> Tuple[bool, bool, bool, int]:
    """Which parameters a keyed type takes: size, locks, mode, flag bits."""
    if t is MessageType.RESERVE_WRITE:
        return True, False, True, Flag.TEMPORARY | Flag.POSITIONS
    if t in (MessageType.FINISH_WRITE_AND_RESERVE_READ,
             MessageType.RESERVE_READ, MessageType.RESERVE_READ_PREFIX,
             MessageType.FINISH_READ):
        return False, True, False, 0
    if t is MessageType.RESERVE_READ_PREFIX_WAIT:
        return True, True, False, 0
    if t is MessageType.DELETE:
        return False, False, False, Flag.FORCE
    if t is MessageType.LOOKUP:
        return False, False, False, Flag.PREFETCH
    return False, False, False, 0


def encode_request(q: Request) -> bytes:
    """``q`` as one frame, as ``wire.Encoder.AppendRequest`` encodes it.

    The temporary and positions flags follow the lists (a non-empty list
    sets its flag). What the frame cannot express (parameters a type does
    not take, lists that are not one per key, more than MAX_KEYS keys, a
    frame over MAX_FRAME) raises :class:`InvalidArgumentError`.
    """
    t = MessageType(q.type)
    if t is MessageType.ANSWER:
        raise InvalidArgumentError(f"{t.wire_name} is not a request type")
    if t is MessageType.HELLO:
        return _header(HEADER_SIZE + 8, t, q.id, 0, q.epoch) + \
            _HELLO_REQ.pack(MAGIC, q.version)
    if not t.keyed:
        return _header(HEADER_SIZE, t, q.id, 0, q.epoch)
    size_ok, locks_ok, mode_ok, flags_ok = _params_allowed(t)
    flags = q.flags & ~(Flag.TEMPORARY | Flag.POSITIONS)
    if q.temporary:
        flags |= Flag.TEMPORARY
    if q.positions:
        flags |= Flag.POSITIONS
    n = len(q.keys)
    if ((not size_ok and q.size) or (not locks_ok and q.locks)
            or (not mode_ok and q.mode) or flags & ~flags_ok):
        raise InvalidArgumentError(
            f"{t.wire_name} takes no such parameter (size {q.size}, locks "
            f"{q.locks}, mode {q.mode}, flags {int(flags):#x})")
    if q.temporary and len(q.temporary) != n:
        raise InvalidArgumentError(
            f"{len(q.temporary)} temporary flags for {n} keys")
    if q.positions and len(q.positions) != n:
        raise InvalidArgumentError(
            f"{len(q.positions)} positions for {n} keys")
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
        pack_array("Q", q.leases, "lease"),
    ))
    frame = keyed_request(t, q.id, q.epoch, KeyBatch(q.keys), q.size,
                          q.locks, q.mode, flags, tail)
    if len(frame) > MAX_FRAME:
        raise InvalidArgumentError(f"{t.wire_name} frame of {len(frame)} "
                                   f"bytes exceeds MAX_FRAME ({MAX_FRAME})")
    return frame


def pack_array(typecode: str, values: Sequence[int], what: str) -> bytes:
    """``values`` as little-endian ``typecode`` integers (``I`` or ``Q``).

    A value out of range raises :class:`InvalidArgumentError`.
    """
    if isinstance(values, array) and values.typecode == typecode:
        a = values
    else:
        try:
            a = array(typecode, values)
        except (OverflowError, TypeError) as e:
            bits = 8 * array(typecode).itemsize
            raise InvalidArgumentError(
                f"a {what} is not an unsigned {bits}-bit integer: {e}"
            ) from None
    if _BIG:
        a = array(typecode, a)
        a.byteswap()
    return a.tobytes()


_BIG = struct.pack("=H", 1) != struct.pack("<H", 1)
assert array("I").itemsize == 4 and array("Q").itemsize == 8


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


def decode_request(frame: bytes) -> Request:
    """The request in ``frame`` (exactly one frame, header included).

    Malformed frames raise :class:`FrameError` with ``wire``'s code; a
    hello with another magic or version is ``BAD_VERSION``.
    """
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
        if q.version != VERSION:
            raise FrameError(Code.BAD_VERSION, f"protocol version "
                             f"{q.version}; this codec speaks {VERSION}")
        return q
    if t.keyed:
        _read_keyed(r, q)
    r.end()
    return q


def _read_keyed(r: _Reader, q: Request) -> None:
    t = q.type
    size_ok, locks_ok, mode_ok, flags_ok = _params_allowed(t)
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
    r.zero(flags & ~flags_ok, f"flags not defined for {t.wire_name}")
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
    if t.has_leases:
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


def pack_results(results: Sequence[Result]) -> bytes:
    """Result records, 40 bytes each, as a results answer lays them out."""
    try:
        return b"".join(_RESULT.pack(*x) for x in results)
    except struct.error as e:
        raise InvalidArgumentError(f"a result is out of range: {e}") from None


def encode_answer(a: Answer) -> bytes:
    """``a`` as one frame, as ``wire.Encoder.AppendAnswer`` encodes it."""
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
        body = _HELLO_ANS.pack(h.version, h.max_keys, h.max_frame, 0,
                               h.pool_size, h.align)
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


def decode_answer(frame: bytes) -> Answer:
    """The answer in ``frame`` (exactly one frame, header included).

    A malformed frame raises :class:`FrameError`. An answer whose code is
    not ``OK`` decodes without error; its ``code`` and ``message`` are the
    daemon's refusal. The results and statuses view ``frame``.
    """
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
        v, keys, frame_max, res, size, align = r.unpack(_HELLO_ANS, "hello")
        r.zero(res, "hello reserved field")
        a.hello = Hello(v, keys, frame_max, size, align)
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
        a.results = _read_results(r, t, h.epoch)
    elif t.has_statuses:
        n = r.count(1, MAX_KEYS, "status count")
        r.zero(r.u32("statuses reserved"), "statuses reserved field")
        a.statuses = StatusList(bytes(r.take(n, "statuses")))
    r.end()
    return a


def _read_results(r: _Reader, t: MessageType, epoch: int) -> Results:
    n = r.count(RESULT_SIZE, MAX_KEYS, "result count")
    prefix = r.u32("prefix")
    if t not in (MessageType.RESERVE_READ_PREFIX,
                 MessageType.RESERVE_READ_PREFIX_WAIT):
        r.zero(prefix, f"prefix (unused by {t.wire_name})")
    elif prefix > n:
        raise FrameError(Code.BAD_FRAME,
                         f"prefix {prefix} exceeds the {n} results")
    records = r.take(n * RESULT_SIZE, "results")
    for j in range(1, 8):
        reserved = records[j::RESULT_SIZE].tobytes()
        if reserved.count(0) != n:
            i = next(i for i, v in enumerate(reserved) if v)
            raise FrameError(Code.BAD_FRAME,
                             f"result {i}: reserved bytes are not 0")
    return Results(records, prefix, epoch)
