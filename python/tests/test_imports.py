"""Each module of the package imports first, in a fresh interpreter, with
no module of the package importing back one that imports it: the import
graph is a tree of layers (enums and limits, errors, keys, results,
protocol, connection, client)."""

import ast
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PKG = os.path.join(ROOT, "kvalloc")
MODULES = sorted(f[:-3] for f in os.listdir(PKG)
                 if f.endswith(".py") and f != "__init__.py")


def imports_of(name: str) -> set:
    """The package's modules that module name imports, anywhere in it
    (inside functions too: a deferred import is still an edge)."""
    with open(os.path.join(PKG, name + ".py")) as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("kvalloc."):
            out.add(node.module.split(".")[1])
    return out & set(MODULES)


class TestImports(unittest.TestCase):
    def test_each_module_first(self):
        for name in MODULES:
            r = subprocess.run(
                [sys.executable, "-c", f"import kvalloc.{name}"],
                cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0,
                             f"import kvalloc.{name} first:\n{r.stderr}")

    def test_no_cycle(self):
        graph = {m: imports_of(m) for m in MODULES}
        state = {}

        def visit(m, path):
            if state.get(m) == "done":
                return
            if state.get(m) == "open":
                cycle = path[path.index(m):] + [m]
                self.fail("import cycle: " + " -> ".join(cycle))
            state[m] = "open"
            for n in sorted(graph[m]):
                visit(n, path + [m])
            state[m] = "done"

        for m in MODULES:
            visit(m, [])


if __name__ == "__main__":
    unittest.main()
