"""The protocol's constants and limits (``wire/PROTOCOL.md``, "Limits")."""

import os

from .errors import InvalidArgumentError

__all__ = [
    "VERSION", "VERSIONS", "MAGIC", "HEADER_SIZE", "MAX_FRAME", "MAX_KEYS",
    "MAX_STRING_LEN", "MAX_STRINGS", "MAX_MESSAGE_LEN", "MAX_STATS",
    "MAX_READ_LOCKS", "MAX_INT64", "ROOT_SOCKET_DIR",
    "default_socket_path",
]

#: The newest protocol version this package speaks: version 2, key
#: handles. It speaks version 1 too (:data:`VERSIONS`).
VERSION = 2
#: The protocol versions this package speaks.
VERSIONS = (1, 2)
#: The four bytes that open a hello request.
MAGIC = b"KVAL"
#: The size of every frame's header.
HEADER_SIZE = 24
#: The largest frame, header included.
MAX_FRAME = 16 << 20
#: The most keys one request may name.
MAX_KEYS = 1 << 16
#: The longest chunk hash, model or cache salt, in bytes.
MAX_STRING_LEN = 4096
#: The most entries in a request's table of models and salts.
MAX_STRINGS = 4096
#: The longest error message in an answer, in bytes.
MAX_MESSAGE_LEN = 4096
#: The most values in a stats answer a decoder accepts.
MAX_STATS = 1024
#: Read locks one call may take or release per key (``l1.MaxReadLocks``).
MAX_READ_LOCKS = 128
#: The largest object size the wire can carry.
MAX_INT64 = (1 << 63) - 1


def check_read_locks(locks: int) -> int:
    """``locks``, a call's read locks per key, if in ``[1,
    MAX_READ_LOCKS]``; else :class:`InvalidArgumentError`."""
    if isinstance(locks, bool) or not isinstance(locks, int) \
            or not 1 <= locks <= MAX_READ_LOCKS:
        raise InvalidArgumentError(
            f"read locks {locks!r} outside [1, {MAX_READ_LOCKS}]")
    return locks


#: The default socket directory of a daemon run as root
#: (``wire.RootSocketDir``).
ROOT_SOCKET_DIR = "/run/kvallocd"


def default_socket_path() -> str:
    """Where kvallocd listens when told nothing (``wire.DefaultSocketPath``).

    ``kvallocd.sock`` in a directory only the daemon's user can write:
    ``/run/kvallocd`` for root (effective uid 0), else
    ``$XDG_RUNTIME_DIR`` when that variable is set, else the private
    directory ``kvallocd-<uid>`` (mode 0700, made by the daemon) in
    ``$TMPDIR``, or ``/tmp``, as Go's ``os.TempDir`` says. A client of
    another user's daemon names its path.
    """
    uid = os.geteuid()
    if uid == 0:
        d = ROOT_SOCKET_DIR
    else:
        d = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(
            os.environ.get("TMPDIR") or "/tmp", f"kvallocd-{uid}")
    return os.path.join(d, "kvallocd.sock")
