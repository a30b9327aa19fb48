"""python/examples/engine.py runs against a daemon and finds its prefix."""

import os
import re
import subprocess
import sys

from helpers import DaemonTest

ENGINE = os.path.join(os.path.dirname(__file__), "..", "examples",
                      "engine.py")


class TestEngineExample(DaemonTest):

    def run_engine(self, *prompts):
        p = subprocess.run([sys.executable, ENGINE, "--socket",
                            self.daemon.socket, *prompts],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_two_engines_share_a_prefix(self):
        first = self.run_engine()
        hits = [int(h) for h in re.findall(r"(\d+) of \d+ chunks hit", first)]
        self.assertEqual(hits, [0, 5])
        self.assertNotIn("CORRUPT", first)
        self.assertIn("5 new chunks stored", first)
        # Another process: every chunk is there, read and verified.
        second = self.run_engine()
        self.assertEqual(re.findall(r"(\d+) of (\d+) chunks hit", second),
                         [("5", "5"), ("7", "7")])
        self.assertEqual(second.count("verified"), 2)
        s = self.daemon.go_stats()
        self.assertEqual((s["objects"], s["write_locked"]), (7, 0))
