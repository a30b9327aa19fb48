package l1_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// putChain reserves ks as a chain from position 0, the keys whose index is
// in partial with the Partial hint, and finishes them.
func (e *env) putChain(t *testing.T, ks []int, partial ...int) {
	t.Helper()
	pos := make([]uint32, len(ks))
	for i := range pos {
		pos[i] = uint32(i)
	}
	for _, i := range partial {
		pos[i] |= l1.Partial
	}
	rs, err := e.m.ReserveWriteChain(ks, pos, nil, obj, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, repeat(l1.OK, len(ks)), statuses(rs))
	require.Equal(t, repeat(l1.OK, len(ks)), e.finish(ks))
}

// A partial block goes first, the latest stored first, before blocks
// stored earlier without the hint: under LRU and prefix always, under
// S3-FIFO because every object here is new, in the small queue.
func TestPartialBlockIsTheNextVictim(t *testing.T) {
	for _, p := range l1.EvictionPolicies {
		t.Run(p.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{Eviction: p})
			e.put(t, []int{10, 11}, obj)
			e.putChain(t, []int{1, 2, 3}, 2)
			e.putChain(t, []int{4, 5}, 1)
			e.rec.take()
			n, err := e.m.EvictTo(float64(5*obj) / float64(64*KiB))
			require.NoError(t, err)
			assert.Equal(t, 2, n)
			assert.Equal(t, []int{5, 3}, evicted(e.rec.take()))
		})
	}
}

// A read clears the hint: the block is then ranked as any other, and an
// object that was never partial goes before it.
func TestPartialHintClearedByUse(t *testing.T) {
	for _, p := range []l1.EvictionPolicy{l1.EvictLRU, l1.EvictPrefix} {
		t.Run(p.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{Eviction: p})
			e.putChain(t, []int{1, 2}, 1)
			e.put(t, []int{7}, obj)
			e.read(t, []int{2}, 1)
			e.finishRead(t, []int{2}, 1)
			e.rec.take()
			_, err := e.m.EvictTo(float64(2*obj) / float64(64*KiB))
			require.NoError(t, err)
			assert.Equal(t, []int{1}, evicted(e.rec.take()), "2 was read: no longer first")
			_, err = e.m.EvictTo(0)
			require.NoError(t, err)
			assert.Equal(t, []int{7, 2}, evicted(e.rec.take()))
		})
	}
}

// On-demand eviction takes the partial block first, and never one the
// call names: two actors, the second rewriting the first's partial block
// while the pool is full.
func TestPartialBlockOnDemand(t *testing.T) {
	for _, p := range l1.EvictionPolicies {
		t.Run(p.String(), func(t *testing.T) {
			e := newEnv(t, 4*obj, l1.Config{Eviction: p, EvictOnDemand: true})
			e.putChain(t, []int{1, 2, 3, 4}, 3)
			e.rec.take()
			rs := e.reserve(t, []int{4, 9}, obj)
			assert.Equal(t, []l1.Status{l1.OK, l1.OK}, statuses(rs), "4 re-locked, 9 allocated")
			ev := evicted(e.rec.take())
			assert.Len(t, ev, 1)
			assert.NotContains(t, ev, 4, "a key the call names is never its victim")
		})
	}
}

// A rewrite is a use: the hint a re-locking call passes is dropped, and
// an older object that was never partial goes first.
func TestPartialHintOfARewriteIsDropped(t *testing.T) {
	for _, p := range []l1.EvictionPolicy{l1.EvictLRU, l1.EvictPrefix} {
		t.Run(p.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{Eviction: p})
			e.put(t, []int{7}, obj)
			e.put(t, []int{1}, obj)
			rs, err := e.m.ReserveWriteChain([]int{1}, []uint32{l1.Partial}, nil, obj, l1.ModeAll)
			require.NoError(t, err)
			require.Equal(t, l1.OK, rs[0].Status)
			require.Equal(t, []l1.Status{l1.OK}, e.finish([]int{1}))
			e.rec.take()
			_, err = e.m.EvictTo(float64(obj) / float64(64*KiB))
			require.NoError(t, err)
			assert.Equal(t, []int{7}, evicted(e.rec.take()))
		})
	}
}

// Positions at the edges: the hint on position 0 and on the largest
// position, and the largest position without it.
func TestPartialPositionEdges(t *testing.T) {
	for _, p := range l1.EvictionPolicies {
		t.Run(p.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{Eviction: p})
			rs, err := e.m.ReserveWriteChain([]int{1, 2, 3}, []uint32{l1.Partial, math.MaxUint32, math.MaxUint32 &^ l1.Partial}, nil, obj, l1.ModeAll)
			require.NoError(t, err)
			require.Equal(t, repeat(l1.OK, 3), statuses(rs))
			require.Equal(t, repeat(l1.OK, 3), e.finish([]int{1, 2, 3}))
			e.rec.take()
			_, err = e.m.EvictTo(float64(obj) / float64(64*KiB))
			require.NoError(t, err)
			assert.Equal(t, []int{2, 1}, evicted(e.rec.take()), "both partial keys first, the latest first")
		})
	}
}
