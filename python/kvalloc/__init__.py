"""kvalloc: a client for kvallocd, the node's shared KV-cache pool.

Standard library only (CPython 3.9+). The daemon passes its pool, a
memfd, once at connect; the client maps it (``MAP_SHARED``) and every
block is a ``memoryview`` over the mapping: KV bytes never cross the
socket, only offsets. See ``python/README.md`` and ``wire/PROTOCOL.md``.

    from kvalloc import Client, KeyBatch, ObjectKey

    with Client() as c:  # the default socket path
        keys = KeyBatch(ObjectKey(h, "llama") for h in hashes)
        res = c.reserve_write(keys, 8 << 20)
        ok = res.ok_indices()
        for i in ok:
            c.view(res, i)[:4] = b"data"
        c.finish_write(keys.subset(ok), res.select(ok))
"""

#: The version of this package, the one place it is written: the build
#: (pyproject.toml's dynamic version) reads it from here.
__version__ = "0.1.0"

from .client import Client
from .enums import PARTIAL, Code, Flag, MessageType, Mode, Status
from .errors import (BusyError, ConnectionLostError, DaemonClosedError,
                     DaemonError, DeadlineExceededError, FrameError,
                     InvalidArgumentError, KvallocError, NotAllowedError,
                     TooManyConnectionsError, UntrustedDaemonError,
                     WrongEpochError)
from .keys import KeyBatch, ObjectKey
from .limits import MAX_KEYS, VERSION, VERSIONS, default_socket_path
from .results import Hello, Lookup, Result, Results, Stats, StatusList
from .tensors import as_numpy, as_tensor

__all__ = [
    "Client", "ObjectKey", "KeyBatch", "Result", "Results", "StatusList",
    "Hello", "Lookup", "Stats", "Status", "Code", "Mode", "Flag", "MessageType",
    "PARTIAL", "KvallocError", "InvalidArgumentError", "DaemonError",
    "WrongEpochError", "NotAllowedError", "TooManyConnectionsError",
    "BusyError", "ConnectionLostError",
    "DeadlineExceededError", "DaemonClosedError", "FrameError",
    "UntrustedDaemonError", "default_socket_path", "MAX_KEYS", "VERSION",
    "VERSIONS",
    "as_numpy", "as_tensor",
]
