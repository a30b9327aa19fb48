package l1_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// On-demand eviction is exact whatever sizes share the pool: it evicts the
// victims of the plain loop "free the next victim in policy order, then
// ask Fit, until the batch fits", no more, under every placement, policy
// and prefix strategy. The plain loop is what the manager runs over
// fitMem, a memory that offers only Fit; over the allocator itself it
// counts what each victim frees instead, and under Scattered placement
// reissues victims' blocks to the batch (allocator.Reissue) where that
// changes nothing.

const (
	unit     = 64 // the allocation unit of these tests
	exactTTL = 10 * time.Second
)

// TestEvictExactMixedSizes is the fixed case: free [0,1); a=[1,4),
// b=[4,6), c=[6,9), d=[9,10) in units, least recently used first; a batch
// of two 3-unit objects. Freeing a and b leaves [0,6), which holds both:
// c and d stay.
func TestEvictExactMixedSizes(t *testing.T) {
	for _, p := range allocator.Placements {
		for _, policy := range l1.EvictionPolicies {
			for _, s := range l1.PrefixStrategies {
				t.Run(fmt.Sprintf("%v/%v/%v", p, policy, s), func(t *testing.T) {
					for _, mem := range exactMemories {
						a := newAlloc(t, 10*unit, unit)
						e := newEnvOver(t, a, mem.wrap(a), l1.Config{Placement: p, Eviction: policy, Prefix: s, EvictOnDemand: true})
						// x=0, then a..d, one call each so that each is its
						// own operation for the prefix policy.
						for i, u := range []int64{1, 3, 2, 3, 1} {
							rs := e.put(t, []int{i}, u*unit)
							require.Equal(t, []int64{0, 1, 4, 6, 9}[i]*unit, rs[0].Block.Offset)
						}
						e.del([]int{0}, false)
						e.rec.take()
						rs := e.reserve(t, keys(10, 2), 3*unit)
						assert.Equal(t, repeat(l1.OK, 2), statuses(rs), mem.name)
						assert.Equal(t, []int{1, 2}, evicted(e.rec.take()), "%s: victims", mem.name)
						require.NoError(t, a.Verify())
					}
				})
			}
		}
	}
}

// exactMemories are the two sides of the differential test: the
// allocator, and fitMem, where eviction runs the plain loop.
var exactMemories = []struct {
	name string
	wrap func(a *allocator.Allocator) l1.Memory
}{
	{"allocator", func(a *allocator.Allocator) l1.Memory { return a }},
	{"fit-only", func(a *allocator.Allocator) l1.Memory { return fitMem{a} }},
}

// TestEvictExactDifferential runs random operations, objects of 1 to 3
// units, on two managers in lockstep, one over the allocator and one over
// fitMem, under every placement, policy and prefix strategy, and compares
// every answer and the victims of every call. Reissued blocks may lie
// elsewhere than the blocks the plain loop allocates; the run of a case
// ends at the first call after which the two hold different blocks.
func TestEvictExactDifferential(t *testing.T) {
	cases := 30
	if testing.Short() {
		cases = 10
	}
	for _, p := range allocator.Placements {
		for _, policy := range l1.EvictionPolicies {
			for _, s := range l1.PrefixStrategies {
				name := fmt.Sprintf("%v/%v/%v", p, policy, s)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(p)<<16|uint64(policy)<<8|uint64(s), 19))
					calls := 0
					for c := range cases {
						cfg := l1.Config{Placement: p, Eviction: policy, Prefix: s, EvictOnDemand: true, WriteTTL: exactTTL, ReadTTL: exactTTL}
						calls += exactCase(t, rng, cfg, c)
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
func exactCase(t *testing.T, rng *rand.Rand, cfg l1.Config, c int) int {
	units := 6 + rng.IntN(30)
	var envs [2]*env
	var allocs [2]*allocator.Allocator
	for i, mem := range exactMemories {
		allocs[i] = newAlloc(t, int64(units)*unit, unit)
		envs[i] = newEnvOver(t, allocs[i], mem.wrap(allocs[i]), cfg)
	}
	leases := [2]map[int]l1.Lease{{}, {}}
	const keySpace = 24
	calls := 0
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
		kind := rng.IntN(11)
		where := fmt.Sprintf("case %d (%d units) op %d", c, units, op)
		var answers [2]string
		var victims [2][]int
		for i, e := range envs {
			e.rec.take()
			switch {
			case kind < 5: // store, and usually finish
				rs, err := e.m.ReserveWriteChain(ks, pos, nil, size, l1.ModeAll)
				require.NoError(t, err)
				answers[i] = fmt.Sprint(statuses(rs))
				var done []int
				var ls []l1.Lease
				for j, r := range rs {
					if r.Status == l1.OK {
						leases[i][ks[j]] = r.Lease
						done, ls = append(done, ks[j]), append(ls, r.Lease)
					}
				}
				if kind < 4 && len(done) > 0 {
					sts, err := e.m.FinishWrite(done, ls)
					require.NoError(t, err)
					answers[i] += fmt.Sprint(sts)
				}
			case kind < 7: // read, and usually release
				rs, err := e.m.ReserveRead(ks, 1)
				require.NoError(t, err)
				answers[i] = fmt.Sprint(statuses(rs))
				if kind < 6 {
					ls := make([]l1.Lease, len(ks))
					for j, r := range rs {
						ls[j] = r.Lease
					}
					sts, err := e.m.FinishRead(ks, ls, 1)
					require.NoError(t, err)
					answers[i] += fmt.Sprint(sts)
				}
			case kind < 9:
				require.NoError(t, e.m.Touch(ks))
			case kind == 10: // unfinished writes and unreleased reads lapse
				e.clk.Advance(exactTTL + time.Second)
			default:
				sts, err := e.m.Delete(ks, false)
				require.NoError(t, err)
				answers[i] = fmt.Sprint(sts)
			}
			victims[i] = evicted(e.rec.take())
		}
		if !assert.Equal(t, answers[1], answers[0], "%s: answers", where) ||
			!assert.Equal(t, victims[1], victims[0], "%s: victims (plain loop, then the allocator's)", where) {
			return calls
		}
		if len(victims[0]) > 0 {
			calls++
		}
		if kind < 5 && !sameBlocks(envs[0].m, envs[1].m) {
			break
		}
	}
	for _, a := range allocs {
		require.NoError(t, a.Verify())
	}
	return calls
}

// sameBlocks reports whether two managers hold the same keys in the same
// blocks (generations aside).
func sameBlocks(a, b *l1.Manager[int]) bool {
	key := func(e l1.Entry[int]) string { return fmt.Sprint(e.Key, e.Block.Offset, e.Block.Size) }
	var x, y []string
	for _, e := range a.Snapshot() {
		x = append(x, key(e))
	}
	for _, e := range b.Snapshot() {
		y = append(y, key(e))
	}
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestEvictExactAfterLapse: an object whose write lock lapsed is reclaimed
// as the call begins, and its block counts toward the batch before any
// victim does. In a full pool of four 1-unit objects, the second of them
// write-locked past its TTL, a batch of two takes the lapsed object's
// block and the first one's, not two victims.
func TestEvictExactAfterLapse(t *testing.T) {
	for _, p := range allocator.Placements {
		for _, mem := range exactMemories {
			t.Run(p.String()+"/"+mem.name, func(t *testing.T) {
				a := newAlloc(t, 4*unit, unit)
				e := newEnvOver(t, a, mem.wrap(a), l1.Config{Placement: p, EvictOnDemand: true, WriteTTL: exactTTL})
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
}
