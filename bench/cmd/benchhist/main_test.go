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

func TestAppendTwiceIsTwoRuns(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(in, []byte("BenchmarkX-2 \t 10\t 5 ns/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hist := filepath.Join(dir, "history")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 2 {
		var out, errOut bytes.Buffer
		now := func() time.Time { return t0.Add(time.Duration(i) * time.Minute) }
		if code := run([]string{"-dir", hist, "-commit", "c0ffee", fmt.Sprintf("-dirty=%t", i == 1), in}, &out, &errOut, now); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), "c0ffee.txt") {
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

func TestUsageAndErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	now := time.Now
	if code := run([]string{"-h"}, &out, &errOut, now); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	if code := run(nil, &out, &errOut, now); code != 2 {
		t.Errorf("no file: exit %d, want 2", code)
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	os.WriteFile(empty, []byte("PASS\n"), 0o644)
	if code := run([]string{"-dir", t.TempDir(), "-commit", "x", empty}, &out, &errOut, now); code != 1 {
		t.Errorf("no results: exit %d, want 1", code)
	}
}
