package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handProfile builds a CPU profile with known values (ms):
//
//	leaf inlined into caller, called from main:  30
//	caller (not inlined) from main:              10
//	rec -> rec -> main:                          60 * recScale
func handProfile(recScale int64) *profile.Profile {
	fn := func(id uint64, name string) *profile.Function {
		return &profile.Function{ID: id, Name: name, SystemName: name, Filename: "x.go"}
	}
	fMain, fCaller, fLeaf, fRec := fn(1, "main.main"), fn(2, "main.caller"), fn(3, "main.leaf"), fn(4, "main.rec")
	m := &profile.Mapping{ID: 1, Start: 0x1000, Limit: 0x9000, File: "/tmp/x.test", HasFunctions: true}
	loc := func(id uint64, fns ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id, Mapping: m, Address: 0x1000 + id*16}
		for i, f := range fns {
			l.Line = append(l.Line, profile.Line{Function: f, Line: int64(10 * (i + 1))})
		}
		return l
	}
	lInl, lMain, lRec, lCaller := loc(1, fLeaf, fCaller), loc(2, fMain), loc(3, fRec), loc(4, fCaller)
	const ms = 1_000_000
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10 * ms,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lInl, lMain}, Value: []int64{3, 30 * ms}},
			{Location: []*profile.Location{lCaller, lMain}, Value: []int64{1, 10 * ms}},
			{Location: []*profile.Location{lRec, lRec, lMain}, Value: []int64{6 * recScale, 60 * ms * recScale}},
		},
		Mapping:  []*profile.Mapping{m},
		Location: []*profile.Location{lInl, lMain, lRec, lCaller},
		Function: []*profile.Function{fMain, fCaller, fLeaf, fRec},
	}
}

// TestFlatTimes: flat goes to the leaf frame, the inlined function of a
// location with several lines, for the profile's default (last) sample
// type.
func TestFlatTimes(t *testing.T) {
	p := handProfile(1)
	require.NoError(t, p.CheckValid())
	flat, total, typ, unit, err := flatTimes(p)
	require.NoError(t, err)
	assert.Equal(t, "cpu", typ)
	assert.Equal(t, "nanoseconds", unit)
	assert.Equal(t, int64(100e6), total)
	assert.Equal(t, map[string]int64{"main.rec": 60e6, "main.leaf": 30e6, "main.caller": 10e6}, flat)
}

// TestProfileDiffTable: unchanged functions cancel out, a difference shows
// with its sign beside both sides, and the base is not modified.
func TestProfileDiffTable(t *testing.T) {
	base := handProfile(1)
	var out bytes.Buffer
	require.NoError(t, writeProfileDiff(&out, base, handProfile(3), "100x", 10))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	assert.Contains(t, lines[0], "base total 100ms, head total 220ms")
	assert.Equal(t, []string{"+120ms", "60ms", "180ms", "main.rec"}, strings.Fields(lines[2]))
	out.Reset()
	require.NoError(t, writeProfileDiff(&out, handProfile(3), base, "100x", 10))
	assert.Contains(t, out.String(), "-120ms")
	assert.Equal(t, int64(30e6), base.Sample[0].Value[1])
}

func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    int64
		unit string
		want string
	}{
		{0, "nanoseconds", "0"},
		{0, "widgets", "0"},
		{999, "nanoseconds", "999ns"},
		{10_000_000, "nanoseconds", "10ms"},
		{1_500_000_000, "nanoseconds", "1.50s"},
		{-20_000_000, "nanoseconds", "-20ms"},
		{42, "count", "42"},
		{7, "widgets", "7 widgets"},
	} {
		assert.Equal(t, c.want, formatValue(c.v, c.unit), "%d %s", c.v, c.unit)
	}
}

func TestShortName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/kvalloc/kvalloc/l1.(*Manager[go.shape.struct { ChunkHash string; Model string; KVRank uint32; GroupID uint32 }]).ReserveWrite": "l1.(*Manager[…]).ReserveWrite",
		"github.com/kvalloc/kvalloc/l1.(*index[go.shape.struct { A [32]uint8 }]).find.func1":                                                       "l1.(*index[…]).find.func1",
		"github.com/kvalloc/kvalloc/allocator.(*Allocator).Free":                                                                                   "allocator.(*Allocator).Free",
		"runtime.memclrNoHeapPointers": "runtime.memclrNoHeapPointers",
		"slices.SortFunc[go.shape.[]github.com/kvalloc/kvalloc/allocator.Block,go.shape.struct {}]": "slices.SortFunc[…]",
	} {
		assert.Equal(t, want, shortName(in), in)
	}
}

// TestProfileDiffRanksWithinGroups: by |delta| within the code and within
// the runtime, the code first, at least three runtime lines.
func TestProfileDiffRanksWithinGroups(t *testing.T) {
	base := funcProfile(map[string]int64{
		"runtime.memclrNoHeapPointers":                           100,
		"github.com/kvalloc/kvalloc/allocator.(*Allocator).Free": 100,
		"internal/runtime/maps.(*Map).putSlot":                   600,
		"github.com/kvalloc/kvalloc/l1.(*Manager[x]).Delete":     100,
	})
	head := funcProfile(map[string]int64{
		"runtime.memclrNoHeapPointers":                           1000,
		"github.com/kvalloc/kvalloc/allocator.(*Allocator).Free": 400,
		"internal/runtime/maps.(*Map).putSlot":                   100,
		"github.com/kvalloc/kvalloc/l1.(*Manager[x]).Delete":     80,
	})
	var out bytes.Buffer
	require.NoError(t, writeProfileDiff(&out, base, head, "1x", 1))
	var names []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 4 && (strings.Contains(l, ".") && !strings.HasPrefix(l, "CPU")) {
			names = append(names, f[3])
		}
	}
	assert.Equal(t, []string{"allocator.(*Allocator).Free", "runtime.memclrNoHeapPointers", "internal/runtime/maps.(*Map).putSlot"}, names,
		"-n 1 keeps the first of the code, the runtime keeps its three at most")
}
