package l1_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// allocCalls counts the allocator's calls that could hand out one block:
// each one-block call that grants adds an Alloc (Reissue too), each that
// fails a FailedNoSpace or FailedFragmented, or, for AllocateUpTo, a
// PartialGrant.
func allocCalls(a *allocator.Allocator) uint64 {
	c := a.Stats().Counters
	return c.Allocs + c.FailedNoSpace + c.FailedFragmented + c.PartialGrants
}

// TestOneKeyBatch: a one-key ReserveWrite is all or nothing and makes one
// allocator call at most, with and without on-demand eviction, under every
// placement and prefix strategy: none when the manager knows before asking
// that the object cannot fit. Pools of four 1-unit slots:
//   - fits: two objects, one more of 1 unit;
//   - fragmented: units 0 and 2 free, 1 and 3 read-locked, an object of
//     2 units: OutOfMemory, nothing changes (with on-demand eviction, whose
//     count sees that no victim is left, without a call);
//   - evicts: units 0 and 2 free, 1 and 3 evictable, 2 units: with
//     on-demand eviction one victim and one call; without, as fragmented;
//   - full: four read-locked objects: OutOfMemory, and no call at all
//     when the manager knows its own objects fill the pool (the one-pass
//     prefix, on-demand eviction); LMCache's baselines (the binary search
//     and all or nothing), which bound nothing, make their one
//     all-or-nothing call.
func TestOneKeyBatch(t *testing.T) {
	type tc struct {
		name   string
		prep   func(e *env)
		units  int64
		ok     bool // granted (with on-demand eviction, if it differs)
		calls  uint64
		victim bool // with on-demand eviction
	}
	holes := func(lock bool) func(e *env) {
		return func(e *env) {
			e.put(e.t, keys(0, 4), obj)
			e.del([]int{0, 2}, false)
			if lock {
				e.read(e.t, []int{1, 3}, 1)
			}
		}
	}
	cases := []tc{
		{"fits", func(e *env) { e.put(e.t, keys(0, 2), obj) }, 1, true, 1, false},
		{"fragmented", holes(true), 2, false, 1, false},
		{"evicts", holes(false), 2, true, 1, true},
		{"full", func(e *env) { e.put(e.t, keys(0, 4), obj); e.read(e.t, keys(0, 4), 1) }, 1, false, 0, false},
	}
	for _, p := range allocator.Placements {
		for _, s := range baseline.Strategies {
			for _, evict := range []bool{false, true} {
				for _, c := range cases {
					t.Run(fmt.Sprintf("%v/%v/evict=%v/%s", p, s, evict, c.name), func(t *testing.T) {
						a := newAlloc(t, 4*obj, obj)
						cfg := l1.Config{Placement: p, EvictOnDemand: evict}
						e := newEnvOver(t, a, under(s, a, cfg), cfg)
						c.prep(e)
						before, used, calls := e.m.Snapshot(), a.Stats().Used, allocCalls(a)
						e.rec.take()
						rs, err := e.m.ReserveWrite([]int{10}, nil, c.units*obj, l1.ModeAll)
						require.NoError(t, err)
						granted := c.ok && (evict || !c.victim)
						want := c.calls
						switch {
						case c.name == "full" && s != baseline.OnePass && !evict:
							want = 1
						case c.name == "fragmented" && evict:
							want = 0 // eviction's count knows nothing it may evict makes room
						}
						assert.Equal(t, want, allocCalls(a)-calls, "allocator calls")
						if !granted {
							assert.Equal(t, []l1.Status{l1.OutOfMemory}, statuses(rs))
							assert.Equal(t, before, e.m.Snapshot(), "an OutOfMemory one-key batch changes nothing")
							assert.Equal(t, used, a.Stats().Used)
							return
						}
						assert.Equal(t, []l1.Status{l1.OK}, statuses(rs))
						if c.victim {
							assert.Len(t, evicted(e.rec.take()), 1)
						}
						require.NoError(t, a.Verify())
					})
				}
			}
		}
	}
}
