package baseline

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

const unit = 64

// pool returns an allocator of units units of 64 bytes.
func pool(t *testing.T, units int) *allocator.Allocator {
	t.Helper()
	r, err := hostmem.NewHeapRegion(int64(units) * unit)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: unit})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

func TestStrategyNames(t *testing.T) {
	var names []string
	for _, s := range Strategies {
		names = append(names, s.String())
	}
	assert.Equal(t, []string{"onepass", "binarysearch", "none"}, names)
	assert.Equal(t, "Strategy(9)", Strategy(9).String())
}

func TestWrap(t *testing.T) {
	a := pool(t, 8)
	assert.Same(t, a, OnePass.Wrap(a, false).(*allocator.Allocator), "the one pass is the memory itself")
	for _, s := range []Strategy{BinarySearch, None} {
		m := s.Wrap(a, false)
		_, ok := m.(Counter)
		assert.True(t, ok, "%v counts", s)
		assert.Equal(t, int64(math.MaxInt64), m.Capacity(), "%v bounds nothing", s)
	}
}

// TestSearch is LMCache's 7/10 case over the allocator: the failed full
// call, probes 5 (fits), 7 (fits), 8 (fails), the final 7; with Preflight
// the full call is skipped, and a size above the capacity makes no call.
func TestSearch(t *testing.T) {
	for _, preflight := range []bool{false, true} {
		a := pool(t, 7)
		s := BinarySearch.Wrap(a, preflight).(*Search)
		bs, err := s.AppendUpTo(nil, unit, 10, allocator.Scattered)
		require.NoError(t, err)
		assert.Len(t, bs, 7)
		want := Counts{Calls: 5, Probes: 3}
		if preflight {
			want.Calls = 4
		}
		assert.Equal(t, want, s.Counts(), "preflight %v", preflight)
		st := a.Stats()
		assert.Equal(t, int64(7), st.LiveBlocks, "the probes are freed")
		require.NoError(t, a.Free(bs...))

		bs, err = s.AppendUpTo(nil, 8*unit, 3, allocator.Scattered)
		require.ErrorIs(t, err, allocator.ErrOutOfMemory, "larger than the capacity")
		assert.Empty(t, bs)
		calls := uint64(1) // the full call says it never fits
		if preflight {
			calls = 0
		}
		assert.Equal(t, want.Calls+calls, s.Counts().Calls)
		assert.Equal(t, want.Probes, s.Counts().Probes, "no search for a size that never fits")
	}
}

// TestSearchContiguous: under Contiguous placement the preflight asks for
// the largest free extent, and the search finds the most one extent holds.
func TestSearchContiguous(t *testing.T) {
	a := pool(t, 8)
	hole, err := a.AllocateBatch(unit, 8, allocator.Contiguous)
	require.NoError(t, err)
	require.NoError(t, a.Free(hole[:3]...))
	require.NoError(t, a.Free(hole[4:]...)) // free [0,3) and [4,8)
	s := BinarySearch.Wrap(a, true).(*Search)
	bs, err := s.AppendUpTo(nil, unit, 6, allocator.Contiguous)
	require.NoError(t, err)
	assert.Len(t, bs, 4)
	assert.Equal(t, int64(4*unit), bs[0].Offset)
}

func TestAllOrNothing(t *testing.T) {
	for _, preflight := range []bool{false, true} {
		a := pool(t, 7)
		n := None.Wrap(a, preflight).(*AllOrNothing)
		bs, err := n.AppendUpTo(nil, unit, 10, allocator.Scattered)
		require.NoError(t, err)
		assert.Empty(t, bs)
		calls := uint64(1)
		if preflight {
			calls = 0
		}
		assert.Equal(t, Counts{Calls: calls}, n.Counts(), "preflight %v", preflight)
		bs, err = n.AppendUpTo(nil, unit, 7, allocator.Scattered)
		require.NoError(t, err)
		assert.Len(t, bs, 7)
		assert.Equal(t, Counts{Calls: calls + 1}, n.Counts())
	}
}

// TestManagerOverBaselines: through a manager, the baselines' AppendUpTo
// is the call that grants the prefix, and their other calls pass through.
func TestManagerOverBaselines(t *testing.T) {
	for _, s := range Strategies {
		a := pool(t, 7)
		mem := s.Wrap(a, false)
		m, err := l1.New[int](mem, l1.Config{})
		require.NoError(t, err)
		rs, err := m.ReserveWrite([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, nil, unit, l1.ModeAll)
		require.NoError(t, err)
		granted := 0
		for _, r := range rs {
			if r.Status == l1.OK {
				granted++
			}
		}
		want := 7
		if s == None {
			want = 0
		}
		assert.Equal(t, want, granted, s.String())
		assert.Equal(t, uint64(1), m.Stats().AllocCalls, "%v: one AppendUpTo", s)
		require.NoError(t, m.Close())
		assert.Zero(t, a.Stats().Used)
	}
}
