package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/internal/proftop"
)

const pkgPath = "github.com/kvalloc/kvalloc/bench/cmd/pproftop"

// spin does a fixed amount of work, n rounds of 100000 multiply-adds
// (about 100 ms of CPU per 1000 rounds on the CI VM). A fixed amount of
// work, not a wall-clock duration: on a loaded machine the profile then
// still gets its samples, later.
//
//go:noinline
func spin(n int) uint64 {
	x := uint64(1)
	for range n {
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

var sink [16][]byte

var spinSink uint64

//go:noinline
func allocate(size int) {
	for i := range sink {
		sink[i] = make([]byte, size)
	}
}

func writeCPUProfile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cpu.out")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, pprof.StartCPUProfile(f))
	spinSink = spin(4000)
	pprof.StopCPUProfile()
	require.NoError(t, f.Close())
	return path
}

func TestCPUProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a CPU profile")
	}
	path := writeCPUProfile(t)
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"-n", "5", path}, &out, &errb), errb.String())
	s := out.String()
	t.Log("\n" + s)
	assert.Contains(t, s, "cpu (nanoseconds): total ")
	assert.Regexp(t, `top [1-5] by flat:`, s)
	assert.Contains(t, s, "bench/cmd/pproftop.spin", "the module prefix is dropped")

	// spin should account for most of the profile, directly and below.
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	tb, err := proftop.Functions(p, "")
	require.NoError(t, err)
	spinFn := tb.Map()[pkgPath+".spin"]
	assert.Greater(t, spinFn.Cum, tb.Total/2, "total %d", tb.Total)
	assert.Greater(t, spinFn.Flat, int64(0))

	// The samples column counts 10ms ticks.
	out.Reset()
	require.Equal(t, 0, run([]string{"-sample_index", "samples", path}, &out, &errb))
	assert.Contains(t, out.String(), "samples (count): total ")
}

func TestHeapProfile(t *testing.T) {
	rate := runtime.MemProfileRate
	defer func() { runtime.MemProfileRate = rate }()
	runtime.MemProfileRate = 1
	allocate(1 << 20)
	runtime.GC()
	runtime.GC()

	path := filepath.Join(t.TempDir(), "mem.out")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, pprof.Lookup("allocs").WriteTo(f, 0))
	runtime.MemProfileRate = rate
	require.NoError(t, f.Close())
	sink = [16][]byte{}

	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"-n", "3", "-sample_index", "alloc_space", path}, &out, &errb), errb.String())
	s := out.String()
	t.Log("\n" + s)
	assert.Contains(t, s, "alloc_space (bytes): total ")
	// allocate tops the flat list.
	assert.Regexp(t, `(?m)^top 3 by flat:\n.*\n.*\s`+regexp.QuoteMeta("bench/cmd/pproftop.allocate")+`\n`, s)

	// With MemProfileRate 1 every allocation is recorded: at least 16
	// objects of 1 MiB (the runtime may add a few small ones, and the
	// allocs profile is cumulative over repeated runs of this test).
	p, err := profile.Parse(bytes.NewReader(must(os.ReadFile(path))))
	require.NoError(t, err)
	for _, c := range []struct {
		index string
		unit  int64
	}{{"alloc_space", 16 << 20}, {"alloc_objects", 16}} {
		tb, err := proftop.Functions(p, c.index)
		require.NoError(t, err)
		fn := tb.Map()[pkgPath+".allocate"]
		assert.GreaterOrEqual(t, fn.Flat, c.unit, c.index)
		assert.GreaterOrEqual(t, fn.Cum, fn.Flat, c.index)
	}

	// The default value of a go test -memprofile / allocs profile is
	// alloc_space.
	out.Reset()
	require.Equal(t, 0, run([]string{path}, &out, &errb), errb.String())
	assert.Contains(t, out.String(), "alloc_space (bytes): total ")
}

func TestHandMadeProfile(t *testing.T) {
	const ms = 1_000_000
	main := &profile.Function{ID: 1, Name: "main.main"}
	work := &profile.Function{ID: 2, Name: "main.work"}
	lMain := &profile.Location{ID: 1, Line: []profile.Line{{Function: main}}}
	lWork := &profile.Location{ID: 2, Line: []profile.Line{{Function: work}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10 * ms,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lWork, lMain}, Value: []int64{75, 750 * ms}},
			{Location: []*profile.Location{lMain}, Value: []int64{25, 250 * ms}},
		},
		Location: []*profile.Location{lMain, lWork},
		Function: []*profile.Function{main, work},
	}
	path := filepath.Join(t.TempDir(), "hand.out")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, p.Write(f))
	require.NoError(t, f.Close())

	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{path}, &out, &errb), errb.String())
	want := `cpu (nanoseconds): total 1s
top 2 by flat:
      flat   flat%    sum%        cum    cum%
     750ms  75.00%  75.00%      750ms  75.00%  main.work
     250ms  25.00% 100.00%         1s 100.00%  main.main
top 2 by cum:
      flat   flat%    sum%        cum    cum%
     250ms  25.00%  25.00%         1s 100.00%  main.main
     750ms  75.00% 100.00%      750ms  75.00%  main.work
`
	assert.Equal(t, want, out.String())

	// -focus keeps the samples through main.work; -tables cum drops the
	// flat table.
	out.Reset()
	require.Equal(t, 0, run([]string{"-focus", `^main\.work$`, "-tables", "cum", path}, &out, &errb), errb.String())
	want = `cpu (nanoseconds): total 1s, 750ms of it under -focus ^main\.work$
top 2 by cum:
      flat   flat%    sum%        cum    cum%
     750ms 100.00% 100.00%      750ms 100.00%  main.work
         0   0.00% 100.00%      750ms 100.00%  main.main
`
	assert.Equal(t, want, out.String())
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.out")
	require.NoError(t, os.WriteFile(garbage, []byte("not a profile"), 0o644))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "want exactly one profile"},
		{[]string{"a", "b"}, 2, "want exactly one profile"},
		{[]string{"-bogus", "x"}, 2, "flag provided but not defined"},
		{[]string{"-n", "0", "x"}, 2, "-n must be at least 1"},
		{[]string{filepath.Join(dir, "missing.out")}, 1, "no such file"},
		{[]string{garbage}, 1, "garbage.out"},
	} {
		var out, errb bytes.Buffer
		assert.Equal(t, c.code, run(c.args, &out, &errb), "%q", c.args)
		assert.Contains(t, errb.String(), c.msg, "%q", c.args)
	}

	if !testing.Short() {
		var out, errb bytes.Buffer
		assert.Equal(t, 1, run([]string{"-sample_index", "alloc_space", writeCPUProfile(t)}, &out, &errb))
		assert.Contains(t, errb.String(), `sample_index "alloc_space" must be one of`)
	}

	var out, errb bytes.Buffer
	assert.Equal(t, 0, run([]string{"-h"}, &out, &errb))
	assert.True(t, strings.HasPrefix(errb.String(), "usage: pproftop"))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
