package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/internal/history"
)

// now is the clock of the dates -record writes; tests replace it.
var now = time.Now

// record is -record DIR: it appends the results file path to the history
// dir under commit (git HEAD when empty).
func record(dir, commit string, dirty bool, path string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "benchratio: %v\n", err)
		return 2
	}
	m := history.Meta{Commit: commit, Dirty: dirty, Date: now().UTC().Truncate(time.Second)}
	if m.Commit == "" {
		m.Commit, m.Dirty = gitState()
	}
	file, err := history.Append(dir, m, data)
	if err != nil {
		fmt.Fprintf(stderr, "benchratio: -record %s: %v\n", path, err)
		return 2
	}
	fmt.Fprintf(stdout, "benchratio: appended %s to %s\n", path, file)
	return 0
}

// gitState returns HEAD and whether tracked files differ from it, or
// "unknown" outside a git checkout.
func gitState() (string, bool) {
	ctx := context.Background()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "HEAD").Output()
	if err != nil {
		return "unknown", false
	}
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err == nil && len(strings.TrimSpace(string(status))) > 0
}

// plotHistory is -history DIR -plot OUT: every target with a bound, its
// ratio in every run of the history, drawn over the runs.
func plotHistory(dir, out string, stdout, stderr io.Writer) int {
	runs, err := history.Read(dir)
	if err != nil {
		fmt.Fprintf(stderr, "benchratio: %v\n", err)
		return 2
	}
	if len(runs) == 0 {
		fmt.Fprintf(stderr, "benchratio: no runs in %s (make bench appends one per run)\n", dir)
		return 2
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintf(stderr, "benchratio: %v\n", err)
		return 2
	}
	labels := make([]string, len(runs))
	perRun := make([]samples, len(runs))
	for i, r := range runs {
		labels[i] = r.Short()
		perRun[i] = samples{}
		for _, res := range r.Results {
			perRun[i].add(res)
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Target ratios over %d runs\n\nOldest first; `+` marks a run of a dirty tree. Written by `benchratio -history %s -plot %s`.\n\n", len(runs), dir, out)
	md.WriteString("| measure | target |")
	for i, r := range runs {
		fmt.Fprintf(&md, " %s<br>%s |", labels[i], r.Date.Format("2006-01-02"))
	}
	md.WriteString("\n|---|--:|" + strings.Repeat("--:|", len(runs)) + "\n")
	var written []string
	for _, t := range targets {
		if t.op == "" {
			continue
		}
		s := history.Series{Title: t.num.String(), YLabel: t.num.unit, Values: make([]float64, len(runs)), Bound: t.bound}
		if t.den.name != "" {
			s.Title += "  ÷  " + t.den.String()
			s.YLabel = "ratio"
		}
		name := t.num.String()
		if t.den.name != "" {
			name = "`" + t.num.name + "` ÷ `" + t.den.name + "`"
		} else {
			name = "`" + t.num.name + "` " + t.num.unit
		}
		fmt.Fprintf(&md, "| %s | %s |", name, t.goal())
		for i := range runs {
			r := evaluate(perRun[i], []target{t})[0]
			s.Values[i] = math.NaN()
			cell := "—"
			if r.verdict != verdictMissing {
				s.Values[i] = r.ratio
				cell = formatNum(r.ratio)
				if r.verdict == verdictMiss {
					cell = "**" + cell + "**"
				}
			}
			fmt.Fprintf(&md, " %s |", cell)
		}
		md.WriteString("\n")
		if !hasValue(s.Values) {
			continue
		}
		base := filepath.Join(out, slug(t))
		for _, ext := range []string{".svg", ".png"} {
			if err := history.Plot(base+ext, labels, s); err != nil {
				fmt.Fprintf(stderr, "benchratio: %v\n", err)
				return 2
			}
			written = append(written, base+ext)
		}
	}
	md.WriteString("\nA bold ratio misses its target.\n")
	mdPath := filepath.Join(out, "history.md")
	if err := os.WriteFile(mdPath, []byte(md.String()), 0o644); err != nil {
		fmt.Fprintf(stderr, "benchratio: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "benchratio: %d runs, %d plots and %s in %s\n", len(runs), len(written), filepath.Base(mdPath), out)
	return 0
}

func hasValue(vs []float64) bool {
	for _, v := range vs {
		if !math.IsNaN(v) {
			return true
		}
	}
	return false
}

var slugRE = regexp.MustCompile(`[^A-Za-z0-9]+`)

// slug names a target's plot file, such as
// "L1Cycle-keys-5700-ns-key".
func slug(t target) string {
	return strings.Trim(slugRE.ReplaceAllString(t.num.name+" "+t.num.unit, "-"), "-")
}
