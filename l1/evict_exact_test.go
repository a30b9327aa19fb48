package l1_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// On-demand eviction is exact whatever sizes share the pool: it evicts the
// victims of the plain loop "free the next victim in policy order, then
// ask Fit, until the batch fits", no more, under every placement, policy
// and prefix strategy. The manager counts what each victim frees instead
// (evict.go), and under Scattered placement reissues victims' blocks to
// the batch (allocator.Reissue) where that changes nothing; the reference
// model (internal/reference/l1ref) runs the plain loop itself.

const (
	unit     = 64 // the allocation unit of these tests
	exactTTL = 10 * time.Second
)

// TestEvictExactMixedSizes is the fixed case: free [0,1); a=[1,4),
// b=[4,6), c=[6,9), d=[9,10) in units, least recently used first; a batch
// of two 3-unit objects. Freeing a and b leaves [0,6), which holds both:
// c and d stay, as the plain loop finds (freeing a alone leaves [0,4),
// room for one).
func TestEvictExactMixedSizes(t *testing.T) {
	for _, p := range allocator.Placements {
		for _, policy := range l1.EvictionPolicies {
			for _, s := range baseline.Strategies {
				t.Run(fmt.Sprintf("%v/%v/%v", p, policy, s), func(t *testing.T) {
					a := newAlloc(t, 10*unit, unit)
					cfg := l1.Config{Placement: p, Eviction: policy, EvictOnDemand: true}
					e := newEnvOver(t, a, under(s, a, cfg), cfg)
					// x=0, then a..d, one call each so that each is its
					// own operation for the prefix policy.
					for i, u := range []int64{1, 3, 2, 3, 1} {
						rs := e.put(t, []int{i}, u*unit)
						require.Equal(t, []int64{0, 1, 4, 6, 9}[i]*unit, rs[0].Block.Offset)
					}
					e.del([]int{0}, false)
					e.rec.take()
					rs := e.reserve(t, keys(10, 2), 3*unit)
					assert.Equal(t, repeat(l1.OK, 2), statuses(rs))
					assert.Equal(t, []int{1, 2}, evicted(e.rec.take()), "victims")
					require.NoError(t, a.Verify())
				})
			}
		}
	}
}

// TestEvictExactDifferential runs random operations, objects of 1 to 3
// units, on a manager over the allocator and on the reference model in
// lockstep (l1check), under every placement, policy and prefix strategy,
// and compares every answer, every object's state (so the victims of
// every call) and the allocator's free extents after each.
func TestEvictExactDifferential(t *testing.T) {
	cases := 30
	if testing.Short() {
		cases = 10
	}
	for _, p := range allocator.Placements {
		for _, policy := range l1.EvictionPolicies {
			for _, s := range baseline.Strategies {
				name := fmt.Sprintf("%v/%v/%v", p, policy, s)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(p)<<16|uint64(policy)<<8|uint64(s), 19))
					calls := uint64(0)
					for c := range cases {
						setup := l1check.Setup{Units: 6 + rng.IntN(30), Align: unit, Placement: p, Prefix: s, EvictOnDemand: true,
							Eviction: policy, WriteTTL: exactTTL, ReadTTL: exactTTL}
						calls += exactCase(t, rng, setup, c)
						if t.Failed() {
							return
						}
					}
					t.Logf("%d evicting calls compared", calls)
				})
			}
		}
	}
}

// exactCase runs one random case and returns how many calls evicted.
func exactCase(t *testing.T, rng *rand.Rand, setup l1check.Setup, c int) uint64 {
	sys := l1check.MustNew(setup, l1check.Variant{})
	defer sys.Close()
	const keySpace = 24
	calls := uint64(0)
	for op := range 60 {
		ks := make([]int, 1+rng.IntN(4))
		for i := range ks {
			ks[i] = rng.IntN(keySpace)
		}
		var pos []uint32
		if rng.IntN(3) == 0 {
			pos = make([]uint32, len(ks))
			for i := range pos {
				pos[i] = uint32(i)
			}
			if rng.IntN(2) == 0 {
				pos[len(pos)-1] |= l1.Partial
			}
		}
		size := int64(1+rng.IntN(3)) * unit
		var ops []l1check.Op
		switch kind := rng.IntN(11); {
		case kind < 5: // store, and usually finish
			ops = append(ops, l1check.Op{Kind: l1check.OpReserveWrite, Keys: ks, Positions: pos, Size: size, Mode: l1.ModeAll})
			if kind < 4 {
				ops = append(ops, l1check.Op{Kind: l1check.OpFinishWrite, Keys: ks})
			}
		case kind < 7: // read, and usually release
			ops = append(ops, l1check.Op{Kind: l1check.OpReserveRead, Keys: ks, Locks: 1})
			if kind < 6 {
				ops = append(ops, l1check.Op{Kind: l1check.OpFinishRead, Keys: ks, Locks: 1})
			}
		case kind < 9:
			ops = append(ops, l1check.Op{Kind: l1check.OpTouch, Keys: ks})
		case kind == 10: // unfinished writes and unreleased reads lapse
			ops = append(ops, l1check.Op{Kind: l1check.OpAdvance, Advance: exactTTL + time.Second})
		default:
			ops = append(ops, l1check.Op{Kind: l1check.OpDelete, Keys: ks})
		}
		for _, o := range ops {
			o.Observe = true
			before := sys.M.Stats().OnDemandEvictions
			if err := sys.Apply(o); err != nil {
				t.Errorf("case %d (%d units) op %d: %v", c, setup.Units, op, err)
				return calls
			}
			if sys.M.Stats().OnDemandEvictions > before {
				calls++
			}
		}
	}
	if err := sys.Drain(); err != nil {
		t.Errorf("case %d: %v", c, err)
	}
	return calls
}

// TestEvictExactAfterLapse: an object whose write lock lapsed is reclaimed
// as the call begins, and its block counts toward the batch before any
// victim does. In a full pool of four 1-unit objects, the second of them
// write-locked past its TTL, a batch of two takes the lapsed object's
// block and the first one's, not two victims.
func TestEvictExactAfterLapse(t *testing.T) {
	for _, p := range allocator.Placements {
		t.Run(p.String(), func(t *testing.T) {
			a := newAlloc(t, 4*unit, unit)
			e := newEnvOver(t, a, a, l1.Config{Placement: p, EvictOnDemand: true, WriteTTL: exactTTL})
			e.put(t, []int{0}, unit)
			e.reserve(t, []int{1}, unit) // never finished
			e.put(t, keys(2, 2), unit)
			e.clk.Advance(exactTTL)
			e.rec.take()
			rs := e.reserve(t, keys(10, 2), unit)
			assert.Equal(t, repeat(l1.OK, 2), statuses(rs))
			assert.Equal(t, []int{0}, evicted(e.rec.take()))
			assert.Equal(t, uint64(1), e.m.Stats().Expired)
		})
	}
}
