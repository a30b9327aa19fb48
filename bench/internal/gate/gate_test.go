package gate

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bench describes one synthetic benchmark: its true ns/op, the relative
// half-width of uniform noise around it, and its B/op and allocs/op.
type bench struct {
	name   string
	ns     float64
	noise  float64
	bytes  []int // per run, cycled
	allocs []int // per run, cycled
}

// goTestOutput renders runs of benches the way "go test -bench
// -benchmem -count=runs" prints them, with deterministic noise.
func goTestOutput(seed uint64, runs int, benches ...bench) string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: example.com/x/bench\ncpu: Synthetic CPU @ 3.00GHz\n")
	for i := range runs {
		for _, bn := range benches {
			ns := bn.ns * (1 + bn.noise*(2*rng.Float64()-1))
			by, al := 0, 0
			if len(bn.bytes) > 0 {
				by = bn.bytes[i%len(bn.bytes)]
			}
			if len(bn.allocs) > 0 {
				al = bn.allocs[i%len(bn.allocs)]
			}
			fmt.Fprintf(&b, "Benchmark%s \t    1000\t%10.1f ns/op\t%8d B/op\t%8d allocs/op\n", bn.name, ns, by, al)
		}
	}
	b.WriteString("PASS\nok  \texample.com/x/bench\t1.234s\n")
	return b.String()
}

func compare(t *testing.T, old, cur string, opt Options) *Report {
	t.Helper()
	rep, err := Compare(Input{"old", strings.NewReader(old)}, Input{"new", strings.NewReader(cur)}, opt)
	require.NoError(t, err)
	return rep
}

func TestRegressionTwelvePercent(t *testing.T) {
	old := goTestOutput(1, 10, bench{name: "Alloc/size=64", ns: 1000, noise: 0.01})
	cur := goTestOutput(2, 10, bench{name: "Alloc/size=64", ns: 1120, noise: 0.01})
	rep := compare(t, old, cur, DefaultOptions())
	assert.Equal(t, 10, rep.OldResults)
	assert.Equal(t, 10, rep.NewResults)

	row := rep.Row("Alloc/size=64", UnitTime)
	require.NotNil(t, row)
	assert.True(t, row.Significant)
	assert.Less(t, row.Comparison.P, 0.001)
	assert.InDelta(t, 0.12, row.Delta, 0.02)
	assert.True(t, row.Regressed)
	require.Len(t, rep.Regressions(), 1)

	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "REGRESSION")
	assert.Contains(t, out.String(), "n=10")
}

func TestSameDistributionPasses(t *testing.T) {
	benches := []bench{
		{name: "Alloc/size=64", ns: 1000, noise: 0.01, bytes: []int{64}, allocs: []int{1}},
		{name: "Free", ns: 250, noise: 0.01},
	}
	for seed := uint64(1); seed <= 20; seed++ {
		old := goTestOutput(seed, 10, benches...)
		cur := goTestOutput(seed+1000, 10, benches...)
		rep := compare(t, old, cur, DefaultOptions())
		assert.Empty(t, rep.Regressions(), "seed %d", seed)
	}
}

func TestSignificantButBelowThreshold(t *testing.T) {
	old := goTestOutput(3, 10, bench{name: "Free", ns: 1000, noise: 0.005})
	cur := goTestOutput(4, 10, bench{name: "Free", ns: 1030, noise: 0.005})
	rep := compare(t, old, cur, DefaultOptions())
	row := rep.Row("Free", UnitTime)
	require.NotNil(t, row)
	assert.True(t, row.Significant)
	assert.False(t, row.Regressed)

	opt := DefaultOptions()
	opt.TimeThreshold = 0.01
	assert.True(t, compare(t, old, cur, opt).Row("Free", UnitTime).Regressed)

	opt.TimeThreshold = -1
	row = compare(t, old, cur, opt).Row("Free", UnitTime)
	assert.False(t, row.Gated)
	assert.False(t, row.Regressed)
}

func TestImprovementIsNotARegression(t *testing.T) {
	old := goTestOutput(5, 10, bench{name: "Free", ns: 1000, noise: 0.01, bytes: []int{128}, allocs: []int{2}})
	cur := goTestOutput(6, 10, bench{name: "Free", ns: 500, noise: 0.01, bytes: []int{64}, allocs: []int{1}})
	rep := compare(t, old, cur, DefaultOptions())
	assert.Empty(t, rep.Regressions())
	assert.InDelta(t, -0.5, rep.Row("Free", UnitTime).Delta, 0.02)
}

func TestAllocsZeroToOne(t *testing.T) {
	old := goTestOutput(7, 10, bench{name: "Get", ns: 100, noise: 0.01, allocs: []int{0}})
	cur := goTestOutput(7, 10, bench{name: "Get", ns: 100, noise: 0.01, bytes: []int{8}, allocs: []int{1}})
	rep := compare(t, old, cur, DefaultOptions())
	row := rep.Row("Get", UnitAllocs)
	require.NotNil(t, row)
	assert.True(t, row.Regressed)
	assert.True(t, math.IsInf(row.Delta, 1))
	assert.False(t, rep.Row("Get", UnitTime).Regressed)
	// B/op 0 -> 8 is significant and infinitely large.
	assert.True(t, rep.Row("Get", UnitBytes).Regressed)

	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "+∞%")
	assert.NotContains(t, out.String(), "NaN")
}

// allocsRow compares two allocs/op series of one benchmark.
func allocsRow(t *testing.T, old, cur []int, opt Options) *Row {
	t.Helper()
	o := goTestOutput(8, len(old), bench{name: "Get", ns: 100, noise: 0.01, allocs: old})
	c := goTestOutput(9, len(cur), bench{name: "Get", ns: 100, noise: 0.01, allocs: cur})
	row := compare(t, o, c, opt).Row("Get", UnitAllocs)
	require.NotNil(t, row)
	return row
}

func TestAllocsRealGrowthFails(t *testing.T) {
	ten := func(v int) []int { return []int{v, v, v, v, v, v, v, v, v, v} }
	for _, tc := range []struct {
		name     string
		old, cur []int
	}{
		{"0->1", ten(0), ten(1)},
		{"5->6", ten(5), ten(6)},
		// Too few runs for any p-value: every new run is above every old one.
		{"5->6 in two runs", []int{5, 5}, []int{6, 6}},
		// A stray allocation in one old run: the samples overlap, the U
		// test still sees the shift.
		{"5->6 with a stray old run", []int{5, 5, 5, 6, 5, 5, 5, 5, 5, 5}, ten(6)},
		{"0->1 with a stray new run", ten(0), []int{1, 1, 2, 1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := allocsRow(t, tc.old, tc.cur, DefaultOptions())
			assert.True(t, row.Gated)
			assert.True(t, row.Regressed, "median %v -> %v, p=%v", row.OldSummary.Center, row.NewSummary.Center, row.Comparison.P)
			assert.Contains(t, row.Reason, "median")
		})
	}
}

func TestAllocsNoiseDoesNotFail(t *testing.T) {
	ten := func(v int) []int { return []int{v, v, v, v, v, v, v, v, v, v} }
	for _, tc := range []struct {
		name     string
		old, cur []int
	}{
		// A gate failure seen in CI: allocs/op that depended on b.N, under
		// a machine load that changed b.N between runs (p = 0.895).
		{"median 5 -> 5.5", []int{5, 5, 7, 5, 5, 12, 5, 5, 5, 7}, []int{5, 7, 5, 6, 5, 12, 5, 7, 7, 5}},
		// One run in ten caught a background allocation.
		{"one stray", ten(0), []int{0, 0, 0, 1, 0, 0, 0, 0, 0, 0}},
		// fmt's sync.Pool refilled after each GC: the count wanders
		// over the same range on both sides.
		{"pool refills", []int{46, 51, 53, 47, 48, 47, 50, 46, 47, 48}, []int{48, 47, 53, 51, 46, 47, 49, 48, 46, 50}},
		{"improvement", ten(6), ten(5)},
		{"equal", ten(5), ten(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := allocsRow(t, tc.old, tc.cur, DefaultOptions())
			assert.False(t, row.Regressed, "%s", row.Reason)
		})
	}
}

func TestAllocsMinDelta(t *testing.T) {
	// A significant growth of half an allocation: below the default
	// minimum of 1, above a minimum of 0.5.
	old := []int{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}
	cur := []int{5, 6, 5, 6, 5, 6, 5, 6, 5, 6}
	row := allocsRow(t, old, cur, DefaultOptions())
	assert.True(t, row.Significant)
	assert.False(t, row.Regressed)

	opt := DefaultOptions()
	opt.AllocsMinDelta = 0.5
	assert.True(t, allocsRow(t, old, cur, opt).Regressed)

	opt.AllocsMinDelta = -1
	row = allocsRow(t, []int{0, 0, 0, 0}, []int{3, 3, 3, 3}, opt)
	assert.False(t, row.Gated)
	assert.False(t, row.Regressed)
}

func TestAllZeroBytesHasNoNaN(t *testing.T) {
	old := goTestOutput(10, 10, bench{name: "Put", ns: 100, noise: 0.01})
	cur := goTestOutput(11, 10, bench{name: "Put", ns: 100, noise: 0.01})
	rep := compare(t, old, cur, DefaultOptions())
	row := rep.Row("Put", UnitBytes)
	require.NotNil(t, row)
	assert.Equal(t, 0.0, row.Delta)
	assert.False(t, row.Significant)
	assert.False(t, row.Regressed)
	assert.Empty(t, row.Warnings, "the all-equal warning is dropped")

	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	s := out.String()
	assert.NotContains(t, s, "NaN")
	assert.NotContains(t, s, "all samples are equal")
	assert.Regexp(t, `(?m)^Put\s+0\.000 ± 0%\s+0\.000 ± 0%\s+~ \(p=1\.000 n=10\)`, s)
	t.Log("\n" + s)
}

func TestMissingSideIsReportedNotGated(t *testing.T) {
	old := goTestOutput(12, 10, bench{name: "Old", ns: 100, noise: 0.01})
	cur := goTestOutput(13, 10, bench{name: "New", ns: 100, noise: 0.01})
	rep := compare(t, old, cur, DefaultOptions())
	assert.Empty(t, rep.Regressions())
	row := rep.Row("New", UnitTime)
	require.NotNil(t, row)
	assert.Nil(t, row.Old)
	assert.False(t, row.Gated)

	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "note: missing in old: New")
	assert.Contains(t, out.String(), "note: missing in new: Old")
	assert.NotContains(t, out.String(), "NaN")
}

func TestTooFewSamplesWarns(t *testing.T) {
	old := goTestOutput(14, 3, bench{name: "Get", ns: 100, noise: 0.01})
	cur := goTestOutput(15, 3, bench{name: "Get", ns: 200, noise: 0.01})
	rep := compare(t, old, cur, DefaultOptions())
	row := rep.Row("Get", UnitTime)
	assert.False(t, row.Regressed, "3 runs per side can never be significant")
	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "need >= 4 samples to detect a difference at alpha level 0.05")
	assert.Contains(t, out.String(), "± ∞")
}

func TestUnitsAndOrder(t *testing.T) {
	benches := []bench{{name: "B", ns: 10}, {name: "A", ns: 20}}
	rep := compare(t, goTestOutput(1, 4, benches...), goTestOutput(2, 4, benches...), DefaultOptions())
	var units []string
	for _, tb := range rep.Tables {
		units = append(units, tb.Unit)
		assert.Equal(t, "B", tb.Rows[0].Name, "first-seen order")
	}
	assert.Equal(t, []string{UnitTime, UnitBytes, UnitAllocs}, units)
	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "geomean")
}

func TestSyntaxErrorsAreKept(t *testing.T) {
	old := "BenchmarkX 10 100 ns/op\nBenchmarkBad x 1 ns/op\n"
	rep := compare(t, old, old, DefaultOptions())
	assert.Len(t, rep.SyntaxErrors, 2)
	assert.Equal(t, 1, rep.OldResults)
}

func TestValidate(t *testing.T) {
	for _, mod := range []func(*Options){
		func(o *Options) { o.Alpha = 0 },
		func(o *Options) { o.Alpha = 1 },
		func(o *Options) { o.Confidence = 1.5 },
		func(o *Options) { o.TimeThreshold = math.NaN() },
		func(o *Options) { o.BytesThreshold = math.Inf(1) },
		func(o *Options) { o.AllocsMinDelta = math.NaN() },
	} {
		o := DefaultOptions()
		mod(&o)
		assert.Error(t, o.Validate())
		_, err := Compare(Input{"a", strings.NewReader("")}, Input{"b", strings.NewReader("")}, o)
		assert.Error(t, err)
	}
	assert.NoError(t, DefaultOptions().Validate())
}

func TestFormatDelta(t *testing.T) {
	assert.Equal(t, "+12.00%", FormatDelta(0.12))
	assert.Equal(t, "-3.50%", FormatDelta(-0.035))
	assert.Equal(t, "0.00%", FormatDelta(0))
	assert.Equal(t, "+∞%", FormatDelta(math.Inf(1)))
	assert.Equal(t, "?", FormatDelta(math.NaN()))
	assert.Equal(t, 0.0, relDelta(0, 0))
	assert.True(t, math.IsInf(relDelta(0, 1), 1))
}
