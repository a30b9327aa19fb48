"""A version 1 kvallocd made of a real one: a proxy that speaks only 1.

kvallocd has no flag that makes it refuse version 2, so the tests put this
in front of it: for each connection it reads the hello, answers a hello of
any version but 1 ``BAD_VERSION`` and closes, as a version 1 daemon does,
and otherwise passes the hello on to the real daemon and then every byte
both ways, the pool's descriptor with the hello answer's first byte
included. What a client then speaks is the real daemon's version 1.
"""

import array
import os
import socket
import struct
import tempfile
import threading
from typing import List

from kvalloc import MessageType
from kvalloc.enums import Code
from kvalloc.protocol import Answer, decode_request, encode_answer

_FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    b = b""
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got:
            raise EOFError
        b += got
    return b


class V1Proxy:
    """Serves ``path`` in front of the daemon at ``upstream``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.dir = tempfile.mkdtemp(dir=os.path.dirname(upstream))
        self.path = os.path.join(self.dir, "v1.sock")
        self.ls = socket.socket(socket.AF_UNIX)
        self.ls.bind(self.path)
        self.ls.listen(16)
        #: The version of each hello, in order.
        self.hellos: List[int] = []
        self._socks: List[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        self._accept = self._start(self._serve)

    def _start(self, target, *args) -> threading.Thread:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)
        return t

    def _keep(self, s: socket.socket) -> socket.socket:
        with self._lock:
            self._socks.append(s)
        return s

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return  # closed
            self._keep(c)
            self._start(self._connection, c)

    def _connection(self, c: socket.socket) -> None:
        try:
            head = _recv_exact(c, 24)
            size = struct.unpack_from("<I", head)[0]
            hello = head + _recv_exact(c, size - 24)
            q = decode_request(hello, version=2)
            self.hellos.append(q.version)
            if q.version != 1:
                c.sendall(encode_answer(Answer(
                    MessageType.HELLO, q.id, Code.BAD_VERSION, 0,
                    message=f"protocol version {q.version}; this daemon "
                    "speaks 1")))
                c.close()
                return
            u = self._keep(socket.socket(socket.AF_UNIX))
            u.connect(self.upstream)
            u.sendall(hello)
            data, anc, _, _ = u.recvmsg(24, _FD_SPACE)
            fds = [fd for level, kind, d in anc
                   if level == socket.SOL_SOCKET
                   and kind == socket.SCM_RIGHTS
                   for fd in array.array("i", d[:len(d) - len(d) % 4])]
            if not data:
                raise EOFError
            if fds:
                socket.send_fds(c, [data[:1]], fds[:1])
                c.sendall(data[1:])
            else:
                c.sendall(data)
            for fd in fds:
                os.close(fd)
            self._start(self._pipe, u, c)
            self._pipe(c, u)
        except (OSError, EOFError, ValueError):
            pass
        finally:
            c.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                b = src.recv(1 << 16)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop serving and close every connection."""
        self.ls.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(5)
        for s in socks:
            s.close()
        os.unlink(self.path)
        os.rmdir(self.dir)
