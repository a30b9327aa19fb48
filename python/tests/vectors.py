"""The conformance vectors (``testdata/wire/vectors.json``) and their check.

:func:`check_vector` decodes a vector's frame with the Python codec and
compares it with the vector's message (or its error code), then encodes the
message and compares the bytes; any difference raises
:class:`VectorMismatch`. A vector with ``"version": 2`` is checked with the
codec of a version 2 connection, any other with version 1's. The JSON
forms are the ones ``PROTOCOL.md`` ("Conformance vectors") describes.
"""

import json
import os
from typing import Any, Dict, List

from kvalloc.enums import Code, MessageType, Status
from kvalloc.errors import FrameError, InvalidArgumentError
from kvalloc.keys import ObjectKey
from kvalloc.protocol import (Answer, Request, decode_answer, decode_request,
                              encode_answer, encode_request)
from kvalloc.results import STATS_NAMES, Hello, Lookup, Result, Results, \
    Stats, StatusList

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "testdata",
                       "wire", "vectors.json")


class VectorMismatch(AssertionError):
    """The codec disagrees with a vector."""


def load(path: str = VECTORS) -> List[Dict[str, Any]]:
    """The vectors, in file order."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _type(name: str) -> MessageType:
    return MessageType.ANSWER if name == "error" else MessageType[name.upper()]


def _status(name: str) -> int:
    return int(Status[name])


def _status_name(v: int) -> str:
    try:
        return Status(v).name
    except ValueError:
        return f"Status({v})"


_EMPTY = (0, "", [], None, {})


def _drop_empty(d: Dict[str, Any], keep: tuple) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if k in keep or v not in _EMPTY}


def request_json(q: Request) -> Dict[str, Any]:
    """``q`` in the vectors' form: fields that are 0 or empty left out."""
    return _drop_empty({
        "type": q.type.wire_name, "id": q.id, "epoch": q.epoch,
        "version": q.version, "size": q.size, "locks": q.locks,
        "mode": q.mode, "flags": q.flags,
        "keys": [{"chunk_hash": k.chunk_hash.hex(), "model": k.model,
                  "kv_rank": k.kv_rank, "group_id": k.group_id,
                  "cache_salt": k.cache_salt} for k in q.keys],
        "temporary": list(q.temporary), "positions": list(q.positions),
        "sizes": list(q.sizes),
        "handles": list(q.handles), "leases": list(q.leases),
    }, keep=("type", "id", "epoch"))


def request_from_json(m: Dict[str, Any]) -> Request:
    """The Request a vector's message describes."""
    return Request(
        type=_type(m["type"]), id=m["id"], epoch=m["epoch"],
        version=m.get("version", 0), size=m.get("size", 0),
        locks=m.get("locks", 0), mode=m.get("mode", 0),
        flags=m.get("flags", 0),
        keys=[ObjectKey(bytes.fromhex(k["chunk_hash"]), k["model"],
                        k["kv_rank"], k["group_id"], k["cache_salt"])
              for k in m.get("keys", [])],
        temporary=m.get("temporary", []), positions=m.get("positions", []),
        sizes=m.get("sizes", []),
        leases=m.get("leases", []), handles=m.get("handles", []))


def answer_json(a: Answer) -> Dict[str, Any]:
    """``a`` in the vectors' form."""
    d: Dict[str, Any] = {"type": a.type.wire_name, "id": a.id,
                         "code": a.code.name, "epoch": a.epoch,
                         "message": a.message, "prefix": a.prefix}
    if a.code is Code.OK:
        if a.hello is not None:
            d["hello"] = _drop_empty(a.hello._asdict(), keep=(
                "version", "max_keys", "max_frame", "pool_size", "align"))
        if a.stats is not None:
            d["stats"] = a.stats._asdict()
        if a.lookup is not None:
            d["lookup"] = a.lookup._asdict()
        if a.results is not None:
            d["results"] = [_drop_empty(
                {"status": _status_name(r.status), "offset": r.offset,
                 "size": r.size, "gen": r.gen, "lease": r.lease,
                 "handle": r.handle},
                keep=("status", "offset", "size", "gen", "lease"))
                for r in a.results]
        if a.statuses is not None:
            d["statuses"] = [_status_name(s) for s in a.statuses.raw]
    return _drop_empty(d, keep=("type", "id", "code", "epoch", "hello"))


def answer_from_json(m: Dict[str, Any]) -> Answer:
    """The Answer a vector's message describes."""
    t = _type(m["type"])
    a = Answer(type=t, id=m["id"], code=Code[m["code"]], epoch=m["epoch"],
               message=m.get("message", ""))
    if a.code is not Code.OK:
        return a
    if "hello" in m:
        a.hello = Hello(**m["hello"])
    if t is MessageType.LOOKUP:
        a.lookup = Lookup(**m["lookup"])
    if t is MessageType.STATS:
        s = m.get("stats", {})
        a.stats = Stats(*(s.get(n, 0) for n in STATS_NAMES))
    if t.has_results:
        a.results = Results.from_list(
            [Result(_status(r["status"]), r["offset"], r["size"], r["gen"],
                    r["lease"], r.get("handle", 0))
             for r in m.get("results", [])],
            m.get("prefix", 0))
    if t.has_statuses:
        a.statuses = StatusList(bytes(_status(s)
                                      for s in m.get("statuses", [])))
    return a


def check_vector(v: Dict[str, Any]) -> None:
    """Raise :class:`VectorMismatch` unless the codec agrees with ``v``."""
    frame = bytes.fromhex(v["frame"])
    request = v["kind"] == "request"
    version = v.get("version", 1)
    decode = decode_request if request else decode_answer
    encode = encode_request if request else encode_answer
    if "error" in v:
        try:
            decode(frame, version)
        except FrameError as e:
            if e.code.name != v["error"]:
                raise VectorMismatch(f"{v['name']}: refused with "
                                     f"{e.code.name}, want {v['error']}: "
                                     f"{e}") from None
            return
        raise VectorMismatch(f"{v['name']}: decoded, want {v['error']}")
    try:
        msg = decode(frame, version)
    except FrameError as e:
        raise VectorMismatch(f"{v['name']}: refused: {e}") from None
    got = request_json(msg) if request else answer_json(msg)
    if got != v["message"]:
        raise VectorMismatch(f"{v['name']}: decoded\n{got}\nwant\n"
                             f"{v['message']}")
    want = (request_from_json if request else answer_from_json)(v["message"])
    try:
        enc = encode(want, version)
    except InvalidArgumentError as e:
        raise VectorMismatch(f"{v['name']}: refused to encode: {e}"
                             ) from None
    if enc != frame:
        raise VectorMismatch(f"{v['name']}: encoded\n{enc.hex()}\nwant\n"
                             f"{frame.hex()}")
    again = encode(msg, version)
    if again != frame:
        raise VectorMismatch(f"{v['name']}: re-encoded the decoded message "
                             f"to\n{again.hex()}\nwant\n{frame.hex()}")
