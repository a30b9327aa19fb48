"""The build backend of the kvalloc package (PEP 517 and PEP 660).

pip installs the Python client of kvallocd with it: ``pip install ./python``.
It is the standard library alone, so that an install needs no download: a
fresh venv of Python 3.12 or later has no setuptools, and a machine without
PyPI access cannot fetch a backend.

It reads the ``[project]`` table of ``pyproject.toml`` (with ``tomllib`` on
Python 3.11 and later, else with ``read_toml`` below, which reads the
subset that file uses) and builds

- a wheel of the ``kvalloc`` package: its ``.py`` files and a
  ``.dist-info`` directory (METADATA, WHEEL, RECORD);
- an sdist: the package, ``pyproject.toml``, ``README.md`` and this
  backend, with PKG-INFO;
- an editable wheel (``pip install -e``): a ``.pth`` file naming this
  directory.

Archives are reproducible: fixed timestamps and modes, sorted entries.
"""

import base64
import hashlib
import io
import json
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "kvalloc"
BACKEND_DIR = "build_backend"
TAG = "py3-none-any"
EPOCH = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    """pyproject.toml or the tree is not what this backend builds."""


# ---- pyproject.toml ---------------------------------------------------------

_TABLE = re.compile(r"^\[([A-Za-z0-9_.-]+)\]$")
_KEY = re.compile(r"^([A-Za-z0-9_-]+)\s*=\s*(.*)$")


def read_toml(text: str) -> dict:
    """Parse the TOML subset of pyproject.toml: comments, [a.b] tables, and
    keys whose values are basic strings or arrays of them (which may span
    lines). Anything else raises BuildError naming the line."""
    doc: dict = {}
    table = doc
    pending: Optional[Tuple[str, str, int]] = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if pending is not None:
            key, acc, start = pending
            acc += " " + line
            if not acc.rstrip().endswith("]"):
                pending = (key, acc, start)
                continue
            pending = None
            table[key] = _value(acc, start)
            continue
        if not line:
            continue
        m = _TABLE.match(line)
        if m:
            table = doc
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        m = _KEY.match(line)
        if not m:
            raise BuildError(f"pyproject.toml:{n}: cannot read {raw!r}")
        key, value = m.group(1), m.group(2).strip()
        if value.startswith("[") and not value.endswith("]"):
            pending = (key, value, n)
            continue
        table[key] = _value(value, n)
    if pending is not None:
        raise BuildError(f"pyproject.toml:{pending[2]}: unterminated array")
    return doc


def _strip_comment(line: str) -> str:
    """The line without a # comment outside a string."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def _value(text: str, n: int):
    """A basic string or an array of them (a trailing comma allowed)."""
    text = text.strip()
    try:
        if text.startswith("[") and text.endswith("]"):
            v = json.loads("[" + text[1:-1].strip().rstrip(",") + "]")
            if all(isinstance(x, str) for x in v):
                return v
        elif text.startswith('"'):
            v = json.loads(text)
            if isinstance(v, str):
                return v
    except ValueError:
        pass
    raise BuildError(f"pyproject.toml:{n}: want a string or an array of "
                     f"strings, got {text!r}")


def project(root: str = ROOT) -> dict:
    """The [project] table of root's pyproject.toml, checked."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib
        doc = tomllib.loads(data.decode())
    except ImportError:
        doc = read_toml(data.decode())
    p = doc.get("project")
    if not isinstance(p, dict):
        raise BuildError("pyproject.toml has no [project] table")
    for key in ("name", "version", "description", "readme", "requires-python"):
        if not isinstance(p.get(key), str) or not p[key]:
            raise BuildError(f"pyproject.toml: [project] {key} must be a "
                             f"non-empty string")
    if p["name"] != PACKAGE:
        raise BuildError(f"pyproject.toml: this backend builds {PACKAGE!r}, "
                         f"not {p['name']!r}")
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", p["version"]):
        raise BuildError(f"pyproject.toml: version {p['version']!r} is not "
                         f"a release number such as 1.2.3")
    if p.get("dependencies"):
        raise BuildError("pyproject.toml: the client has no dependencies")
    return p


# ---- metadata ---------------------------------------------------------------

def metadata(p: dict, root: str = ROOT) -> str:
    """Core metadata 2.1 (METADATA in a wheel, PKG-INFO in an sdist)."""
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}",
             f"Version: {p['version']}", f"Summary: {p['description']}",
             f"Requires-Python: {p['requires-python']}"]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    for extra, reqs in sorted(p.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(root, p["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines) + "\n\n" + readme


def _dist_info(p: dict) -> str:
    return f"{p['name']}-{p['version']}.dist-info"


def _wheel_file() -> str:
    return ("Wheel-Version: 1.0\nGenerator: kvalloc_build\n"
            f"Root-Is-Purelib: true\nTag: {TAG}\n")


def package_files(root: str = ROOT) -> List[str]:
    """The package's .py files, relative to root, sorted."""
    out = []
    for d, dirs, files in os.walk(os.path.join(root, PACKAGE)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        rel = os.path.relpath(d, root)
        out += [os.path.join(rel, f) for f in files if f.endswith(".py")]
    if os.path.join(PACKAGE, "__init__.py") not in out:
        raise BuildError(f"{root} has no {PACKAGE}/__init__.py")
    return sorted(out)


# ---- archives ---------------------------------------------------------------

def _write_wheel(path: str, p: dict, entries: List[Tuple[str, bytes]]) -> None:
    """A wheel of entries plus the dist-info: METADATA, WHEEL, RECORD."""
    info = _dist_info(p)
    entries = entries + [
        (f"{info}/METADATA", metadata(p).encode()),
        (f"{info}/WHEEL", _wheel_file().encode()),
    ]
    record = io.StringIO()
    for name, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
        record.write(f"{name},sha256={digest.rstrip(b'=').decode()},"
                     f"{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    entries.append((f"{info}/RECORD", record.getvalue().encode()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            zi = zipfile.ZipInfo(name, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)


def _read(rel: str) -> bytes:
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def _wheel_name(p: dict) -> str:
    return f"{p['name']}-{p['version']}-{TAG}.whl"


# ---- PEP 517 and PEP 660 hooks ----------------------------------------------

def get_requires_for_build_wheel(config_settings=None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings=None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings=None) -> str:
    p = project()
    info = _dist_info(p)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, text in (("METADATA", metadata(p)), ("WHEEL", _wheel_file())):
        with open(os.path.join(metadata_directory, info, name), "w",
                  encoding="utf-8") as f:
            f.write(text)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings=None,
                metadata_directory=None) -> str:
    p = project()
    files = [(rel.replace(os.sep, "/"), _read(rel)) for rel in package_files()]
    name = _wheel_name(p)
    _write_wheel(os.path.join(wheel_directory, name), p, files)
    return name


def build_editable(wheel_directory: str, config_settings=None,
                   metadata_directory=None) -> str:
    p = project()
    package_files()  # the tree must hold the package
    name = _wheel_name(p)
    pth = (ROOT + "\n").encode()
    _write_wheel(os.path.join(wheel_directory, name), p,
                 [(f"_{PACKAGE}_editable.pth", pth)])
    return name


def build_sdist(sdist_directory: str, config_settings=None) -> str:
    p = project()
    base = f"{p['name']}-{p['version']}"
    rels = ["pyproject.toml", p["readme"], os.path.join(BACKEND_DIR,
            "kvalloc_build.py")] + package_files()
    members: Dict[str, bytes] = {f"{base}/{r.replace(os.sep, '/')}": _read(r)
                                 for r in rels}
    members[f"{base}/PKG-INFO"] = metadata(p).encode()
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz",
                      format=tarfile.PAX_FORMAT) as t:
        for member in sorted(members):
            data = members[member]
            ti = tarfile.TarInfo(member)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
    return name
