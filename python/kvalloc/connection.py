"""One Unix-domain socket to kvallocd: whole frames, each under a deadline.

Every operation takes an absolute deadline (``time.monotonic()`` seconds)
and sets the socket's timeout to what is left of it before each system
call, so no call blocks past its deadline, however the daemon stalls. A
timeout raises :class:`~kvalloc.errors.DeadlineExceededError`; EOF, a reset
or any other socket error :class:`~kvalloc.errors.ConnectionLostError`.
After either the connection is unusable (a frame may be half sent or half
read) and the owner closes it.
"""

import array
import os
import socket
import time
from typing import Optional, Tuple

from .errors import ConnectionLostError, DeadlineExceededError
from .limits import HEADER_SIZE
from .protocol import parse_header

__all__ = ["Connection"]

_FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)
_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)


class Connection:
    """A connected socket that sends and receives whole frames.

    Not safe for concurrent use; :class:`~kvalloc.client.Client` holds a
    lock around each request and its answer.
    """

    def __init__(self, path: str, deadline: float) -> None:
        """Connect to the daemon's socket at ``path`` by ``deadline``."""
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._timeout(sock, deadline)
            sock.connect(path)
        except socket.timeout:
            sock.close()
            raise DeadlineExceededError(
                f"kvalloc: connecting to {path}: deadline exceeded") from None
        except OSError as e:
            sock.close()
            raise ConnectionLostError(
                f"kvalloc: cannot connect to kvallocd at {path}: {e}"
            ) from e
        self._sock: Optional[socket.socket] = sock

    @staticmethod
    def _timeout(sock: socket.socket, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline exceeded")
        sock.settimeout(left)

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
        try:
            self._timeout(sock, deadline)
            sock.sendall(frame)
        except OSError as e:
            raise self._lost("sending to", e) from e

    def recv(self, deadline: float,
             with_fd: bool = False) -> Tuple[bytearray, Optional[int]]:
        """Receive one whole frame by ``deadline``.

        With ``with_fd`` the first bytes are read with ``recvmsg`` and the
        file descriptor that travels with them (``SCM_RIGHTS``, opened
        close-on-exec) is returned too, else None. The header is checked
        before the body is read, so a bad size cannot make it allocate.
        """
        sock = self._live()
        head = bytearray(HEADER_SIZE)
        view = memoryview(head)
        got, fd = 0, None
        try:
            try:
                if with_fd:
                    self._timeout(sock, deadline)
                    data, anc, _, _ = sock.recvmsg(HEADER_SIZE, _FD_SPACE,
                                                   _CLOEXEC)
                    fd = _take_fd(anc)
                    if not data:
                        raise ConnectionResetError("connection closed")
                    view[:len(data)] = data
                    got = len(data)
                self._fill(sock, view, got, deadline)
                h = parse_header(head)
                frame = bytearray(h.size)
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
            self._timeout(sock, deadline)
            n = sock.recv_into(view[got:])
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
