package proptest

import (
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// Fixed regression cases of the eviction state machine: seeds that once
// made TestPropL1Policies fail, replayed with the parameters it had then,
// and the shrunk command sequences they found, replayed on their own so
// that they still run when the generator changes.

// policySeeds are the seeds of TestPropL1Policies that found a bug:
// 1796119290076412010 a touch of a partial object under EvictPrefix,
// ranked by the Partial hint the touch itself clears.
var policySeeds = []int64{1796119290076412010}

// TestPropL1PoliciesSeeds replays each seed of policySeeds.
func TestPropL1PoliciesSeeds(t *testing.T) {
	for _, seed := range policySeeds {
		p := gopter.DefaultTestParametersWithSeed(seed)
		p.MinSuccessfulTests, p.MaxSize, p.MaxShrinkCount = 300, 80, 200
		if r := commands.Prop(policyCommands(l1check.Variant{})).Check(p); !r.Passed() {
			t.Errorf("seed %d: %v %v", seed, r.Status, r.Labels)
		}
	}
}

// TestPolicyTouchPartialRanked is the sequence seed 1796119290076412010
// shrank to: under EvictPrefix, key 0 is stored partial, then touched. The
// touch is a use, so key 0 must be ranked as the used object it now is,
// behind the keys the touch made recent before it, not at the front as a
// partial one; the last ReserveWrite's victim tells which.
func TestPolicyTouchPartialRanked(t *testing.T) {
	for _, p := range allocator.Placements {
		sys := l1check.MustNew(l1check.Setup{Units: 13, Align: 64, Placement: p, EvictOnDemand: true,
			Eviction: l1.EvictPrefix, WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry}, l1check.Variant{})
		rw := func(keys []int, pos []uint32, size int64, temp []bool) l1check.Op {
			return l1check.Op{Kind: l1check.OpReserveWrite, Keys: keys, Positions: pos, Size: size, Temporary: temp, Mode: l1.ModeAll, Observe: true}
		}
		fw := func(keys ...int) l1check.Op {
			return l1check.Op{Kind: l1check.OpFinishWrite, Keys: keys, Observe: true}
		}
		ops := []l1check.Op{
			rw([]int{12, 13, 14, 15}, []uint32{0, 1, 2, 3}, 128, []bool{true, false, false, false}),
			fw(9, 10, 11, 12),
			rw([]int{14, 15, 0}, []uint32{0, 1, 2 | l1.Partial}, 128, []bool{true, false, false}),
			rw([]int{10, 11}, []uint32{0, 1 | l1.Partial}, 128, []bool{true, false}),
			rw([]int{12, 13}, nil, 64, []bool{true, false}),
			fw(15, 0),
			{Kind: l1check.OpTouch, Keys: []int{15, 0, 1}, Observe: true},
			rw([]int{5}, nil, 64, nil),
		}
		if err := sys.Run(ops); err != nil {
			t.Errorf("%v: %v", p, err)
		}
		sys.Close()
	}
}
