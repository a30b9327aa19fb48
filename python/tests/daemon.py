"""A real kvallocd for the tests, and the Go client beside it.

The binaries come from ``$KVALLOC_DAEMON`` and ``$KVALLOC_GOCLIENT`` (make
python-test builds them first), or are built here with ``go build`` into a
temporary directory, once per test process. Without either the tests fail:
they never skip for want of a daemon.

The clients ask for the protocol version the client's own
``$KVALLOC_PROTOCOL_VERSION`` says (kvalloc.client.PROTOCOL_ENV; unset,
version 2 with the fallback to 1): make python-test runs the suite with
it unset, then with 1.
"""

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from kvalloc import Client, ConnectionLostError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GIB = 1 << 30
MIB = 1 << 20

_built: Dict[str, str] = {}
_tmp: Optional[str] = None


def _tempdir() -> str:
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="kvalloc-pytest-")
        atexit.register(shutil.rmtree, _tmp, True)
    return _tmp


def binary(env: str, package: str) -> str:
    """The binary named by ``$env``, or ``package`` built with go build."""
    path = os.environ.get(env)
    if path:
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"${env}={path} is not an executable")
        return path
    if package not in _built:
        go = shutil.which(os.environ.get("GO", "go"))
        if go is None:
            raise RuntimeError(f"set ${env}, or put go on PATH to build "
                               f"{package}")
        out = os.path.join(_tempdir(), os.path.basename(package))
        subprocess.run([go, "build", "-o", out, package], cwd=REPO,
                       check=True)
        _built[package] = out
    return _built[package]


def daemon_binary() -> str:
    """kvallocd."""
    return binary("KVALLOC_DAEMON", "./cmd/kvallocd")


def goclient_binary() -> str:
    """The Go helper of these tests (python/tests/goclient)."""
    return binary("KVALLOC_GOCLIENT", "./python/tests/goclient")


class Daemon:
    """One kvallocd process on a socket of its own, 45 GiB unpopulated.

    The pool is a memfd that costs nothing until written, so tests write
    stamps at the ends of 8 MiB objects only.
    """

    def __init__(self, pool: int = 45 * GIB, args: Sequence[str] = (),
                 socket: Optional[str] = None) -> None:
        self.pool = pool
        self.args = list(args)
        self.socket = socket or os.path.join(
            tempfile.mkdtemp(dir=_tempdir()), "kvallocd.sock")
        self.proc: Optional[subprocess.Popen] = None
        self.log = os.path.join(os.path.dirname(self.socket), "kvallocd.log")

    def start(self, timeout: float = 30, ping: bool = True) -> "Daemon":
        """Start it and wait until it answers a ping (with ``ping``) or
        until its socket accepts connections."""
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [daemon_binary(), "-socket", self.socket,
             "-pool-size", str(self.pool), "-populate=false",
             "-log-level", "warn", *self.args],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kvallocd exited {self.proc.returncode}:"
                                   f" {self.log_text()}")
            try:
                if ping:
                    with Client(self.socket, timeout=2) as c:
                        c.ping()
                else:
                    with socket.socket(socket.AF_UNIX) as s:
                        s.connect(self.socket)
                return self
            except (ConnectionLostError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def log_text(self) -> str:
        """What the daemon logged."""
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the daemon."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    def pause(self) -> None:
        """SIGSTOP it and wait until the kernel has stopped it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while _state(self.proc.pid) != "T":
            if time.monotonic() > deadline:
                raise RuntimeError("kvallocd did not stop")
            time.sleep(0.001)

    def resume(self) -> None:
        """SIGCONT it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL it and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM it (a clean shutdown) and reap it; SIGKILL if it hangs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, timeout: float = 10, **kw: Any) -> Client:
        """A new Python client of this daemon (``kw``: Client's)."""
        return Client(self.socket, timeout=timeout, **kw)

    def go(self, *args: str, stdin: Any = None) -> Any:
        """Run the Go helper against this daemon; its JSON output."""
        p = subprocess.run(
            [goclient_binary(), "-socket", self.socket, *args],
            input=json.dumps(stdin).encode() if stdin is not None else None,
            capture_output=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError(f"goclient {' '.join(args)}: "
                                 f"{p.stderr.decode()}")
        return json.loads(p.stdout)

    def go_stats(self) -> Dict[str, int]:
        """The daemon's stats as the Go client sees them."""
        return self.go("stats")


def _state(pid: int) -> str:
    """A process's state letter from /proc (``T`` once stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def key_json(keys, stamps: Optional[List[tuple]] = None) -> List[dict]:
    """Keys in the Go helper's JSON form, with head and tail stamps."""
    out = []
    for i, k in enumerate(keys):
        d = {"chunk_hash": bytes(k.chunk_hash).hex(), "model": k.model,
             "kv_rank": k.kv_rank, "group_id": k.group_id,
             "cache_salt": k.cache_salt}
        if stamps is not None:
            d["head"], d["tail"] = stamps[i][0].hex(), stamps[i][1].hex()
        out.append(d)
    return out
