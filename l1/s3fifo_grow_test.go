package l1_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// growing is an allocator.GrowingRegion over a heap region whose ranges
// the test makes usable by hand, as a SegmentedRegion's workers would.
type growing struct {
	allocator.Region
	gran   int64
	mu     sync.Mutex
	ranges [][2]int64
}

func newGrowing(t *testing.T, size, gran int64) *growing {
	t.Helper()
	r, err := hostmem.NewHeapRegion(size)
	require.NoError(t, err)
	return &growing{Region: r, gran: gran}
}

// grow makes the next n segments usable.
func (g *growing) grow(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		off := int64(len(g.ranges)) * g.gran
		g.ranges = append(g.ranges, [2]int64{off, min(g.gran, int64(len(g.Bytes()))-off)})
	}
}

func (g *growing) Grown() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ranges)
}

func (g *growing) GrownRange(i int) (int64, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ranges[i][0], g.ranges[i][1]
}

func (g *growing) GrowGranularity() int64 { return g.gran }

// TestS3FIFOSmallQueueOverAGrowingRegion: S3-FIFO's small queue is a
// tenth of the memory usable at each eviction, so over a region that grows
// the policy evicts what it evicts over a region whole from the start,
// once the capacity is the same. The manager is made over a region with
// nothing usable yet (a fresh segmented region: capacity 0), which grows
// half, takes objects that fit, then grows whole before the first
// eviction; random stores, reads and touches then run on both managers,
// and every call's victims must match.
func TestS3FIFOSmallQueueOverAGrowingRegion(t *testing.T) {
	const segs, perSeg = 8, 5 // 40 objects of obj bytes
	for _, evict := range []string{"on-demand", "evict-to"} {
		t.Run(evict, func(t *testing.T) {
			g := newGrowing(t, segs*perSeg*obj, perSeg*obj)
			ga, err := allocator.New(g, allocator.Options{Align: obj})
			require.NoError(t, err)
			t.Cleanup(func() { ga.Close() })
			cfg := l1.Config{Eviction: l1.EvictS3FIFO, EvictOnDemand: evict == "on-demand"}
			envs := [2]*env{
				newEnvOver(t, ga, ga, cfg),
				newEnv(t, segs*perSeg*obj, cfg),
			}
			require.Zero(t, ga.Stats().Capacity)
			g.grow(segs / 2)
			rng := rand.New(rand.NewPCG(3, 19))
			next := 0
			// store puts n new keys into e and finishes those it granted.
			store := func(e *env, n int) {
				rs, err := e.m.ReserveWrite(keys(next, n), nil, obj, l1.ModeAll)
				require.NoError(t, err)
				var ok []int
				for i, r := range rs {
					if r.Status == l1.OK {
						ok = append(ok, next+i)
					}
				}
				e.finish(ok)
			}
			for _, e := range envs {
				store(e, segs/2*perSeg/2) // fits in the half that is usable
			}
			next += segs / 2 * perSeg / 2
			g.grow(segs - segs/2)
			for op := range 400 {
				var victims [2][]int
				kind, k, n := rng.IntN(4), max(0, next-1-rng.IntN(30)), 1+rng.IntN(4)
				for i, e := range envs {
					e.rec.take()
					switch kind {
					case 0:
						store(e, n)
					case 1:
						if st := e.read(t, []int{k}, 1); st[0].Status == l1.OK {
							e.finishRead(t, []int{k}, 1)
						}
					case 2:
						e.touch([]int{k})
					case 3:
						if evict == "evict-to" {
							_, err := e.m.EvictTo(0.8)
							require.NoError(t, err)
						}
					}
					victims[i] = evicted(e.rec.take())
				}
				if kind == 0 {
					next += n
				}
				require.Equal(t, victims[1], victims[0], "op %d: victims over the grown region, then the whole one", op)
			}
			assert.Equal(t, envs[1].m.Stats().Evictions, envs[0].m.Stats().Evictions)
			assert.Equal(t, fmt.Sprint(snapKeys(envs[1].m)), fmt.Sprint(snapKeys(envs[0].m)))
		})
	}
}

func snapKeys(m *l1.Manager[int]) []int {
	var out []int
	for _, e := range m.Snapshot() {
		out = append(out, e.Key)
	}
	return out
}
