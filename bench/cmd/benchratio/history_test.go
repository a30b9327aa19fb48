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
