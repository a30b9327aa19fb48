// Benchgate fails a build when benchmarks regress.
//
// Usage:
//
//	benchgate [gate flags] -old old.txt -new new.txt
//	benchgate [gate flags] -base REF [-bench regexp] [-count 10] [-benchtime 1000x] [-pkg ./bench/] [-confirm N]
//
// The first form compares two files in the Go benchmark format (the
// output of go test -bench, several runs each). The second form
// measures: it builds the test binary of -pkg twice with go test -c,
// once from REF (checked out in a temporary detached git worktree that
// is removed afterwards) and once from the working tree, runs the two
// binaries alternately, base then head, -count times each with
//
//	-test.run=^$ -test.bench=REGEXP -test.benchmem -test.benchtime=X -test.cpu=1 -test.count=1
//
// and compares the results. Alternating the runs spreads slow drifts of
// the machine (thermal throttling, a noisy neighbour) over both sides
// instead of charging them to one. The default -benchtime is a fixed
// iteration count, so both sides do the same work in every run.
//
// Benchgate is opinionated about statistics, see package
// github.com/kvalloc/kvalloc/bench/internal/gate: every unit is
// summarized by its median and compared with the Mann-Whitney U test
// (golang.org/x/perf/benchmath.AssumeNothing). Only three units are
// gated. sec/op regresses when the difference is significant (p <
// -alpha) and the median grew by more than -time-threshold; B/op
// likewise with -bytes-threshold. allocs/op regresses when its median
// grew by at least -allocs-delta allocations (default 1) and the growth
// is real: p < -alpha, or every head run above every base run (which
// catches a deterministic 0 -> 1 with too few runs for a p-value). A
// median of 5 -> 5.5, or a count that wanders over the same range on
// both sides (fmt's sync.Pool refilled after each GC), is not a
// regression. Samples whose values are all equal (0 B/op on both sides)
// print as "~" and never as NaN. Other units are shown, not gated, and
// improvements never fail the gate.
//
// A timing regression found in git mode can be checked again with
// -confirm N: the regressed benchmarks are measured N more times with
// fresh alternating rounds, and the regression stands only if every
// re-run shows it. Then benchgate runs each binary once more, untimed,
// with a CPU profile, and prints the ten functions whose flat CPU time
// differs most between base and head.
//
// Benchgate skips, with a message and exit status 0, when there is
// nothing to compare against: REF does not resolve to a commit (as for
// HEAD~1 on the first commit), REF has no such package or it fails to
// build, or no benchmark of REF matches -bench. With -strict-base these
// cases exit 2 instead. In file mode, an -old file without results is
// treated the same way.
//
// Gate flags, valid in both modes:
//
//	-alpha A
//		Significance level of the U test (default 0.05).
//	-confidence C
//		Confidence level of the interval printed around each
//		median (default 0.95).
//	-time-threshold T
//		Fail when sec/op grows significantly by more than T
//		(default 0.05, i.e. 5%). Negative disables the sec/op gate.
//	-bytes-threshold T
//		Fail when B/op grows significantly by more than T (default
//		0.10). Negative disables the B/op gate.
//	-allocs-delta D
//		Fail when the allocs/op median grows by at least D
//		allocations and the growth is significant or every head
//		run is above every base run (default 1). Negative
//		disables the allocs/op gate.
//	-strict-base
//		Exit 2 instead of skipping when the base is missing or has
//		no matching benchmarks.
//
// Git-mode flags:
//
//	-base REF
//		The git revision to compare the working tree against.
//	-bench REGEXP
//		Benchmarks to run, as for go test -bench (default ".").
//	-count N
//		Alternating rounds, i.e. runs per side (default 10).
//	-benchtime X
//		Passed to -test.benchtime (default "1000x").
//	-pkg PKG
//		The package whose benchmarks run, relative to the current
//		directory or an import path (default "./bench/").
//	-confirm N
//		Re-measure sec/op regressions N more times (default 0):
//		fresh alternating rounds of the top-level benchmarks
//		that regressed (with all their sub-benchmarks); a
//		regression stands only if every re-run shows it too.
//	-profile
//		Profile regressed benchmarks and print the top differences
//		(default true).
//	-profile-time D
//		How long the profiled run of the base should take; the
//		same iteration count is used for head (default 1s).
//	-out DIR
//		Keep the raw benchmark output (base.txt, head.txt, and
//		confirm-N-*.txt) and the CPU profiles in DIR.
//
// Exit status: 0 when nothing regressed or the comparison was skipped,
// 1 when a gated metric regressed, 2 on a usage error (bad flags, both
// modes or neither, an unreadable file) or when the comparison could
// not be carried out (the working tree does not build, a benchmark
// binary fails).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/internal/gate"
)

// Exit statuses.
const (
	exitOK         = 0
	exitRegression = 1
	exitError      = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	opt        gate.Options
	strictBase bool

	oldFile, newFile string

	base        string
	bench       string
	count       int
	benchtime   string
	pkg         string
	confirm     int
	profile     bool
	profileTime time.Duration
	outDir      string
}

// gitOnly are the flags that make sense only with -base.
var gitOnly = []string{"bench", "count", "benchtime", "pkg", "confirm", "profile", "profile-time", "out"}

// parseFlags parses args; a nil config with exitOK means -h.
func parseFlags(args []string, stderr io.Writer) (*config, int) {
	c := &config{opt: gate.DefaultOptions()}
	fs := flag.NewFlagSet("benchgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&c.opt.Alpha, "alpha", c.opt.Alpha, "significance level `A` of the Mann-Whitney U test")
	fs.Float64Var(&c.opt.Confidence, "confidence", c.opt.Confidence, "confidence level `C` of the intervals printed around medians")
	fs.Float64Var(&c.opt.TimeThreshold, "time-threshold", c.opt.TimeThreshold, "fail when sec/op grows significantly by more than `T` (0.05 = 5%); negative disables")
	fs.Float64Var(&c.opt.BytesThreshold, "bytes-threshold", c.opt.BytesThreshold, "fail when B/op grows significantly by more than `T`; negative disables")
	fs.Float64Var(&c.opt.AllocsMinDelta, "allocs-delta", c.opt.AllocsMinDelta, "fail when the allocs/op median grows by at least `D` and significantly (or every head run is above every base run); negative disables")
	fs.BoolVar(&c.strictBase, "strict-base", false, "exit 2 instead of skipping when the base is missing or has no matching benchmarks")
	fs.StringVar(&c.oldFile, "old", "", "file mode: baseline results `file` in the Go benchmark format")
	fs.StringVar(&c.newFile, "new", "", "file mode: new results `file` in the Go benchmark format")
	fs.StringVar(&c.base, "base", "", "git mode: compare the working tree against git revision `REF`")
	fs.StringVar(&c.bench, "bench", ".", "git mode: run benchmarks matching `regexp`, as go test -bench")
	fs.IntVar(&c.count, "count", 10, "git mode: `N` alternating rounds (runs per side)")
	fs.StringVar(&c.benchtime, "benchtime", "1000x", "git mode: -test.benchtime `X` of every timed run")
	fs.StringVar(&c.pkg, "pkg", "./bench/", "git mode: `PKG` with the benchmarks, a directory or import path")
	fs.IntVar(&c.confirm, "confirm", 0, "git mode: re-measure sec/op regressions `N` more times; fail only if all confirm")
	fs.BoolVar(&c.profile, "profile", true, "git mode: on regression, print the top CPU profile differences")
	fs.DurationVar(&c.profileTime, "profile-time", time.Second, "git mode: target duration of the profiled base run")
	fs.StringVar(&c.outDir, "out", "", "git mode: keep raw outputs and profiles in `DIR`")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: benchgate [flags] -old old.txt -new new.txt\n       benchgate [flags] -base REF [-bench regexp] [-count N] [-benchtime X] [-pkg ./bench/] [-confirm N]\n\nExit status: 0 no regression or skipped, 1 regression, 2 usage error or failure.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		return nil, exitError
	}
	usage := func(format string, a ...any) (*config, int) {
		fmt.Fprintf(stderr, "benchgate: "+format+"\n", a...)
		fmt.Fprintf(stderr, "run benchgate -h for usage\n")
		return nil, exitError
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments: %q", fs.Args())
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fileMode := set["old"] || set["new"]
	switch {
	case fileMode && set["base"]:
		return usage("-old/-new and -base are mutually exclusive")
	case fileMode && (c.oldFile == "" || c.newFile == ""):
		return usage("file mode needs both -old and -new")
	case !fileMode && !set["base"]:
		return usage("need -old and -new, or -base")
	case set["base"] && c.base == "":
		return usage("-base is empty")
	}
	if fileMode {
		for _, name := range gitOnly {
			if set[name] {
				return usage("-%s is only valid with -base", name)
			}
		}
	}
	if err := c.opt.Validate(); err != nil {
		return usage("%v", err)
	}
	switch {
	case c.count < 1:
		return usage("-count must be at least 1")
	case c.confirm < 0:
		return usage("-confirm must not be negative")
	case c.profileTime <= 0:
		return usage("-profile-time must be positive")
	case c.benchtime == "" || strings.ContainsAny(c.benchtime, " \t"):
		return usage("bad -benchtime %q", c.benchtime)
	case c.pkg == "":
		return usage("-pkg is empty")
	}
	if _, err := regexp.Compile(c.bench); err != nil {
		return usage("bad -bench: %v", err)
	}
	return c, exitOK
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, code := parseFlags(args, stderr)
	if c == nil {
		return code
	}
	if c.base != "" {
		g := &gitGate{cfg: c, stdout: stdout, stderr: stderr, runner: execRunner}
		return g.run(ctx)
	}
	return fileGate(c, stdout, stderr)
}

// fileGate is file mode.
func fileGate(c *config, stdout, stderr io.Writer) int {
	oldF, err := os.Open(c.oldFile)
	if err != nil {
		fmt.Fprintf(stderr, "benchgate: %v\n", err)
		return exitError
	}
	defer oldF.Close()
	newF, err := os.Open(c.newFile)
	if err != nil {
		fmt.Fprintf(stderr, "benchgate: %v\n", err)
		return exitError
	}
	defer newF.Close()
	rep, err := gate.Compare(
		gate.Input{Label: filepath.Base(c.oldFile), R: oldF},
		gate.Input{Label: filepath.Base(c.newFile), R: newF},
		c.opt)
	if err != nil {
		fmt.Fprintf(stderr, "benchgate: %v\n", err)
		return exitError
	}
	switch {
	case rep.OldResults == 0:
		return skip(c, stdout, stderr, "%s has no benchmark results", c.oldFile)
	case rep.NewResults == 0:
		fmt.Fprintf(stderr, "benchgate: %s has no benchmark results\n", c.newFile)
		return exitError
	}
	if err := rep.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "benchgate: %v\n", err)
		return exitError
	}
	return verdict(stdout, rep.Regressions(), nil)
}

// skip reports that there is nothing to compare against. It exits 0, or
// 2 with -strict-base.
func skip(c *config, stdout, stderr io.Writer, format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	if c.strictBase {
		fmt.Fprintf(stderr, "benchgate: %s (-strict-base)\n", msg)
		return exitError
	}
	fmt.Fprintf(stdout, "benchgate: skipping: %s\n", msg)
	return exitOK
}

// verdict prints the outcome and returns the exit status. notes, keyed
// by row, are appended to the line of each regression.
func verdict(w io.Writer, regs []*gate.Row, notes map[*gate.Row]string) int {
	fmt.Fprintln(w)
	if len(regs) == 0 {
		fmt.Fprintln(w, "benchgate: PASS: no regressions")
		return exitOK
	}
	fmt.Fprintf(w, "benchgate: FAIL: %d regression(s):\n", len(regs))
	for _, r := range regs {
		fmt.Fprintf(w, "  %s %s: %s%s\n", r.Name, r.Unit, r.Reason, notes[r])
	}
	return exitRegression
}
