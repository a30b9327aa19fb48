package proftop

import (
	"bytes"
	"regexp"
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

func TestFunctions(t *testing.T) {
	p := handProfile(1)
	require.NoError(t, p.CheckValid())
	tb, err := Functions(p, "")
	require.NoError(t, err)
	assert.Equal(t, "cpu", tb.Type)
	assert.Equal(t, int64(100e6), tb.Total)
	got := tb.Map()
	assert.Equal(t, Func{"main.rec", 60e6, 60e6}, got["main.rec"], "recursion counted once in cum")
	assert.Equal(t, Func{"main.leaf", 30e6, 30e6}, got["main.leaf"], "Line[0] is the inlined leaf")
	assert.Equal(t, Func{"main.caller", 10e6, 40e6}, got["main.caller"])
	assert.Equal(t, Func{"main.main", 0, 100e6}, got["main.main"])

	names := func(fs []Func) (out []string) {
		for _, f := range fs {
			out = append(out, f.Name)
		}
		return out
	}
	assert.Equal(t, []string{"main.rec", "main.leaf", "main.caller", "main.main"}, names(tb.ByFlat()))
	assert.Equal(t, []string{"main.main", "main.rec", "main.caller", "main.leaf"}, names(tb.ByCum()))

	tb, err = Functions(p, "samples")
	require.NoError(t, err)
	assert.Equal(t, int64(10), tb.Total)
	assert.Equal(t, int64(6), tb.Map()["main.rec"].Flat)

	_, err = Functions(p, "alloc_space")
	assert.Error(t, err)
}

func TestWriteTop(t *testing.T) {
	tb, err := Functions(handProfile(1), "cpu")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, tb.WriteTop(&out, tb.ByFlat(), 2))
	want := "" +
		"      flat   flat%    sum%        cum    cum%\n" +
		"      60ms  60.00%  60.00%       60ms  60.00%  main.rec\n" +
		"      30ms  30.00%  90.00%       30ms  30.00%  main.leaf\n"
	assert.Equal(t, want, out.String())
}

func TestDiff(t *testing.T) {
	d, err := Diff(handProfile(1), handProfile(3), "")
	require.NoError(t, err)
	fs := d.ByAbsFlat()
	require.Len(t, fs, 1, "unchanged samples cancel out")
	assert.Equal(t, Func{"main.rec", 120e6, 120e6}, fs[0])

	d, err = Diff(handProfile(3), handProfile(1), "cpu")
	require.NoError(t, err)
	assert.Equal(t, int64(-120e6), d.ByAbsFlat()[0].Flat)

	// The base is not modified.
	base := handProfile(1)
	_, err = Diff(base, handProfile(2), "")
	require.NoError(t, err)
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
		{10_000_000, "nanoseconds", "10ms"},
		{1_500_000_000, "nanoseconds", "1.50s"},
		{-20_000_000, "nanoseconds", "-20ms"},
		{512, "bytes", "512B"},
		{3 << 20, "bytes", "3MB"},
		{1536, "bytes", "1.50kB"},
		{42, "count", "42"},
		{7, "widgets", "7 widgets"},
	} {
		assert.Equal(t, c.want, FormatValue(c.v, c.unit), "%d %s", c.v, c.unit)
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
		assert.Equal(t, want, ShortName(in), in)
	}
}

func TestFocus(t *testing.T) {
	p := handProfile(1)
	// main.leaf is inlined into main.caller: both samples through
	// main.caller stay, the recursion goes.
	tb, err := Functions(Focus(p, regexp.MustCompile(`^main\.caller$`)), "cpu")
	require.NoError(t, err)
	assert.Equal(t, int64(40e6), tb.Total)
	assert.Len(t, p.Sample, 3, "the input is not modified")
}

func TestByAbsFlatCodeFirst(t *testing.T) {
	tb := &Table{Funcs: []Func{
		{Name: "runtime.memclrNoHeapPointers", Flat: 900},
		{Name: "github.com/kvalloc/kvalloc/allocator.(*Allocator).Free", Flat: 300},
		{Name: "internal/runtime/maps.(*Map).putSlot", Flat: -500},
		{Name: "github.com/kvalloc/kvalloc/l1.(*Manager[...]).Delete", Flat: -20},
	}}
	var names []string
	for _, f := range tb.ByAbsFlatCodeFirst() {
		names = append(names, ShortName(f.Name))
	}
	assert.Equal(t, []string{"allocator.(*Allocator).Free", "l1.(*Manager[…]).Delete", "runtime.memclrNoHeapPointers", "internal/runtime/maps.(*Map).putSlot"}, names)
}
