package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/internal/gate"
)

func TestBenchArgs(t *testing.T) {
	assert.Equal(t, []string{
		"-test.run=^$",
		"-test.bench=Alloc",
		"-test.benchmem",
		"-test.benchtime=1000x",
		"-test.cpu=1",
		"-test.count=1",
	}, benchArgs("Alloc", "1000x"))
}

func TestBenchPattern(t *testing.T) {
	p := benchPattern([]string{"Free", "Alloc/size=64", "Alloc/size=4096", "Odd.Name", "Free"})
	assert.Equal(t, `^Benchmark(?:Alloc|Free|Odd\.Name)$`, p)
	re := regexp.MustCompile(p)
	assert.True(t, re.MatchString("BenchmarkAlloc"))
	assert.True(t, re.MatchString("BenchmarkOdd.Name"))
	assert.False(t, re.MatchString("BenchmarkOddxName"))
	assert.False(t, re.MatchString("BenchmarkAllocFast"))
}

// call is one recorded run of a benchmark binary.
type call struct {
	label string
	args  []string
}

// fakeRunner answers runs with output from respond and records them.
type fakeRunner struct {
	mu      sync.Mutex
	calls   []call
	respond func(n int, s side, args []string) (string, error)
}

func (f *fakeRunner) run(_ context.Context, s side, args []string) ([]byte, error) {
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, call{s.label, args})
	f.mu.Unlock()
	out, err := f.respond(n, s, args)
	return []byte(out), err
}

func (f *fakeRunner) labels() string {
	var l []string
	for _, c := range f.calls {
		l = append(l, c.label)
	}
	return strings.Join(l, " ")
}

var (
	baseSide = side{label: "base", bin: "/nonexistent/base.test", dir: "/nonexistent"}
	headSide = side{label: "head", bin: "/nonexistent/head.test", dir: "/nonexistent"}
)

func TestRoundsInterleave(t *testing.T) {
	f := &fakeRunner{respond: func(n int, s side, _ []string) (string, error) {
		return goTestOutput(uint64(n), 1, bench{name: "X", ns: 100, noise: 0.01}), nil
	}}
	args := benchArgs(".", "10x")
	var progress bytes.Buffer
	b, h, err := rounds(context.Background(), f.run, &progress, baseSide, headSide, 4, args)
	require.NoError(t, err)
	assert.Equal(t, "base head base head base head base head", f.labels())
	for _, c := range f.calls {
		assert.Equal(t, args, c.args)
	}
	assert.Equal(t, 4, countResults(b))
	assert.Equal(t, 4, countResults(h))
	assert.Equal(t, "benchgate: round 1/4\nbenchgate: round 2/4\nbenchgate: round 3/4\nbenchgate: round 4/4\n", progress.String())
}

func TestRoundsNoBenchmarks(t *testing.T) {
	results := goTestOutput(1, 1, bench{name: "X", ns: 100})
	noMatch := "testing: warning: no tests to run\nPASS\n"

	f := &fakeRunner{respond: func(int, side, []string) (string, error) { return noMatch, nil }}
	_, _, err := rounds(context.Background(), f.run, &bytes.Buffer{}, baseSide, headSide, 10, benchArgs("Nope", "1x"))
	assert.ErrorIs(t, err, errNoBaseBenchmarks)
	assert.Equal(t, "base", f.labels(), "stops after the first base run")

	f = &fakeRunner{respond: func(_ int, s side, _ []string) (string, error) {
		if s.label == "head" {
			return noMatch, nil
		}
		return results, nil
	}}
	_, _, err = rounds(context.Background(), f.run, &bytes.Buffer{}, baseSide, headSide, 10, benchArgs("X", "1x"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, errNoBaseBenchmarks)
	assert.Contains(t, err.Error(), "no benchmark of head matches")

	boom := errors.New("boom")
	f = &fakeRunner{respond: func(n int, _ side, _ []string) (string, error) {
		if n == 3 {
			return "", boom
		}
		return results, nil
	}}
	_, _, err = rounds(context.Background(), f.run, &bytes.Buffer{}, baseSide, headSide, 10, benchArgs("X", "1x"))
	assert.ErrorIs(t, err, boom)
	assert.Len(t, f.calls, 4)
}

// cpuProfile is a CPU profile in which fn used ms milliseconds.
func cpuProfile(fn string, ms int64) *profile.Profile {
	f := &profile.Function{ID: 1, Name: fn}
	r := &profile.Function{ID: 2, Name: "testing.(*B).runN"}
	l1 := &profile.Location{ID: 1, Line: []profile.Line{{Function: f}}}
	l2 := &profile.Location{ID: 2, Line: []profile.Line{{Function: r}}}
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{l1, l2}, Value: []int64{ms / 10, ms * 1_000_000}},
			{Location: []*profile.Location{l2}, Value: []int64{1, 10_000_000}},
		},
		Location: []*profile.Location{l1, l2},
		Function: []*profile.Function{f, r},
	}
}

// slowdownRunner simulates a head whose Work is slower by factor in the
// first rounds and by confirmFactor in later ones. Profiled runs write
// a profile charging the difference to tiny.work.
func slowdownRunner(t *testing.T, factor, confirmFactor float64) *fakeRunner {
	return &fakeRunner{respond: func(n int, s side, args []string) (string, error) {
		for _, a := range args {
			if path, ok := strings.CutPrefix(a, "-test.cpuprofile="); ok {
				ms := int64(100)
				if s.label == "head" {
					ms = int64(100 * confirmFactor)
				}
				var buf bytes.Buffer
				require.NoError(t, cpuProfile("tiny.work", ms).Write(&buf))
				return "", os.WriteFile(path, buf.Bytes(), 0o644)
			}
		}
		f := 1.0
		if s.label == "head" {
			f = factor
			if args[1] != "-test.bench=." {
				f = confirmFactor
			}
		}
		return goTestOutput(uint64(n), 1,
			bench{name: "Work", ns: 1000 * f, noise: 0.01},
			bench{name: "Steady", ns: 100, noise: 0.01}), nil
	}}
}

func newTestGate(f *fakeRunner, mod func(*config)) (*gitGate, *bytes.Buffer) {
	c := &config{opt: gate.DefaultOptions(), base: "HEAD", bench: ".", count: 10, benchtime: "1000x", pkg: "./bench/", profile: true, profileTime: time.Second}
	if mod != nil {
		mod(c)
	}
	var out bytes.Buffer
	return &gitGate{cfg: c, stdout: &out, stderr: &bytes.Buffer{}, runner: f.run}, &out
}

func TestMeasureConfirmed(t *testing.T) {
	f := slowdownRunner(t, 1.3, 1.3)
	g, out := newTestGate(f, func(c *config) { c.confirm = 1 })
	g.tmp = t.TempDir()
	code := g.measure(context.Background(), baseSide, headSide)
	t.Log("\n" + out.String())
	assert.Equal(t, exitRegression, code)
	assert.Len(t, f.calls, 10*2+10*2+2, "rounds, confirmation, one profiled run per side")

	// The confirmation runs only the regressed benchmark, alternating.
	for _, c := range f.calls[20:40] {
		assert.Equal(t, "-test.bench=^Benchmark(?:Work)$", c.args[1])
	}
	assert.Equal(t, strings.Repeat("base head ", 20)+"base head", f.labels())

	// The profiled runs do the same fixed work on both sides, about
	// -profile-time of it for the base: 1s / 1µs.
	prof := f.calls[40].args
	assert.Equal(t, f.calls[41].args[:len(prof)-1], prof[:len(prof)-1])
	assert.Regexp(t, `^-test.benchtime=(9\d{5}|10\d{5})x$`, prof[3])
	assert.Contains(t, prof[len(prof)-1], "-test.cpuprofile=")

	s := out.String()
	assert.Contains(t, s, "confirming 1 sec/op regression(s), re-run 1/1")
	assert.Regexp(t, `(?m)^\s+\+30ms\s+100ms\s+130ms  tiny\.work$`, s)
	assert.Regexp(t, `benchgate: FAIL: 1 regression\(s\):\n  Work sec/op: \+\d\d\.\d\d% > \+5\.00% \(p=0\.000 < 0\.05\); confirmed 1/1: \+\d\d\.\d\d%`, s)
}

func TestMeasureNotConfirmed(t *testing.T) {
	f := slowdownRunner(t, 1.3, 1.0)
	g, out := newTestGate(f, func(c *config) { c.confirm = 2 })
	code := g.measure(context.Background(), baseSide, headSide)
	assert.Equal(t, exitOK, code, out.String())
	assert.Len(t, f.calls, 40, "one re-run; the second is not needed")
	assert.Contains(t, out.String(), "Work sec/op: regression not confirmed")
	assert.Contains(t, out.String(), "benchgate: PASS: no regressions")
}

func TestMeasureWithoutConfirm(t *testing.T) {
	f := slowdownRunner(t, 1.3, 1.0)
	g, out := newTestGate(f, func(c *config) { c.profile = false })
	assert.Equal(t, exitRegression, g.measure(context.Background(), baseSide, headSide))
	assert.Len(t, f.calls, 20)
	assert.NotContains(t, out.String(), "CPU profile")
}

func TestMeasureSkipsWithoutBaseBenchmarks(t *testing.T) {
	f := &fakeRunner{respond: func(int, side, []string) (string, error) { return "PASS\n", nil }}
	g, out := newTestGate(f, nil)
	assert.Equal(t, exitOK, g.measure(context.Background(), baseSide, headSide))
	assert.Contains(t, out.String(), "benchgate: skipping: no benchmark of base HEAD matches -bench \".\"")

	g, _ = newTestGate(f, func(c *config) { c.strictBase = true })
	assert.Equal(t, exitError, g.measure(context.Background(), baseSide, headSide))
}

func TestProfileIters(t *testing.T) {
	old := goTestOutput(1, 10, bench{name: "Alloc/size=64", ns: 1000}, bench{name: "Alloc/size=4096", ns: 3000}, bench{name: "Free", ns: 500})
	rep, err := gate.Compare(gate.Input{Label: "a", R: strings.NewReader(old)}, gate.Input{Label: "b", R: strings.NewReader(old)}, gate.DefaultOptions())
	require.NoError(t, err)
	// Both sub-benchmarks of Alloc run: 4µs per iteration.
	assert.Equal(t, int64(250_000), profileIters(rep, []string{"Alloc/size=64"}, 1))
	assert.Equal(t, int64(2000), profileIters(rep, []string{"Free"}, 0.001))
	assert.Equal(t, int64(1), profileIters(rep, []string{"Free"}, 1e-9))
	assert.Equal(t, int64(1000), profileIters(rep, []string{"Unknown"}, 1))
}

// TestGitEndToEnd builds a throwaway module in a temporary git
// repository and runs the gate against its commits.
func TestGitEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs test binaries")
	}
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	repo := t.TempDir()
	sh := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v\n%s", args, out)
	}
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o777))
		require.NoError(t, os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644))
	}
	const benchSrc = `package bench

import "testing"

var out int
var sink []byte

//go:noinline
func work(n int) int {
	s := 0
	for i := range n {
		s += i*i ^ (s >> 3)
	}
	return s
}

func BenchmarkWork(b *testing.B) {
	for b.Loop() {
		out = work(WORK)
		ALLOC
	}
}

func BenchmarkSteady(b *testing.B) {
	for b.Loop() {
		out = work(500)
	}
}
`
	sh("git", "init", "-q")
	write("go.mod", "module example.com/tiny\n\ngo 1.26\n")
	write("README", "tiny\n")
	sh("git", "add", ".")
	sh("git", "commit", "-qm", "no benchmarks yet")
	write("bench/bench_test.go", strings.NewReplacer("WORK", "2000", "ALLOC", "").Replace(benchSrc))
	sh("gofmt", "-w", "bench")
	sh("git", "add", ".")
	sh("git", "commit", "-qm", "benchmarks")
	t.Chdir(repo)

	code, out, errOut := runArgs("-base", "HEAD~2")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, `benchgate: skipping: base "HEAD~2" does not resolve to a commit`)
	code, _, _ = runArgs("-base", "HEAD~2", "-strict-base")
	assert.Equal(t, exitError, code)

	code, out, errOut = runArgs("-base", "HEAD~1", "-count", "2")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "benchgate: skipping: base HEAD~1 has no package ./bench/")

	code, out, errOut = runArgs("-base", "HEAD", "-bench", "NoSuchBenchmark", "-count", "2")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, `benchgate: skipping: no benchmark of base HEAD matches -bench "NoSuchBenchmark"`)

	// Head does three times the work and allocates.
	write("bench/bench_test.go", strings.NewReplacer("WORK", "6000", "ALLOC", "sink = make([]byte, 64)").Replace(benchSrc))
	outDir := filepath.Join(t.TempDir(), "out")
	code, out, errOut = runArgs("-base", "HEAD", "-count", "8", "-benchtime", "5000x", "-confirm", "1", "-profile-time", "200ms", "-out", outDir)
	t.Log("\n" + out)
	assert.Equal(t, exitRegression, code, errOut)
	assert.Regexp(t, `(?m)^Work\s.*\+\d+\.\d\d% \(p=0\.0\d\d n=8\)\s+REGRESSION`, out)
	assert.Regexp(t, `(?m)^\s+\+\S+\s+\S+\s+\S+  example\.com/tiny/bench\.work$`, out)
	// The verdict, not the first pass, decides: on a busy machine the
	// first pass may flag Steady too, and the confirmation rejects it.
	_, final, ok := strings.Cut(out, "benchgate: FAIL:")
	require.True(t, ok, "no FAIL verdict")
	assert.Contains(t, final, "Work allocs/op: median 0 -> 1, +1 >= 1 (")
	assert.Regexp(t, `Work sec/op: .*; confirmed 1/1`, final)
	assert.NotContains(t, final, "Steady sec/op")
	for _, name := range []string{"base.txt", "head.txt", "confirm-1-base.txt", "confirm-1-head.txt", "base.cpu.pprof", "head.cpu.pprof"} {
		assert.FileExists(t, filepath.Join(outDir, name))
	}

	// The worktree is gone.
	list, err := exec.Command("git", "worktree", "list", "--porcelain").Output()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(list), "worktree "), string(list))
}

// funcProfile is a CPU profile with one single-frame sample per function,
// of the given milliseconds.
func funcProfile(ms map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	id := uint64(0)
	for name, v := range ms {
		id++
		f := &profile.Function{ID: id, Name: name, SystemName: name}
		loc := &profile.Location{ID: id, Address: 0x1000 + id, Line: []profile.Line{{Function: f}}}
		p.Function = append(p.Function, f)
		p.Location = append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{v * 1_000_000}})
	}
	return p
}

// TestProfileDiffNamesCodeBeforeRuntime: a regression in Free (+120ms) is
// listed before a larger runtime difference (+300ms of memclr from a heap
// grown at another moment); before this commit memclr came first.
func TestProfileDiffNamesCodeBeforeRuntime(t *testing.T) {
	base := funcProfile(map[string]int64{
		"github.com/kvalloc/kvalloc/allocator.(*Allocator).Free":                        100,
		"runtime.memclrNoHeapPointers":                                                  50,
		"github.com/kvalloc/kvalloc/l1.(*Manager[go.shape.struct { A string }]).Delete": 40,
	})
	head := funcProfile(map[string]int64{
		"github.com/kvalloc/kvalloc/allocator.(*Allocator).Free":                        220,
		"runtime.memclrNoHeapPointers":                                                  350,
		"github.com/kvalloc/kvalloc/l1.(*Manager[go.shape.struct { A string }]).Delete": 45,
	})
	var out bytes.Buffer
	require.NoError(t, writeProfileDiff(&out, base, head, "1000x", 10))
	s := out.String()
	t.Log("\n" + s)
	free, memclr := strings.Index(s, "allocator.(*Allocator).Free"), strings.Index(s, "runtime.memclrNoHeapPointers")
	require.True(t, free >= 0 && memclr >= 0, s)
	assert.Less(t, free, memclr, "the code under test comes first")
	assert.Contains(t, s, "l1.(*Manager[…]).Delete", "names are shortened")
	assert.NotContains(t, s, "github.com/kvalloc/kvalloc/")
}
