"""One Unix-domain socket to kvallocd: whole frames, each under a deadline.

Every operation takes an absolute deadline (``time.monotonic()`` seconds)
and waits for the socket (``poll``) for no more than what is left of it,
so no call blocks past its deadline, however the daemon stalls or
trickles. A
timeout raises :class:`~kvalloc.errors.DeadlineExceededError`; EOF, a reset
or any other socket error :class:`~kvalloc.errors.ConnectionLostError`.
After either the connection is unusable (a frame may be half sent or half
read) and the owner closes it.
"""

import array
import os
import select
import socket
import struct
import time
from typing import FrozenSet, Iterable, Optional, Tuple

from .enums import Code
from .errors import (ConnectionLostError, DeadlineExceededError, FrameError,
                     InvalidArgumentError, UntrustedDaemonError)
from .limits import HEADER_SIZE, MAX_FRAME

__all__ = ["Connection", "trusted_uids"]

_FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)
_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
_SIZE = struct.Struct("<I")
_UCRED = struct.Struct("=iII")  # struct ucred: pid, uid, gid


def trusted_uids(daemon_uids: Optional[Iterable[int]]) -> FrozenSet[int]:
    """The uids a daemon may run as: ``daemon_uids``, or by default root
    and this process's effective uid. A bad value raises
    :class:`~kvalloc.errors.InvalidArgumentError`."""
    if daemon_uids is None:
        return frozenset((0, os.geteuid()))
    if isinstance(daemon_uids, (str, bytes)):
        raise InvalidArgumentError(
            f"daemon_uids {daemon_uids!r} must be an iterable of uids")
    try:
        uids = frozenset(daemon_uids)
    except TypeError:
        raise InvalidArgumentError(
            f"daemon_uids {daemon_uids!r} must be an iterable of uids"
        ) from None
    for u in uids:
        if type(u) is not int or not 0 <= u < 1 << 32:
            raise InvalidArgumentError(f"daemon_uids: {u!r} is not a uid")
    if not uids:
        raise InvalidArgumentError("daemon_uids is empty: no daemon could "
                                   "be trusted")
    return uids


class Connection:
    """A connected socket that sends and receives whole frames.

    The socket is non-blocking: each send or receive is tried at once and,
    when it would block, waited for with ``poll`` for what is left of the
    deadline, so a call costs the system calls it needs and no more.

    Not safe for concurrent use; :class:`~kvalloc.client.Client` holds a
    lock around each request and its answer.
    """

    def __init__(self, path: str, deadline: float,
                 trusted: Optional[FrozenSet[int]] = None) -> None:
        """Connect to the daemon's socket at ``path`` by ``deadline``.

        The socket's server must run as one of the ``trusted`` uids
        (:func:`trusted_uids`; None is its default): its credentials
        (``SO_PEERCRED``) are read before anything is sent, and another uid
        raises :class:`~kvalloc.errors.UntrustedDaemonError`.
        """
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("deadline exceeded")
            sock.settimeout(left)
            sock.connect(path)
            sock.setblocking(False)
            _check_server(sock, path, trusted or trusted_uids(None))
        except socket.timeout:
            sock.close()
            raise DeadlineExceededError(
                f"kvalloc: connecting to {path}: deadline exceeded") from None
        except UntrustedDaemonError:
            sock.close()
            raise
        except OSError as e:
            sock.close()
            raise ConnectionLostError(
                f"kvalloc: cannot connect to kvallocd at {path}: {e}"
            ) from e
        self._sock: Optional[socket.socket] = sock
        self._in, self._out = select.poll(), select.poll()
        self._in.register(sock, select.POLLIN)
        self._out.register(sock, select.POLLOUT)

    @staticmethod
    def _wait(poller: "select.poll", deadline: float) -> None:
        """Wait until the socket is ready, or raise at the deadline."""
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000 + 1):
            raise socket.timeout("deadline exceeded")

    def _live(self) -> socket.socket:
        if self._sock is None:
            raise ConnectionLostError("kvalloc: the connection is closed")
        return self._sock

    def _lost(self, what: str, e: BaseException) -> ConnectionLostError:
        if isinstance(e, socket.timeout):
            return DeadlineExceededError(
                f"kvalloc: {what} {self.path}: deadline exceeded")
        return ConnectionLostError(
            f"kvalloc: {what} {self.path}: {e or 'connection closed'}")

    def send(self, frame: bytes, deadline: float) -> None:
        """Send ``frame`` whole by ``deadline``."""
        sock = self._live()
        view, sent = memoryview(frame), 0
        try:
            while sent < len(view):
                try:
                    sent += sock.send(view[sent:])
                except BlockingIOError:
                    self._wait(self._out, deadline)
        except OSError as e:
            raise self._lost("sending to", e) from e

    def recv(self, deadline: float,
             with_fd: bool = False) -> Tuple[bytearray, Optional[int]]:
        """Receive one whole frame by ``deadline``.

        With ``with_fd`` the first bytes are read with ``recvmsg`` and the
        file descriptor that travels with them (``SCM_RIGHTS``, opened
        close-on-exec) is returned too, else None. The header's size is
        checked before the body is read, so a bad size cannot make it
        allocate; the rest of the header is the decoder's to check.
        """
        sock = self._live()
        head = bytearray(HEADER_SIZE)
        view = memoryview(head)
        got, fd = 0, None
        try:
            try:
                while with_fd:
                    try:
                        data, anc, _, _ = sock.recvmsg(
                            HEADER_SIZE, _FD_SPACE, _CLOEXEC)
                    except BlockingIOError:
                        self._wait(self._in, deadline)
                        continue
                    fd = _take_fd(anc)
                    if not data:
                        raise ConnectionResetError("connection closed")
                    view[:len(data)] = data
                    got = len(data)
                    break
                self._fill(sock, view, got, deadline)
                size = _SIZE.unpack_from(head)[0]
                if not HEADER_SIZE <= size <= MAX_FRAME:
                    raise FrameError(Code.TOO_LARGE, f"kvallocd announced "
                                     f"a frame of {size} bytes")
                frame = bytearray(size)
                frame[:HEADER_SIZE] = head
                self._fill(sock, memoryview(frame), HEADER_SIZE, deadline)
            except OSError as e:
                raise self._lost("receiving from", e) from e
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        return frame, fd

    def _fill(self, sock: socket.socket, view: memoryview, got: int,
              deadline: float) -> None:
        while got < len(view):
            try:
                n = sock.recv_into(view[got:])
            except BlockingIOError:
                self._wait(self._in, deadline)
                continue
            if n == 0:
                raise ConnectionResetError("connection closed by kvallocd")
            got += n

    def close(self) -> None:
        """Close the socket; the daemon then releases what it held."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    @property
    def closed(self) -> bool:
        """Whether the connection is closed."""
        return self._sock is None


def _check_server(sock: socket.socket, path: str,
                  trusted: FrozenSet[int]) -> None:
    """Refuse a socket served by a uid not in ``trusted``."""
    pid, uid, _ = _UCRED.unpack(sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    if uid not in trusted:
        raise UntrustedDaemonError(path, pid, uid, os.geteuid(), trusted)


def _take_fd(anc: list) -> Optional[int]:
    """The first descriptor of an ``SCM_RIGHTS`` message; closes others."""
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(data[:len(data) - len(data) % a.itemsize])
            fds.extend(a)
    for extra in fds[1:]:
        os.close(extra)
    return fds[0] if fds else None
