"""The package's version and LICENSE, pyproject.toml's build, and the
checks of dist_check.py (which make python-install-test runs on the real
wheel, sdist and installs) against distributions made wrong on purpose:
each defect must fail them."""

import contextlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(ROOT)

import kvalloc  # noqa: E402

import dist_check  # noqa: E402


class TestPackage(unittest.TestCase):

    def test_version(self):
        # PEP 440's public versions, the form a release takes.
        self.assertRegex(kvalloc.__version__,
                         r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?"
                         r"(\.post[0-9]+)?(\.dev[0-9]+)?$")
        self.assertEqual(dist_check.source_version(ROOT), kvalloc.__version__)

    def test_license_is_the_repositorys(self):
        # The build takes python/LICENSE (a project's files must lie under
        # its pyproject.toml); it must be the repository's, byte for byte.
        with open(os.path.join(REPO, "LICENSE"), "rb") as f:
            repo = f.read()
        self.assertIn(b"Apache License", repo)
        self.assertTrue(os.path.isfile(os.path.join(ROOT, "LICENSE")),
                        "no python/LICENSE")
        self.assertEqual(dist_check.read_license(ROOT), repo,
                         "python/LICENSE differs from the repository's "
                         "LICENSE: cp LICENSE python/LICENSE")

    def test_pyproject(self):
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            raw = f.read()
        try:
            import tomllib
        except ImportError:  # Python 3.9 and 3.10: the lines themselves
            text = raw.decode()
            for line in ('requires = ["setuptools>=77"]',
                         'build-backend = "setuptools.build_meta"',
                         'dynamic = ["version"]',
                         'version = { attr = "kvalloc.__version__" }',
                         'include = ["kvalloc", "kvalloc.*"]',
                         'dependencies = []',
                         'license = "Apache-2.0"'):
                self.assertIn("\n" + line + "\n", text)
            return
        doc = tomllib.loads(raw.decode())
        bs = doc["build-system"]
        self.assertEqual(bs["build-backend"], "setuptools.build_meta")
        self.assertEqual(len(bs["requires"]), 1)
        self.assertRegex(bs["requires"][0], r"^setuptools>=[0-9]+$")
        p = doc["project"]
        self.assertEqual(p["name"], "kvalloc")
        self.assertNotIn("version", p)
        self.assertEqual(p["dynamic"], ["version"])
        self.assertEqual(p["dependencies"], [])
        self.assertEqual(p["license"], "Apache-2.0")
        self.assertEqual(p["license-files"], ["LICENSE"])
        st = doc["tool"]["setuptools"]
        self.assertEqual(st["dynamic"]["version"],
                         {"attr": "kvalloc.__version__"})
        self.assertEqual(st["packages"]["find"]["include"],
                         ["kvalloc", "kvalloc.*"])

    def test_imports_with_the_standard_library_alone(self):
        # Every module of the package imports in an interpreter without
        # site-packages (-I -S): the standard library's and the package's
        # own modules alone (tensors imports numpy and torch inside its
        # functions). A subpackage named after an extra (kvalloc/<extra>/,
        # pyproject.toml's [project.optional-dependencies]) is that extra's
        # and may import its requirements; kvalloc itself may not import it.
        extras = _extras()
        self.assertIn("numpy", extras)
        mods = []
        for rel in sorted(dist_check.package_files(ROOT)):
            parts = rel[:-3].split("/")
            if len(parts) > 2 and parts[1] in extras:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            mods.append(".".join(parts))
        self.assertIn("kvalloc.client", mods)
        code = ("import importlib, sys\n"
                f"sys.path.insert(0, {ROOT!r})\n"
                f"for m in {mods!r}:\n"
                "    importlib.import_module(m)\n"
                "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
                f"{sorted(extras)!r})\n"
                "assert not bad, f'imported with kvalloc: {bad}'\n")
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code],
                           cwd=HERE, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)


def _extras() -> set:
    """The names of pyproject.toml's extras (the keys of its
    [project.optional-dependencies] table, read line by line: Python 3.9
    has no tomllib)."""
    out, inside = set(), False
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                inside = line == "[project.optional-dependencies]"
            elif inside and "=" in line and not line.startswith("#"):
                out.add(line.split("=", 1)[0].strip())
    return out

def _meta(version="0.1.0", license_expr="Apache-2.0", requires=(),
          extras=("numpy", "torch")) -> str:
    lines = ["Metadata-Version: 2.4", "Name: kvalloc", f"Version: {version}"]
    if license_expr:
        lines.append(f"License-Expression: {license_expr}")
    lines.append("License-File: LICENSE")
    for e in extras:
        lines.append(f"Provides-Extra: {e}")
        lines.append(f'Requires-Dist: {e}; extra == "{e}"')
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n\n"


class TestDistCheck(unittest.TestCase):
    """dist_check against a source tree with a subpackage and a wheel and
    an sdist of it: the right ones pass, and each defect fails."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.src = os.path.join(self.tmp.name, "src")
        files = {
            "kvalloc/__init__.py": '__version__ = "0.1.0"\n',
            "kvalloc/client.py": "",
            "kvalloc/sub/__init__.py": "",
            "kvalloc/sub/conn.py": "",
            "kvalloc/notapkg/data.py": "",  # no __init__.py: not shipped
            "tests/test_x.py": "",
            "LICENSE": "Apache License\n",
        }
        for rel, text in files.items():
            path = os.path.join(self.src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        self.code = ["kvalloc/__init__.py", "kvalloc/client.py",
                     "kvalloc/sub/__init__.py", "kvalloc/sub/conn.py"]

    def test_package_files(self):
        self.assertEqual(dist_check.package_files(self.src), set(self.code))
        self.assertEqual(dist_check.source_version(self.src), "0.1.0")

    def wheel(self, drop=(), add=(), meta=None, lic=b"Apache License\n"):
        path = os.path.join(self.tmp.name, "kvalloc-0.1.0-py3-none-any.whl")
        info = "kvalloc-0.1.0.dist-info/"
        with zipfile.ZipFile(path, "w") as z:
            for n in self.code + list(add):
                if n not in drop:
                    z.writestr(n, "")
            if lic is not None:
                z.writestr(info + "licenses/LICENSE", lic)
            z.writestr(info + "METADATA", meta or _meta())
            z.writestr(info + "RECORD", "")
        return path

    def sdist(self, drop=(), add=(), pkg_info=None, lic=b"Apache License\n"):
        path = os.path.join(self.tmp.name, "kvalloc-0.1.0.tar.gz")
        top = "kvalloc-0.1.0/"
        members = {n: b"" for n in self.code + list(add) if n not in drop}
        members["PKG-INFO"] = (pkg_info or _meta()).encode()
        members["pyproject.toml"] = b""
        members["README.md"] = b""
        members["kvalloc.egg-info/SOURCES.txt"] = b""
        if lic is not None:
            members["LICENSE"] = lic
        with tarfile.open(path, "w:gz") as t:
            for n, data in members.items():
                ti = tarfile.TarInfo(top + n)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
        return path

    def fails(self, f, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = f(*args)
        return rc, out.getvalue()

    def test_wheel(self):
        rc, out = self.fails(dist_check.check_wheel, self.wheel(), self.src)
        self.assertEqual(rc, 0, out)
        for name, kw, said in (
                ("a stray package", dict(add=["tests/test_x.py"]),
                 "files outside"),
                ("a stray top-level module", dict(add=["conftest.py"]),
                 "files outside"),
                ("a module too many", dict(add=["kvalloc/old.py"]),
                 "beyond the source"),
                ("a subpackage left out", dict(drop=["kvalloc/sub/conn.py"]),
                 "lacks"),
                ("no LICENSE", dict(lic=None), "licenses/LICENSE"),
                ("another LICENSE", dict(lic=b"MIT"), "not the repository"),
                ("another version", dict(meta=_meta(version="0.2.0")),
                 "Version '0.2.0'"),
                ("no license expression", dict(meta=_meta(license_expr="")),
                 "License-Expression"),
                ("a runtime dependency", dict(meta=_meta(requires=["six"])),
                 "runtime requirement")):
            with self.subTest(name):
                rc, out = self.fails(dist_check.check_wheel,
                                     self.wheel(**kw), self.src)
                self.assertEqual(rc, 1, out)
                self.assertIn(said, out)

    def test_sdist(self):
        rc, out = self.fails(dist_check.check_sdist, self.sdist(), self.src)
        self.assertEqual(rc, 0, out)
        for name, kw, said in (
                ("the tests", dict(add=["tests/test_x.py"]),
                 "beyond the package"),
                ("a module too many", dict(add=["kvalloc/old.py"]),
                 "beyond the source"),
                ("a subpackage left out", dict(drop=["kvalloc/sub/conn.py"]),
                 "lacks"),
                ("no LICENSE", dict(lic=None), "no LICENSE"),
                ("another version", dict(pkg_info=_meta(version="0.2.0")),
                 "Version '0.2.0'")):
            with self.subTest(name):
                rc, out = self.fails(dist_check.check_sdist,
                                     self.sdist(**kw), self.src)
                self.assertEqual(rc, 1, out)
                self.assertIn(said, out)


if __name__ == "__main__":
    unittest.main()
