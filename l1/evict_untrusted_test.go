package l1_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// On-demand eviction counts what victims free from FreeAround's answers
// and starts from Fit's. Those answers are the memory's to give, and the
// count only saves calls: when the memory changes under the count or
// misreports, eviction still makes room if victims can, and never
// corrupts its plan.

// thiefMem is the allocator shared with another user who, at the first
// FreeAround of an eviction, takes every free unit: the count then says
// the batch fits when it no longer does.
type thiefMem struct {
	*allocator.Allocator
	stolen []allocator.Block
}

func (t *thiefMem) FreeAround(b allocator.Block) (before, after int64) {
	before, after = t.Allocator.FreeAround(b)
	if t.stolen == nil {
		bs, err := t.Allocator.AllocateUpTo(unit, math.MaxInt32, allocator.Scattered)
		if err == nil {
			t.stolen = bs
		}
	}
	return before, after
}

// aroundLiar is the allocator with a FreeAround that answers out of range.
type aroundLiar struct {
	*allocator.Allocator
	before, after int64
}

func (l aroundLiar) FreeAround(allocator.Block) (before, after int64) { return l.before, l.after }

// fullButOne is a pool of 8 units whose first is free and the others hold
// finished 1-unit objects, keys 1-7, least recently used first.
func fullButOne(t *testing.T, wrap func(*allocator.Allocator) l1.Memory, p allocator.Placement) (*env, *allocator.Allocator) {
	a := newAlloc(t, 8*unit, unit)
	e := newEnvOver(t, a, wrap(a), l1.Config{Placement: p, EvictOnDemand: true})
	e.put(t, keys(0, 8), unit)
	e.del([]int{0}, false)
	e.rec.take()
	return e, a
}

func TestEvictWhenTheCountIsWrong(t *testing.T) {
	for _, p := range allocator.Placements {
		t.Run(p.String()+"/memory_taken_meanwhile", func(t *testing.T) {
			thief := &thiefMem{}
			e, a := fullButOne(t, func(a *allocator.Allocator) l1.Memory { thief.Allocator = a; return thief }, p)
			// Three units: the count says keys 1 and 2 with the free unit
			// make room, but the other user took that unit; a third
			// victim does.
			rs := e.reserve(t, keys(10, 1), 3*unit)
			assert.Equal(t, []l1.Status{l1.OK}, statuses(rs))
			assert.Equal(t, []int{1, 2, 3}, evicted(e.rec.take()))
			require.Len(t, thief.stolen, 1)
			require.NoError(t, a.Free(thief.stolen...))
			require.NoError(t, a.Verify())
		})
		// Answers out of range, and one in range but false (4 units free
		// before every block).
		for _, lie := range [][2]int64{{-5 * unit, -7}, {1 << 62, math.MaxInt64}, {-1, 0}, {0, -1}, {4 * unit, 0}} {
			t.Run(p.String()+"/FreeAround_misreports", func(t *testing.T) {
				e, a := fullButOne(t, func(a *allocator.Allocator) l1.Memory { return aroundLiar{a, lie[0], lie[1]} }, p)
				rs := e.reserve(t, keys(10, 2), 2*unit)
				assert.Equal(t, repeat(l1.OK, 2), statuses(rs), "FreeAround answering %v", lie)
				require.NoError(t, a.Verify())
				assert.Equal(t, a.Stats().Used, e.m.Stats().Held)
			})
		}
	}
}
