"""The in-tree build backend (build_backend/kvalloc_build.py): its reading
of pyproject.toml, with and without tomllib, and the wheel it builds."""

import os
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "build_backend"))

import kvalloc_build as kb  # noqa: E402


class TestReadToml(unittest.TestCase):
    def test_pyproject(self):
        with open(os.path.join(ROOT, "pyproject.toml")) as f:
            doc = kb.read_toml(f.read())
        p = doc["project"]
        self.assertEqual(p["name"], "kvalloc")
        self.assertEqual(p["dependencies"], [])
        self.assertEqual(p["optional-dependencies"],
                         {"numpy": ["numpy"], "torch": ["torch"],
                          "vllm": ["vllm>=0.32,<0.33"]})
        self.assertEqual(doc["build-system"]["requires"], [])
        try:
            import tomllib
        except ImportError:  # Python 3.9 and 3.10: the checks above
            return
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            self.assertEqual(doc, tomllib.load(f))

    def test_rejects(self):
        for bad in ['a = 1', 'a = {b = "c"}', 'a = [1, 2]', 'a = ["x"',
                    'just words', 'a = "x" "y"']:
            with self.assertRaises(kb.BuildError, msg=bad):
                kb.read_toml("[t]\n" + bad + "\n")

    def test_strings(self):
        doc = kb.read_toml('[t]\na = "x # not a comment" # a comment\n'
                           'b = [\n  "p",  # one\n  "q",\n]\n')
        self.assertEqual(doc, {"t": {"a": "x # not a comment",
                                     "b": ["p", "q"]}})


class TestWheel(unittest.TestCase):
    def test_wheel(self):
        with tempfile.TemporaryDirectory() as d:
            name = kb.build_wheel(d)
            self.assertRegex(name, r"^kvalloc-[0-9.]+-py3-none-any\.whl$")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = z.namelist()
                self.assertIn("kvalloc/__init__.py", names)
                self.assertFalse([n for n in names if not n.startswith(
                    ("kvalloc/", "kvalloc-"))], names)
                info = name.split("-py3")[0] + ".dist-info"
                meta = z.read(info + "/METADATA").decode()
                record = z.read(info + "/RECORD").decode().splitlines()
            self.assertIn('Requires-Dist: numpy; extra == "numpy"', meta)
            self.assertIn('Requires-Dist: torch; extra == "torch"', meta)
            self.assertEqual(len(record), len(names), record)
            # Two builds are the same bytes.
            with open(os.path.join(d, name), "rb") as f:
                first = f.read()
            os.remove(os.path.join(d, name))
            kb.build_wheel(d)
            with open(os.path.join(d, name), "rb") as f:
                self.assertEqual(f.read(), first)


if __name__ == "__main__":
    unittest.main()
