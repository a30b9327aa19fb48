package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	files, err := filepath.Glob("../../../testdata/scenarios/*.scn")
	if err != nil || len(files) < 5 {
		t.Fatalf("scenario files: %v %v", files, err)
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"-out", dir, "-policies", "onepass/contiguous-first/*", "-max-traffic", "1m", "-fill", "none", "-j", "2"}, files...)
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"== seed-restore", "== sustained-burst", "onepass/contiguous-first/on-demand", "5 scenarios × 2 policies"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "scenarios.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(md), "# Scenario replays") || !strings.Contains(string(md), "-max-traffic 1m0s") ||
		!strings.Contains(string(md), "### mixed-layouts") {
		t.Errorf("scenarios.md:\n%s", md)
	}
	for _, f := range []string{"sustained-burst.svg", "sustained-burst.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestRunErrors(t *testing.T) {
	var out, errs bytes.Buffer
	for _, args := range [][]string{
		{},
		{"-policies", "nope", "x.scn"},
		{"-fill", "half", "x.scn"},
		{"-out", "", "does-not-exist.scn"},
		{"-bogus"},
	} {
		if err := run(args, &out, &errs); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
	// The same scenario twice is refused.
	f := "../../../testdata/scenarios/3-oom-below-watermark.scn"
	if err := run([]string{"-out", "", f, f}, &out, &errs); err == nil || !strings.Contains(err.Error(), "also in") {
		t.Errorf("duplicate scenario: %v", err)
	}
}

// TestHelpExitsZero: -h prints the usage and exits 0, as the other tools
// do; it exited 1 before (fails before this commit).
func TestHelpExitsZero(t *testing.T) {
	var out, errs bytes.Buffer
	if code := exitCode(run([]string{"-h"}, &out, &errs), &errs); code != 0 {
		t.Errorf("scenarios -h exits %d, want 0", code)
	}
	if !strings.Contains(errs.String(), "usage: scenarios") {
		t.Errorf("scenarios -h printed %q, want the usage", errs.String())
	}
	errs.Reset()
	if code := exitCode(run([]string{"-bogus"}, &out, &errs), &errs); code != 1 {
		t.Errorf("scenarios -bogus exits %d, want 1", code)
	}
}
