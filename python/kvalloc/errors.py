"""The client's exceptions.

Every exception the package raises on purpose is a :class:`KvallocError`:

- :class:`InvalidArgumentError` (also a ``ValueError``): a call's arguments
  are wrong. Raised before anything is sent when the client can tell (a
  length, a count, a limit from the hello), or when the daemon answers
  ``INVALID_ARGUMENT``. Nothing changed on the daemon; the connection is
  still usable.
- :class:`DaemonError`: the daemon refused the whole request with a
  :class:`~kvalloc.enums.Code` other than ``OK``. When the code closes the
  connection (:attr:`DaemonError.closes`) the client is closed too.
  :class:`WrongEpochError`, :class:`NotAllowedError`,
  :class:`TooManyConnectionsError` and :class:`BusyError` are the cases a
  caller handles apart.
- :class:`ConnectionLostError` (also a ``ConnectionError``): the daemon went
  away (EOF, reset), or the client was closed. The client is closed; make a
  new one, or call ``reconnect()``, to talk to the next daemon.
  :class:`DeadlineExceededError` (also a ``TimeoutError``) is the case
  where a call's deadline passed before its answer came, and
  :class:`DaemonClosedError` (also a :class:`DaemonError`) the one where
  the daemon answered ``CLOSED``: it is shutting down.
- :class:`UntrustedDaemonError` (also a ``PermissionError``): the process
  serving the socket runs as a uid the client does not trust (by default
  anything but root and the client's own uid): an impostor, or another
  user's daemon. Raised at connect, before anything is sent.
- :class:`FrameError`: bytes that break the protocol (a malformed frame).
  The codec raises it when decoding; the client raises it for a malformed
  answer and closes.
"""

from typing import Optional

from .enums import Code

__all__ = [
    "KvallocError", "InvalidArgumentError", "DaemonError", "WrongEpochError",
    "NotAllowedError", "TooManyConnectionsError", "BusyError",
    "ConnectionLostError", "DeadlineExceededError",
    "DaemonClosedError", "FrameError", "UntrustedDaemonError",
]


class KvallocError(Exception):
    """The base of every error this package raises.

    ``code`` is the protocol's code for the error when it has one.
    """

    code: Optional[Code] = None


class InvalidArgumentError(KvallocError, ValueError):
    """The call's arguments are wrong; nothing was changed."""

    code = Code.INVALID_ARGUMENT


class FrameError(KvallocError):
    """A frame breaks the protocol; ``code`` says how (``BAD_FRAME``...)."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class DaemonError(KvallocError):
    """The daemon refused a whole request with ``code`` and ``message``."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(f"kvallocd: {code.name}: {message}"
                         if message else f"kvallocd: {code.name}")
        self.code = code
        self.message = message

    @property
    def closes(self) -> bool:
        """Whether the daemon closed the connection after this answer."""
        return self.code.closes


class WrongEpochError(DaemonError):
    """The request's epoch is not the daemon's: a new daemon runs.

    Nothing changed. The leases and blocks held are void; reconnect.
    """


class NotAllowedError(DaemonError, PermissionError):
    """The daemon's allowlist refused this process's uid and gid."""


class TooManyConnectionsError(DaemonError, ConnectionRefusedError):
    """The daemon is at its cap on connections (in total or for this uid),
    or out of descriptors, and refused this one before any request.

    Nothing was opened; connect again once other connections have closed.
    """


class BusyError(DaemonError):
    """The daemon's frame buffers, shared by every connection, stayed in
    use for its frame timeout: the request was dropped unread, nothing
    changed, and the connection is still usable. Send it again.
    """


class ConnectionLostError(KvallocError, ConnectionError):
    """The connection to the daemon is gone; the client is closed."""


class DeadlineExceededError(ConnectionLostError, TimeoutError):
    """A call's deadline passed before its answer; the client is closed.

    The request may or may not have been carried out; whatever the
    connection held is released by the daemon when it sees the close.
    """


class DaemonClosedError(DaemonError, ConnectionLostError):
    """The daemon answered ``CLOSED``: it is shutting down."""


class UntrustedDaemonError(KvallocError, PermissionError):
    """The socket is served by a uid the client does not trust.

    The credentials are the socket's (``SO_PEERCRED``), read before the
    client sends anything: ``path``, the server's ``pid`` and ``uid``, the
    client's own ``client_uid`` and the ``trusted`` uids. Nothing was sent.
    """

    def __init__(self, path: str, pid: int, uid: int, client_uid: int,
                 trusted: "frozenset[int]") -> None:
        super().__init__(
            f"kvalloc: {path} is served by pid {pid} of uid {uid}, and this "
            f"client (uid {client_uid}) trusts only uids {sorted(trusted)} "
            f"(daemon_uids): refusing to send it anything")
        self.path, self.pid, self.uid = path, pid, uid
        self.client_uid, self.trusted = client_uid, trusted


def daemon_error(code: int, message: str) -> KvallocError:
    """The exception for an answer with ``code`` other than ``OK``."""
    try:
        c = Code(code)
    except ValueError:
        return FrameError(Code.BAD_FRAME,
                          f"answer with unknown code {code}: {message}")
    if c is Code.INVALID_ARGUMENT:
        return InvalidArgumentError(f"kvallocd: {message}")
    if c is Code.WRONG_EPOCH:
        return WrongEpochError(c, message)
    if c is Code.NOT_ALLOWED:
        return NotAllowedError(c, message)
    if c is Code.TOO_MANY_CONNECTIONS:
        return TooManyConnectionsError(c, message)
    if c is Code.BUSY:
        return BusyError(c, message)
    if c is Code.CLOSED:
        return DaemonClosedError(c, message)
    return DaemonError(c, message)
