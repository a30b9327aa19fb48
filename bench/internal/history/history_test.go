package history

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// result is go test output for one benchmark at ns ns/op.
func result(ns float64) []byte {
	return fmt.Appendf(nil, "goos: linux\ngoarch: amd64\npkg: example.com/bench\nBenchmarkX-2 \t 1000\t %g ns/op\nBenchmarkY-2 \t 1000\t 10 ns/op\nPASS\n", ns)
}

func TestAppendReadOrdersRunsByDate(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// Two runs of commit b, one of a in between, appended out of order.
	for _, a := range []struct {
		commit string
		at     time.Duration
		ns     float64
		dirty  bool
	}{
		{"bbbbbbbbbbbb", 2 * time.Hour, 30, false},
		{"aaaaaaaaaaaa", time.Hour, 20, false},
		{"bbbbbbbbbbbb", 0, 10, true},
	} {
		if _, err := Append(dir, Meta{Commit: a.commit, Date: t0.Add(a.at), Dirty: a.dirty}, result(a.ns)); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	if len(files) != 2 {
		t.Fatalf("files %v, want one per commit", files)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bbbbbbbbbbbb.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "commit: bbbbbbbbbbbb\ndate: 2026-11-30T14:00:00Z\ndirty: false\ngoos: linux\n") {
		t.Errorf("file starts\n%s", b)
	}
	runs, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	var got []string
	for _, r := range runs {
		v, _ := r.Results[0].Value("sec/op")
		got = append(got, fmt.Sprintf("%s %s %d %.0f", r.Short(), r.Date.Format("15:04"), len(r.Results), v*1e9))
	}
	want := []string{"bbbbbbbb+ 12:00 2 10", "aaaaaaaa 13:00 2 20", "bbbbbbbb 14:00 2 30"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("runs %q, want %q", got, want)
	}
}

func TestAppendRefuses(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if _, err := Append(dir, Meta{Commit: "abc", Date: now}, []byte("PASS\nok x 1s\n")); !errors.Is(err, ErrNoResults) {
		t.Errorf("no results: %v, want ErrNoResults", err)
	}
	for _, c := range []string{"", "../x", "a b"} {
		if _, err := Append(dir, Meta{Commit: c, Date: now}, result(1)); err == nil {
			t.Errorf("commit %q accepted", c)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Errorf("a refused Append wrote %v", files)
	}
}

func TestReadRejectsForeignResults(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.txt"), result(1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "no commit") {
		t.Errorf("Read of results without commit: %v", err)
	}
}

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	s := Series{Title: "X ÷ Y", YLabel: "ratio", Values: []float64{1, 1.1, math.NaN(), 1.3}, Bound: 2}
	labels := []string{"aaaa", "bbbb", "cccc", "dddd"}
	for _, ext := range []string{".svg", ".png"} {
		p := filepath.Join(dir, "x"+ext)
		if err := Plot(p, labels, s); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 100 {
			t.Fatalf("%s: %d bytes, %v", p, len(b), err)
		}
		if ext == ".svg" && (!strings.Contains(string(b), "bbbb") || !strings.Contains(string(b), "target 2")) {
			t.Errorf("svg lacks the commit labels or the target")
		}
	}
	if err := Plot(filepath.Join(dir, "y.svg"), labels[:2], Series{Values: []float64{math.NaN(), math.NaN()}, Bound: math.NaN()}); err == nil {
		t.Error("a series without values plotted")
	}
	if err := Plot(filepath.Join(dir, "z.svg"), labels, Series{Values: []float64{1}}); err == nil {
		t.Error("labels and values of different lengths plotted")
	}
}
