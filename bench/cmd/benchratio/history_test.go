package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/bench/internal/history"
)

// TestPlotHistory plots a synthetic history of four commits in which
// Allocate drifts from 2× to 22× its floor, one step at a time, each step
// too small for a pairwise gate.
func TestPlotHistory(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "plots")
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, ns := range []float64{8, 40, 60, 88} {
		data := fmt.Appendf(nil, "BenchmarkAllocate/region=heap-2 \t 1000\t %g ns/op\t 0 B/op\t 0 allocs/op\nBenchmarkFloor/bump-2 \t 1000\t 4 ns/op\n", ns)
		m := history.Meta{Commit: fmt.Sprintf("%040d", i+1), Date: t0.Add(time.Duration(i) * 24 * time.Hour)}
		if _, err := history.Append(dir, m, data); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-history", dir, "-plot", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(out, "history.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `Allocate/region=heap` ÷ `Floor/bump` | ≤ 20× | 2 | 10 | 15 | **22** |",
		"| `Allocate/region=heap` allocs/op | = 0 | 0 | 0 | 0 | 0 |",
		"| `L1Cycle/keys=256` ÷ `Floor/map` | ≤ 4× | — | — | — | — |",
		"00000000<br>2026-11-01",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("history.md lacks %q:\n%s", want, md)
		}
	}
	for _, f := range []string{"Allocate-region-heap-ns-op.svg", "Allocate-region-heap-ns-op.png", "Allocate-region-heap-allocs-op.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "L1Cycle-keys-256-ns-key.svg")); err == nil {
		t.Error("plotted a target no run measured")
	}

	if code := run([]string{"-history", t.TempDir(), "-plot", out}, &stdout, &stderr); code != 2 {
		t.Errorf("empty history: exit %d, want 2", code)
	}
	if code := run([]string{"-history", dir}, &stdout, &stderr); code != 2 {
		t.Errorf("-history without -plot: exit %d, want 2", code)
	}
}

// TestRecordTwiceIsTwoRuns: -record appends each run to the commit's file,
// with its date and dirty flag, after printing the ratios as usual.
func TestRecordTwiceIsTwoRuns(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(in, []byte("BenchmarkFloor/bump-2 \t 10\t 5 ns/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hist := filepath.Join(dir, "history")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	defer func() { now = time.Now }()
	for i := range 2 {
		var out, errOut bytes.Buffer
		now = func() time.Time { return t0.Add(time.Duration(i) * time.Minute) }
		if code := run([]string{"-record", hist, "-commit", "c0ffee", fmt.Sprintf("-dirty=%t", i == 1), in}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), "Floor/bump") || !strings.Contains(out.String(), "c0ffee.txt") {
			t.Errorf("stdout %q", out.String())
		}
	}
	runs, err := history.Read(hist)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Commit != "c0ffee" || !runs[1].Date.Equal(t0.Add(time.Minute)) || runs[0].Dirty || !runs[1].Dirty {
		t.Errorf("runs %+v", runs)
	}
}

func TestRecordUsageAndErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bench.txt")
	os.WriteFile(in, []byte("BenchmarkFloor/bump-2 \t 10\t 5 ns/op\n"), 0o644)
	for _, args := range [][]string{
		{"-commit", "x", in},                            // -commit without -record
		{"-record", dir, "-dirty", in},                  // -dirty without -commit
		{"-record", dir, "-commit", "x", in, in},        // two files
		{"-record", dir, "-commit", "x"},                // none
		{"-record", dir, "-history", dir, "-plot", dir}, // with -history
		{"-record", dir, "-commit", "not a hash", in},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); err == nil {
		t.Error("a refused call wrote the history")
	}
}
