package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
	"golang.org/x/perf/benchfmt"

	"github.com/kvalloc/kvalloc/bench/internal/gate"
)

// A side is one benchmark binary and the directory it runs in (the
// package directory, as with go test).
type side struct {
	label string
	bin   string
	dir   string
}

// A runner runs one benchmark binary and returns its standard output.
// Tests replace execRunner.
type runner func(ctx context.Context, s side, args []string) ([]byte, error)

func execRunner(ctx context.Context, s side, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s%s", s.label, strings.Join(args, " "), err, tail(stdout.Bytes()), tail(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

func tail(b []byte) string {
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// benchArgs is the command line of one timed run.
func benchArgs(bench, benchtime string) []string {
	return []string{
		"-test.run=^$",
		"-test.bench=" + bench,
		"-test.benchmem",
		"-test.benchtime=" + benchtime,
		"-test.cpu=1",
		"-test.count=1",
	}
}

// benchPattern is a -test.bench pattern that runs the top-level
// benchmarks of names (full names without the "Benchmark" prefix, such
// as "Alloc/size=64") with all their sub-benchmarks.
func benchPattern(names []string) string {
	seen := make(map[string]bool)
	var bases []string
	for _, n := range names {
		b := string(benchfmt.Name(n).Base())
		if !seen[b] {
			seen[b] = true
			bases = append(bases, regexp.QuoteMeta(b))
		}
	}
	sort.Strings(bases)
	return "^Benchmark(?:" + strings.Join(bases, "|") + ")$"
}

// countResults returns the number of benchmark results in out.
func countResults(out []byte) int {
	n := 0
	r := benchfmt.NewReader(bytes.NewReader(out), "")
	for r.Scan() {
		if _, ok := r.Result().(*benchfmt.Result); ok {
			n++
		}
	}
	return n
}

// errNoBaseBenchmarks reports that the base ran no benchmark.
var errNoBaseBenchmarks = errors.New("no benchmarks")

// rounds runs base and head alternately, base first, count times each
// with args and returns their concatenated outputs. It fails with
// errNoBaseBenchmarks if the first base run reports no result, and with
// an error if the first head run reports none.
func rounds(ctx context.Context, run runner, progress io.Writer, base, head side, count int, args []string) (baseOut, headOut []byte, err error) {
	for i := range count {
		fmt.Fprintf(progress, "benchgate: round %d/%d\n", i+1, count)
		for j, s := range []side{base, head} {
			out, err := run(ctx, s, args)
			if err != nil {
				return nil, nil, err
			}
			if i == 0 && countResults(out) == 0 {
				if j == 0 {
					return nil, nil, errNoBaseBenchmarks
				}
				return nil, nil, fmt.Errorf("no benchmark of %s matches %s", head.label, strings.Join(args, " "))
			}
			if j == 0 {
				baseOut = append(baseOut, out...)
			} else {
				headOut = append(headOut, out...)
			}
		}
	}
	return baseOut, headOut, nil
}

// gitGate is git mode.
type gitGate struct {
	cfg            *config
	stdout, stderr io.Writer
	runner         runner

	tmp string
}

func (g *gitGate) errorf(format string, a ...any) int {
	fmt.Fprintf(g.stderr, "benchgate: "+format+"\n", a...)
	return exitError
}

func (g *gitGate) run(ctx context.Context) int {
	c := g.cfg
	if _, err := gitOutput(ctx, "", "rev-parse", "--show-toplevel"); err != nil {
		return g.errorf("-base needs a git repository: %v", err)
	}
	prefix, err := gitOutput(ctx, "", "rev-parse", "--show-prefix")
	if err != nil {
		return g.errorf("%v", err)
	}
	sha, err := gitOutput(ctx, "", "rev-parse", "--verify", "--quiet", c.base+"^{commit}")
	if err != nil {
		return skip(c, g.stdout, g.stderr, "base %q does not resolve to a commit", c.base)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return g.errorf("%v", err)
	}
	headDir, err := goListDir(ctx, cwd, c.pkg)
	if err != nil {
		return g.errorf("package %s in the working tree: %v", c.pkg, err)
	}

	g.tmp, err = os.MkdirTemp("", "benchgate-")
	if err != nil {
		return g.errorf("%v", err)
	}
	defer os.RemoveAll(g.tmp)
	tree := filepath.Join(g.tmp, "base")
	if out, err := gitOutput(ctx, "", "worktree", "add", "--detach", tree, sha); err != nil {
		return g.errorf("git worktree add: %v\n%s", err, out)
	}
	defer func() {
		// Use a fresh context: cleanup must happen after Ctrl-C too.
		if out, err := gitOutput(context.Background(), "", "worktree", "remove", "--force", tree); err != nil {
			fmt.Fprintf(g.stderr, "benchgate: git worktree remove %s: %v\n%s", tree, err, out)
			gitOutput(context.Background(), "", "worktree", "prune")
		}
	}()
	short := sha
	if len(short) > 12 {
		short = short[:12]
	}
	fmt.Fprintf(g.stdout, "benchgate: base %s = %s, head = working tree; package %s; -bench %q -count %d -benchtime %s\n",
		c.base, short, c.pkg, c.bench, c.count, c.benchtime)

	baseCwd := filepath.Join(tree, prefix)
	baseDir, err := goListDir(ctx, baseCwd, c.pkg)
	if err != nil {
		return skip(c, g.stdout, g.stderr, "base %s has no package %s (%v)", c.base, c.pkg, firstLine(err))
	}
	baseBin, headBin := filepath.Join(g.tmp, "base.test"), filepath.Join(g.tmp, "head.test")
	if out, err := goCommand(ctx, baseCwd, "test", "-c", "-o", baseBin, c.pkg); err != nil {
		return skip(c, g.stdout, g.stderr, "package %s does not build at base %s: %v\n%s", c.pkg, c.base, err, out)
	}
	if !exists(baseBin) {
		return skip(c, g.stdout, g.stderr, "package %s has no tests at base %s", c.pkg, c.base)
	}
	if out, err := goCommand(ctx, cwd, "test", "-c", "-o", headBin, c.pkg); err != nil {
		return g.errorf("package %s does not build in the working tree: %v\n%s", c.pkg, err, out)
	}
	if !exists(headBin) {
		return g.errorf("package %s has no tests in the working tree", c.pkg)
	}
	base := side{label: "base", bin: baseBin, dir: baseDir}
	head := side{label: "head", bin: headBin, dir: headDir}
	return g.measure(ctx, base, head)
}

// measure runs the rounds, the confirmations and the profiles.
func (g *gitGate) measure(ctx context.Context, base, head side) int {
	c := g.cfg
	baseOut, headOut, err := rounds(ctx, g.runner, g.stderr, base, head, c.count, benchArgs(c.bench, c.benchtime))
	if errors.Is(err, errNoBaseBenchmarks) {
		return skip(c, g.stdout, g.stderr, "no benchmark of base %s matches -bench %q", c.base, c.bench)
	}
	if err != nil {
		return g.errorf("%v", err)
	}
	g.save("base.txt", baseOut)
	g.save("head.txt", headOut)
	rep, err := g.compare(baseOut, headOut)
	if err != nil {
		return g.errorf("%v", err)
	}
	fmt.Fprintln(g.stdout)
	rep.Write(g.stdout)

	regs := rep.Regressions()
	notes := make(map[*gate.Row]string)
	for attempt := 1; attempt <= c.confirm; attempt++ {
		var timeNames []string
		for _, r := range regs {
			if r.Unit == gate.UnitTime {
				timeNames = append(timeNames, r.Name)
			}
		}
		if len(timeNames) == 0 {
			break
		}
		fmt.Fprintf(g.stdout, "\nbenchgate: confirming %d sec/op regression(s), re-run %d/%d\n", len(timeNames), attempt, c.confirm)
		bOut, hOut, err := rounds(ctx, g.runner, g.stderr, base, head, c.count, benchArgs(benchPattern(timeNames), c.benchtime))
		if err != nil {
			return g.errorf("confirming: %v", err)
		}
		g.save(fmt.Sprintf("confirm-%d-base.txt", attempt), bOut)
		g.save(fmt.Sprintf("confirm-%d-head.txt", attempt), hOut)
		again, err := g.compare(bOut, hOut)
		if err != nil {
			return g.errorf("confirming: %v", err)
		}
		wanted := make(map[string]bool)
		for _, n := range timeNames {
			wanted[n] = true
		}
		again.Select(func(r *gate.Row) bool { return r.Unit == gate.UnitTime && wanted[r.Name] }).Write(g.stdout)
		kept := regs[:0]
		for _, r := range regs {
			if r.Unit != gate.UnitTime {
				kept = append(kept, r)
				continue
			}
			if ar := again.Row(r.Name, r.Unit); ar != nil && ar.Regressed {
				notes[r] = fmt.Sprintf("; confirmed %d/%d: %s", attempt, c.confirm, ar.Reason)
				kept = append(kept, r)
			} else {
				fmt.Fprintf(g.stdout, "benchgate: %s sec/op: regression not confirmed\n", r.Name)
			}
		}
		regs = kept
	}

	if len(regs) > 0 && c.profile {
		if err := g.profileDiff(ctx, base, head, rep, regs); err != nil {
			fmt.Fprintf(g.stderr, "benchgate: profiling: %v\n", err)
		}
	}
	return verdict(g.stdout, regs, notes)
}

func (g *gitGate) compare(baseOut, headOut []byte) (*gate.Report, error) {
	return gate.Compare(
		gate.Input{Label: "base", R: bytes.NewReader(baseOut)},
		gate.Input{Label: "head", R: bytes.NewReader(headOut)},
		g.cfg.opt)
}

// save keeps a copy of data in -out, if set.
func (g *gitGate) save(name string, data []byte) {
	if g.cfg.outDir == "" {
		return
	}
	if err := os.MkdirAll(g.cfg.outDir, 0o777); err == nil {
		err = os.WriteFile(filepath.Join(g.cfg.outDir, name), data, 0o666)
		if err == nil {
			return
		}
	}
	fmt.Fprintf(g.stderr, "benchgate: cannot save %s in %s\n", name, g.cfg.outDir)
}

// profileIters is the fixed iteration count of the profiled runs: the
// base should need about d for the benchmarks in names, judging by its
// sec/op medians.
func profileIters(rep *gate.Report, names []string, d float64) int64 {
	bases := make(map[string]bool)
	for _, n := range names {
		bases[string(benchfmt.Name(n).Base())] = true
	}
	var perOp float64
	if t := rep.Table(gate.UnitTime); t != nil {
		for _, r := range t.Rows {
			if r.Old != nil && bases[string(benchfmt.Name(r.Name).Base())] {
				perOp += r.OldSummary.Center
			}
		}
	}
	if !(perOp > 0) {
		return 1000
	}
	return int64(min(max(math.Ceil(d/perOp), 1), 1e9))
}

// profileDiff profiles base and head on the regressed benchmarks with
// the same iteration count and prints the largest flat differences.
func (g *gitGate) profileDiff(ctx context.Context, base, head side, rep *gate.Report, regs []*gate.Row) error {
	var names []string
	for _, r := range regs {
		names = append(names, r.Name)
	}
	iters := profileIters(rep, names, g.cfg.profileTime.Seconds())
	dir := g.cfg.outDir
	if dir == "" {
		dir = g.tmp
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	benchtime := fmt.Sprintf("%dx", iters)
	fmt.Fprintf(g.stderr, "benchgate: profiling %s with -test.benchtime=%s\n", benchPattern(names), benchtime)
	profs := make([]*profile.Profile, 2)
	for i, s := range []side{base, head} {
		path := filepath.Join(dir, s.label+".cpu.pprof")
		args := append(benchArgs(benchPattern(names), benchtime), "-test.cpuprofile="+path)
		if _, err := g.runner(ctx, s, args); err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if profs[i], err = profile.ParseData(data); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	return writeProfileDiff(g.stdout, profs[0], profs[1], benchtime, 10)
}

// gitOutput runs git in dir ("" for the current directory) and returns
// its trimmed standard output, or its combined output in the error.
func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out) + stderr.String()), fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// goCommand runs the go command in dir and returns its combined output.
func goCommand(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// goListDir returns the directory of the single package pkg, resolved
// from dir.
func goListDir(ctx context.Context, dir, pkg string) (string, error) {
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-f", "{{.Dir}}", pkg)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	dirs := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(dirs) != 1 || dirs[0] == "" {
		return "", fmt.Errorf("%q names %d packages, want 1", pkg, len(dirs))
	}
	return dirs[0], nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
