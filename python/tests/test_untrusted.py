"""Another local user on the socket: the client trusts only root and its
own uid (``SO_PEERCRED``, read before anything is sent), and the daemon's
default path is one that no other user can take.

These tests run processes as other uids (as ``TestPeerRefused`` does in
Go), so they need root; without it they fail, they never skip.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import kvalloc
from kvalloc import (Client, DeadlineExceededError, InvalidArgumentError,
                     UntrustedDaemonError, default_socket_path)

from daemon import daemon_binary

VICTIM, ATTACKER = 65533, 65534

# The impostor: listens on argv[1] (making its directory, 0755, when
# missing), plants a symlink for the lock file, prints "squatting", then
# for each connection, once its peer closes, "got <n> bytes from uid <u>".
IMPOSTOR = textwrap.dedent("""
    import os, socket, struct, sys
    path = sys.argv[1]
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.mkdir(d)
        os.chmod(d, 0o755)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(8)
    os.symlink(path + ".planted", path + ".lock")
    print("squatting", flush=True)
    while True:
        c, _ = s.accept()
        _, uid, _ = struct.unpack("=iII", c.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        c.settimeout(20)
        n = 0
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                n += len(b)
        except OSError:
            pass
        c.close()
        print(f"got {n} bytes from uid {uid}", flush=True)
""")

# A client process: connects to the default path and prints the outcome.
DIALER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from kvalloc import Client, KvallocError, default_socket_path
    print("path", default_socket_path(), flush=True)
    try:
        Client(timeout=20).close()
        print("connected")
    except KvallocError as e:
        print(f"refused: {type(e).__name__}: {e}")
""")


_PYTHON = []


def other_python(test: unittest.TestCase) -> str:
    """A CPython 3.9+ that other uids can run: this one when they can
    (an interpreter under /root cannot be), else the system's."""
    if not _PYTHON:
        for exe in (sys.executable, "/usr/bin/python3",
                    "/usr/local/bin/python3"):
            try:
                r = subprocess.run(
                    [exe, "-c", "import sys; sys.exit(sys.version_info "
                     "< (3, 9))"], user=ATTACKER, group=ATTACKER,
                    cwd="/", capture_output=True, timeout=30)
            except OSError:
                continue
            if r.returncode == 0:
                _PYTHON.append(exe)
                break
        else:
            test.fail("no CPython 3.9+ that uid 65534 can run (tried "
                      f"{sys.executable}, /usr/bin/python3, "
                      "/usr/local/bin/python3)")
    return _PYTHON[0]


class Shared:
    """A directory like /tmp (root's, 1777) with what other uids run: the
    kvalloc package and kvallocd, in a directory they can read."""

    def __init__(self, test: unittest.TestCase) -> None:
        if os.geteuid() != 0:
            test.fail("these tests run processes as other uids: run them "
                      "as root")
        self.top = tempfile.mkdtemp(prefix="kvalloc-squat-", dir="/tmp")
        test.addCleanup(shutil.rmtree, self.top, True)
        os.chmod(self.top, 0o755)
        self.tmp = os.path.join(self.top, "tmp")
        os.mkdir(self.tmp)
        os.chmod(self.tmp, 0o1777)
        self.pkg = os.path.join(self.top, "pkg")
        shutil.copytree(os.path.dirname(kvalloc.__file__),
                        os.path.join(self.pkg, "kvalloc"))
        self.daemon = os.path.join(self.top, "kvallocd")
        shutil.copy(daemon_binary(), self.daemon)
        for root, dirs, files in os.walk(self.pkg):
            for n in dirs + files:
                os.chmod(os.path.join(root, n), 0o755)
        os.chmod(self.pkg, 0o755)
        os.chmod(self.daemon, 0o755)
        self.test = test
        self.python = other_python(test)

    def env(self) -> dict:
        """A victim's environment: no XDG_RUNTIME_DIR, TMPDIR the shared
        directory."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("XDG_RUNTIME_DIR", "TMPDIR", "PYTHONPATH")}
        env["TMPDIR"] = self.tmp
        return env

    def run_as(self, uid: int, args, **kw) -> subprocess.Popen:
        p = subprocess.Popen(args, user=uid, group=uid, cwd=self.top,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, text=True, **kw)

        def stop():
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
        self.test.addCleanup(stop)
        return p

    def impostor(self, path: str) -> subprocess.Popen:
        p = self.run_as(ATTACKER, [self.python, "-c", IMPOSTOR, path])
        self.test.assertEqual(p.stdout.readline().strip(), "squatting")
        return p

    def dial(self) -> str:
        """A victim's client on the default path: its outcome."""
        p = self.run_as(VICTIM, [self.python, "-c", DIALER, self.pkg],
                        env=self.env())
        out, _ = p.communicate(timeout=30)
        return out


def got(impostor: subprocess.Popen, uid: int) -> int:
    """The bytes the impostor got on the connection from ``uid``."""
    suffix = f" bytes from uid {uid}"
    while True:
        line = impostor.stdout.readline()
        if not line:
            raise AssertionError(f"the impostor saw no connection of {uid}")
        if line.strip().endswith(suffix):
            return int(line.split()[1])


class TestUntrustedDaemon(unittest.TestCase):

    def test_impostor_refused(self):
        """A socket served by another uid: the client raises
        UntrustedDaemonError naming both uids, and sends nothing; told to
        trust that uid, it talks to it."""
        sh = Shared(self)
        squat = os.path.join(sh.tmp, "kvallocd-0")
        path = os.path.join(squat, "kvallocd.sock")
        imp = sh.impostor(path)
        with self.assertRaises(UntrustedDaemonError) as cm:
            Client(path, timeout=60)
        e = cm.exception
        self.assertIsInstance(e, PermissionError)
        self.assertEqual((e.uid, e.client_uid, e.path), (ATTACKER, 0, path))
        for w in (path, "uid 65534", "(uid 0)"):
            self.assertIn(w, str(e))
        self.assertEqual(got(imp, 0), 0, "the client sent the impostor bytes")
        with self.assertRaises(DeadlineExceededError):
            Client(path, timeout=0.3, daemon_uids=[ATTACKER])
        self.assertGreater(got(imp, 0), 0)

    def test_default_path_squatted(self):
        """Another uid squats a victim's default path (no XDG_RUNTIME_DIR:
        its private directory in a shared $TMPDIR): kvallocd refuses to
        start, naming both uids, and the victim's client refuses the
        impostor. Unsquatted, the daemon makes the directory (0700) and
        the same client, on the same default path, is served."""
        sh = Shared(self)
        path = os.path.join(sh.tmp, f"kvallocd-{VICTIM}", "kvallocd.sock")
        imp = sh.impostor(path)
        d = sh.run_as(VICTIM, [sh.daemon, "-pool-size", "16MiB"],
                      env=sh.env())
        out, _ = d.communicate(timeout=30)
        self.assertNotEqual(d.returncode, 0, out)
        for w in ("unsafe socket path", "uid 65534", "uid 65533"):
            self.assertIn(w, out)
        self.assertFalse(os.path.lexists(path + ".planted"))
        out = sh.dial()
        self.assertIn(f"path {path}\n", out)
        for w in ("refused: UntrustedDaemonError", "uid 65534", "(uid 65533)"):
            self.assertIn(w, out)
        self.assertEqual(got(imp, VICTIM), 0)
        imp.kill()
        imp.wait()
        shutil.rmtree(os.path.dirname(path))

        d = sh.run_as(VICTIM, [sh.daemon, "-pool-size", "16MiB"],
                      env=sh.env())
        deadline = time.monotonic() + 30
        while not os.path.exists(path):
            self.assertIsNone(d.poll(), "kvallocd exited")
            self.assertLess(time.monotonic(), deadline, "no socket in 30 s")
            time.sleep(0.02)
        st = os.lstat(os.path.dirname(path))
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid),
                         (0o700, VICTIM))
        self.assertIn("connected", sh.dial())
        d.terminate()
        d.communicate(timeout=30)
        self.assertEqual(d.returncode, 0)


class TestDefaults(unittest.TestCase):

    def test_default_socket_path(self):
        """Root's default is in /run/kvallocd, whatever the environment;
        another user's in $XDG_RUNTIME_DIR, else in its private directory
        in $TMPDIR (the victim's client above checks it against kvallocd's
        own)."""
        uid = os.geteuid()
        saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "TMPDIR")}
        try:
            os.environ["XDG_RUNTIME_DIR"] = "/run/user/4242"
            os.environ["TMPDIR"] = "/scratch"
            self.assertEqual(default_socket_path(),
                             "/run/kvallocd/kvallocd.sock" if uid == 0 else
                             "/run/user/4242/kvallocd.sock")
            del os.environ["XDG_RUNTIME_DIR"]
            if uid != 0:
                self.assertEqual(default_socket_path(),
                                 f"/scratch/kvallocd-{uid}/kvallocd.sock")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_bad_daemon_uids(self):
        """A bad daemon_uids raises InvalidArgumentError before connecting
        (the path does not exist: a connect would raise otherwise)."""
        for bad in ("0", 7, [-1], [1 << 32], [1.0], [], None.__class__):
            with self.assertRaises(InvalidArgumentError, msg=repr(bad)):
                Client("/nonexistent/k.sock", daemon_uids=bad)


if __name__ == "__main__":
    unittest.main()
