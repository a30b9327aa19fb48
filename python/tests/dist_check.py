"""What the kvalloc distribution holds, checked against its source tree.

    python dist_check.py wheel WHEEL SRC      a wheel file
    python dist_check.py sdist SDIST SRC      an sdist (.tar.gz)
    python dist_check.py installed SRC        kvalloc as pip installed it
    python dist_check.py editable SRC         kvalloc as pip install -e did

SRC is the directory of pyproject.toml. The package is kvalloc and its
subpackages (each directory under kvalloc/ with an __init__.py), and the
distribution holds exactly their .py files, no others, with LICENSE (the
repository's Apache-2.0, byte for byte) beside its metadata, whose
version is kvalloc.__version__ and whose requirements are all optional
(extras): the client imports with the standard library alone. An
editable install exposes kvalloc alone, from SRC: not tests, bench,
examples or anything else beside it.

python/tests/install.sh runs it (make python-install-test); each failure
is printed, and the exit status is 1 when there is one. Standard library
only, Python 3.9 and later.
"""

import email.parser
import importlib.util
import os
import sys
import tarfile
import zipfile
from typing import Dict, List, Optional, Set

PACKAGE = "kvalloc"


class Checks:
    """Collects failures, so that one run names all of them."""

    def __init__(self, what: str):
        self.what = what
        self.failures: List[str] = []

    def check(self, ok: bool, msg: str) -> bool:
        if not ok:
            self.failures.append(msg)
        return ok

    def done(self) -> int:
        for f in self.failures:
            print(f"dist_check: {self.what}: {f}")
        if not self.failures:
            print(f"dist_check: {self.what}: ok")
        return 1 if self.failures else 0


def package_files(src: str) -> Set[str]:
    """The .py files of kvalloc and its subpackages under src, as
    archive paths (kvalloc/x.py, kvalloc/sub/y.py)."""
    out = set()
    top = os.path.join(src, PACKAGE)
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs
                         if os.path.isfile(os.path.join(root, d,
                                                        "__init__.py")))
        rel = os.path.relpath(root, src).replace(os.sep, "/")
        out.update(f"{rel}/{f}" for f in files if f.endswith(".py"))
    return out


def source_version(src: str) -> Optional[str]:
    """kvalloc.__version__ of the tree at src, imported from there."""
    init = os.path.join(src, PACKAGE, "__init__.py")
    spec = importlib.util.spec_from_file_location(
        "_kvalloc_source", init,
        submodule_search_locations=[os.path.join(src, PACKAGE)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return getattr(mod, "__version__", None)


def read_license(src: str) -> bytes:
    """src's LICENSE (b"" when there is none: nothing then matches it)."""
    try:
        with open(os.path.join(src, "LICENSE"), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def check_metadata(c: Checks, text: str, version: str) -> None:
    """A METADATA or PKG-INFO file: name, version, license, and only
    optional requirements."""
    m = email.parser.Parser().parsestr(text)
    c.check(m.get("Name") == PACKAGE, f"Name {m.get('Name')!r}")
    c.check(m.get("Version") == version,
            f"Version {m.get('Version')!r}, kvalloc.__version__ {version!r}")
    c.check(m.get("License-Expression") == "Apache-2.0",
            f"License-Expression {m.get('License-Expression')!r}")
    c.check("LICENSE" in (m.get_all("License-File") or []),
            f"License-File {m.get_all('License-File')!r}")
    reqs = m.get_all("Requires-Dist") or []
    c.check(all("extra ==" in r for r in reqs),
            f"a runtime requirement, not an extra's: {reqs}")
    extras = set(m.get_all("Provides-Extra") or [])
    c.check({"numpy", "torch"} <= extras, f"Provides-Extra {sorted(extras)}")


def check_wheel(path: str, src: str) -> int:
    c = Checks(f"wheel {os.path.basename(path)}")
    version = source_version(src)
    info = f"{PACKAGE}-{version}.dist-info/"
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        code = {n for n in names if n.startswith(PACKAGE + "/")}
        other = [n for n in names
                 if not n.startswith((PACKAGE + "/", info))]
        c.check(not other, f"files outside {PACKAGE}/ and {info}: {other}")
        want = package_files(src)
        c.check(code == want,
                f"{PACKAGE}/ holds {sorted(code - want)} beyond the "
                f"source's modules, lacks {sorted(want - code)}")
        lic = info + "licenses/LICENSE"
        if c.check(lic in names, f"no {lic}: {sorted(names)}"):
            c.check(z.read(lic) == read_license(src),
                    f"{lic} is not the repository's LICENSE")
        if c.check(info + "METADATA" in names, f"no {info}METADATA"):
            check_metadata(c, z.read(info + "METADATA").decode(), version)
    return c.done()


def check_sdist(path: str, src: str) -> int:
    c = Checks(f"sdist {os.path.basename(path)}")
    version = source_version(src)
    top = f"{PACKAGE}-{version}/"
    with tarfile.open(path) as t:
        members: Dict[str, tarfile.TarInfo] = {
            m.name: m for m in t.getmembers() if not m.isdir()}
        c.check(all(n.startswith(top) for n in members),
                f"members outside {top}: "
                f"{sorted(n for n in members if not n.startswith(top))}")
        rel = {n[len(top):] for n in members if n.startswith(top)}
        code = {n for n in rel if n.startswith(PACKAGE + "/")}
        want = package_files(src)
        c.check(code == want,
                f"{PACKAGE}/ holds {sorted(code - want)} beyond the "
                f"source's modules, lacks {sorted(want - code)}")
        meta = {"PKG-INFO", "pyproject.toml", "setup.cfg", "README.md",
                "LICENSE", "MANIFEST.in"}
        other = sorted(n for n in rel - code - meta
                       if not n.startswith(PACKAGE + ".egg-info/"))
        c.check(not other, f"files beyond the package and its metadata: "
                f"{other}")
        for need in ("PKG-INFO", "pyproject.toml", "README.md", "LICENSE"):
            c.check(need in rel, f"no {need}")
        if "LICENSE" in rel:
            c.check(t.extractfile(members[top + "LICENSE"]).read() ==
                    read_license(src), "LICENSE is not the repository's")
        if "PKG-INFO" in rel:
            check_metadata(
                c, t.extractfile(members[top + "PKG-INFO"]).read().decode(),
                version)
    return c.done()


def check_installed(src: str) -> int:
    """Run by the venv's python, from outside src."""
    import importlib.metadata as md
    c = Checks("installed")
    import kvalloc
    c.check(not os.path.abspath(kvalloc.__file__).startswith(
        os.path.abspath(src) + os.sep),
        f"kvalloc imported from the source, {kvalloc.__file__}")
    version = getattr(kvalloc, "__version__", None)
    c.check(md.version(PACKAGE) == version,
            f"installed version {md.version(PACKAGE)!r}, "
            f"kvalloc.__version__ {version!r}")
    files = [str(f).replace(os.sep, "/") for f in md.files(PACKAGE)]
    info = f"{PACKAGE}-{md.version(PACKAGE)}.dist-info/"
    other = [f for f in files if not f.startswith((PACKAGE + "/", info))]
    c.check(not other, f"files outside {PACKAGE}/ and {info}: {other}")
    code = {f for f in files if f.startswith(PACKAGE + "/")
            and f.endswith(".py")}
    want = package_files(src)
    c.check(code == want, f"installed {sorted(code - want)} beyond the "
            f"source's modules, lacks {sorted(want - code)}")
    lic = info + "licenses/LICENSE"
    if c.check(lic in files, f"no {lic} installed"):
        c.check(md.distribution(PACKAGE).read_text("licenses/LICENSE")
                .encode() == read_license(src),
                "the installed LICENSE is not the repository's")
    check_metadata(c, str(md.metadata(PACKAGE)) + "\n", version)
    return c.done()


def check_editable(src: str) -> int:
    """Run by the venv's python, from outside src: kvalloc from src, and
    nothing else beside it importable."""
    c = Checks("editable")
    import kvalloc
    want = os.path.join(os.path.abspath(src), PACKAGE, "__init__.py")
    c.check(os.path.abspath(kvalloc.__file__) == want,
            f"kvalloc imported from {kvalloc.__file__}, not {want}")
    exposed = []
    for name in sorted(os.listdir(src)):
        mod = name[:-3] if name.endswith(".py") else name
        if mod == PACKAGE or not mod.isidentifier():
            continue
        if importlib.util.find_spec(mod) is not None:
            exposed.append(mod)
    c.check(not exposed, f"importable beside {PACKAGE}: {exposed}")
    return c.done()


def main(argv: List[str]) -> int:
    if len(argv) == 4 and argv[1] == "wheel":
        return check_wheel(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "sdist":
        return check_sdist(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "installed":
        return check_installed(argv[2])
    if len(argv) == 3 and argv[1] == "editable":
        return check_editable(argv[2])
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
