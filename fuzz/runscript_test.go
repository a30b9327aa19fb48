package fuzz

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands in for the go command under fuzz/run.sh: `go test -list`
// lists FuzzX, and `go test -fuzz` prints $FAKE_OUT, writes the corpus
// file $FAKE_WRITE when set, and exits $FAKE_STATUS.
const fakeGo = `#!/bin/sh
case "$*" in
*-list*) echo FuzzX; echo ok; exit 0 ;;
esac
printf '%s' "$FAKE_OUT"
if [ -n "$FAKE_WRITE" ]; then
	mkdir -p fuzz/testdata/fuzz/FuzzX && echo 'go test fuzz v1' >"fuzz/testdata/fuzz/FuzzX/$FAKE_WRITE"
fi
exit "$FAKE_STATUS"
`

// TestRunScriptSaysWhy runs fuzz/run.sh over a go command that fails as go
// test -fuzz does: a failure names the input go test wrote and how to
// replay it, or, when there is none, go test's reason and its last
// progress lines; the deadline race that writes nothing stays a pass.
func TestRunScriptSaysWhy(t *testing.T) {
	script, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	const progress = "fuzz: elapsed: 3s, execs: 5120 (1706/sec), new interesting: 3 (total: 40)\n" +
		"fuzz: elapsed: 6s, execs: 5131 (3/sec), new interesting: 3 (total: 40)\n"
	for _, c := range []struct {
		name, out, write string
		status           string
		fails            bool
		want             []string
	}{
		{
			name: "input written",
			out: progress + "--- FAIL: FuzzX (6.50s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:9: broken\n\n" +
				"    Failing input written to testdata/fuzz/FuzzX/582528ddfad69eb5\n    To re-run:\n    go test -run=FuzzX/582528ddfad69eb5\nFAIL\n",
			write: "582528ddfad69eb5", status: "1", fails: true,
			want: []string{"fuzz: FuzzX failed; the failing input is fuzz/testdata/fuzz/FuzzX/582528ddfad69eb5",
				"make fuzz-replay NAME=FuzzX/582528ddfad69eb5"},
		},
		{
			name: "file without the line", out: progress + "--- FAIL: FuzzX (6.50s)\nFAIL\n",
			write: "00ff", status: "1", fails: true,
			want: []string{"the failing input is fuzz/testdata/fuzz/FuzzX/00ff"},
		},
		{
			name: "worker hung",
			out: progress + "--- FAIL: FuzzX (8.02s)\n    fuzzing process hung or terminated unexpectedly: exit status 2\n" +
				"FAIL\nexit status 1\nFAIL\tgithub.com/kvalloc/kvalloc/fuzz\t8.1s\n",
			status: "1", fails: true,
			want: []string{"fuzz: FuzzX failed and go test wrote no failing input",
				"    fuzzing process hung or terminated unexpectedly: exit status 2",
				"execs: 5131 (3/sec)",
				"the reason: fuzzing process hung or terminated unexpectedly: exit status 2"},
		},
		{
			name: "exit status only", out: "panic: boom\n", status: "2", fails: true,
			want: []string{"wrote no failing input", "the reason: panic: boom"},
		},
		{
			name: "deadline race", out: progress + "--- FAIL: FuzzX (8.00s)\n    context deadline exceeded\nFAIL\n",
			status: "1", want: []string{"golang/go#75804", "== summary", "FuzzX"},
		},
		{
			name: "pass", out: progress + "PASS\nok\tgithub.com/kvalloc/kvalloc/fuzz\t6.2s\n", status: "0",
			want: []string{"== summary", "5131 execs in 6s"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "fuzz"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "fuzz", "run.sh"), script, 0o755); err != nil {
				t.Fatal(err)
			}
			goCmd := filepath.Join(root, "go")
			if err := os.WriteFile(goCmd, []byte(fakeGo), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", filepath.Join(root, "fuzz", "run.sh"), "1s", "FuzzX")
			cmd.Env = append(os.Environ(), "GO="+goCmd, "FAKE_OUT="+c.out, "FAKE_WRITE="+c.write, "FAKE_STATUS="+c.status)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != c.fails {
				t.Fatalf("run.sh: err %v, want failure %v\n%s", err, c.fails, out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("run.sh's output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
