"""Keys: :class:`ObjectKey`, and :class:`KeyBatch`, a batch encoded once.

A keyed request carries its keys as a *keys block* (``PROTOCOL.md``,
"Keys"): a table of the models and salts the keys name, then one 16-byte
record and the chunk hash per key. Encoding it is the only per-key work in
Python a call does, so a :class:`KeyBatch` does it once and every call of a
cycle (reserve, finish, read, release, delete) sends the same bytes.
"""

import struct
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from .errors import InvalidArgumentError
from .limits import MAX_KEYS, MAX_STRING_LEN, MAX_STRINGS

__all__ = ["ObjectKey", "KeyBatch", "Keys"]


class ObjectKey(NamedTuple):
    """One object's key: l1's ``ObjectKey``.

    ``chunk_hash`` is raw bytes; ``model`` and ``cache_salt`` are strings
    (sent as UTF-8; ``bytes`` are sent as they are); ``kv_rank`` and
    ``group_id`` are unsigned 32-bit integers.
    """

    chunk_hash: bytes
    model: str = ""
    kv_rank: int = 0
    group_id: int = 0
    cache_salt: str = ""


_RECORD = struct.Struct("<HHHxxII")
_BLOCK_HEAD = struct.Struct("<IHxx")
_U16 = struct.Struct("<H")


def _string_bytes(s: Union[str, bytes], what: str, i: int) -> bytes:
    if isinstance(s, str):
        b = s.encode("utf-8", "surrogateescape")
    elif isinstance(s, (bytes, bytearray)):
        b = bytes(s)
    else:
        raise InvalidArgumentError(
            f"key {i}: {what} is of type {type(s).__name__}, not str")
    if len(b) > MAX_STRING_LEN:
        raise InvalidArgumentError(
            f"key {i}: {what} is {len(b)} bytes, over the limit "
            f"{MAX_STRING_LEN}")
    return b


def _encode(keys: Sequence[ObjectKey]) -> Tuple[List[bytes], List[bytes]]:
    """The string table's entries and each key's record, canonically."""
    index: dict = {}
    strings: List[bytes] = []
    records: List[bytes] = []
    pack = _RECORD.pack

    def add(s: Union[str, bytes], what: str, i: int) -> int:
        b = _string_bytes(s, what, i)
        if len(strings) >= MAX_STRINGS:
            raise InvalidArgumentError(
                f"the keys name more than {MAX_STRINGS} distinct models "
                "and salts")
        strings.append(b)
        return len(strings) - 1

    i = 0
    try:
        for i, k in enumerate(keys):
            h, m, rank, group, salt = k
            mi = index.get(m)
            if mi is None:
                mi = index[m] = add(m, "model", i)
            si = index.get(salt)
            if si is None:
                si = index[salt] = add(salt, "cache salt", i)
            if len(h) > MAX_STRING_LEN:
                raise InvalidArgumentError(
                    f"key {i}: chunk hash is {len(h)} bytes, over the limit "
                    f"{MAX_STRING_LEN}")
            records.append(pack(len(h), mi, si, rank, group) + h)
    except InvalidArgumentError:
        raise
    except struct.error:
        raise InvalidArgumentError(
            f"key {i}: kv_rank or group_id is not an unsigned 32-bit "
            "integer") from None
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"key {i}: {_why(keys[i], e)}") from None
    return strings, records


def _why(k: object, e: Exception) -> str:
    """What is wrong with a key that did not encode."""
    if not isinstance(k, tuple) or len(k) != 5:
        return (f"a {type(k).__name__} is not an ObjectKey of (chunk_hash, "
                "model, kv_rank, group_id, cache_salt)")
    if not isinstance(k[0], (bytes, bytearray, memoryview)):
        return f"the chunk hash is a {type(k[0]).__name__}, not bytes"
    return f"not an ObjectKey of (bytes, str, int, int, str): {e}"


def _encode_uniform(keys: Sequence[ObjectKey]
                    ) -> Optional[Tuple[List[bytes], bytes, int]]:
    """The common batch, fast: one model, salt, rank and group, and chunk
    hashes of one length. The table, the records (all of one size, one
    header repeated) and that size; None for any other batch, which
    :func:`_encode` then encodes key by key (and explains, when bad)."""
    try:
        if not keys or set(map(len, keys)) != {5}:
            return None
        hs, ms, rs, gs, ss = zip(*keys)
        if not len(set(ms)) == len(set(ss)) == len(set(rs)) == \
                len(set(gs)) == 1:
            return None
        lens = set(map(len, hs))
    except (TypeError, ValueError):
        return None
    n = lens.pop()
    if lens or n > MAX_STRING_LEN or set(map(type, hs)) != {bytes}:
        return None
    m, s = ms[0], ss[0]
    if not isinstance(m, str) or not isinstance(s, str):
        return None
    strings = [_string_bytes(m, "model", 0)]
    if s != m:
        strings.append(_string_bytes(s, "cache salt", 0))
    try:
        head = _RECORD.pack(n, 0, len(strings) - 1, rs[0], gs[0])
    except struct.error:
        return None
    return strings, head + head.join(hs), _KEY_RECORD + n


_KEY_RECORD = 16


class KeyBatch(Sequence[ObjectKey]):
    """A batch of keys with its keys block encoded once, ready to send.

    Pass it wherever a call takes keys; it is a read-only sequence of the
    :class:`ObjectKey` it was made from. Construction checks every key
    (types, lengths, ranges) and raises :class:`InvalidArgumentError` for
    the first bad one; the encoding is canonical (``PROTOCOL.md``).
    :meth:`subset` picks keys without encoding them again.
    """

    __slots__ = ("_keys", "_strings", "_table", "_recs", "_stride",
                 "_block")

    def __init__(self, keys: Iterable[ObjectKey]) -> None:
        if isinstance(keys, (str, bytes, bytearray, memoryview, ObjectKey)):
            raise InvalidArgumentError(
                f"keys are a {type(keys).__name__}, not a sequence of "
                "ObjectKey")
        try:
            self._keys: Tuple[ObjectKey, ...] = tuple(keys)
        except TypeError:
            raise InvalidArgumentError(
                f"keys of type {type(keys).__name__} are not a sequence of "
                "ObjectKey") from None
        if len(self._keys) > MAX_KEYS:
            raise InvalidArgumentError(
                f"{len(self._keys)} keys exceed the protocol's limit "
                f"{MAX_KEYS}")
        fast = _encode_uniform(self._keys)
        if fast is not None:
            strings, recs, stride = fast
        else:
            strings, recs, stride = (*_encode(self._keys), 0)
        self._init(self._keys, strings,
                   b"".join(_U16.pack(len(s)) + s for s in strings),
                   recs, stride)

    def _init(self, keys: Tuple[ObjectKey, ...], strings: List[bytes],
              table: bytes, recs: Union[bytes, List[bytes]],
              stride: int) -> None:
        # recs: the records joined (stride, their common size, > 0) or a
        # list of them (stride 0).
        self._keys, self._strings, self._table = keys, strings, table
        self._recs, self._stride = recs, stride
        self._block: Optional[bytes] = None

    @classmethod
    def of(cls, keys: "Keys") -> "KeyBatch":
        """``keys`` as a KeyBatch: itself when it is one."""
        return keys if isinstance(keys, KeyBatch) else cls(keys)

    @property
    def block(self) -> bytes:
        """The keys block's bytes (``PROTOCOL.md``, "Keys")."""
        if self._block is None:
            recs = self._recs
            self._block = b"".join((
                _BLOCK_HEAD.pack(len(self._keys), len(self._strings)),
                self._table, *((recs,) if self._stride else recs)))
        return self._block

    def subset(self, indices: Iterable[int]) -> "KeyBatch":
        """The keys at ``indices``, in that order, without re-encoding.

        The subset keeps the whole string table, which the protocol allows
        (a table may hold unused entries).
        """
        keys, n, st, recs = self._keys, len(self._keys), self._stride, \
            self._recs
        idx = []
        for i in indices:
            if not -n <= i < n:
                raise IndexError(f"key {i} of {n}")
            idx.append(i % n)
        out = KeyBatch.__new__(KeyBatch)
        if st:
            picked: Union[bytes, List[bytes]] = b"".join(
                [recs[i * st:(i + 1) * st] for i in idx])
        else:
            picked = [recs[i] for i in idx]
        out._init(tuple(keys[i] for i in idx), self._strings, self._table,
                  picked, st)
        return out

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i):  # type: ignore[override]
        return self._keys[i]

    def __iter__(self):
        return iter(self._keys)

    def __repr__(self) -> str:
        return f"KeyBatch({len(self._keys)} keys)"


#: What a call accepts as keys.
Keys = Union[KeyBatch, Sequence[ObjectKey]]
